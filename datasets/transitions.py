"""Transitions `(s_{t-1}, s_t) → a_{t-1}` from demo episodes, for inverse-dynamics training.

In an episode `frames[t]` is what the player saw when it chose `steps[t].action`, so the action
that turned `frames[t]` into `frames[t+1]` is `steps[t].action`: each pair of adjacent frames
gives one sample. Frames are resized to the encoder's `FrameSpec` (the one resize, `capture/frames.py`) on
the fly from the memory-mapped episodes; each frame comes with the box of the object under test, scaled alike, for
the OD mask that the model applies (masking lives with the model, above this layer):

- the episode's own ground truth when it carries it: `test_box` (inspect demos; may be None),
  else the largest of the visible `objects`;
- else a box from `boxes` (a detector's, computed by the caller), else None.

Episodes are split into training and held-out ones by `datasets.splits` (never frames of one
episode on both sides, stratified by behaviour).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from playtester.errors import UserError
from playtester.capture.frames import FrameSpec
from playtester.datasets.episodes import Episode, load_episodes
from playtester.datasets.splits import split_episodes


class Transition(NamedTuple):
    prev: torch.Tensor
    """uint8 3×S×S, the frame before the action."""
    curr: torch.Tensor
    """uint8 3×S×S, the frame after it."""
    action: torch.Tensor
    """int64 scalar, the action taken in between."""
    prev_box: torch.Tensor
    """float32 4, the OOI box in `prev` (resized pixels), NaN when there is none."""
    curr_box: torch.Tensor


def ground_truth_box(step: dict[str, Any]) -> tuple[bool, list[float] | None]:
    """(whether the step carries ground truth, the box of the object under test or None)."""
    if "test_box" in step:
        return True, step["test_box"]
    if "objects" in step:
        objects = [o for o in step["objects"] if o.get("box")]
        if not objects:
            return True, None
        box = max(objects, key=lambda o: (o["box"][2] - o["box"][0]) * (o["box"][3] - o["box"][1]))["box"]
        return True, box
    return False, None


def episode_boxes(ep: Episode, detected: np.ndarray | None = None) -> np.ndarray:
    """N×4 float32 boxes (native pixels, NaN rows for none) of an episode's frames."""
    out = np.full((len(ep), 4), np.nan, np.float32)
    for t, step in enumerate(ep.steps):
        has_gt, box = ground_truth_box(step)
        if has_gt:
            if box is not None:
                out[t] = box
        elif detected is not None:
            out[t] = detected[t]
    return out


def needs_detector(ep: Episode) -> bool:
    """Whether an episode lacks ground-truth boxes (so a detector must supply them)."""
    return not any(ground_truth_box(s)[0] for s in ep.steps[:1])


class TransitionDataset(Dataset):
    """Adjacent-frame pairs of some episodes, resized to `frames` (a `FrameSpec`), with OOI boxes."""

    def __init__(self, episodes: Sequence[Episode], frames: FrameSpec, boxes: dict[str, np.ndarray] | None = None) -> None:
        self.episodes = list(episodes)
        self.frames = frames
        self.index = [(e, t) for e, ep in enumerate(self.episodes) for t in range(len(ep) - 1)]
        self.boxes = []
        for ep in self.episodes:
            b = episode_boxes(ep, (boxes or {}).get(ep.name))
            h, w = ep.frames.shape[1:3]
            scale = np.array([frames.width / w, frames.height / h] * 2, np.float32)
            self.boxes.append(b * scale)
        self.actions = np.concatenate([ep.actions[:-1] for ep in self.episodes]) if self.episodes else np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def _frame(self, ep: Episode, t: int) -> torch.Tensor:
        frame = self.frames.resize(np.asarray(ep.frames[t]))
        return torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1)

    def __getitem__(self, i: int) -> Transition:
        e, t = self.index[i]
        ep = self.episodes[e]
        return Transition(
            prev=self._frame(ep, t),
            curr=self._frame(ep, t + 1),
            action=torch.tensor(int(ep.steps[t]["action"]), dtype=torch.int64),
            prev_box=torch.from_numpy(self.boxes[e][t]),
            curr_box=torch.from_numpy(self.boxes[e][t + 1]),
        )


def check_keymaps(episodes: Sequence[Episode]) -> list[str]:
    """The action names all episodes share; a `UserError` names an episode whose key map differs."""
    names = [a["name"] for a in episodes[0].meta["keymap"]["actions"]]
    for ep in episodes[1:]:
        other = [a["name"] for a in ep.meta["keymap"]["actions"]]
        if other != names:
            raise UserError(f"episode {ep.path}: its key map ({', '.join(other)}) differs from {episodes[0].name}'s ({', '.join(names)})")
    return names


class TransitionDataModule(L.LightningDataModule):
    """Training and held-out transitions from the demo episodes under a folder."""

    def __init__(
        self,
        demos: str | Path | Sequence[Episode],
        *,
        frames: FrameSpec = FrameSpec.square(128),
        batch_size: int = 32,
        val_fraction: float = 0.2,
        seed: int = 0,
        workers: int = 0,
        boxes: dict[str, np.ndarray] | None = None,
        box_fn: Callable[[Episode], np.ndarray] | None = None,
    ) -> None:
        super().__init__()
        if not 0 <= val_fraction < 1:
            raise UserError(f"--val-fraction {val_fraction}: use a number in [0, 1)")
        self.demos = demos
        self.frames, self.batch_size, self.val_fraction = frames, batch_size, val_fraction
        self.seed, self.workers = seed, workers
        self.boxes = dict(boxes or {})
        self.box_fn = box_fn
        self.episodes: list[Episode] | None = None
        self.train_set: TransitionDataset | None = None
        self.val_set: TransitionDataset | None = None
        self.action_names: list[str] = []

    def setup(self, stage: str | None = None) -> None:
        if self.episodes is not None:
            return
        episodes = load_episodes(self.demos) if isinstance(self.demos, (str, Path)) else list(self.demos)
        episodes = [ep for ep in episodes if len(ep) >= 2]
        if not episodes:
            raise UserError(f"demos {self.demos}: no episode has two or more steps")
        self.action_names = check_keymaps(episodes)
        if self.box_fn is not None:
            for ep in episodes:
                if ep.name not in self.boxes and needs_detector(ep):
                    self.boxes[ep.name] = self.box_fn(ep)
        parts = split_episodes(episodes, {"val": self.val_fraction, "train": 1 - self.val_fraction}, self.seed)
        train, val = parts["train"], parts["val"]
        self.train_set = TransitionDataset(train, self.frames, self.boxes)
        self.val_set = TransitionDataset(val, self.frames, self.boxes)
        self.episodes = episodes

    def action_counts(self, split: str = "train") -> np.ndarray:
        data = self.train_set if split == "train" else self.val_set
        return np.bincount(data.actions, minlength=len(self.action_names))

    def _loader(self, data: TransitionDataset, shuffle: bool) -> DataLoader:
        return DataLoader(data, batch_size=self.batch_size, shuffle=shuffle, num_workers=self.workers,
                          persistent_workers=self.workers > 0, drop_last=False)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, False)
