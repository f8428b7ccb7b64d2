"""Errors a person can act on, shared by every layer (this is the bottom of the stack).

A `UserError` is bad input: the message names the file, record or option and says what to do.
The command line prints it as one line and exits with status 2. Anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


class UserError(Exception):
    """Bad input from the user; its message is shown as one line, without a traceback."""


@contextmanager
def about(option: str) -> Iterator[None]:
    """Say which option bad input came from: a `UserError` raised inside gets `option` in front,
    unless its message names the option already."""
    try:
        yield
    except UserError as e:
        message = str(e)
        if message.startswith(option) or f"{option} " in message or f"{option}:" in message:
            raise
        raise UserError(f"{option} {message}") from None
