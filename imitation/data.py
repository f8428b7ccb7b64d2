"""Demo trajectories for behaviour cloning, as encoder features, and the DataModule that serves them.

With the encoder frozen (the default on a CPU), each frame is encoded once, twice over: OD-masked
with the box of the OOI under test for the student (`test_box` in the episode's steps; no box
means the whole frame in grayscale) and in full RGB for the teacher. Training then runs on these
feature sequences, whole trajectories at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.datasets.episodes import Episode, load_episodes
from playtester.datasets.splits import split_episodes
from playtester.perception.od_mask import od_mask_batch


@dataclass
class Trajectory:
    """One demo episode as features: student (masked) and teacher (RGB) inputs, expert actions."""

    name: str
    student: torch.Tensor
    """T×D features of the OD-masked frames."""
    teacher: torch.Tensor
    """T×D features of the full RGB frames."""
    actions: torch.Tensor
    """T expert actions: each step's `label` where it has one (jitter, DAgger), else its action."""
    weights: torch.Tensor | None = None
    """T loss weights (None: all 1); IDM-labelled steps get `IdmUse.weight`, or 0 when dropped."""

    def __len__(self) -> int:
        return len(self.actions)


def test_boxes(ep: Episode) -> list:
    """The box of the OOI under test at each step (None where there is none)."""
    return [s.get("test_box") for s in ep.steps]


def check_demos(episodes: list[Episode], action_names: list[str] | None, k: int, root: str | Path) -> KeyMap:
    """The demos' common key map; errors name the folder or episode that does not fit.

    `action_names` are the encoder's (it was trained to tell those actions apart)."""
    km = episodes[0].keymap
    for ep in episodes:
        if not ep.keymap.same_actions(km):
            raise UserError(f"demos folder {root}: episode {ep.name} has another key map than {episodes[0].name}; keep one key map per folder")
        if len(ep) < k:
            raise UserError(f"episode {ep.path}: {len(ep)} frames, shorter than the policy's window of {k}; record longer episodes or remove it")
    if action_names is not None and list(action_names) != km.names:
        raise UserError(
            f"demos folder {root}: its key map ({', '.join(km.names)}) differs from the encoder's "
            f"({', '.join(action_names)}); train the encoder on demos with this key map"
        )
    return km


def demo_starts_and_targets(episodes: list[Episode]) -> dict[str, dict[str, list[int]]]:
    """Per game, the start points and target OOIs its demos used, for the checkpoint: a park's
    start 3 and another park's start 3 are different places."""
    out: dict[str, dict[str, set[int]]] = {}
    for e in episodes:
        seen = out.setdefault(str(e.meta.get("game", "")), {"starts": set(), "targets": set()})
        start = ((e.meta.get("reset") or {}).get("options") or {}).get("start")  # a level's demos reset with no options
        if isinstance(start, int):
            seen["starts"].add(start)
        target = e.steps[0].get("target_ooi") if e.steps else None
        if isinstance(target, int):
            seen["targets"].add(target)
    return {game: {k: sorted(v) for k, v in seen.items()} for game, seen in out.items()}


def trained_on(scoring: dict, game: str) -> tuple[set[int], set[int]]:
    """The start points and target OOIs a policy's demos used on `game` (empty on a game its demos
    never saw). Checkpoints from before the per-game record (`demo_starts`, `demo_targets`) give
    their demos' starts and targets for every game they name."""
    by_game = scoring.get("demo_by_game")
    if isinstance(by_game, dict):
        seen = by_game.get(game) or {}
        return set(seen.get("starts", [])), set(seen.get("targets", []))
    if game not in (scoring.get("demo_games") or [game]):
        return set(), set()
    starts = {s for s in scoring.get("demo_starts") or [] if isinstance(s, int)}
    return starts, set(scoring.get("demo_targets") or [])


SHARES = {"train": 0.7, "val": 0.1, "test": 0.2}
"""How behaviour cloning splits the expert-driven episodes (`datasets.splits`, cut in this order)."""


def split_demos(episodes: list[Episode], seed: int = 0) -> tuple[list[Episode], list[Episode], list[Episode]]:
    """Train / validation / test for behaviour cloning: the expert-driven episodes split 70/10/20,
    every DAgger episode (the policy drove, the expert labelled) and every episode labelled from
    video in train, so that validation and the held-out score measure the expert's own behaviour."""
    parts = split_episodes([e for e in episodes if e.expert_driven], SHARES, seed)
    return parts["train"] + [e for e in episodes if not e.expert_driven], parts["val"], parts["test"]


@dataclass(frozen=True)
class IdmUse:
    """How steps labelled by the inverse-dynamics model (`demos --from-video`) count in training."""

    weight: float = 1.0
    """Loss weight of an IDM-labelled step (a demo's own steps weigh 1)."""
    min_confidence: float = 0.0
    """IDM-labelled steps whose label has a lower probability weigh 0: the policy still sees
    their frames (its memory runs through them) but learns no action there."""

    def __post_init__(self) -> None:
        if not 0 <= self.weight:
            raise UserError(f"--idm-weight {self.weight}: a weight of 0 or more")
        if not 0 <= self.min_confidence <= 1:
            raise UserError(f"--idm-min-confidence {self.min_confidence}: a probability between 0 and 1")


def step_weights(ep: Episode, use: IdmUse) -> torch.Tensor:
    """The loss weight of each step: 1, or for an IDM-labelled step `use.weight` where its
    confidence reaches `use.min_confidence` and 0 where it does not."""
    weights = [
        (use.weight if float(s.get("confidence", 0.0)) >= use.min_confidence else 0.0) if s.get("label_source") == "idm" else 1.0
        for s in ep.steps
    ]
    return torch.tensor(weights, dtype=torch.float32)


def encode_episodes(episodes: list[Episode], encode: Callable[[torch.Tensor], torch.Tensor], *, teacher: bool = True,
                    idm: IdmUse = IdmUse()) -> list[Trajectory]:
    """Features of every episode: `encode` maps uint8 N×H×W×3 frames to N×D features."""
    out = []
    for ep in episodes:
        frames = np.array(ep.frames)  # a writable copy: the memory map is read-only
        masked = od_mask_batch(frames, test_boxes(ep))
        student = encode(torch.from_numpy(masked))
        rgb = encode(torch.from_numpy(frames)) if teacher else student
        out.append(Trajectory(ep.name, student, rgb, torch.as_tensor(ep.labels), step_weights(ep, idm)))
    return out


@dataclass
class Batch:
    """B trajectories padded to the same length T."""

    student: torch.Tensor  # B×T×D
    teacher: torch.Tensor  # B×T×D
    actions: torch.Tensor  # B×T (−1 on padding)
    mask: torch.Tensor  # B×T, 1 on real steps
    weights: torch.Tensor  # B×T loss weights, 0 on padding


def collate(trajs: list[Trajectory]) -> Batch:
    t = max(len(x) for x in trajs)
    d = trajs[0].student.shape[1]
    b = len(trajs)
    student = torch.zeros(b, t, d)
    teacher = torch.zeros(b, t, d)
    actions = torch.full((b, t), -1, dtype=torch.long)
    mask = torch.zeros(b, t)
    weights = torch.zeros(b, t)
    for i, x in enumerate(trajs):
        n = len(x)
        student[i, :n] = x.student
        teacher[i, :n] = x.teacher
        actions[i, :n] = x.actions
        mask[i, :n] = 1.0
        weights[i, :n] = 1.0 if x.weights is None else x.weights
    return Batch(student, teacher, actions, mask, weights)


def load_demo_folders(demos: str | Path | Sequence[str | Path], behavior: str | None) -> tuple[list[Episode], str]:
    """Every episode under one or more demo folders (an episode under two of them counts once),
    and the folders as one name for messages."""
    roots = [demos] if isinstance(demos, (str, Path)) else list(demos)
    if not roots:
        raise UserError("train policy: give at least one --demos folder")
    seen: dict[Path, Episode] = {}
    for root in roots:
        for ep in load_episodes(root, behavior=behavior):
            seen.setdefault(ep.path.resolve(), ep)
    return list(seen.values()), ", ".join(str(r) for r in roots)


class EpochShuffle(Sampler[int]):
    """The trajectories in an order drawn from (seed, epoch) alone: Lightning sets the epoch
    (`set_epoch`) before each, so a training resumed at an epoch shuffles it as the uninterrupted
    one did, whatever the random streams went through before."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        return iter(torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)).tolist())

    def __len__(self) -> int:
        return self.n


def loader(trajs: list[Trajectory], batch_size: int, shuffle: bool, seed: int = 0) -> DataLoader:
    return DataLoader(trajs, batch_size=batch_size, sampler=EpochShuffle(len(trajs), seed) if shuffle else None, collate_fn=collate,
                      generator=torch.Generator().manual_seed(seed), num_workers=0)


class DemoDataModule(L.LightningDataModule):
    """Behaviour-cloning data from one or more demo folders: the episodes loaded and checked
    against the encoder's actions, split by episode (`split_demos`), each encoded once with the
    frozen encoder (`encode`: uint8 N×H×W×3 frames → N×D features), served B whole trajectories a
    batch. After `setup`: `keymap`, `episodes`, `parts` (episodes by split) and `trajs` (features
    by split, in the same order)."""

    def __init__(self, demos: str | Path | Sequence[str | Path], encode: Callable[[torch.Tensor], torch.Tensor], *,
                 action_names: list[str] | None, k: int, behavior: str | None = None, batch_size: int = 8, seed: int = 0,
                 teacher: bool = True, idm: IdmUse = IdmUse(), say: Callable[[str], None] = print) -> None:
        super().__init__()
        self.demos, self.encode, self.action_names, self.k, self.behavior = demos, encode, action_names, k, behavior
        self.batch_size, self.seed, self.teacher, self.idm, self.say = batch_size, seed, teacher, idm, say
        self.keymap: KeyMap | None = None
        self.episodes: list[Episode] = []
        self.parts: dict[str, list[Episode]] = {}
        self.trajs: dict[str, list[Trajectory]] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.trajs:
            return
        episodes, where = load_demo_folders(self.demos, self.behavior)
        self.keymap = check_demos(episodes, self.action_names, self.k, where)
        n = sum(e.expert_driven for e in episodes)
        if n < 3:
            raise UserError(f"demos folder {where}: {n} expert-driven episodes; record at least 3 (train, validation, test)")
        train, val, test = split_demos(episodes, self.seed)
        self.episodes, self.parts = episodes, {"train": train, "val": val, "test": test}
        others = sum(not e.expert_driven for e in episodes)
        self.say(f"encoding {len(episodes)} episodes ({sum(len(e) for e in episodes)} frames) with the frozen encoder"
                 + (f"; {others} DAgger or video episodes train only" if others else ""))
        self.trajs = {part: encode_episodes(eps, self.encode, teacher=self.teacher, idm=self.idm) for part, eps in self.parts.items()}

    @property
    def expert_episodes(self) -> list[Episode]:
        return [e for e in self.episodes if e.expert_driven]

    def train_dataloader(self) -> DataLoader:
        return loader(self.trajs["train"], self.batch_size, True, self.seed)

    def val_dataloader(self) -> DataLoader:
        return loader(self.trajs["val"], self.batch_size, False)
