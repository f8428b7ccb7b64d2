"""Play a trained policy in the game from held-out starts and score each executed test."""

from __future__ import annotations

from typing import Any

import numpy as np

from playtester.errors import UserError
from playtester.capture.experts import CircleProgress, inspect_start, ooi_on_screen
from playtester.capture.envs import make_env
from playtester.imitation.data import trained_on
from playtester.imitation.jsd import action_distribution, jsd
from playtester.imitation.live import LivePolicy


def held_out_cases(layout, scoring: dict[str, Any], game: str, behavior: str) -> tuple[list, list[int], bool]:
    """The OOIs to inspect and the path start points to test from on `game`, and whether they are
    held out: the ones the policy's demos did not use where the game has any (on another park every
    one is new), else all of them, from new random starts."""
    trained_starts, trained_targets = trained_on(scoring, game)
    targets = [o for o in layout.oois if o.reachable and o.id not in trained_targets]
    starts = [i for i, s in enumerate(layout.starts) if s.on_path and i not in trained_starts]
    held_out = bool(targets) if behavior == "inspect" else bool(starts)
    return targets or [o for o in layout.oois if o.reachable], starts or list(range(len(layout.starts))), held_out


def evaluate_policy(
    live: LivePolicy, game: str, behavior: str, *, episodes: int, steps: int | None, seed: int,
    greedy: bool = False, ckpt: str = "policy",
) -> dict[str, Any]:
    """Play `episodes` tests of `behavior` on `game` from held-out starts (one rng, seeded by
    `seed`, draws the starts and the sampled actions), each scored by the JSD of its actions
    against the expert's and by the behaviour's own measures."""
    scoring = live.scoring
    if "expert_distribution" not in scoring:
        raise UserError(f"checkpoint {ckpt}: it has no scoring data (expert distribution); retrain it")
    expert = np.asarray(scoring["expert_distribution"])
    threshold = float(scoring["threshold"])
    steps = steps or int(round(1.5 * scoring.get("max_length", 200)))
    env = make_env(game)
    try:
        layout = _scored_layout(env, live, game, ckpt)
        rng = np.random.default_rng(seed)
        targets, starts, held_out = held_out_cases(layout, scoring, game, behavior)
        tests = []
        for i in range(episodes):
            live.reset()
            target = targets[i % len(targets)] if behavior == "inspect" else None
            actions, measures = _play_test(live, env, layout, target, starts, rng, seed + i, steps, greedy)
            score = jsd(action_distribution(actions, len(expert)), expert)
            tests.append({"jsd": score, "success": score <= threshold, "steps": len(actions), **measures})
    finally:
        env.close()
    return {"game": game, "behavior": behavior, "summary": _summary(tests, behavior, threshold, held_out), "tests": tests}


def _scored_layout(env, live: LivePolicy, game: str, ckpt: str):
    """The game's ground-truth layout, which the behaviour's measures need; refused in one line
    when the game has none or plays with another key map than the policy's."""
    unwrapped = env.unwrapped
    if not unwrapped.keymap.same_actions(live.keymap):
        raise UserError(
            f"checkpoint {ckpt}: its key map ({', '.join(live.keymap.names)}) differs from "
            f"{game}'s ({', '.join(unwrapped.keymap.names)}); train it on demos from this game"
        )
    layout = getattr(getattr(unwrapped, "scenario", None), "layout", None)
    if layout is None:
        raise UserError(f"eval policy --game {game}: the behaviour's measures need a game with ground truth (doom:park)")
    return layout


def _play_test(
    live: LivePolicy, env, layout, target, starts: list[int], rng: np.random.Generator, seed: int, steps: int, greedy: bool,
) -> tuple[list[int], dict[str, Any]]:
    """One test: inspect `target` (from a start facing it) or, with no target, walk from a random
    path start; its actions and the behaviour's measures (degrees circled and time on screen, or
    share of steps on a pathway and cells reached)."""
    if target is not None:
        frame, info = env.reset(seed=seed, options={"start": inspect_start(layout, target, rng, facing_spread=20.0)})
        progress = CircleProgress(target)
    else:
        frame, info = env.reset(seed=seed, options={"start": starts[int(rng.integers(len(starts)))]})
    actions, on_path, cells = [], 0, set()
    for _ in range(steps):
        box = None
        if target is not None:
            seen = ooi_on_screen(info, target.id)
            box = seen["box"] if seen else None
        probs = live.step(frame, box)
        action = int(np.argmax(probs)) if greedy else int(rng.choice(len(probs), p=probs / probs.sum()))
        actions.append(action)
        frame, _, terminated, truncated, info = env.step(action)
        x, y, _ = info["position"]
        on_path += layout.on_pathway(x, y)
        cells.add(layout.cell_of(x, y))
        if target is not None:
            progress.update(x, y, ooi_on_screen(info, target.id) is not None)
        if terminated or truncated:
            break
    if target is not None:
        return actions, {"ooi": target.id, "degrees": progress.degrees, "on_screen": progress.steps_on_screen / max(1, progress.steps)}
    return actions, {"on_path": on_path / len(actions), "cells": len(cells)}  # standing still on a path is not walking it


def _summary(tests: list[dict[str, Any]], behavior: str, threshold: float, held_out: bool) -> dict[str, Any]:
    """The tests' success rate and mean JSD, with the behaviour's measures averaged."""
    summary: dict[str, Any] = {"success_rate": float(np.mean([t["success"] for t in tests])), "threshold": threshold,
                               "mean_jsd": float(np.mean([t["jsd"] for t in tests])), "held_out": held_out}
    if behavior == "inspect":
        degrees = [t["degrees"] for t in tests]
        summary.update(circled_270=float(np.mean([d >= 270 for d in degrees])), median_degrees=float(np.median(degrees)))
    else:
        summary.update(on_path=float(np.mean([t["on_path"] for t in tests])), cells=float(np.mean([t["cells"] for t in tests])))
    return summary
