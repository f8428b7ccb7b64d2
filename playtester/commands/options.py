"""Checks the commands share: which option bad input came from, and whether a budget fits.

Counts have upper bounds (typer's `max=`) so that a slip of the keyboard is refused at once;
what a count costs in disk or memory is checked against what the machine has before anything
is written, so `demos --episodes 100000000000000000000` says it will not fit instead of filling
the disk.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from playtester.errors import UserError

MANY = 1_000_000
"""Upper bound of counts of episodes, steps, generations: more than a run can play."""
WIDE = 65_536
"""Upper bound of sizes: batch sizes, hidden sizes, image sides."""
RULES_HELP = ("How a Doom level is played: immortal (god mode; the default for stock levels, WADs and scenarios), "
              "no-monsters, or play (as shipped; a death starts the level again).")
"""The help of `--rules` on the commands that play a Doom level (`run` takes it from `RunSpec`)."""


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


def human_bytes(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def _existing(folder: Path) -> Path:
    folder = folder.resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_free_disk(folder: Path, needed: float, what: str) -> None:
    """Refuse, in one line naming `what`, a job whose estimated output (`needed` bytes, an upper
    bound) would not fit in the free space of `folder`'s disk (with 5 % to spare)."""
    free = shutil.disk_usage(_existing(folder)).free
    if needed > 0.95 * free:
        raise UserError(f"{what}: up to {human_bytes(needed)} to write, but {_existing(folder)} has {human_bytes(free)} free; "
                        "ask for less, or free some space")


def available_memory() -> int:
    """Bytes of memory available to a new allocation (MemAvailable on Linux, else free pages)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def check_memory(needed: float, what: str) -> None:
    """Refuse, in one line naming `what`, a job whose buffers (`needed` bytes) would take more
    than half the memory available now."""
    available = available_memory()
    if needed > available / 2:
        raise UserError(f"{what}: its buffers need about {human_bytes(needed)}, more than half the {human_bytes(available)} "
                        "of memory available; ask for less")
