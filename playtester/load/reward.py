"""RELINE's load testing for PPO: the frame-time threshold and the load reward.

Threshold (RELINE §4.1.3): from a baseline run's step frame times `s`,

    t_b = mean(s) + 5·sd(s)                                     (the five-σ rule, sd with n − 1)

and, because training itself loads the machine, warm-up steps at the start of training measure
frame times `s_tr` and shift it:

    δ = max(Q1(s_tr) − Q1(s), Q3(s_tr) − Q3(s))                   t = t_b + δ

Reward (RELINE §4.1.2): `+reward` (10) on every step whose frame time exceeds `t` at a position
inside the area the tester cares about (everywhere by default), and at the end of each episode a
bonus of `end_bonus_coef × Σ` the load reward of that episode. `LoadReward` is a PPO `RewardHook`;
it adds its stream, times `coef`, to an inner hook's episodic stream (the explorer's novelty and
preference) or, alone, to the game's own reward that PPO already counts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from playtester.files import write_text_atomic
from playtester.errors import UserError
from playtester.files import read_json
from playtester.capture.timing import missing_frame_time_message
from playtester.exploration.hook import RewardHook, ShapedRewards, StepView
from playtester.exploration.ppo import rollout_rewards


@dataclass(frozen=True)
class FrameTimeStats:
    """Summary of a sample of step frame times (ms)."""

    n: int
    mean: float
    sd: float
    """Sample standard deviation (n − 1), as R's `sd` that RELINE used."""
    q1: float
    q3: float

    @classmethod
    def of(cls, samples: Sequence[float] | np.ndarray, what: str = "frame times") -> "FrameTimeStats":
        s = np.asarray(samples, dtype=float).ravel()
        s = s[np.isfinite(s)]
        if s.size < 2:
            raise UserError(f"{what}: {s.size} finite sample(s); a threshold needs at least 2 steps (play a longer baseline run)")
        q1, q3 = np.percentile(s, [25, 75])
        return cls(n=int(s.size), mean=float(s.mean()), sd=float(s.std(ddof=1)), q1=float(q1), q3=float(q3))


@dataclass(frozen=True)
class LoadThreshold:
    """`t = t_b + δ`: the frame time (ms) above which a step counts as a frame-rate drop."""

    base: float
    """`t_b = mean + sigmas · sd` of the baseline run."""
    baseline: FrameTimeStats
    shift: float = 0.0
    """`δ`, the training load measured by the warm-up (0 until `shifted`)."""
    sigmas: float = 5.0
    training: FrameTimeStats | None = None
    """The warm-up's frame times, once measured."""

    @property
    def value(self) -> float:
        return self.base + self.shift

    @classmethod
    def from_baseline(cls, samples: Sequence[float] | np.ndarray, sigmas: float = 5.0) -> "LoadThreshold":
        """`t_b` from a baseline run's step frame times."""
        if not sigmas > 0:
            raise UserError(f"threshold sigmas {sigmas}: use a positive number (RELINE uses 5)")
        stats = FrameTimeStats.of(samples, "baseline frame times")
        return cls(base=stats.mean + sigmas * stats.sd, baseline=stats, sigmas=sigmas)

    def shifted(self, training_samples: Sequence[float] | np.ndarray) -> "LoadThreshold":
        """The threshold shifted by `δ = max(Q1_tr − Q1, Q3_tr − Q3)` of the warm-up's frame times."""
        tr = FrameTimeStats.of(training_samples, "warm-up frame times")
        delta = max(tr.q1 - self.baseline.q1, tr.q3 - self.baseline.q3)
        return LoadThreshold(base=self.base, baseline=self.baseline, shift=float(delta), sigmas=self.sigmas, training=tr)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"value": self.value}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LoadThreshold":
        training = data.get("training")
        return cls(base=float(data["base"]), baseline=FrameTimeStats(**data["baseline"]), shift=float(data.get("shift", 0.0)),
                   sigmas=float(data.get("sigmas", 5.0)), training=FrameTimeStats(**training) if training else None)

    def save(self, path: str | Path) -> Path:
        return write_text_atomic(Path(path), json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "LoadThreshold":
        path = Path(path)
        if not path.exists():
            raise UserError(f"load threshold {path}: file not found; measure a baseline first")
        doc = read_json(path, f"load threshold {path}")
        try:
            threshold = cls.from_dict(doc)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise UserError(f"load threshold {path}: malformed ({type(e).__name__}: {e}); measure the baseline again") from None
        if not (np.isfinite(threshold.value) and threshold.value > 0):
            raise UserError(f"load threshold {path}: t = {threshold.value} ms is no frame time; a threshold is a positive number "
                            "of milliseconds (measure the baseline again, or fix \"base\" and \"shift\")")
        return threshold


@dataclass(frozen=True)
class AreaMask:
    """The area where frame-rate drops count: `mask[row, col]` over cells of `cell` map units
    from `(x0, y0)`, row 0 south (as `OccupancyGrid`). Positions outside the bounds are outside."""

    origin: tuple[float, float]
    cell: float
    mask: np.ndarray

    def contains(self, x: float, y: float) -> bool:
        col = int(np.floor((x - self.origin[0]) / self.cell))
        row = int(np.floor((y - self.origin[1]) / self.cell))
        rows, cols = self.mask.shape
        return 0 <= row < rows and 0 <= col < cols and bool(self.mask[row, col])

    @classmethod
    def pathways(cls, layout: Any) -> "AreaMask":
        """The park's pathways and bridges (a `ParkLayout`)."""
        return cls((0.0, 0.0), float(layout.config.cell), np.asarray(layout.pathway_mask, dtype=bool))


@dataclass
class LoadRewardConfig:
    """What the load-testing agent is rewarded for."""

    reward: float = 10.0
    """Reward of a step whose frame time exceeds the threshold inside the area (RELINE: 10)."""
    end_bonus_coef: float = 1.0
    """Episode-end bonus = this × the episode's load reward (RELINE gave 10× at its finish line;
    here every episode end counts, time limits included, so the default is 1×)."""
    coef: float = 0.1
    """Weight of the load stream added to the episodic stream (RND's normalised novelty is about 1)."""
    warmup_steps: int = 0
    """Vector steps at training start that only measure frame times, then shift the threshold by
    the quartile rule; 0 keeps the threshold as given."""

    def __post_init__(self) -> None:
        if self.reward <= 0:
            raise UserError(f"load reward {self.reward}: use a positive reward (RELINE: 10)")
        if self.end_bonus_coef < 0 or self.coef <= 0:
            raise UserError(f"load end_bonus_coef={self.end_bonus_coef}, coef={self.coef}: use bonus ≥ 0 and coef > 0")
        if self.warmup_steps < 0:
            raise UserError(f"load warmup_steps {self.warmup_steps}: use 0 or more steps")


def vector_info(infos: dict[str, Any], key: str, done: np.ndarray) -> list[Any]:
    """Per-env values of `key` from a vector env's `infos` (`None` where absent); for envs whose
    episode ended in this step (same-step autoreset) the value comes from `final_info`."""
    n = len(done)
    out: list[Any] = [None] * n
    for source, pick in ((infos, ~done), (infos.get("final_info") or {}, done)):
        values, mask = source.get(key), source.get(f"_{key}")
        if values is None:
            continue
        for i in np.flatnonzero(pick):
            if mask is None or mask[i]:
                out[i] = values[i]
    return out


class LoadReward:
    """`RewardHook`: RELINE's load reward, optionally on top of an inner hook (the explorer's).

    Reads `frame_time_ms` (and `position`, when an area is given) from the infos PPO passes in
    `StepView`; a game without frame times is refused with what to enable.
    """

    def __init__(
        self,
        config: LoadRewardConfig,
        threshold: LoadThreshold,
        num_envs: int,
        *,
        inner: RewardHook | None = None,
        area: AreaMask | Callable[[float, float], bool] | None = None,
        game: str = "the game",
        on_shift: Callable[[LoadThreshold], None] | None = None,
    ) -> None:
        """`on_shift(threshold)` is called once the warm-up has shifted the threshold (to save it)."""
        self.config = config
        self.threshold = threshold
        self.num_envs = num_envs
        self.inner = inner
        self.non_episodic = bool(inner is not None and inner.non_episodic)
        self.area = area.contains if isinstance(area, AreaMask) else area
        self.game = game
        self.on_shift = on_shift
        self.warmup_samples: list[float] = []
        self.warmup_left = config.warmup_steps
        self.episode_load = np.zeros(num_envs)
        self._clear()

    def _clear(self) -> None:
        self._load: list[np.ndarray] = []
        self._frame_times: list[np.ndarray] = []

    def _in_area(self, positions: list[Any]) -> np.ndarray:
        if self.area is None:
            return np.ones(self.num_envs, dtype=bool)
        inside = np.zeros(self.num_envs, dtype=bool)
        for i, p in enumerate(positions):
            if p is None:
                raise UserError(f"game {self.game!r} reports no position: the load reward's area needs telemetry "
                                "positions; drop the area (count frame drops everywhere) or send \"pos\" in telemetry")
            inside[i] = self.area(float(p[0]), float(p[1]))
        return inside

    def step(self, view: StepView) -> None:
        if self.inner is not None:
            self.inner.step(view)
        if view.infos is None or view.dones is None:
            raise RuntimeError("LoadReward needs the step's infos and dones in StepView (PPO passes them)")
        done = np.asarray(view.dones, dtype=bool)
        times = vector_info(view.infos, "frame_time_ms", done)
        if any(t is None for t in times):
            fps = vector_info(view.infos, "fps", done)
            times = [t if t is not None else (1000.0 / f if f else None) for t, f in zip(times, fps)]
            if any(t is None for t in times):
                raise UserError(missing_frame_time_message(self.game))
        frame_times = np.asarray(times, dtype=float)
        self._frame_times.append(frame_times)
        load = np.zeros(self.num_envs)
        if self.warmup_left > 0:
            self.warmup_samples.extend(frame_times.tolist())
            self.warmup_left -= 1
            if self.warmup_left == 0:
                self.threshold = self.threshold.shifted(self.warmup_samples)
                if self.on_shift is not None:
                    self.on_shift(self.threshold)
        else:
            inside = self._in_area(vector_info(view.infos, "position", done))
            load = np.where((frame_times > self.threshold.value) & inside, self.config.reward, 0.0)
        self.episode_load += load
        bonus = np.where(done, self.config.end_bonus_coef * self.episode_load, 0.0)
        self.episode_load[done] = 0.0
        self._load.append(load + bonus)

    def setup(self, fabric: Any) -> None:
        """Set the inner hook up on the run's Fabric."""
        if self.inner is not None and hasattr(self.inner, "setup"):
            self.inner.setup(fabric)

    def hand_off(self) -> Callable[[], ShapedRewards]:
        """The rollout's load rewards, and the work of the inner hook's (`ppo.rollout_rewards`)
        that adds them to its own: the work `ppo.train` runs in the update's thread."""
        load = torch.as_tensor(np.stack(self._load), dtype=torch.float32)
        frame_times = np.stack(self._frame_times)
        threshold = self.threshold.value
        self._clear()
        inner = rollout_rewards(self.inner)

        def rewards() -> ShapedRewards:
            if inner is not None:
                shaped = inner()
                episodic, non_episodic, logs = shaped.episodic + self.config.coef * load, shaped.non_episodic, dict(shaped.logs)
            else:
                episodic, non_episodic, logs = self.config.coef * load, None, {}
            logs.update({
                "rewards/load": float(load.mean()),
                "charts/frame_time_ms": float(frame_times.mean()),
                "charts/load_threshold_ms": float(threshold),
                "charts/over_threshold_share": float((frame_times > threshold).mean()),
            })
            return ShapedRewards(episodic, non_episodic, logs)

        return rewards

    def end_rollout(self) -> ShapedRewards:
        return self.hand_off()()

    def state_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold.to_dict(), "warmup_left": self.warmup_left,
                "warmup_samples": list(self.warmup_samples), "episode_load": self.episode_load.tolist(),
                "inner": self.inner.state_dict() if self.inner is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.threshold = LoadThreshold.from_dict(state["threshold"])
        self.warmup_left = int(state["warmup_left"])
        self.warmup_samples = list(state["warmup_samples"])
        self.episode_load = np.zeros(self.num_envs)  # a resumed run starts new episodes
        if self.inner is not None:
            self.inner.load_state_dict(state["inner"])
