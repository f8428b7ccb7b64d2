"""The plan runner (the paper's explicit plan agent): nodes in order, rules interrupting them.

Every step it first asks the rules: when the conditions of some hold (and they are not cooling
down) the one with the highest priority performs its action, then the sequence resumes where it
left off: the node being walked to is walked to again, a held action goes on for its remaining
steps. Otherwise the current node takes one step: navigate to its target (by telemetry, else by
sight), then its action (a key-map action held for `repeat` steps, or a named behaviour: a trained
test policy with the target's box as its mask), then its wait.

Validation callbacks run around every action, whoever performs it. A node fails when it cannot
reach its target in time, names an unknown action or class, or one of its checks fails; the
runner records why, keeps the frames and a clip, and goes on to the next node.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import gymnasium as gym
import numpy as np
import yaml

from playtester.capture.experts import bearing
from playtester.bugs.oracles import Finding
from playtester.plans.navigate import Moves, SightNavigator, TelemetryNavigator, turn_toward
from playtester.datasets.plans import Condition, Node, Plan, Rule, Target
from playtester.plans.validation import Moment, PendingCheck, ValidationRegistry, call_with_timeout
from playtester.tester.runlog import JsonlWriter

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}


@dataclass
class RunnerConfig:
    """How the runner plays a plan."""

    max_steps: int = 3000
    """Steps for the whole plan, rules included; nodes not reached by then fail."""
    clip_frames: int = 48
    """Frames kept before each failure (its clip)."""
    sweep_steps: int = 32
    """Steps of a full turn on the spot, looking for a target that should be here."""
    greedy: bool = True
    """Behaviours take their most likely action (else they sample it)."""
    ground_truth_positions: bool = False
    """Walk to a target object's place as the engine's ground truth has it (the park's layout)
    before looking for it: an ablation (`plan run --ground-truth-positions`), said in the report.
    Off, objects named by kind or id are found by sight, as a tester without the level's data
    would find them."""

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.clip_frames < 1 or self.sweep_steps < 1:
            raise ValueError("max_steps, clip_frames and sweep_steps are positive step counts")


@dataclass
class Record:
    """What happened to one node, or to one firing of a rule."""

    kind: str
    """`node` or `rule`."""
    index: int
    name: str
    action: str | None
    target: str | None
    start: int
    end: int = -1
    steps: int = 0
    reached: bool | None = None
    reasons: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    interrupted: str | None = None
    """For a rule firing: the node it interrupted."""
    findings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "name": self.name, "action": self.action, "target": self.target,
                "passed": self.passed, "reasons": list(self.reasons), "start": self.start, "end": self.end,
                "steps": self.steps, "reached": self.reached, "checks": self.checks, "interrupted": self.interrupted,
                "findings": self.findings}


@dataclass
class PlanResult:
    plan: str
    game: str
    nodes: list[Record]
    rules: list[Record]
    steps: int
    ended: str | None
    """Why the episode ended early (the game ended, the step budget ran out), or None."""
    objects_found_by: str = "not recorded"
    """What found the plan's objects: the detector and its held-out AP, or the engine's labels (an ablation)."""

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.nodes) and all(r.passed for r in self.rules)

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan, "game": self.game, "objects_found_by": self.objects_found_by, "passed": self.passed,
                "steps": self.steps, "ended": self.ended,
                "nodes": [r.to_dict() for r in self.nodes], "rules": [r.to_dict() for r in self.rules]}


class _Ended(Exception):
    """The episode is over (terminated, truncated, or the step budget is spent)."""


def telemetry_value(info: dict[str, Any], key: str, step: int) -> float | None:
    """A number from telemetry: `x`, `y`, `z` (position), `step` (the runner's), or any key of `info`."""
    if key in ("x", "y", "z"):
        pos = info.get("position")
        i = "xyz".index(key)
        return float(pos[i]) if pos is not None and len(pos) > i else None
    if key == "step":
        return float(step)
    value = info.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class PlanRunner:
    """Plays one plan on one game; see the module's docstring."""

    def __init__(
        self, env: gym.Env, plan: Plan, *, detector: Callable[[np.ndarray, dict], list[dict]], out: str | Path,
        game: str, game_options: dict[str, Any] | None = None, classes: Sequence[str] | None = None,
        registry: ValidationRegistry | None = None, behaviors: dict[str, Any] | None = None,
        search: Any = None, config: RunnerConfig | None = None,
    ) -> None:
        self.env = env
        self.plan = plan
        self.detector = detector
        self.out = Path(out)
        self.game = game
        self.game_options = dict(game_options or {})
        self.classes = None if classes is None else list(classes)
        self.registry = registry or ValidationRegistry()
        self.behaviors = dict(behaviors or {})
        self.search = search
        self.cfg = config or RunnerConfig()
        self.keymap = env.unwrapped.keymap
        self.moves = Moves(self.keymap)
        self.layout = getattr(getattr(env.unwrapped, "scenario", None), "layout", None)
        self.rng = np.random.default_rng(plan.seed)
        self.fps = float(env.metadata.get("render_fps", 10))

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> PlanResult:
        from playtester.files import write_text_atomic

        options = None if self.plan.start is None else {"start": self.plan.start}
        self.reset_args = {"seed": self.plan.seed, "options": options}
        self.obs, self.info = self.env.reset(seed=self.plan.seed, options=options)  # a bad start is refused before --out is made
        (self.out / "findings").mkdir(parents=True, exist_ok=True)
        self.trajectory = JsonlWriter(self.out / "trajectory.jsonl")
        self.detections = self.detector(self.obs, self.info)
        self.t, self.actions, self.recent = 0, [], deque(maxlen=self.cfg.clip_frames)
        self.pending: list[tuple[PendingCheck, Record]] = []
        self.cooldown = {i: 0 for i in range(len(self.plan.rules))}
        self.fired: list[Record] = []
        self.rules = self._usable_rules()
        nodes = [Record("node", i, n.name, n.action, n.target.describe() if n.target else None, start=-1)
                 for i, n in enumerate(self.plan.nodes)]
        ended = None
        try:
            for node, rec in zip(self.plan.nodes, nodes):
                rec.start = self.t
                steps = self._node_steps(node, rec)
                while True:
                    rule = self._rule_due()
                    if rule is not None:
                        self._fire(rule, rec)
                        continue
                    action = next(steps, None)
                    if action is None:
                        break
                    self._take(action, "node", rec)
                rec.end = self.t
            while self.pending:  # let the last checks see their delay or event
                self._take(self.moves.idle[self.t % len(self.moves.idle)], "settle", None)
        except _Ended as e:
            ended = str(e)
            for rec in nodes:
                if rec.end < 0:
                    rec.end = self.t
                    self._fail(rec, f"not finished: {ended}")
            for check, rec in self.pending:
                self._fail(rec, f"{check.check.name} not checked: {ended}")
        finally:
            self.trajectory.close()
        found_by = str(getattr(self.detector, "description", "a detector function"))
        if self.cfg.ground_truth_positions:
            found_by += "; walked to their ground-truth positions (--ground-truth-positions, an ablation)"
        result = PlanResult(self.plan.name, self.game, nodes, self.fired, self.t, ended, found_by)
        config = {"game": self.game, "agent": "plan runner", "plan": self.plan.name, "game_options": self.game_options,
                  "objects_found_by": found_by}
        write_text_atomic(self.out / "config.yaml", yaml.safe_dump(config, sort_keys=False))
        return result

    def _take(self, action: int, mode: str, owner: Record | None) -> None:
        if self.t >= self.cfg.max_steps:
            raise _Ended(f"the plan ran out of steps ({self.cfg.max_steps})")
        self.obs, _, terminated, truncated, self.info = self.env.step(int(action))
        self.actions.append(int(action))
        self.recent.append(self.obs)
        self.detections = self.detector(self.obs, self.info)
        row = {"episode": 0, "t": self.t, "action": int(action), "mode": mode, "owner": owner.name if owner else None}
        if "position" in self.info:
            row["position"] = [round(float(v), 1) for v in self.info["position"]]
        self.trajectory.write(row)
        self.t += 1
        if owner is not None:
            owner.steps += 1
        self._poll_checks()
        if terminated or truncated or self.info.get("crashed"):
            raise _Ended(f"the game ended at step {self.t}")

    # -- nodes --------------------------------------------------------------------------------
    def _node_steps(self, node: Node, rec: Record) -> Iterator[int]:
        problem = self._unknown_action(node.action) or self._unknown_class(node.target.kind if node.target else None)
        if node.keys is not None or node.until is not None:
            problem = "keys and until are steps of a reset plan (run window --reset); a plan's node acts with key-map actions"
        if problem:
            self._fail(rec, problem)
            return
        box: Callable[[], list[float] | None] = lambda: None
        if node.target is not None:
            nav = self._navigate(node, rec)
            result = yield from nav
            rec.reached = result is not None
            if result is None:
                return
            box = result
        if node.action is not None:
            yield from self._perform(node.action, node.repeat, rec, box)
        for k in range(node.wait):
            yield self.moves.idle[k % len(self.moves.idle)]

    def _navigate(self, node: Node, rec: Record):
        """Yields actions until the target is reached; returns a box getter, or None on failure."""
        target = node.target
        assert target is not None
        has_telemetry = "position" in self.info and "angle" in self.info
        missing = self.moves.missing()
        if missing:
            self._fail(rec, f"the key map has no {', '.join(missing)} action to move with")
            return None
        if target.position is not None:
            if not has_telemetry:
                self._fail(rec, "a position target needs telemetry (position and angle); this game reports none")
                return None
            ok = yield from self._walk(target.position, node, rec)
            return (lambda: None) if ok else None
        known = has_telemetry and self.cfg.ground_truth_positions
        obj = self._known_object(target) if known else None
        if target.ooi is not None and known and self.layout is not None and obj is None:
            self._fail(rec, f"OOI {target.ooi} is not in the game's ground truth")
            return None
        match = self._matcher(target, obj)
        if obj is not None:
            if not (yield from self._walk((obj.x, obj.y), node, rec)):
                return None
            seen = yield from self._look_for(obj, match, node, rec)
            if not seen:
                self._fail(rec, f"reached where {target.describe()} ({obj.kind}) should stand ({obj.x:.0f}, {obj.y:.0f}) "
                                f"but did not see it there in a full turn")
                return None
        else:
            search = None
            if self.search is not None:
                search = lambda frame: int(np.argmax(self.search.step(frame, None)))
            nav = SightNavigator(self.moves, match, node.view, self.rng, search, turn_steps=self.cfg.sweep_steps)
            while (a := nav.act(self.obs, self.info, self.detections)) is not None:
                if rec.steps >= node.timeout:
                    seen = "it came into view but was not reached" if nav.seen else "it never came into view"
                    self._fail(rec, f"did not reach {target.describe()} by sight within {node.timeout} steps ({seen})")
                    return None
                yield a
        return lambda: self._box(match)

    def _walk(self, goal: tuple[float, float], node: Node, rec: Record):
        nav = TelemetryNavigator(self.moves, goal, node.tolerance, self.rng, self.layout)
        while (a := nav.act(self.info)) is not None:
            if rec.steps >= node.timeout:
                self._fail(rec, f"did not reach ({goal[0]:.0f}, {goal[1]:.0f}) within {node.timeout} steps "
                                f"(still {nav.distance(self.info):.0f} map units away, tolerance {node.tolerance:g})")
                return False
            yield a
        return True

    def _look_for(self, obj: Any, match: Callable[[dict], bool], node: Node, rec: Record):
        """Face the object's place, then turn a full circle until it shows; True when seen."""
        for _ in range(self.cfg.sweep_steps):
            x, y = self.info["position"][0], self.info["position"][1]
            turn = turn_toward(self.moves, float(self.info["angle"]), bearing(x, y, obj.x, obj.y))
            if turn is None:
                break
            yield turn
        for _ in range(self.cfg.sweep_steps + 1):
            if self._box(match) is not None:
                return True
            if rec.steps >= node.timeout:
                return False
            yield self.moves.turn_left
        return False

    def _known_object(self, target: Target) -> Any:
        """The ground-truth object a target names (the nearest of its kind), when the game has a layout."""
        if self.layout is None:
            return None
        if target.ooi is not None:
            return next((o for o in self.layout.oois if o.id == target.ooi), None)
        x, y = self.info["position"][0], self.info["position"][1]
        kind = [o for o in self.layout.oois if o.kind == target.kind and o.reachable]
        return min(kind, key=lambda o: math.hypot(o.x - x, o.y - y), default=None)

    @staticmethod
    def _matcher(target: Target, obj: Any) -> Callable[[dict], bool]:
        if obj is not None:
            return lambda d: d.get("ooi") == obj.id or (d.get("ooi") is None and d["class"] == obj.kind)
        if target.ooi is not None:
            return lambda d: d.get("ooi") == target.ooi
        return lambda d: d["class"] == target.kind

    def _box(self, match: Callable[[dict], bool]) -> list[float] | None:
        found = [d for d in self.detections if match(d)]
        return max(found, key=lambda d: d["box"][3] - d["box"][1])["box"] if found else None

    # -- actions and their validation ---------------------------------------------------------
    def _unknown_action(self, action: str | None) -> str | None:
        if action is None or action in self.keymap.names or action in self.behaviors:
            return None
        behaviours = ", ".join(self.behaviors) or "none loaded"
        return (f"unknown action {action!r}: the key map {self.keymap.name!r} has {', '.join(self.keymap.names)}; "
                f"behaviours: {behaviours}")

    def _unknown_class(self, kind: str | None) -> str | None:
        if kind is None or self.classes is None or kind in self.classes:
            return None
        return f"unknown class {kind!r}: the detector knows {', '.join(self.classes)}"

    def _moment(self, action: str, owner: str) -> Moment:
        return Moment(self.t, self.obs, dict(self.info), list(self.detections), action, owner)

    def _perform(self, action: str, repeat: int, rec: Record, box: Callable[[], list[float] | None]) -> Iterator[int]:
        before = self._moment(action, rec.name)
        for pre in self.registry.pre_for(action):
            outcome = call_with_timeout(pre.fn, (before,), pre.timeout, pre.name)
            if outcome.ok:
                before.data[pre.name] = outcome.value
            else:
                rec.checks.append({"name": pre.name, "when": "pre", "passed": False, "reason": outcome.reason})
                self._fail(rec, outcome.reason)
        if action in self.keymap.names:
            for _ in range(max(1, repeat)):
                yield self.keymap.index(action)
        else:
            policy = self.behaviors[action]
            policy.reset()
            steps = repeat or int(round(policy.scoring.get("mean_length", 50)))
            for _ in range(steps):
                probs = np.asarray(policy.step(self.obs, box()), dtype=float)
                yield int(np.argmax(probs)) if self.cfg.greedy else int(self.rng.choice(len(probs), p=probs / probs.sum()))
        for check in self.registry.post_for(action):
            self.pending.append((PendingCheck(check, before, self.t), rec))
        self._poll_checks()  # a check with no delay runs on the moment the action ends

    def _poll_checks(self) -> None:
        if not self.pending:
            return
        now = self._moment("", "")
        waiting = []
        for pending, rec in self.pending:
            result = pending.poll(now, self.registry.events)
            if result is False:
                waiting.append((pending, rec))
                continue
            rec.checks.append({"name": pending.check.name, "when": "post", "passed": result is None, "reason": result,
                               "action": pending.before.action, "step": self.t})
            if result is not None:
                self._fail(rec, result)
        self.pending = waiting

    # -- rules --------------------------------------------------------------------------------
    def _usable_rules(self) -> list[int]:
        """Indices of the rules that can fire; a rule with an unknown action or class fails once."""
        usable = []
        for i, rule in enumerate(self.plan.rules):
            problem = self._unknown_action(rule.action)
            for cond in rule.when:
                problem = problem or self._unknown_class(cond.see)
            if problem:
                rec = Record("rule", i, rule.name, rule.action, None, start=0, end=0)
                self.fired.append(rec)
                self._fail(rec, f"rule disabled: {problem}")
            else:
                usable.append(i)
        return usable

    def _holds(self, cond: Condition) -> bool:
        if cond.see is not None:
            return self._seen(cond) is not None
        value = telemetry_value(self.info, str(cond.telemetry), self.t)
        return value is not None and _OPS[cond.op](value, cond.value)

    def _seen(self, cond: Condition) -> list[float] | None:
        h_img = self.obs.shape[0]
        for d in self.detections:
            size = (d["box"][3] - d["box"][1]) / h_img
            if d["class"] == cond.see and (cond.ooi is None or d.get("ooi") == cond.ooi) and cond.min_size <= size <= cond.max_size:
                return d["box"]
        return None

    def _rule_due(self) -> Rule | None:
        due = [i for i in self.rules if self.cooldown[i] <= self.t and all(self._holds(c) for c in self.plan.rules[i].when)]
        if not due:
            return None
        return self.plan.rules[max(due, key=lambda i: (self.plan.rules[i].priority, -i))]

    def _fire(self, rule: Rule, interrupted: Record) -> None:
        i = self.plan.rules.index(rule)
        rec = Record("rule", i, rule.name, rule.action, None, start=self.t, interrupted=interrupted.name)
        self.fired.append(rec)
        sights = [c for c in rule.when if c.see is not None]
        box = (lambda: self._seen(sights[0])) if sights else (lambda: None)
        for action in self._perform(rule.action, rule.repeat, rec, box):
            self._take(action, "rule", rec)
        rec.end = self.t
        self.cooldown[i] = self.t + max(1, rule.cooldown)

    # -- failures -----------------------------------------------------------------------------
    def _fail(self, rec: Record, reason: str) -> None:
        """Record why, and keep the frames, the clip and the action trace of the moment."""
        from playtester.bugs.findings import save_finding

        rec.reasons.append(reason)
        name = f"{len(list((self.out / 'findings').glob('[0-9]*'))):04d}"
        finding = Finding("plan", f"{rec.kind} {rec.index + 1} ({rec.name}): {reason}", 0, self.t,
                          {"owner": rec.kind, "index": rec.index, "name": rec.name, "action": rec.action})
        save_finding(self.out / "findings" / name, finding, game=self.game, game_options=self.game_options,
                     reset=self.reset_args, actions=self.actions, frames=list(self.recent), fps=self.fps)
        rec.findings.append(name)
