"""Plans from a recorded play session (a demo episode), as the paper's play-session recording.

With telemetry, positions are sampled every `every` steps (when the player has moved) and every
non-movement action (a jump, an attack) becomes a node at the place it was done; consecutive
steps of the same action become one node that holds it. Without telemetry, the objects seen up
close along the way become nodes in the order they were first approached, with the actions in
between. The plan starts where the episode started (its recorded reset), so it replays from the
same place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playtester.errors import UserError
from playtester.datasets.episodes import Episode
from playtester.plans.navigate import is_movement
from playtester.datasets.plans import Node, Plan, Target


@dataclass
class RecordConfig:
    """How densely a session becomes nodes."""

    every: int = 15
    """With telemetry: a position node every this many steps."""
    min_spacing: float = 48.0
    """…unless the player moved less than this (map units) since the last node."""
    tolerance: float = 96.0
    """Each node's tolerance (map units)."""
    min_size: float = 0.25
    """Without telemetry: an object counts as approached once its box is this share of the frame height."""

    def __post_init__(self) -> None:
        if not self.every >= 1:
            raise UserError(f"plan record --every {self.every}: must be at least 1")
        if not (self.tolerance > 0 and math.isfinite(self.tolerance)):
            raise UserError(f"plan record --tolerance {self.tolerance}: must be a positive number of map units")
        if not (self.min_spacing >= 0 and math.isfinite(self.min_spacing)):
            raise UserError(f"plan record: min_spacing {self.min_spacing} must be 0 or more map units")
        if not 0 < self.min_size <= 1:
            raise UserError(f"plan record: min_size {self.min_size} must be a share of the frame height in (0, 1]")


def _timeout(steps_since: int) -> int:
    """Generous room to redo a stretch the recording took `steps_since` steps over."""
    return 3 * steps_since + 60


def plan_from_episode(path: str | Path, config: RecordConfig | None = None) -> Plan:
    """A plan that retraces a demo episode."""
    cfg = config or RecordConfig()
    ep = Episode.open(path)
    keymap = ep.keymap
    reset = ep.meta.get("reset") or {}
    start = (reset.get("options") or {}).get("start")
    if isinstance(start, list):
        start = tuple(float(v) for v in start)
    telemetry = all("position" in s for s in ep.steps)
    nodes = _by_position(ep, keymap, cfg) if telemetry else _by_sight(ep, keymap, cfg)
    if not nodes:
        raise UserError(f"episode {ep.path}: nothing to make a plan of (no movement, no actions, no objects seen)")
    return Plan(name=ep.name, nodes=nodes, start=start, seed=int(reset.get("seed") or 0))


def _action_node(nodes: list[Node], name: str, t: int, prev_t: int, target: Target | None, tolerance: float,
                 last_action: tuple[str, int] | None) -> tuple[str, int]:
    """Append (or extend, when the same action goes on) an action node; the new last action."""
    if last_action is not None and last_action == (name, t - 1) and nodes and nodes[-1].action == name:
        nodes[-1].repeat += 1
    else:
        nodes.append(Node(name=f"{name} at step {t}", target=target, action=name, tolerance=tolerance,
                          timeout=_timeout(t - prev_t)))
    return name, t


def _by_position(ep: Episode, keymap: Any, cfg: RecordConfig) -> list[Node]:
    nodes: list[Node] = []
    last_xy = tuple(ep.steps[0]["position"][:2])
    last_t = 0
    last_action: tuple[str, int] | None = None
    for t, step in enumerate(ep.steps):
        xy = (float(step["position"][0]), float(step["position"][1]))
        action = int(step["action"])
        if not is_movement(keymap, action):
            name = keymap.names[action]
            last_action = _action_node(nodes, name, t, last_t, Target(position=xy), cfg.tolerance, last_action)
            last_xy, last_t = xy, t
            continue
        moved = math.hypot(xy[0] - last_xy[0], xy[1] - last_xy[1])
        if t - last_t >= cfg.every and moved >= cfg.min_spacing:
            nodes.append(Node(name=f"step {t}", target=Target(position=xy), tolerance=cfg.tolerance,
                              timeout=_timeout(t - last_t)))
            last_xy, last_t = xy, t
    end = ep.steps[-1]["position"]
    if math.hypot(end[0] - last_xy[0], end[1] - last_xy[1]) >= cfg.min_spacing:
        nodes.append(Node(name="end", target=Target(position=(float(end[0]), float(end[1]))), tolerance=cfg.tolerance,
                          timeout=_timeout(len(ep.steps) - last_t)))
    return nodes


def _by_sight(ep: Episode, keymap: Any, cfg: RecordConfig) -> list[Node]:
    height = ep.frames.shape[1]
    nodes: list[Node] = []
    approached: set[Any] = set()
    last_t = 0
    last_action: tuple[str, int] | None = None
    for t, step in enumerate(ep.steps):
        for obj in step.get("objects", []):
            key = obj.get("ooi", obj["class"])
            if key in approached or (obj["box"][3] - obj["box"][1]) / height < cfg.min_size:
                continue
            approached.add(key)
            target = Target(ooi=int(obj["ooi"])) if obj.get("ooi") is not None else Target(kind=str(obj["class"]))
            nodes.append(Node(name=f"{obj['class']} at step {t}", target=target, view=cfg.min_size,
                              timeout=_timeout(t - last_t)))
            last_t = t
        action = int(step["action"])
        if not is_movement(keymap, action):
            last_action = _action_node(nodes, keymap.names[action], t, last_t, None, cfg.tolerance, last_action)
            last_t = t
    if not any(n.target for n in nodes) and not any("objects" in s for s in ep.steps):
        raise UserError(f"episode {ep.path}: it has no position telemetry and no object detections to make nodes of")
    return nodes
