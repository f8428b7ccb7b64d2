"""Play a trained policy in the game from held-out starts and score each executed test."""

from __future__ import annotations

from typing import Any

import numpy as np

from playtester.errors import UserError
from playtester.capture.experts import CircleProgress, inspect_start, ooi_on_screen
from playtester.capture.games import make_game
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
    scoring = live.scoring
    if "expert_distribution" not in scoring:
        raise UserError(f"checkpoint {ckpt}: it has no scoring data (expert distribution); retrain it")
    expert = np.asarray(scoring["expert_distribution"])
    threshold = float(scoring["threshold"])
    steps = steps or int(round(1.5 * scoring.get("max_length", 200)))
    env = make_game(game)
    try:
        unwrapped = env.unwrapped
        if not unwrapped.keymap.same_actions(live.keymap):
            raise UserError(
                f"checkpoint {ckpt}: its key map ({', '.join(live.keymap.names)}) differs from "
                f"{game}'s ({', '.join(unwrapped.keymap.names)}); train it on demos from this game"
            )
        layout = getattr(getattr(unwrapped, "scenario", None), "layout", None)
        if layout is None:
            raise UserError(f"eval policy --game {game}: the behaviour's measures need a game with ground truth (doom:park)")
        rng = np.random.default_rng(seed)
        targets, starts, held_out = held_out_cases(layout, scoring, game, behavior)
        tests = []
        for i in range(episodes):
            live.reset()
            if behavior == "inspect":
                ooi = targets[i % len(targets)]
                frame, info = env.reset(seed=seed + i, options={"start": inspect_start(layout, ooi, rng, facing_spread=20.0)})
                progress = CircleProgress(ooi)
            else:
                frame, info = env.reset(seed=seed + i, options={"start": starts[int(rng.integers(len(starts)))]})
            actions, on_path, cells = [], 0, set()
            for _ in range(steps):
                box = None
                if behavior == "inspect":
                    seen = ooi_on_screen(info, ooi.id)
                    box = seen["box"] if seen else None
                probs = live.step(frame, box)
                action = int(np.argmax(probs)) if greedy else int(rng.choice(len(probs), p=probs / probs.sum()))
                actions.append(action)
                frame, _, terminated, truncated, info = env.step(action)
                x, y, _ = info["position"]
                on_path += layout.on_pathway(x, y)
                cells.add(layout.cell_of(x, y))
                if behavior == "inspect":
                    progress.update(x, y, ooi_on_screen(info, ooi.id) is not None)
                if terminated or truncated:
                    break
            score = jsd(action_distribution(actions, len(expert)), expert)
            result: dict[str, Any] = {"jsd": score, "success": score <= threshold, "steps": len(actions)}
            if behavior == "inspect":
                result.update(ooi=ooi.id, degrees=progress.degrees, on_screen=progress.steps_on_screen / max(1, progress.steps))
            else:
                result.update(on_path=on_path / len(actions), cells=len(cells))  # standing still on a path is not walking it
            tests.append(result)
    finally:
        env.close()
    summary: dict[str, Any] = {"success_rate": float(np.mean([t["success"] for t in tests])), "threshold": threshold,
                               "mean_jsd": float(np.mean([t["jsd"] for t in tests])), "held_out": held_out}
    if behavior == "inspect":
        degrees = [t["degrees"] for t in tests]
        summary.update(circled_270=float(np.mean([d >= 270 for d in degrees])), median_degrees=float(np.median(degrees)))
    else:
        summary.update(on_path=float(np.mean([t["on_path"] for t in tests])), cells=float(np.mean([t["cells"] for t in tests])))
    return {"game": game, "behavior": behavior, "summary": summary, "tests": tests}
