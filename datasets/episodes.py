"""Demo episodes on disk, one folder each:

    NAME/frames.npy    uint8 N×H×W×3, memory-mapped when read
    NAME/steps.jsonl   one line a step: t, action, keys, telemetry (position, angle, objects, …)
    NAME/meta.json     game, behaviour tag, key map, frame size, fps, format version, step count

`frames[t]` is what the player saw when it chose `action` of step `t`. A step may also carry
`label`, the action a policy should learn there when it differs from the one executed: what a
scripted expert meant on a step of jitter, or what it would have done where the policy drove
(DAgger episodes). `action` is always what was executed, so every episode replays and trains
the inverse-dynamics encoder. An episode is written into
`NAME.partial/` and renamed when complete, so a crash loses at most the episode being recorded;
loaders ignore `.partial` folders. Frames stream to disk as they come (the `.npy` header is
rewritten with the final count at the end), so a long episode never has to fit in memory.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from playtester.files import write_text_atomic
from playtester.errors import UserError
from playtester.capture.keymap import KeyMap

FORMAT_VERSION = 1
PARTIAL_SUFFIX = ".partial"
_NPY_HEADER_BYTES = 128

log = logging.getLogger(__name__)


def _npy_header(shape: tuple[int, ...]) -> bytes:
    """A version-1 `.npy` header for uint8 data of `shape`, padded to a fixed size."""
    body = repr({"descr": "|u1", "fortran_order": False, "shape": tuple(shape)}).encode("latin1")
    pad = _NPY_HEADER_BYTES - 10 - len(body) - 1
    if pad < 0:
        raise ValueError(f"frame shape {shape} does not fit a {_NPY_HEADER_BYTES}-byte header")
    header = body + b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


class EpisodeWriter:
    """Writes one episode; `close()` publishes it, `discard()` drops it.

    Use as a context manager: leaving by an exception discards the episode, so a half-written
    one never appears among the complete ones.
    """

    def __init__(
        self,
        root: str | Path,
        name: str,
        *,
        game: str,
        behavior: str,
        keymap: KeyMap,
        fps: float,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.root = Path(root)
        if not self.root.parent.exists():
            raise UserError(f"output folder {self.root}: its parent {self.root.parent} does not exist; create it first")
        self.root.mkdir(exist_ok=True)
        self.final = self.root / name
        if self.final.exists():
            raise UserError(f"episode {self.final} already exists; choose another name or remove it")
        self.folder = self.root / (name + PARTIAL_SUFFIX)
        if self.folder.exists():
            shutil.rmtree(self.folder)  # left by a crash: it was never published
        self.folder.mkdir()
        self.meta: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "game": game,
            "behavior": behavior,
            "keymap": keymap.to_dict(),
            "fps": float(fps),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **(extra or {}),
        }
        self._frames = open(self.folder / "frames.npy", "wb")
        self._frames.write(b"\0" * _NPY_HEADER_BYTES)
        self._steps = open(self.folder / "steps.jsonl", "w")
        self._shape: tuple[int, int, int] | None = None
        self.n = 0

    def add(self, frame: np.ndarray, action: int, keys: tuple[str, ...] | list[str] = (), **telemetry: Any) -> None:
        """Append step `t = n`: the frame seen and the action taken on it, with telemetry."""
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        if frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"frame of shape {frame.shape}: expected H×W×3")
        if self._shape is None:
            self._shape = frame.shape  # type: ignore[assignment]
        elif frame.shape != self._shape:
            raise ValueError(f"frame {self.n} has shape {frame.shape}, the episode's frames are {self._shape}")
        self._frames.write(frame.tobytes())
        record = {"t": self.n, "action": int(action), "keys": list(keys), **_jsonable(telemetry)}
        self._steps.write(json.dumps(record) + "\n")
        self.n += 1

    def close(self) -> Path:
        """Finish the files and publish the episode under its final name."""
        if self._shape is None:
            self.discard()
            raise UserError(f"episode {self.final.name}: it has no steps, so it was not kept")
        self._frames.seek(0)
        self._frames.write(_npy_header((self.n, *self._shape)))
        for f in (self._frames, self._steps):
            f.flush()
            os.fsync(f.fileno())
            f.close()
        self.meta.update(steps=self.n, size=[int(self._shape[0]), int(self._shape[1])])
        write_text_atomic(self.folder / "meta.json", json.dumps(self.meta, indent=1))
        os.replace(self.folder, self.final)
        return self.final

    def discard(self) -> None:
        for f in (self._frames, self._steps):
            if not f.closed:
                f.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "EpisodeWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()
        elif not self._frames.closed:
            self.close()


@dataclass
class Episode:
    """A complete episode on disk; frames are memory-mapped, steps read once."""

    path: Path
    meta: dict[str, Any]
    frames: np.ndarray
    steps: list[dict[str, Any]]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def behavior(self) -> str:
        return str(self.meta.get("behavior", ""))

    @property
    def keymap(self) -> KeyMap:
        return KeyMap.from_dict(self.meta["keymap"], where=f"episode {self.path}")

    @property
    def actions(self) -> np.ndarray:
        """The actions executed, one a step."""
        return np.array([s["action"] for s in self.steps], dtype=np.int64)

    @property
    def labels(self) -> np.ndarray:
        """The expert's action at each step: its `label` where the step has one, else the action
        executed (the expert drove)."""
        return np.array([s.get("label", s["action"]) for s in self.steps], dtype=np.int64)

    @property
    def expert_driven(self) -> bool:
        """Whether the expert chose every executed action: not a DAgger episode (the policy drove)
        nor one labelled from video (`demos --from-video`: a model inferred the actions)."""
        return "dagger" not in self.meta and "video" not in self.meta

    def __len__(self) -> int:
        return len(self.steps)

    @classmethod
    def open(cls, path: str | Path) -> "Episode":
        """Open and check an episode; a broken one raises a `UserError` naming it."""
        path = Path(path)
        where = f"episode {path}"
        if path.name.endswith(PARTIAL_SUFFIX):
            raise UserError(f"{where}: it is incomplete (left by an interrupted recording); delete it")
        if path.is_file():
            raise UserError(f"{where}: is a file; give the episode's folder (frames.npy, steps.jsonl, meta.json)")
        try:
            meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"{where}: meta.json is missing; it is not an episode folder") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UserError(f"{where}: meta.json is not valid JSON ({e})") from None
        if not isinstance(meta, dict):
            raise UserError(f"{where}: meta.json holds {type(meta).__name__}, not the episode's description")
        if meta.get("format_version") != FORMAT_VERSION:
            raise UserError(f"{where}: format version {meta.get('format_version')!r}, this playtester reads {FORMAT_VERSION}")
        try:
            frames = np.load(path / "frames.npy", mmap_mode="r")
        except FileNotFoundError:
            raise UserError(f"{where}: frames.npy is missing") from None
        except (ValueError, OSError) as e:
            raise UserError(f"{where}: frames.npy is truncated or corrupt ({e})") from None
        if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[3] != 3:
            raise UserError(f"{where}: frames.npy holds {frames.dtype} {frames.shape}, expected uint8 N×H×W×3")
        steps = []
        try:
            with open(path / "steps.jsonl", encoding="utf-8") as f:
                for i, line in enumerate(f):
                    steps.append(json.loads(line))
        except FileNotFoundError:
            raise UserError(f"{where}: steps.jsonl is missing") from None
        except UnicodeDecodeError:
            raise UserError(f"{where}: steps.jsonl is not text (not UTF-8); it is damaged") from None
        except json.JSONDecodeError as e:
            raise UserError(f"{where}: steps.jsonl line {i + 1} is not valid JSON ({e})") from None
        if not all(isinstance(step, dict) and "t" in step for step in steps):
            raise UserError(f"{where}: steps.jsonl holds lines that are not steps; it is damaged")
        if len(steps) != len(frames) or meta.get("steps", len(steps)) != len(steps):
            raise UserError(f"{where}: {len(frames)} frames but {len(steps)} steps (meta says {meta.get('steps')}); it is damaged")
        n_actions = len(meta.get("keymap", {}).get("actions", []))
        for field, what in (("action", "an action"), ("label", "a label")):
            bad = next((s["t"] for s in steps if not 0 <= int(s.get(field, s.get("action", -1))) < n_actions), None)
            if bad is not None:
                raise UserError(f"{where}: step {bad} has {what} outside its key map's {n_actions} actions")
        return cls(path=path, meta=meta, frames=frames, steps=steps)


def episode_folders(root: str | Path) -> list[Path]:
    """Complete-looking episode folders under `root` (itself an episode, or a tree of them)."""
    root = Path(root)
    if not root.exists():
        raise UserError(f"demos folder {root}: not found")
    if not root.is_dir():
        raise UserError(f"demos folder {root}: is a file; give the folder the episodes were recorded into")
    if (root / "meta.json").exists():
        return [root]
    found, seen, unfinished = [], set(), []
    for folder, subfolders, names in os.walk(root, followlinks=True):  # demos gathered by symlinks count too
        real = os.path.realpath(folder)
        if real in seen:  # a link back up the tree (or twice to one folder) is walked once
            subfolders.clear()
            continue
        seen.add(real)
        unfinished += [d for d in subfolders if d.endswith(PARTIAL_SUFFIX)]
        subfolders[:] = [d for d in subfolders if not d.endswith(PARTIAL_SUFFIX)]
        if "meta.json" in names:
            found.append(Path(folder))
    if unfinished:
        many = len(unfinished) > 1
        log.warning("demos folder %s: skipped %d unfinished episode%s (%s%s: a recording stopped before the episode ended); "
                    "delete %s or record again", root, len(unfinished), "s" if many else "", sorted(unfinished)[0],
                    ", …" if many else "", "them" if many else "it")
    return sorted(found)


def load_episodes(root: str | Path, *, behavior: str | None = None, strict: bool = False) -> list[Episode]:
    """Every complete episode under `root`; broken ones are reported by name and skipped.

    `strict=True` raises on the first broken episode instead. An empty result is an error that
    names the folder.
    """
    episodes, broken = [], []
    for folder in episode_folders(root):
        try:
            ep = Episode.open(folder)
        except UserError as e:
            if strict:
                raise
            broken.append(str(e))
            continue
        if behavior is None or ep.behavior == behavior:
            episodes.append(ep)
    if not episodes:  # the broken ones are said in the error, not also one by one
        what = f" with behaviour {behavior!r}" if behavior else ""
        extra = f" ({len(broken)} broken: {broken[0]})" if broken else ""
        raise UserError(f"demos folder {root}: no complete episodes{what}{extra}")
    for message in broken:
        log.warning("skipped %s", message)
    return episodes


def open_episode(root: str | Path, **meta: Any) -> EpisodeWriter:
    """A writer for the next free episode name under `root` (`meta`: `EpisodeWriter`'s keywords)."""
    return EpisodeWriter(root, next_episode_name(root), **meta)


def next_episode_name(root: str | Path, prefix: str = "ep") -> str:
    """`ep0000`, `ep0001`, …: the first name not taken under `root` (complete or partial)."""
    root = Path(root)
    taken = {p.name.removesuffix(PARTIAL_SUFFIX) for p in root.iterdir()} if root.exists() else set()
    i = 0
    while f"{prefix}{i:04d}" in taken:
        i += 1
    return f"{prefix}{i:04d}"
