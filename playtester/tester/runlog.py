"""What a run writes, step by step, so that reports and replays can be made from it alone.

    runs/NAME/config.yaml       the game spec and the run's settings
    runs/NAME/trajectory.jsonl  one line a step: episode, t, action, mode (explore|test),
                                ooi (under test, or null), position (with telemetry)
    runs/NAME/tests.jsonl       one line an executed OOI test: episode, step, ooi, kind, steps,
                                jsd, success, texture verdict
    runs/NAME/findings/NNNN/    finding.json, actions.jsonl (the whole trace that led there),
                                frames.npy (the last frames), clip.mp4

Lines are appended and flushed as they come, so a run stopped by Ctrl-C keeps what it did; a
run killed mid-line leaves a torn last line, which `cut_torn_lines` takes off before a resumed
run appends again (else the first new record would be glued to it, and the log damaged for good).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from playtester.files import write_bytes_atomic

from playtester.errors import UserError
from playtester.files import read_yaml


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


def cut_torn_tail(path: Path) -> int:
    """Cut `path` back to its last whole line when a crash tore the last one; the number of bytes
    dropped (0: the file ended cleanly). The cut file replaces the old one atomically."""
    if not path.is_file() or path.stat().st_size == 0:
        return 0
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return 0
        f.seek(0)
        data = f.read()
    kept = data[: data.rfind(b"\n") + 1]
    write_bytes_atomic(path, kept)
    return len(data) - len(kept)


def cut_torn_lines(run: Path) -> list[str]:
    """Before a run folder is appended to again: every JSON-lines log in it (trajectory, tests,
    claims, findings, crashes, generations) cut back to its last whole record; one line saying
    so for each log that was cut."""
    said = []
    for path in sorted(Path(run).glob("*.jsonl")):
        dropped = cut_torn_tail(path)
        if dropped:
            records = sum(1 for _ in read_jsonl(path))
            said.append(f"{path}: its last line was torn (the run was stopped mid-write); cut back to its last whole "
                        f"record ({records} kept, {dropped} bytes dropped)")
    return said


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


class PlaceLog:
    """The places a game instance reached (`playtester.perception.places`), kept in the run folder:
    `places.jsonl` gets a line for each new place (`env`, `place`, `episode`, `t`, `embedding`,
    `vector`: its exemplar, `thumb`) and `places/[eK-]NNNN.png` its picture. A resumed run reads
    its places back, so the ids go on."""

    def __init__(self, run_dir: Path, env_index: int, embedding) -> None:
        from playtester.perception.places import Places

        self.run_dir = Path(run_dir)
        self.env_index = env_index
        self.embedding = embedding
        self.places = Places(embedding.threshold)
        (self.run_dir / "places").mkdir(parents=True, exist_ok=True)
        for record in read_jsonl(self.run_dir / "places.jsonl"):
            if record.get("env", 0) == env_index and record.get("embedding") == embedding.name:
                self.places.add(record["vector"], int(record.get("first_step", 0)))
        self.places.steps = sum(1 for r in read_jsonl(self.run_dir / "trajectory.jsonl")
                                if r.get("env", 0) == env_index and "place" in r)
        self._writer = JsonlWriter(self.run_dir / "places.jsonl")

    def visit(self, frame, episode: int, t: int) -> int:
        """The place of `frame`; a new one is written down with its picture."""
        import cv2

        from playtester.perception.places import thumbnail

        place, new = self.places.visit(self.embedding(frame))
        if new:
            prefix = "" if self.env_index == 0 else f"e{self.env_index}-"
            thumb = f"places/{prefix}{place:04d}.png"
            ok, buf = cv2.imencode(".png", cv2.cvtColor(thumbnail(frame), cv2.COLOR_RGB2BGR))
            write_bytes_atomic(self.run_dir / thumb, buf.tobytes())
            vector = self.places.places[place].vector
            self._writer.write({"env": self.env_index, "place": place, "episode": episode, "t": t,
                                "first_step": self.places.places[place].first_step, "embedding": self.embedding.name,
                                "threshold": self.embedding.threshold,
                                "thumb": thumb, "vector": [round(float(v), 4) for v in vector]})
        return place

    def close(self) -> None:
        self._writer.close()
