"""The tester loop (PPGTA's agent) as a Gymnasium wrapper around a game.

The explorer, whatever drives it (PPO trained online, a baseline, a random agent), sends one
action a step. Every `detect_every` steps the wrapper looks for objects of interest; when it sees
an untested one close enough and with enough confidence, it hands control to the test policy
with that OOI's box as the mask, for the behaviour's length, keeps the crops and the clip, scores
the executed test (JSD against the expert, the texture oracle on the crops), and gives control
back. From the explorer's side the whole test is one long step. Oracles run on every step, the
explorer's and the test policy's alike; every finding keeps the actions that led to it.

The wrapper sits under any resizing: detector, test policy and oracles see the game's own frames.

Several game instances may run at once, each in its own process with its own wrapper
(`env_index` of `n_envs`): they share the run folder, number their episodes so that they never
clash, and share which OOIs are taken through `claims.jsonl` (an OOI is claimed when its test
starts, so it is tested once in the whole run). With an episode budget, an instance whose next
episode lies beyond it goes idle: it still plays (the vector env needs frames) but logs, detects
and tests nothing, and says so with `info["tester_idle"]`. The latest detections ride in
`info["detections"]`, for the explorer's OD mask.

An oracle that says `ends_episode` (the player trapped for good and the trap walked:
`playtester/bugs/softlock.py`) ends its episode, truncated, so that the run goes on from a new
start rather than play out the episode in the trap. A game that crashes (`info["crashed"]`) ends its episode; the crash oracle makes it a finding,
`crashes.jsonl` counts it, and the next `reset` starts the game again (the backend does). Past
`max_restarts` crashes in the run, or when the game will not start again, the instance stops:
it writes why to `stopped.json`, plays no more (blank frames, `info["run_stopped"]`), and the
driver ends the run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import gymnasium as gym
import numpy as np

from playtester.capture.doom import wrap_angle
from playtester.perception.places import frame_cell
from playtester.tester.identity import appearance_signature, best_overlap, nearest_box, same_object
from playtester.imitation.jsd import action_distribution, jsd
from playtester.imitation.live import LivePolicy
from playtester.perception.candidates import CONFIRM_HITS, CONFIRM_SURE, CONFIRM_WINDOW, Candidate, ConfirmConfig, ConfirmTracker, close_surface
from playtester.perception.tracker import BoxTracker
from playtester.datasets.negatives import NegativeLog
from playtester.perception.calibration import RUN_FLOOR
from playtester.tester.scoring import TestWitness, labelled, move_actions, object_key, real_object
from playtester.bugs.oracles import Finding, TextureOracle
from playtester.tester.runlog import JsonlWriter, read_jsonl
from playtester.tester.frontier import FrontierArchive

VIEWS_PER_TEST = 6
"""Appearance signatures kept from each test of an OOI no telemetry names."""
MIN_SCORE = RUN_FLOOR
"""The confidence a detection needs where neither `--min-score` nor the detector's checkpoint says
(the checkpoint's thresholds are never below it: `playtester.perception.calibration`)."""

Detection = dict[str, Any]
"""`box` [x0, y0, x1, y1] pixels, `class`, `score`, and `ooi` (the matched known OOI id, or None)."""


@dataclass
class TesterConfig:
    __test__ = False  # not a pytest test class, whatever its name

    detect_every: int = 4
    """Run the detector every this many explorer steps."""
    min_score: float | None = None
    """Detections below this confidence are ignored; None: the detector's per-class thresholds
    (`thresholds`, kept in its checkpoint), else `MIN_SCORE`."""
    min_box_height: int = 28
    """An OOI is tested once its box is at least this tall (close enough to circle)."""
    test_steps: int | None = None
    """Steps of a test; default: the tester policy's mean demo length."""
    clip_frames: int = 48
    """Frames kept before each finding, and in each test's clip."""
    greedy: bool = False
    """Take the test policy's most likely action instead of sampling it."""
    track_every: int = 1
    """During a test, look for the OOI under test (a detector call) every this many steps; in
    between the box tracker follows the detector's last box (`playtester.perception.tracker`),
    and only the detector's boxes give the texture oracle crops. 1: the detector every step."""
    confirm_hits: int = CONFIRM_HITS
    """k: a detection becomes a test target once it was found in k of the last `confirm_window`
    detector passes (`playtester.perception.candidates`); 1 tests every detection at once."""
    confirm_window: int = CONFIRM_WINDOW
    """n: the passes counted. While a candidate close enough to test waits for confirmation the
    detector looks on every step."""
    look_closer: bool = True
    """While a candidate close enough to test waits for confirmation, the test policy takes the
    game, aimed at its box, for up to `confirm_window - 1` steps (`_look_closer`). Not a run's
    option: on the cpu park it made 4 phantom tests of 50 against 10 of 44 and 22.5 real OOIs
    tested a 10 000 steps against 17.0 (20 seeds; docs/benchmarks/real-tests.md); off only where
    a test isolates something else."""
    negatives: bool = True
    """Write the frames of rejected detections, and of tests that found nothing, to
    `negatives/` in the run folder: candidate negatives for the detector's next training."""
    returns: float = 0.0
    """The share of an instance's episodes, after its first, that begin by returning to a frontier
    place (Go-Explore: `playtester/tester/frontier.py`); 0: every episode starts afresh."""
    seed: int = 0


class GroundTruthDetector:
    """The engine's own labels as detections (score 1): an ablation (`--oracle-labels`) that
    measures the rest of the loop without a detector's misses. Needs a backend that reports
    `objects`."""

    def __init__(self, description: str = "engine labels: ablation") -> None:
        self.description = description
        """What the run's report says found the objects."""

    def __call__(self, frame: np.ndarray, info: dict[str, Any]) -> list[Detection]:
        return [{"box": o["box"], "class": o["class"], "score": 1.0, "ooi": o.get("ooi")} for o in info.get("objects", [])]


class NoDetector:
    """Sees nothing: for a plan that looks for no object."""

    def __init__(self, description: str = "nothing") -> None:
        self.description = description

    def __call__(self, frame: np.ndarray, info: dict[str, Any]) -> list[Detection]:
        return []


class ModelDetector:
    """A trained detector; detections are matched to known OOIs by telemetry when there is some."""

    def __init__(self, detector, oois: Sequence[Any] = (), hfov: float = 90.0, description: str = "a trained detector",
                 thresholds: dict[str, float] | None = None) -> None:
        self.detector = detector
        self.oois = list(oois)
        self.thresholds = dict(thresholds or {})
        """Per-class score thresholds from the checkpoint (`playtester.perception.calibration`)."""
        self.hfov = hfov
        self.description = description
        """What the run's report says found the objects (`playtester.tester.object_source.describe_detector`)."""

    @property
    def classes(self) -> list[str]:
        """The classes it finds (the run's tests are scored against labelled objects of these)."""
        return list(self.detector.classes)

    def __call__(self, frame: np.ndarray, info: dict[str, Any]) -> list[Detection]:
        boxes, labels, scores = self.detector.predict([frame])[0]
        out = []
        for box, label, score in zip(boxes, labels, scores):
            kind = self.detector.classes[int(label) - 1]
            out.append({"box": [float(v) for v in box], "class": kind, "score": float(score),
                        "ooi": match_ooi(self.oois, info, box, kind, frame.shape[1], self.hfov)})
        return out


def level_events(info: dict[str, Any]) -> dict[str, Any]:
    """What a Doom level's step told (`capture/level_play.py`) as a trajectory line keeps it:
    `used` (the line a USE press worked), `death` (where, and what killed the player), `level_exit`."""
    out: dict[str, Any] = {}
    if "used" in info:
        out["used"] = info["used"]["line"]
    if "death" in info:
        position = info["death"]["position"]
        out["death"] = {"position": None if position is None else [round(float(v), 1) for v in position],
                        "cause": info["death"]["cause"]}
    if "level_exit" in info:
        out["level_exit"] = True
    return out


def match_ooi(oois: Sequence[Any], info: dict[str, Any], box: Sequence[float], kind: str, width: int,
              hfov: float = 90.0, tolerance: float = 8.0, reach: float = 1500.0) -> int | None:
    """The known OOI a box shows: the one of that kind whose bearing from the player is closest to
    the box centre's bearing (within `tolerance` degrees). None without telemetry."""
    if "position" not in info or "angle" not in info:
        return None
    x, y = info["position"][0], info["position"][1]
    centre = (box[0] + box[2]) / 2.0
    # screen right is clockwise: a box right of centre lies at a smaller angle
    half = math.radians(hfov / 2)
    offset = math.degrees(math.atan((centre / width - 0.5) * 2 * math.tan(half)))
    target = info["angle"] - offset
    best, best_err = None, tolerance
    for o in oois:
        if o.kind != kind or math.hypot(o.x - x, o.y - y) > reach:
            continue
        err = abs(wrap_angle(math.degrees(math.atan2(o.y - y, o.x - x)) - target))
        if err < best_err:
            best, best_err = o.id, err
    return best


class ClaimLog:
    """The OOIs taken in a run, shared by every game instance through one append-only file.

    `claim(ooi)` appends a line; `taken()` reads what the others appended since the last look
    (only the new bytes), so a look costs next to nothing. `take(ooi)` claims an OOI before its
    test only if no other instance took it first: each OOI's first claim also creates one file in
    `claims.d/` exclusively (`O_EXCL`), so two instances that pick it in the same moment test it
    once. A claim may carry appearance signatures of its OOI (`playtester.tester.identity`), for
    games without telemetry.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.touch()
        self._seen: set[Any] = set()
        self._views: dict[str, list[np.ndarray]] = {}
        self._offset = 0
        self._writer = JsonlWriter(path)

    def taken(self) -> set[Any]:
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next look
        for line in chunk[:end].splitlines():
            if line.strip():
                record = json.loads(line)
                self._seen.add(record["ooi"])
                for sig in record.get("views", ()):
                    self._views.setdefault(record.get("kind", ""), []).append(np.asarray(sig, dtype=np.float32))
        self._offset += end
        return self._seen

    def views(self, kind: str) -> list[np.ndarray]:
        """Appearance signatures of the claimed OOIs of `kind`, as of the last `taken()`."""
        return self._views.get(kind, [])

    def take(self, ooi: Any, episode: int, kind: str = "", views: Sequence[np.ndarray] = ()) -> bool:
        """Claim `ooi` for its test; False (and nothing written) when another instance took it first."""
        folder = self.path.parent / "claims.d"
        folder.mkdir(exist_ok=True)
        name = hashlib.blake2b(json.dumps(ooi, sort_keys=True).encode(), digest_size=8).hexdigest()
        try:
            os.close(os.open(folder / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        self.claim(ooi, episode, kind, views)
        return True

    def claim(self, ooi: Any, episode: int, kind: str = "", views: Sequence[np.ndarray] = ()) -> None:
        record: dict[str, Any] = {"ooi": ooi, "episode": episode}
        if views:
            record["kind"] = kind
            record["views"] = [[round(float(v), 3) for v in sig] for sig in views]
        self._writer.write(record)
        self.taken()  # read back, own line included: the file is the one record of what is claimed

    def close(self) -> None:
        self._writer.close()


class RunStopped(Exception):
    """The game cannot go on (crashed too often, or will not start again); the message says why."""


class _TestPlay(NamedTuple):
    """What the test policy's steps on one OOI came to."""

    obs: np.ndarray
    info: dict[str, Any]
    reward: float
    terminated: bool
    truncated: bool
    actions: list[int]
    crops: list[tuple[np.ndarray, list[float]]]
    found: str  # each detector pass of the test: found its object again (1) or not (0)
    last_seen: list[float] | None


class TesterEnv(gym.Wrapper):
    """Explore → detect → test, with oracles and logs; see the module's docstring."""

    __test__ = False

    def __init__(
        self, env: gym.Env, *, tester: LivePolicy | None, detector: Callable[[np.ndarray, dict], list[Detection]] | None,
        oracles: Sequence[Any], run_dir: str | Path, game: str, game_options: dict[str, Any] | None = None,
        texture: TextureOracle | None = None, config: TesterConfig | None = None, env_index: int = 0, n_envs: int = 1,
        episodes: int | None = None, max_restarts: int | None = None, places: Any = None,
    ) -> None:
        """`places`: a `PlaceLog` (`playtester/tester/runlog.py`) that puts every step in a place
        (a run with no map: the report's places view); None: none kept."""
        super().__init__(env)
        self.tester = tester
        self.detector = detector
        self.oracles = list(oracles)
        self.texture = texture
        self.cfg = config or TesterConfig()
        self.run_dir = Path(run_dir)
        self.game = game
        self.game_options = dict(game_options or {})
        self.env_index, self.n_envs = env_index, n_envs
        self.rng = np.random.default_rng(self.cfg.seed + 7919 * env_index)
        if tester is not None:  # without a test policy the loop only explores and watches the oracles
            self.expert = np.asarray(tester.scoring["expert_distribution"])
            self.threshold = float(tester.scoring["threshold"])
            self.test_steps = self.cfg.test_steps or int(round(tester.scoring.get("mean_length", 100)))
        self._open_logs()
        self.thresholds: dict[str, float] = dict(getattr(detector, "thresholds", None) or {})
        """Per-class score thresholds the detector's checkpoint keeps (used when `min_score` is None)."""
        # one hit fewer for sure boxes only from a detector calibrated among the game's backgrounds:
        # the demo's, trained on framed shots alone, boxes park scenery too often in free play
        self.confirm = ConfirmTracker(ConfirmConfig(self.cfg.confirm_hits, self.cfg.confirm_window,
                                                    sure=CONFIRM_SURE if self.thresholds else None))
        self.confirming = False
        """A candidate close enough to test waits for confirmation: the detector looks every step."""
        self.pending: dict[int, dict[str, Any]] = {}
        """What the loop keeps of each candidate: `testable` (was ever close enough), and the frame
        of its most confident testable detection (`frame`, `score`, `detection`)."""
        self.classes = getattr(detector, "classes", None)
        """The detector's classes: tests are scored against labelled objects of these (scoring only)."""
        self.known = list(getattr(detector, "oois", ()))
        self.move_actions = move_actions(env)
        self.episodes = episodes
        self.max_restarts = max_restarts
        """Crashes in the run after which the game is not started again; None: no limit."""
        self.crash: str | None = None
        """Why the game crashed in the episode under way (until the next reset)."""
        self.stopped: str | None = None
        """Why this instance stopped playing before the budget."""
        self.local_episode = -1
        self.idle = False
        self.detections: list[Detection] = []
        self.following: dict[Any, Detection] = {}
        """Tested OOIs no telemetry names, followed from one detection to the next while in view."""
        prefix = self._finding_prefix()  # this instance's numbered findings (not, e.g., a lost worker's)
        self.n_findings = len([p for p in (self.run_dir / "findings").glob(f"{prefix}*") if p.name[len(prefix):].isdigit()])
        self.fps = float(env.metadata.get("render_fps", 10))
        self.places = places
        self.frontier: FrontierArchive | None = None
        """The places this instance reached and the way to each, with `returns` (`tester/frontier.py`)."""
        if self.cfg.returns:
            if not self.game_options.get("max_steps"):
                raise ValueError("returns: the frontier's ways are bounded by the episode's steps; give game_options max_steps")
            self.frontier = FrontierArchive(int(self.game_options["max_steps"]))
        self._ended: tuple | None = None
        """A return whose replay ended the episode: its last step, handed back at the next `step`."""

    def _open_logs(self) -> None:
        """The run folder's logs this instance writes to (each opened for appending)."""
        (self.run_dir / "findings").mkdir(parents=True, exist_ok=True)
        self.trajectory = JsonlWriter(self.run_dir / "trajectory.jsonl")
        self.returns: JsonlWriter | None = None
        """`returns.jsonl`, opened on the first return to a frontier place."""
        self.tests = JsonlWriter(self.run_dir / "tests.jsonl")
        self.harness: JsonlWriter | None = None
        """`harness.jsonl`, opened on a window game harness's first reset: launches and reset recipes."""
        self.claims = ClaimLog(self.run_dir / "claims.jsonl")
        self.rejected = JsonlWriter(self.run_dir / "rejected.jsonl")
        self.negatives = NegativeLog(self.run_dir) if self.cfg.negatives else None

    # -- episode bookkeeping ------------------------------------------------------------------
    @property
    def episode(self) -> int:
        """Run-wide episode number: episodes of several envs interleave without clashing."""
        return self._run_episode(self.local_episode)

    def _run_episode(self, local_episode: int) -> int:
        """The run-wide number of this instance's `local_episode`."""
        return local_episode * self.n_envs + self.env_index

    def _beyond_budget(self, local_episode: int) -> bool:
        """Whether this instance's `local_episode` lies beyond the run's episode budget (it plays idle)."""
        return self.episodes is not None and self._run_episode(local_episode) >= self.episodes

    @property
    def tested(self) -> set[Any]:
        """The OOIs tested (or under test) anywhere in the run."""
        return self.claims.taken()

    def continue_run(self) -> None:
        """Carry on a run folder that was interrupted: episodes this instance already played
        (the interrupted one too, kept as it was) are skipped."""
        mine = [r["episode"] for r in read_jsonl(self.run_dir / "trajectory.jsonl")
                if r.get("env", 0) == self.env_index]
        self.local_episode = max((e - self.env_index) // self.n_envs for e in mine) if mine else -1
        self.rng = np.random.default_rng(self.cfg.seed + 7919 * self.env_index + 104729 * (self.local_episode + 1))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        way = self._way_back() if seed is None else None
        if seed is None:
            seed = int(self.rng.integers(0, 2**31 - 1))
        if way is not None:
            seed, options = way.reset["seed"], way.reset["options"]
        if self.stopped is not None:
            return self._stopped_frame(), self._annotate({})
        from playtester.errors import UserError

        try:
            obs, info = self._restart_game(seed, options) if self.crash is not None else self.env.reset(seed=seed, options=options)
        except RunStopped as stop:
            return self._stop(str(stop))
        except UserError as e:  # a window game's harness could not bring it to play
            first = getattr(e, "first", None)  # `ResetMissedPlay`: the first miss is a finding, as when the relaunch works
            if first is not None:
                self.actions, self.recent, self.reset_args = [], deque(), {"seed": seed, "options": options}
                self._save(Finding("reset", str(first), self.episode + self.n_envs, 0, {"launched_again": True}))
            return self._stop(f"the game cannot be brought to play for episode {self.episode + self.n_envs}: {e}")
        self.local_episode += 1
        self.idle = self._beyond_budget(self.local_episode)
        self.detections = []
        self.following = {}
        self._forget_candidates()
        self.t = 0
        self.actions: list[int] = []
        self.recent: deque[np.ndarray] = deque(maxlen=self.cfg.clip_frames)
        self.reset_args = {"seed": seed, "options": options}
        self._info = info
        # A game that reports positions may still end an episode with a step that has none: that
        # step stays unplaced rather than placed by its frame, two kinds of place in one run.
        self.telemetry = "position" in info
        for oracle in self.oracles:
            oracle.reset()
        if "reset_seconds" in info and not self.idle:  # a window game's harness: launches and the reset recipe
            self.harness = self.harness or JsonlWriter(self.run_dir / "harness.jsonl")
            self.harness.write({"env": self.env_index, "episode": self.episode, "seconds": info["reset_seconds"],
                                "launched": bool(info.get("launched")), "failed": info.get("reset_failed")})
        if info.get("reset_failed") and not self.idle:
            self._save(Finding("reset", str(info["reset_failed"]), self.episode, 0, {"launched_again": bool(info.get("launched"))}))
        self._ended = None
        if self.frontier is not None and not self.idle:
            self.frontier.begin(self.episode, self.reset_args, self.actions)
            self.frontier.observe(obs, 0)
            if way is not None:
                obs, info = self._return(way, obs, info)
        return obs, self._annotate(info)

    def _way_back(self):
        """The way to a frontier place this episode returns to (`returns`), or None: a fresh start."""
        if self.frontier is None or self.stopped is not None or self.local_episode < 0:
            return None
        if self._beyond_budget(self.local_episode + 1):  # idle: nothing to explore
            return None
        if self.rng.random() >= self.cfg.returns:
            return None
        return self.frontier.choose(self.rng)

    def _return(self, way, obs: np.ndarray, info: dict[str, Any]):
        """Play the way's actions below the explorer (mode `return`: no detection, no test, and of
        the oracles, which judged these steps the first time, only the crash oracle), and log
        whether it arrived."""
        ended = False
        for action in way.actions:
            obs, reward, terminated, truncated, info = self._step(action, "return", None, watch=False)
            if terminated or truncated:  # the explorer sees the episode end at its first step
                self._ended, ended = (obs, reward, terminated, truncated, info), True
                break
        reached = self.frontier.arrived(way, obs, ended)
        self.returns = self.returns or JsonlWriter(self.run_dir / "returns.jsonl")
        self.returns.write({"env": self.env_index, "episode": self.episode, "from_episode": way.episode, "place": way.place,
                            "steps": self.t, "reached": bool(reached)})
        return obs, info

    def _annotate(self, info: dict[str, Any]) -> dict[str, Any]:
        info = dict(info)
        info["tester_idle"] = self.idle
        info["detections"] = [d["box"] for d in self.detections]
        if self.stopped is not None:
            info["run_stopped"] = self.stopped
        return info

    def _restart_game(self, seed: int, options: dict[str, Any] | None):
        """Reset after a crash: the backend starts the game again, unless the run's restarts are spent."""
        from playtester.errors import UserError
        from playtester.tester.crashes import count_crashes

        crash, self.crash = self.crash, None
        crashes = count_crashes(self.run_dir)
        if self.max_restarts is not None and crashes > self.max_restarts:
            raise RunStopped(f"the game crashed {crashes} {'time' if crashes == 1 else 'times'} in the run, one more than "
                             f"--max-restarts {self.max_restarts} allows (last, in episode {self.episode}: {crash})")
        try:
            return self.env.reset(seed=seed, options=options)
        except UserError as e:
            raise RunStopped(f"the game crashed in episode {self.episode} ({crash}) and cannot be started again: {e}") from None

    def _stop(self, reason: str):
        """Stop playing for good: say why in the run folder, hand back blank frames from now on."""
        from playtester.tester.crashes import write_stop

        self.stopped = reason
        self.idle = True
        self.detections = []
        write_stop(self.run_dir, reason, env=self.env_index, episode=self.episode)
        return self._stopped_frame(), self._annotate({})

    def _stopped_frame(self) -> np.ndarray:
        return np.zeros(self.observation_space.shape, dtype=self.observation_space.dtype)

    def step(self, action):
        if self.stopped is not None:  # the game is gone for good: the driver ends the run
            return self._stopped_frame(), 0.0, False, False, self._annotate({})
        if self._ended is not None:  # the return's replay ended the episode
            ended, self._ended = self._ended, None
            obs, reward, terminated, truncated, info = ended
            return obs, reward, terminated, truncated, self._annotate(info)
        if self.idle:  # beyond the run's episode budget: play on, record nothing
            obs, reward, terminated, truncated, info = self.env.step(int(action))
            return obs, reward, terminated, truncated, self._annotate(info)
        obs, reward, terminated, truncated, info = self._step(int(action), "explore", None)
        if info.get("keys_ignored"):  # nothing can be tested in a game that does not play: the run ends, saying why
            self._stop(f"the picture has not changed in the {info['keys_ignored']} steps of key presses since the game "
                       "was opened: the game ignores the keys (does its window take the keyboard? does it accept "
                       "synthetic key events? is it waiting on a menu or a dialog?)")
            return obs, reward, terminated, True, self._annotate(info)
        testing = self.tester is not None and self.detector is not None
        if testing and not (terminated or truncated) and (self.t % self.cfg.detect_every == 0 or self.confirming):
            self.detections = self._follow(self.detector(obs, info))
            target = self._pick_target(obs, self.detections)
            if target is None and self.confirming and self.cfg.look_closer:
                obs, extra, terminated, truncated, info, target = self._look_closer(obs, info)
                reward += extra
            if target is not None and not (terminated or truncated):
                obs, extra, terminated, truncated, info = self._run_test(obs, info, target)
                reward += extra
        return obs, reward, terminated, truncated, self._annotate(info)

    def _look_closer(self, obs: np.ndarray, info: dict[str, Any]):
        """Keep a candidate in view until confirmation has its passes: the test policy takes the
        game aimed at the most confident candidate close enough to test that waits (as a tester
        stops to look at what caught their eye), the detector looking every step, for at most
        `confirm_window - 1` steps (mode `confirm` in the trajectory). An explorer turns and
        looks about, and a small object a step moves out of view is never found in k passes
        running. Returns the last step's outcome with the summed reward, and the target
        confirmed (None: it was not, and exploring goes on)."""
        total, terminated, truncated, target = 0.0, False, False, None
        self.tester.reset()
        for _ in range(self.cfg.confirm_window - 1):
            waiting = [c for c in self.confirm.candidates
                       if c.detection is not None and not c.confirmed and c.height >= self.cfg.min_box_height]
            if not waiting:
                break
            aim = max(waiting, key=lambda c: c.score)
            a = self._test_action(obs, aim.box)
            obs, r, terminated, truncated, info = self._step(a, "confirm", None)
            total += r
            if terminated or truncated:
                break
            self.detections = self._follow(self.detector(obs, info))
            target = self._pick_target(obs, self.detections)
            if target is not None or not self.confirming:
                break
        return obs, total, terminated, truncated, info, target

    def _test_action(self, obs: np.ndarray, box: Sequence[float] | None) -> int:
        """The test policy's next action aimed at `box`: its most likely one with `greedy`, else sampled."""
        probs = self.tester.step(obs, box)
        return int(np.argmax(probs)) if self.cfg.greedy else int(self.rng.choice(len(probs), p=probs / probs.sum()))

    def _step(self, action: int, mode: str, ooi: Any, watch: bool = True):
        """One game step, logged; `watch`: the oracles judge it (else only those that judge
        replayed steps, `judges_replays`: the crash oracle; the others judged them when first played)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.actions.append(action)
        self.recent.append(obs)
        row = {"env": self.env_index, "episode": self.episode, "t": self.t, "action": action, "mode": mode, "ooi": ooi}
        if "position" in info:
            row["position"] = [round(float(v), 1) for v in info["position"]]
            self.telemetry = True
        elif not self.telemetry:  # no telemetry: the frame's Go-Explore cell stands for the place
            row["frame_cell"] = hashlib.blake2b(frame_cell(obs), digest_size=8).hexdigest()
        if "frame_time_ms" in info:
            row["frame_time_ms"] = round(float(info["frame_time_ms"]), 3)
        row.update(level_events(info))
        if info.get("out_of_play"):  # game over or a menu: the episode ends here
            row["out_of_play"] = str(info["out_of_play"])
            row["out_of_play_steps"] = int(info.get("out_of_play_steps", 1))
        if self.places is not None:
            row["place"] = self.places.visit(obs, self.episode, self.t)
        self.trajectory.write(row)
        if self.frontier is not None:
            self.frontier.observe(obs, len(self.actions))
        for oracle in self.oracles if watch else [o for o in self.oracles if getattr(o, "judges_replays", False)]:
            for finding in oracle.observe(obs, info, action, self.episode, self.t):
                self._save(finding)
            if getattr(oracle, "ends_episode", False):  # trapped for good and the trap walked: the run goes on from a new start
                truncated = True
        if info.get("reset_failed"):
            self._save(Finding("reset", str(info["reset_failed"]), self.episode, self.t))
        self.t += 1
        self._info = info
        if info.get("crashed"):
            from playtester.tester.crashes import record_crash

            terminated = True
            self.crash = str(info.get("crash_reason") or "the game's process is gone")
            record_crash(self.run_dir, self.env_index, self.episode, self.t - 1, self.crash)
        return obs, float(reward), bool(terminated), bool(truncated), info

    # -- testing ------------------------------------------------------------------------------
    def _follow(self, detections: list[Detection]) -> list[Detection]:
        """Name the detections that are tested OOIs still in view (by where they just were);
        an OOI not found again is no longer followed."""
        out = list(detections)
        following: dict[Any, Detection] = {}
        for ooi, last in self.following.items():
            free = [i for i, d in enumerate(out) if d.get("ooi") is None and d["class"] == last["class"]]
            i = nearest_box(last["box"], [out[j]["box"] for j in free])
            if i is not None:
                out[free[i]] = {**out[free[i]], "ooi": ooi}
                following[ooi] = out[free[i]]
        self.following = following
        return out

    def _pick_target(self, obs: np.ndarray, detections: list[Detection]) -> Detection | None:
        """The most confident confirmed detection close enough to test that is no tested OOI.

        Detections at `min_score` or more are followed from pass to pass (`ConfirmTracker`); one
        becomes a target once confirmed (found in `confirm_hits` of the last `confirm_window`
        passes), at least `min_box_height` tall, not on a surface at arm's length
        (`close_surface`: a streak of a wall's texture the player stands against), and not an OOI
        tested already: by its telemetry name where the game has one, else by appearance against
        the tested OOIs' views (`playtester.tester.identity`). Candidates that end unconfirmed or
        only ever confirmed on a close surface go to `rejected.jsonl`."""
        best = None
        tested = self.tested  # one look at the claims for the whole pick (views too)
        for c in self.confirm.update([d for d in detections if d["score"] >= self._min_score(d["class"])], frame=obs):
            d = c.detection
            kept = self.pending.setdefault(c.id, {"testable": False})
            if d["box"][3] - d["box"][1] < self.cfg.min_box_height:
                continue
            kept["testable"] = True
            if not c.confirmed or close_surface(obs, d["box"]):
                if self.negatives is not None and d["score"] > kept.get("score", -1.0):
                    kept.update(frame=obs.copy(), score=d["score"], detection=d, verdict=self._frame_verdict(d["box"]))
                kept["close"] = kept.get("close", False) or c.confirmed
                continue
            d = self._untested(obs, d, tested)
            if d is not None and (best is None or d["score"] > best["score"]):
                best = d
        self.confirming = any(not c.confirmed and c.height >= self.cfg.min_box_height for c in self.confirm.candidates)
        for c in self.confirm.take_ended():
            self._rejected(c)
        return best

    def _min_score(self, kind: str) -> float:
        """The confidence a detection of `kind` needs: `min_score` when set, else the class's
        calibrated threshold (`playtester.perception.calibration`), else `MIN_SCORE`."""
        if self.cfg.min_score is not None:
            return self.cfg.min_score
        return self.thresholds.get(kind, MIN_SCORE)

    def _untested(self, obs: np.ndarray, d: Detection, tested: set[Any]) -> Detection | None:
        """`d` named for its test, or None when it is an OOI tested already: by its telemetry name,
        else by its appearance against the tested OOIs' views (with that view kept)."""
        key = d.get("ooi")
        if key is not None:
            return None if key in tested else d
        sig = appearance_signature(obs, d["box"])
        if sig is None or same_object(sig, self.claims.views(d["class"])):
            return None
        return {**d, "ooi": f"{d['class']}@{self.episode}:{self.t}", "view": sig}

    def _rejected(self, c: Candidate) -> None:
        """Log a candidate that ended untested after it was close enough to test, unconfirmed or
        confirmed only on a close surface; its most confident frame is a candidate negative,
        unless it shows an OOI tested already."""
        kept = self.pending.pop(c.id, {})
        if not kept.get("testable") or (c.confirmed and not kept.get("close")):
            return
        why = "close surface" if c.confirmed else "unconfirmed"
        record = {"env": self.env_index, "episode": self.episode, "step": self.t, "kind": c.kind, "why": why,
                  "passes": c.passes, "found": c.found, "hits_needed": self.confirm.needed(c),
                  "window": self.cfg.confirm_window, "boxes": [{"pass": p, "box": b, "score": sc} for p, b, sc in c.boxes]}
        if self.negatives is not None and "frame" in kept and self._untested(kept["frame"], kept["detection"], self.tested):
            record["negative"] = self.negatives.write(kept["frame"], self.episode, self.t, why, [kept["detection"]])
            record.update(kept.get("verdict") or {})  # scoring only: what the labels saw in its box
        self.rejected.write(record)

    def _forget_candidates(self) -> None:
        """Drop every candidate unlogged: the view moved on (a test, a new episode), not the detector."""
        self.confirm.reset()
        self.pending = {}
        self.confirming = False

    def _track(self, obs: np.ndarray, info: dict[str, Any], target: Detection, previous: Sequence[float] | None) -> list[float] | None:
        """The OOI under test in this frame: by its id, else by overlap with where it just was."""
        detections = [d for d in self.detector(obs, info) if d["class"] == target["class"]]
        for d in detections:
            if d.get("ooi") is not None and d.get("ooi") == target["ooi"]:
                return d["box"]
        if previous is None:
            return None
        i = best_overlap(previous, [d["box"] for d in detections])
        return None if i is None else detections[i]["box"]

    def _verdict(self, info: dict[str, Any], box: Sequence[float]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Scoring only: what the game's labels say of `box` (`playtester.tester.scoring`):
        `{"target": "matched", "target_ooi": …}` with the labelled object, `{"target": "phantom"}`
        (with `shows` where a thing of another kind stands there), or `{}` where nothing is labelled."""
        objects = labelled(info, self.classes)
        if objects is None:
            return {}, None
        real = real_object(box, objects)
        if real is None:  # none of the detector's kinds; a thing of another kind, perhaps
            other = real_object(box, labelled(info, None) or [])
            return {"target": "phantom", **({"shows": str(other["class"])} if other is not None else {})}, None
        return {"target": "matched", "target_ooi": object_key(real, self.known)}, real

    def _frame_verdict(self, box: Sequence[float]) -> dict[str, Any]:
        """Scoring only: `_verdict` of `box` in this step's frame, and how many objects of the
        detector's kinds the labels show anywhere in it (`in_view`: a frame kept as a candidate
        negative is a true background only where that is 0)."""
        verdict = self._verdict(self._info, box)[0]
        objects = labelled(self._info, self.classes)
        return verdict if objects is None else {**verdict, "in_view": len(objects)}

    def _score_start(self, info: dict[str, Any], target: Detection) -> tuple[dict[str, Any], TestWitness | None]:
        """Scoring only: what the game's labels say of the tested box, and the witness of a test of a
        real object (`playtester.tester.scoring`)."""
        verdict, real = self._verdict(info, target["box"])
        if real is None:
            return verdict, None
        witness = TestWitness(verdict["target_ooi"], self.known, self.move_actions)
        witness.start(info)
        return verdict, witness

    def _run_test(self, obs: np.ndarray, info: dict[str, Any], target: Detection):
        """Hand the game to the test policy on `target` for up to `test_steps` steps, then judge
        and log the test; returns the last step's outcome with the test's summed reward."""
        ooi, kind = target["ooi"], target["class"]
        by_sight = "view" in target  # no telemetry named it: remember how it looks
        if not self.claims.take(ooi, self.episode, kind, [target["view"]] if by_sight else ()):
            return obs, 0.0, False, False, info  # another instance took it a moment ago: explore on
        self._forget_candidates()
        scored, witness = self._score_start(info, target)
        start_frame, start = obs, self.t
        self.tester.reset()
        play = self._play_test(obs, info, target, witness)
        if by_sight:
            self._remember_test_views(target, play)
        self._log_test(target, play, start, start_frame, scored, witness)
        return play.obs, play.reward, play.terminated, play.truncated, play.info

    def _play_test(self, obs: np.ndarray, info: dict[str, Any], target: Detection, witness: TestWitness | None) -> _TestPlay:
        """The test policy's steps, the tested box followed between detector passes (by the OOI's
        id or its overlap; by the box tracker in between when `track_every` > 1)."""
        ooi = target["ooi"]
        box: list[float] | None = target["box"]
        last_seen = box
        crops, actions = [], []
        found = []  # what each detector pass of the test said: found its object again (1) or not (0)
        total = 0.0
        terminated = truncated = False
        tracker = BoxTracker() if self.cfg.track_every > 1 else None  # follows the OOI between detector passes
        if tracker is not None:
            tracker.anchor(obs, box)
        for _ in range(self.test_steps):
            a = self._test_action(obs, box)
            actions.append(a)
            obs, r, terminated, truncated, info = self._step(a, "test", ooi)
            total += r
            if terminated or truncated or len(actions) % self.cfg.track_every == 0:
                box = self._track(obs, info, target, box if box is not None else last_seen)
                found.append("1" if box is not None else "0")
                last_seen = box if box is not None else last_seen
                if tracker is not None:
                    tracker.anchor(obs, box)
                if box is not None:
                    crops.append((obs, box))
            elif tracker is not None and tracker.patch is not None:
                box = tracker.follow(obs)
            self.detections = [] if box is None else [{**target, "box": box}]
            if witness is not None:
                witness.step(a, info, box)
            if terminated or truncated:
                break
        return _TestPlay(obs, info, total, terminated, truncated, actions, crops, "".join(found), last_seen)

    def _remember_test_views(self, target: Detection, play: _TestPlay) -> None:
        """An OOI known only by sight: follow it from where the test last saw it, and claim the
        views the test saw, so that from any side it comes back from it is known."""
        ooi = target["ooi"]
        if play.last_seen is not None:
            self.following[ooi] = {**target, "box": play.last_seen}
        if play.crops:
            crops = play.crops
            picks = np.linspace(0, len(crops) - 1, num=min(VIEWS_PER_TEST, len(crops))).round().astype(int)
            views = [v for v in (appearance_signature(*crops[i]) for i in sorted(set(picks))) if v is not None]
            if views:  # none when every crop was too small or cut by the frame's edge to sign
                self.claims.claim(ooi, self.episode, target["class"], views)

    def _log_test(self, target: Detection, play: _TestPlay, start: int, start_frame: np.ndarray,
                  scored: dict[str, Any], witness: TestWitness | None) -> None:
        """Judge the test (JSD of its actions against the expert's, the texture oracle on its
        crops), write its record to tests.jsonl, and save a texture finding when the oracle says so."""
        ooi, kind, actions, crops = target["ooi"], target["class"], play.actions, play.crops
        score = jsd(action_distribution(actions, len(self.expert)), self.expert)
        verdict = self.texture.judge(kind, crops) if self.texture is not None else None
        success = score <= self.threshold
        record = {"env": self.env_index, "episode": self.episode, "step": start, "ooi": ooi, "kind": kind,
                  "box": [round(float(v), 1) for v in target["box"]], "score": round(float(target["score"]), 3),
                  "steps": len(actions), "jsd": score, "success": success, "crops": len(crops), "found": play.found,
                  "texture": None if verdict is None else {"bug": verdict.bug, "aspect_ratio": verdict.aspect_ratio,
                                                           "texel_ratio": verdict.texel_ratio, "crops": verdict.crops},
                  **scored}
        if witness is not None and not success:
            record["failure"] = witness.failure()
        if self.negatives is not None and play.found and not crops:
            # no detector pass of the test found it again: its first frame is a candidate negative
            record["negative"] = self.negatives.write(start_frame, self.episode, start, "test found nothing", [target])
        self.tests.write(record)
        if verdict is not None and verdict.bug:
            self._save(Finding("texture", f"{kind} OOI {ooi} looks {verdict.bug} (aspect ×{verdict.aspect_ratio:.2f}, "
                                          f"texel ×{verdict.texel_ratio:.2f})", self.episode, self.t - 1,
                               {"ooi": ooi, "kind": kind, "bug": verdict.bug, **scored}))

    # -- findings -----------------------------------------------------------------------------
    def _finding_prefix(self) -> str:
        return "" if self.env_index == 0 else f"e{self.env_index}-"

    def _save(self, finding: Finding) -> None:
        from playtester.bugs.findings import save_finding

        name = f"{self._finding_prefix()}{self.n_findings:04d}"
        self.n_findings += 1
        save_finding(self.run_dir / "findings" / name, finding, game=self.game, game_options=self.game_options,
                     reset=self.reset_args, actions=self.actions, frames=list(self.recent), fps=self.fps)

    def close(self) -> None:
        self.trajectory.close()
        if self.returns is not None:
            self.returns.close()
        self.tests.close()
        if self.harness is not None:
            self.harness.close()
        self.claims.close()
        if self.places is not None:
            self.places.close()
        self.rejected.close()
        if self.negatives is not None:
            self.negatives.close()
        super().close()
