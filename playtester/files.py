"""The files a person gives and the files a run writes.

Writes are atomic: to `NAME.partial`, then renamed, so a crash never leaves half a file. Reading
a YAML or JSON file a user gave: a missing file, a folder, bytes that are not text or invalid
syntax is one `UserError` line that names it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

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
