"""Command implementations, one module per area; registered in `playtester.cli`."""
