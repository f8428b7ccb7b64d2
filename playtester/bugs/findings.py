"""Findings on disk, and replaying them.

    findings/NNNN/finding.json   what was found, where, how to start the game again, and
                                 `replay`: the command that plays the trace again
    findings/NNNN/actions.jsonl  every action of the episode up to the finding, from its reset
    findings/NNNN/frames.npy     the last frames before the finding (uint8 M×H×W×3): frame i is
                                 what the game showed after action `frames_from + i`
    findings/NNNN/clip.mp4       those frames as a video

`replay_finding` starts the game with the same reset arguments, sends the same actions and
compares the frames: on a deterministic backend they are identical.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from playtester.files import write_text_atomic
from playtester.errors import UserError
from playtester.bugs.oracles import Finding


def write_clip(path: Path, frames: Sequence[np.ndarray], fps: float) -> Path | None:
    """An H.264 MP4 of the frames (even-sized), written atomically; None when ffmpeg is missing."""
    try:
        import imageio.v2 as imageio
    except ImportError:
        return None
    tmp = path.with_name(path.name + ".partial.mp4")
    try:
        with imageio.get_writer(tmp, fps=max(1.0, fps), codec="libx264", macro_block_size=2, quality=7,
                                ffmpeg_log_level="error") as w:
            for f in frames:
                h, wd = f.shape[0] // 2 * 2, f.shape[1] // 2 * 2
                w.append_data(np.ascontiguousarray(f[:h, :wd]))
    except Exception:  # no ffmpeg binary: the frames.npy still holds the clip
        tmp.unlink(missing_ok=True)
        return None
    os.replace(tmp, path)
    return path


def save_finding(
    folder: Path, finding: Finding, *, game: str, game_options: dict[str, Any], reset: dict[str, Any],
    actions: Sequence[int], frames: Sequence[np.ndarray], fps: float,
) -> Path:
    """Write one finding folder atomically (`NNNN.partial/` renamed when complete)."""
    tmp = folder.with_name(folder.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    frames_from = len(actions) - len(frames)
    with open(tmp / "actions.jsonl", "w") as f:
        for t, a in enumerate(actions):
            f.write(json.dumps({"t": t, "action": int(a)}) + "\n")
    if frames:
        np.save(tmp / "frames.npy", np.stack(frames))
        write_clip(tmp / "clip.mp4", frames, fps)
    doc = finding.to_dict() | {"game": game, "game_options": game_options, "reset": reset, "frames_from": frames_from,
                               "steps": len(actions), "replay": f"playtester replay {folder}"}
    write_text_atomic(tmp / "finding.json", json.dumps(doc, indent=1))
    os.replace(tmp, folder)
    return folder


@dataclass
class ReplayResult:
    steps: int
    compared: int
    identical: int
    first_mismatch: int | None


def replay_finding(folder: str | Path, game: str | None = None) -> ReplayResult:
    """Start the game as the finding's episode started, send its actions, compare the frames."""
    from playtester.capture.games import make_game

    folder = Path(folder)
    try:
        doc = json.loads((folder / "finding.json").read_text())
        actions = [json.loads(line)["action"] for line in (folder / "actions.jsonl").read_text().splitlines() if line.strip()]
    except FileNotFoundError as e:
        raise UserError(f"finding {folder}: {Path(e.filename).name} is missing") from None
    except (json.JSONDecodeError, KeyError) as e:
        raise UserError(f"finding {folder}: damaged ({e})") from None
    frames = np.load(folder / "frames.npy", mmap_mode="r") if (folder / "frames.npy").exists() else None
    env = make_game(game or doc["game"], **doc.get("game_options", {}))
    try:
        from playtester.capture.replay import check_actions

        check_actions(actions, env, f"finding {folder}")
        env.reset(**_reset_args(doc["reset"]))
        start = int(doc.get("frames_from", len(actions)))
        compared = identical = 0
        first = None
        for t, a in enumerate(actions):
            obs, *_ = env.step(int(a))
            if frames is not None and t >= start:
                i = t - start
                compared += 1
                if obs.shape == frames[i].shape and np.array_equal(obs, frames[i]):
                    identical += 1
                elif first is None:
                    first = t
    finally:
        env.close()
    return ReplayResult(len(actions), compared, identical, first)


def _reset_args(reset: dict[str, Any]) -> dict[str, Any]:
    options = dict(reset.get("options") or {})
    if isinstance(options.get("start"), list):
        options["start"] = tuple(options["start"])
    return {"seed": reset.get("seed"), "options": options or None}
