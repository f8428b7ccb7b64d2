"""Errors a person can act on, shared by every layer (this is the bottom of the stack).

A `UserError` is bad input: the message names the file, record or option and says what to do.
The command line prints it as one line and exits with status 2. Anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user; its message is shown as one line, without a traceback."""
