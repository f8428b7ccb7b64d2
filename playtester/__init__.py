"""playtester: an AI playtester that sees only pixels.

The app lives here (command line, the tester loop, oracles, reports); the five areas install as
sub-packages: `playtester.capture`, `.datasets`, `.perception`, `.imitation`, `.exploration`.
"""

__version__ = "0.1.0"
