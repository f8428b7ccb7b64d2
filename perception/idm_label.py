"""Demos from gameplay video: the inverse-dynamics model labels unlabelled footage (as VPT did).

The feature encoder is trained as an inverse-dynamics model (`InverseDynamics`): given two
adjacent frames it predicts the action between them. Run over a video resampled to the control
rate, it gives every frame the action that led to the next one, and the video becomes an ordinary
demo episode: `frames.npy`, `steps.jsonl` with the inferred `action`, its probability
`confidence`, `label_source: "idm"` and `low_confidence: true` below the threshold, and
`meta.json` naming the video and the model. The last frame of a video has no next frame and is
not kept.

The model was trained with one frame of every pair OD-masked (grayscale outside the box of the
object under test; footage has no box, so the whole frame). Its answer on footage is therefore
the average over what training showed it: the pair with the first frame grey and the pair with
the second frame grey, each half of the `mask_prob` share, and the unmasked pair for the rest.
Each frame is encoded once in colour and once in grey, so a pair costs two encodings, not four.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import torch

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.datasets.episodes import EpisodeWriter
from playtester.datasets.video import control_rate_frames, video_files
from playtester.perception.encoder import InverseDynamics, load_inverse_dynamics
from playtester.perception.od_mask import od_mask_torch

log = logging.getLogger(__name__)

LABEL_SOURCE = "idm"
MIN_TAIL_STEPS = 16
"""The last piece of a video cut into episodes is dropped when it is shorter than this."""


@dataclass
class VideoLabelConfig:
    """How footage becomes demo episodes."""

    fps: float = 35 / 4
    """Control rate the video is resampled to: the rate the encoder's demos were recorded at
    (ViZDoom's 35 tics a second with a frame skip of 4)."""
    size: tuple[int, int] = (320, 240)
    """Width, height of the stored frames (the park's frames); the video is centre-cropped to this
    aspect, then resized."""
    flag_below: float = 0.5
    """Steps whose label has a lower probability are flagged `low_confidence`."""
    episode_steps: int = 300
    """Longer videos are cut into episodes of this many steps (`NAME-000`, `NAME-001`, …)."""
    behavior: str = "path"
    """The behaviour tag the episodes get (what the footage shows a tester doing)."""
    batch_size: int = 64
    """Frame pairs labelled at once."""

    def __post_init__(self) -> None:
        if not self.fps > 0:
            raise UserError(f"--fps {self.fps}: a positive number of control steps a second")
        if len(self.size) != 2 or min(self.size) < 1:
            raise UserError(f"--size {self.size}: give WIDTHxHEIGHT in pixels")
        if not 0 <= self.flag_below <= 1:
            raise UserError(f"--flag-below {self.flag_below}: a probability between 0 and 1")
        if self.episode_steps < 2:
            raise UserError(f"--steps {self.episode_steps}: at least 2 steps per episode")
        if self.batch_size < 1:
            raise UserError(f"batch size {self.batch_size}: at least 1")


class PairLabeller:
    """Action probabilities between adjacent frames, from an inverse-dynamics checkpoint."""

    def __init__(self, model: InverseDynamics) -> None:
        self.model = model.eval()
        self.frames = model.config.frames
        self.mask_prob = float(model.config.mask_prob)
        self.device = next(model.parameters()).device

    @classmethod
    def load(cls, path: str | Path) -> "PairLabeller":
        return cls(load_inverse_dynamics(path))

    def _input(self, frames: np.ndarray) -> torch.Tensor:
        """uint8 N×H×W×3 frames → float N×3×S×S in [0, 1], resized as the training pairs were."""
        x = torch.from_numpy(self.frames.resize_batch(np.stack(frames))).to(self.device).permute(0, 3, 1, 2)
        return x.float().div(255.0)

    @torch.no_grad()
    def probabilities(self, frames: np.ndarray) -> torch.Tensor:
        """(N−1)×n_actions: the probability of each action between frames t and t+1."""
        if len(frames) < 2:
            return torch.zeros(0, self.model.config.n_actions)
        x = self._input(frames)
        grey = od_mask_torch(x, torch.full((len(x), 4), float("nan")))
        colour_f = self.model.encoder(x)
        grey_f = self.model.encoder(grey)

        def probs(f0: torch.Tensor, f1: torch.Tensor) -> torch.Tensor:
            return self.model.head(torch.cat([f0, f1, f1 - f0], dim=1)).softmax(1)

        p = self.mask_prob
        out = 0.5 * p * (probs(grey_f[:-1], colour_f[1:]) + probs(colour_f[:-1], grey_f[1:]))
        if p < 1:
            out = out + (1 - p) * probs(colour_f[:-1], colour_f[1:])
        return out.cpu()


def labelled_pairs(frames: Iterable[np.ndarray], labeller: PairLabeller, batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(frame t, probabilities of the action from t to t+1) for every frame but the last."""
    batch: list[np.ndarray] = []
    for frame in frames:
        batch.append(np.array(frame, dtype=np.uint8))  # a writable copy
        if len(batch) == batch_size + 1:
            yield from zip(batch[:-1], labeller.probabilities(np.stack(batch)).numpy())
            batch = batch[-1:]
    if len(batch) >= 2:
        yield from zip(batch[:-1], labeller.probabilities(np.stack(batch)).numpy())


def episode_name(video: Path) -> str:
    """A folder name from a video's file name (letters, digits, `-`, `_`, `.`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", video.stem).strip("._") or "video"


@dataclass
class VideoResult:
    """What one video became."""

    video: Path
    episodes: list[Path]
    steps: int
    low_confidence: int
    action_counts: list[int]


def label_video(video: str | Path, out: str | Path, labeller: PairLabeller, keymap: KeyMap, cfg: VideoLabelConfig,
                *, idm_path: str = "", name: str | None = None) -> VideoResult:
    """Write one video as IDM-labelled episodes under `out` (each atomically)."""
    video = Path(video)
    info, frames = control_rate_frames(video, cfg.fps, cfg.size, min_side=labeller.frames.side)
    base = name or episode_name(video)
    counts = np.zeros(keymap.n, np.int64)  # over the episodes kept
    written: list[Path] = []
    low = 0
    writer: EpisodeWriter | None = None
    episode_actions: list[int] = []
    episode_low = 0

    def keep(w: EpisodeWriter) -> None:
        nonlocal low
        written.append(w.close())
        counts[:] += np.bincount(episode_actions, minlength=keymap.n)
        low += episode_low

    try:
        for frame, probs in labelled_pairs(frames, labeller, cfg.batch_size):
            if writer is None or writer.n >= cfg.episode_steps:
                if writer is not None:
                    keep(writer)
                episode_actions, episode_low = [], 0
                part = len(written)
                writer = EpisodeWriter(
                    out, f"{base}-{part:03d}", game=f"video:{video.name}", behavior=cfg.behavior, keymap=keymap, fps=cfg.fps,
                    extra={
                        "video": {"file": str(video), "source_fps": info.fps, "source_size": list(info.size),
                                  "codec": info.codec, "first_step": part * cfg.episode_steps},
                        "idm": {"checkpoint": idm_path, "flag_below": cfg.flag_below},
                    },
                )
            action = int(probs.argmax())
            confidence = float(probs[action])
            flagged = confidence < cfg.flag_below
            writer.add(frame, action, keymap.keys_for(action), label_source=LABEL_SOURCE, confidence=round(confidence, 4),
                       **({"low_confidence": True} if flagged else {}))
            episode_actions.append(action)
            episode_low += flagged
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    if writer is None:
        raise UserError(f"video {video}: one frame at {cfg.fps:g} steps a second; a demo needs at least two")
    if written and writer.n < MIN_TAIL_STEPS:  # a few steps left over after the cut: too short to train on
        writer.discard()
    else:
        keep(writer)
    return VideoResult(video, written, int(counts.sum()), low, counts.tolist())


def label_videos(source: str | Path, out: str | Path, idm: str | Path, keymap: KeyMap, cfg: VideoLabelConfig,
                 say: Callable[[str], None] = print, labeller: PairLabeller | None = None) -> list[VideoResult]:
    """Every video of a file or folder as IDM-labelled episodes under `out`, by the encoder
    checkpoint `idm` (`labeller`: that checkpoint already loaded).

    A single file that cannot be read is an error; in a folder, each bad video is named in one
    line and skipped, and it is an error only when none could be read."""
    labeller = labeller or PairLabeller.load(idm)
    names = labeller.model.config.action_names
    if keymap.names != names:
        raise UserError(f"--key-map {keymap.name}: its actions ({', '.join(keymap.names)}) are not the encoder's "
                        f"({', '.join(names)}); pass the key map the encoder was trained with")
    videos = video_files(source)
    results: list[VideoResult] = []
    for video in videos:
        try:
            results.append(label_video(video, out, labeller, keymap, cfg, idm_path=str(idm)))
        except UserError as e:
            if len(videos) == 1:
                raise
            say(f"skipped: {e}")
            continue
        r = results[-1]
        say(f"{video}: {r.steps} steps in {len(r.episodes)} episode(s), {r.low_confidence} below confidence {cfg.flag_below:g}")
    if not results:
        raise UserError(f"--from-video {source}: none of its {len(videos)} videos could be read (each is named above)")
    return results
