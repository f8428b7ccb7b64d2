"""`playtester demos` on Doom levels, with no hand recording: the level-walk expert
(`capture/level_walk.py`) records path demos from each level's own start, the inspect expert
(`capture/level_inspect.py`) circles the level's own things; on one level or several; with
`--dagger`, a trained policy drives and the expert labels each step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playtester.errors import UserError
from playtester.commands.options import about


def record_level_demos(levels: list[str], out: Path, *, behavior: str, episodes: int, steps: int, seed: int,
                       resolution: str, rules: str | None, video: bool, dagger: Path | None, beta: float) -> list[dict[str, Any]]:
    """Episode i on `levels[i % len(levels)]` with seed `seed + i`; the episodes' figures."""
    import numpy as np

    from playtester.capture.games import make_game
    from playtester.capture.level_walk import LevelWalker
    from playtester.commands.scenario import _record_expert_episode, progress
    from playtester.datasets.episodes import EpisodeWriter, next_episode_name

    stats = []
    with progress() as bar:
        task = bar.add_task(f"level-walk {'DAgger episodes' if dagger else 'demos'} on {len(levels)} "
                            f"level{'s' if len(levels) > 1 else ''}", total=episodes)
        for k, level in enumerate(levels):
            mine = [i for i in range(episodes) if i % len(levels) == k]
            if not mine:
                continue
            env = make_game(level, resolution=resolution, **({"rules": rules} if rules else {}))
            try:
                game = env.unwrapped
                driver = None
                if dagger is not None:
                    from playtester.imitation.dagger import load_driver

                    with about("--dagger"):
                        driver, _ = load_driver(dagger, behavior, game.keymap, beta, seed)
                extra = {"dagger": {"policy": str(dagger), "beta": beta}} if driver is not None else {}
                if behavior == "inspect":
                    from playtester.capture.level_inspect import LevelLayout, level_objects_to_inspect

                    layout, oois = LevelLayout(game.graph), level_objects_to_inspect(game.graph)
                    if not oois:
                        raise UserError(f"demos --game {level} --behavior inspect: the level has no object in reach to inspect")
                for i in mine:
                    rng = np.random.default_rng(seed + i)
                    if behavior == "inspect":
                        walker, reset = _inspector(layout, oois, game.keymap, rng, seed + i)
                    else:
                        walker = LevelWalker(game.graph, game.keymap, rng)
                        reset = {"seed": seed + i, "options": None}
                    writer = EpisodeWriter(out, next_episode_name(out), game=level, behavior=behavior, keymap=game.keymap,
                                           fps=game.metadata["render_fps"],
                                           extra={"reset": reset, "expert": type(walker).__name__,
                                                  **({"game_options": {"rules": rules}} if rules else {}), **extra})
                    stats.append(_record_expert_episode(env, writer, walker, driver, reset, steps, None, behavior))
                    if video:
                        from playtester.datasets.video import episode_video

                        episode_video(writer.final)
                    bar.advance(task)
            finally:
                env.close()
    return stats


def _inspector(layout, oois, keymap, rng, seed: int):
    """The inspect expert for an episode (the objects taken in turn), and the reset that starts it near its object."""
    from playtester.capture.experts import Inspector
    from playtester.capture.level_inspect import level_inspect_start

    for k in range(len(oois)):
        ooi = oois[(seed + k) % len(oois)]
        try:
            start = level_inspect_start(layout, ooi, rng)
        except UserError:  # no clear ground around this one: the next
            continue
        return Inspector(layout, keymap, rng, ooi), {"seed": seed, "options": {"start": [round(v, 3) for v in start]}}
    raise UserError("demos --behavior inspect: no object of the level has free ground with a clear walk to it")
