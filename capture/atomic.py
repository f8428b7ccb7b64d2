"""Atomic writes: write to `NAME.partial`, then rename, so a crash never leaves half a file."""

from __future__ import annotations

import os
from pathlib import Path


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
