"""The explicit plan as data: an ordered list of nodes and a set of rules (YAML on disk).

    name: reach-the-barrel
    start: 4                      # a start point index, or [x, y, angle]; default: the game's own
    seed: 0
    behaviors: {inspect: models/inspect.ckpt}   # named behaviours: trained test policies
    nodes:
      - name: barrel
        target: {kind: barrel}    # or {ooi: 7}, or {position: [1200, 340]}; none: act where you are
        action: jump              # a key-map action or a behaviour; none: only get there
        repeat: 2                 # steps a key-map action is held (a behaviour's steps)
        tolerance: 128            # map units: arrived when this close (with telemetry)
        view: 0.3                 # arrived by sight when the target's box is this share of the frame height
        wait: 4                   # idle steps after the action
        timeout: 300              # steps to get there and act
      - name: past the menu       # a reset plan's step (`run window --reset`): keys outside the key map,
        keys: [down, enter]       # held together for `repeat` steps; then `wait`; with `until`, idle
        until: level-start.png    # until the screen matches that screenshot (within `timeout` steps)
    rules:
      - name: jump at tires
        when: [{see: tire, min_size: 0.2}, {telemetry: z, op: "<", value: 8}]
        priority: 2
        action: jump
        cooldown: 20

Structure is checked here and every error names the node or rule; whether an action or a class
exists depends on the game and the detector, so the runner checks that and fails the node.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from playtester.files import write_text_atomic
from playtester.errors import UserError
from playtester.files import read_yaml

OPERATORS = ("<", "<=", ">", ">=", "==", "!=")
PLAN_VERSION = 1


@dataclass
class Target:
    """Where a node goes: exactly one of an OOI kind, an OOI id, or a map position."""

    kind: str | None = None
    """A class the detector knows (`barrel`): the nearest one."""
    ooi: int | None = None
    """One object of interest, by its id in the game's ground truth."""
    position: tuple[float, float] | None = None
    """A map position `(x, y)`; needs telemetry."""

    def __post_init__(self) -> None:
        given = [n for n in ("kind", "ooi", "position") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of kind, ooi, position (got {', '.join(given) or 'none'})")

    def describe(self) -> str:
        if self.kind is not None:
            return f"a {self.kind}"
        if self.ooi is not None:
            return f"OOI {self.ooi}"
        assert self.position is not None
        return f"({self.position[0]:.0f}, {self.position[1]:.0f})"

    def to_dict(self) -> dict[str, Any]:
        if self.position is not None:
            return {"position": [round(float(v), 1) for v in self.position]}
        return {"kind": self.kind} if self.kind is not None else {"ooi": self.ooi}


@dataclass
class Node:
    """One step of the plan: get to a target, then do something there."""

    name: str
    """Shown in logs and the report."""
    target: Target | None = None
    """Where to go; None performs the action where the agent stands."""
    action: str | None = None
    """A key-map action (`jump`) or a named behaviour (`inspect`); None only gets there."""
    repeat: int = 1
    """Steps a key-map action is held; for a behaviour, its steps (0: the behaviour's own length)."""
    tolerance: float = 128.0
    """Map units: with telemetry, the target is reached this close."""
    view: float = 0.3
    """By sight, the target is reached when its box is this share of the frame height."""
    wait: int = 0
    """Idle steps after the action."""
    timeout: int = 300
    """Steps allowed to reach the target and act; past it the node fails."""
    keys: list[str] | None = None
    """A reset plan's keys, held together (menu keys the key map lacks: `enter`, `y`, `esc`)."""
    until: str | None = None
    """A reset plan's screenshot: after the wait, idle until the screen matches it (relative paths:
    from the plan's folder)."""

    def __post_init__(self) -> None:
        if self.repeat < 0 or self.wait < 0:
            raise ValueError("repeat and wait are whole numbers of steps, 0 or more")
        if self.timeout < 1:
            raise ValueError("timeout is a number of steps, at least 1")
        if self.tolerance <= 0 or not 0 < self.view <= 1:
            raise ValueError("tolerance must be positive and view a share of the frame in (0, 1]")
        if self.keys is not None and (not isinstance(self.keys, list) or not all(isinstance(k, str) for k in self.keys)):
            raise ValueError("keys should be a list of key names, e.g. [down, enter]")
        if self.keys is not None and self.action is not None:
            raise ValueError("give keys or an action, not both")
        if self.target is None and self.action is None and self.wait == 0 and not self.keys and self.until is None:
            raise ValueError("it has neither a target nor an action nor a wait; give at least one")


@dataclass
class Condition:
    """One precondition of a rule: a detection, or a telemetry value."""

    see: str | None = None
    """A detected class (`tire`), optionally sized with min_size/max_size."""
    ooi: int | None = None
    """With `see`: that one object only."""
    min_size: float = 0.0
    """Smallest box height as a share of the frame height."""
    max_size: float = 1.0
    """Largest box height as a share of the frame height."""
    telemetry: str | None = None
    """A telemetry key: `x`, `y`, `z`, `angle`, `pitch`, `step`, or any number in `info`."""
    op: str = ">="
    value: float = 0.0

    def __post_init__(self) -> None:
        if (self.see is None) == (self.telemetry is None):
            raise ValueError("a condition is either {see: CLASS, …} or {telemetry: KEY, op: OP, value: V}")
        if self.op not in OPERATORS:
            raise ValueError(f"op {self.op!r}: use one of {' '.join(OPERATORS)}")
        if not 0 <= self.min_size <= self.max_size <= 1:
            raise ValueError("min_size and max_size are shares of the frame height, 0 ≤ min_size ≤ max_size ≤ 1")

    def to_dict(self) -> dict[str, Any]:
        if self.see is not None:
            out: dict[str, Any] = {"see": self.see}
            if self.ooi is not None:
                out["ooi"] = self.ooi
            if self.min_size:
                out["min_size"] = self.min_size
            if self.max_size < 1:
                out["max_size"] = self.max_size
            return out
        return {"telemetry": self.telemetry, "op": self.op, "value": self.value}


@dataclass
class Rule:
    """When every condition holds, interrupt the nodes and do this; the highest priority wins."""

    name: str
    when: list[Condition]
    """Preconditions, all of which must hold."""
    action: str
    """A key-map action or a named behaviour."""
    priority: int = 0
    """Among rules whose conditions hold, the highest fires (ties: the first listed)."""
    repeat: int = 1
    """Steps the action is held (a behaviour's steps; 0: its own length)."""
    cooldown: int = 10
    """Steps after firing before this rule may fire again."""

    def __post_init__(self) -> None:
        if not self.when:
            raise ValueError("'when' lists no condition; a rule needs at least one")
        if self.repeat < 0 or self.cooldown < 0:
            raise ValueError("repeat and cooldown are whole numbers of steps, 0 or more")


@dataclass
class Plan:
    """Nodes in order, rules that interrupt them, and how the game starts."""

    name: str
    nodes: list[Node]
    rules: list[Rule] = field(default_factory=list)
    start: int | tuple[float, ...] | None = None
    """A start point index, `(x, y[, angle])`, or None for the game's own start."""
    seed: int = 0
    """Seed of the game's reset and of sampled behaviour actions."""
    behaviors: dict[str, str] = field(default_factory=dict)
    """Behaviour name → trained test policy checkpoint (relative paths: from the plan's folder)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": PLAN_VERSION, "name": self.name}
        if self.start is not None:
            out["start"] = self.start if isinstance(self.start, int) else [round(float(v), 1) for v in self.start]
        out["seed"] = self.seed
        if self.behaviors:
            out["behaviors"] = dict(self.behaviors)
        out["nodes"] = [_node_dict(n) for n in self.nodes]
        if self.rules:
            out["rules"] = [_rule_dict(r) for r in self.rules]
        return out


def _changed(obj: Any, skip: tuple[str, ...]) -> dict[str, Any]:
    """The dataclass's fields that differ from their defaults, in field order."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)
            if f.name not in skip and not (f.default is not MISSING and getattr(obj, f.name) == f.default)}


def _node_dict(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {"name": node.name}
    if node.target is not None:
        out["target"] = node.target.to_dict()
    return out | _changed(node, ("name", "target"))


def _rule_dict(rule: Rule) -> dict[str, Any]:
    return {"name": rule.name, "when": [c.to_dict() for c in rule.when]} | _changed(rule, ("name", "when"))


# -- reading -----------------------------------------------------------------------------------

def _mapping(value: Any, where: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UserError(f"{where}: {what} should be a mapping (key: value), not {type(value).__name__}")
    return value


def _check_keys(data: dict[str, Any], allowed: list[str], where: str) -> None:
    for key in data:
        if key not in allowed:
            near = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise UserError(f"{where}: unknown field {key!r}{hint}; fields are {', '.join(allowed)}")


def _build(cls: type, data: dict[str, Any], where: str, **parsed: Any) -> Any:
    """`cls(**data)` with `parsed` overriding, turning type and check errors into one line."""
    names = [f.name for f in fields(cls)]
    _check_keys(data, names, where)
    kwargs = {**data, **parsed}
    for f in fields(cls):
        if f.name not in kwargs or f.name in parsed:
            continue
        want = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        value = kwargs[f.name]
        if value is None:
            continue
        try:
            if want.startswith("int") and not isinstance(value, bool):
                if float(value) != int(value):
                    raise ValueError
                kwargs[f.name] = int(value)
            elif want.startswith("float"):
                kwargs[f.name] = float(value)
                if not math.isfinite(kwargs[f.name]):
                    raise ValueError
            elif want.startswith("str"):
                if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                    raise ValueError
                kwargs[f.name] = str(value)
        except (TypeError, ValueError, OverflowError):
            raise UserError(f"{where}: {f.name} {value!r} should be {want.split(' ')[0]}") from None
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise UserError(f"{where}: {e}") from None
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None


def _target(value: Any, where: str) -> Target:
    data = _mapping(value, where, "target")
    _check_keys(data, ["kind", "ooi", "position"], f"{where}, target")
    position = data.get("position")
    if position is not None:
        if not isinstance(position, (list, tuple)) or len(position) < 2:
            raise UserError(f"{where}: target position should be [x, y]")
        try:
            position = (float(position[0]), float(position[1]))
        except (TypeError, ValueError, OverflowError):
            position = (math.nan, math.nan)
        if not all(map(math.isfinite, position)):
            raise UserError(f"{where}: target position {data['position']!r} should be two finite numbers [x, y]")
    ooi = data.get("ooi")
    if ooi is not None and (isinstance(ooi, bool) or not isinstance(ooi, int)):
        raise UserError(f"{where}: target ooi {ooi!r} should be a whole number (an OOI id)")
    kind = data.get("kind")
    try:
        return Target(kind=None if kind is None else str(kind), ooi=ooi, position=position)
    except ValueError as e:
        raise UserError(f"{where}: target: {e}") from None


def parse_plan(data: Any, where: str = "plan") -> Plan:
    """A `Plan` from parsed YAML; every error names `where` and the node or rule."""
    data = _mapping(data, where, "the plan")
    _check_keys(data, ["version", "name", "start", "seed", "behaviors", "nodes", "rules"], where)
    if data.get("version", PLAN_VERSION) != PLAN_VERSION:
        raise UserError(f"{where}: plan version {data['version']!r}; this playtester reads version {PLAN_VERSION}")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise UserError(f"{where}: 'nodes' should be a non-empty list of nodes")
    nodes = []
    for i, raw in enumerate(raw_nodes):
        label = f"{where}: node {i + 1}"
        raw = _mapping(raw, label, "a node")
        label += f" ({raw['name']!r})" if "name" in raw else ""
        target = _target(raw["target"], label) if raw.get("target") is not None else None
        keys = raw.get("keys")
        parsed: dict[str, Any] = {"name": str(raw.get("name", f"node {i + 1}")), "target": target}
        if keys is not None:
            parsed["keys"] = [k for k in keys.split("+") if k] if isinstance(keys, str) else keys
        nodes.append(_build(Node, {k: v for k, v in raw.items() if k != "target"}, label, **parsed))
    rules = []
    raw_rules = data.get("rules") or []
    if not isinstance(raw_rules, list):
        raise UserError(f"{where}: 'rules' should be a list of rules")
    for i, raw in enumerate(raw_rules):
        label = f"{where}: rule {i + 1}"
        raw = _mapping(raw, label, "a rule")
        label += f" ({raw['name']!r})" if "name" in raw else ""
        when = raw.get("when")
        if not isinstance(when, list):
            raise UserError(f"{label}: 'when' should be a list of conditions")
        conds = [_build(Condition, _mapping(c, f"{label}, condition {j + 1}", "a condition"), f"{label}, condition {j + 1}")
                 for j, c in enumerate(when)]
        if "action" not in raw:
            raise UserError(f"{label}: it has no action; give a key-map action or a behaviour")
        rules.append(_build(Rule, {k: v for k, v in raw.items() if k != "when"}, label,
                            name=str(raw.get("name", f"rule {i + 1}")), when=conds))
    start = data.get("start")
    if isinstance(start, bool) or (isinstance(start, int) and start < 0):
        raise UserError(f"{where}: start {start!r} should be a start point index (0 or more) or [x, y] / [x, y, angle]")
    if start is not None and not isinstance(start, int):
        try:
            start = tuple(float(v) for v in start) if isinstance(start, list) and len(start) in (2, 3) else None
        except (TypeError, ValueError, OverflowError):
            start = None
        if start is None or not all(map(math.isfinite, start)):
            raise UserError(f"{where}: start {data['start']!r} should be a start point index or [x, y] / [x, y, angle] "
                            "(finite numbers)")
    behaviors = _mapping(data.get("behaviors") or {}, where, "behaviors")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise UserError(f"{where}: seed {seed!r} should be a whole number from 0 to {2**32 - 1}")
    return Plan(name=str(data.get("name", "plan")), nodes=nodes, rules=rules, start=start, seed=seed,
                behaviors={str(k): str(v) for k, v in behaviors.items()})


def load_plan(path: str | Path) -> Plan:
    """Read and check a plan file."""
    path = Path(path)
    plan = parse_plan(read_yaml(path, f"plan {path}"), f"plan {path}")
    plan.behaviors = {k: str(v if Path(v).is_absolute() else path.parent / v) for k, v in plan.behaviors.items()}
    for node in plan.nodes:
        if node.until is not None and not Path(node.until).is_absolute():
            node.until = str(path.parent / node.until)
    return plan


def save_plan(plan: Plan, path: str | Path) -> Path:
    """Write a plan as YAML, atomically."""
    return write_text_atomic(Path(path), yaml.safe_dump(plan.to_dict(), sort_keys=False, allow_unicode=True))
