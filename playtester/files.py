"""The files a person gives and the files a run writes.

Writes are atomic: to `NAME.partial`, then renamed, so a crash never leaves half a file; a
command's output folder is written inside `new_folder`, so a refused command leaves none. Reading
a YAML or JSON file a user gave: a missing file, a folder, bytes that are not text or invalid
syntax is one `UserError` line that names it.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from playtester.errors import UserError


def partial_path(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    path = Path(path)
    tmp = partial_path(path)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


@contextmanager
def new_folder(out: Path, *, replace: bool = False, kept: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """Write a command's folder `out` so that a refused command leaves the disk as it was: a
    `UserError` raised inside, while `kept()` says no real work is in `out` yet, removes the
    folder this invocation made and puts back the one it replaces (`replace`, for --overwrite:
    set aside as `.NAME.replaced` meanwhile, deleted once the block is left otherwise). A folder
    that was there and is not replaced (a resumed run, demos added to a folder) is left alone."""
    out = Path(out)
    made = not out.exists()
    aside = out.with_name(f".{out.name}.replaced") if replace and not made else None
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(out, aside)
    try:
        yield
    except UserError:
        if (made or aside is not None) and not kept():
            shutil.rmtree(out, ignore_errors=True)
            if aside is not None:
                os.replace(aside, out)
                aside = None
        raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


def holds_lines(path: Path) -> bool:
    """Whether the file `path` exists with something in it (a log that real work has begun)."""
    try:
        return path.stat().st_size > 0
    except OSError:
        return False

def _read_text(path: str | Path, what: str, kind: str) -> str:
    """The UTF-8 text of a `kind` file; missing, a folder or not text is one `UserError` line."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what}: file not found") from None
    except IsADirectoryError:
        raise UserError(f"{what}: is a folder; give the {kind} file") from None
    except UnicodeDecodeError:
        raise UserError(f"{what}: not a text file (not UTF-8); give a {kind} file") from None


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed contents of `path`; a missing file or invalid YAML is one `UserError` line
    beginning with `what` (e.g. "key map keys.yaml")."""
    text = _read_text(path, what, "YAML")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        first = (str(e).splitlines() or ["no detail"])[0]
        raise UserError(f"{what}: not valid YAML ({first})") from None


def read_json(path: str | Path, what: str) -> Any:
    """The parsed contents of the JSON file `path`; a missing file, a folder, bytes that are not
    text or invalid JSON is one `UserError` line beginning with `what` (e.g. "--oois o.json")."""
    try:
        text = _read_text(path, what, "JSON")
    except OSError as e:
        raise UserError(f"{what}: cannot read it ({e.strerror or e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{what}: not valid JSON ({e})") from None


class InputsChecked(Exception):
    """Raised by `inputs_checked()` when `STOP_AFTER_CHECKS` is set (the fuzz test of the command line)."""


STOP_AFTER_CHECKS = False
"""Set by the fuzz test: a command stops where its inputs are all checked, before it writes."""


def inputs_checked() -> None:
    """Mark, in a command, the point where every input has been checked and the first thing is
    about to be written or the long work to start. A no-op, except under the fuzz test of the
    command line (`STOP_AFTER_CHECKS`), which stops the command here and checks that the disk is
    as it was: so every command's checks are fuzzed without its work, and what it writes before
    this point is caught."""
    if STOP_AFTER_CHECKS:
        raise InputsChecked()
