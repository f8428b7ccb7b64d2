"""What a run writes, step by step, so that reports and replays can be made from it alone.

    runs/NAME/config.yaml       the game spec and the run's settings
    runs/NAME/trajectory.jsonl  one line a step: episode, t, action, mode (explore|test),
                                ooi (under test, or null), position (with telemetry)
    runs/NAME/tests.jsonl       one line an executed OOI test: episode, step, ooi, kind, steps,
                                jsd, success, texture verdict
    runs/NAME/findings/NNNN/    finding.json, actions.jsonl (the whole trace that led there),
                                frames.npy (the last frames), clip.mp4

Lines are appended and flushed as they come, so a run stopped by Ctrl-C keeps what it did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator


from playtester.capture.errors import UserError
from playtester.capture.yamlfile import read_yaml


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSON-lines file; a torn last line (a crash mid-write) is skipped."""
    if not path.exists():
        return
    with open(path) as f:
        lines = f.readlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                return
            raise UserError(f"{path}: line {i + 1} is not valid JSON; the run log is damaged") from None


def read_config(run: Path) -> dict[str, Any]:
    path = run / "config.yaml"
    if not path.exists():
        raise UserError(f"run folder {run}: config.yaml is missing; is it a playtester run?")
    config = read_yaml(path, str(path)) or {}
    if "game" not in config:
        raise UserError(f"{path}: it does not name the game (a 'game' key)")
    return config


class JsonlWriter:
    """Appends records to a JSON-lines file, one flushed line each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f = open(path, "a")

    def write(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()
