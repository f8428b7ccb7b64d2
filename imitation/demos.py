"""Scripted-expert demo episodes, as if a tester had played them: `playtester demos` on one
machine and in each Ray task of `demos --cluster`.

On the park the experts play from its ground truth (`capture/experts.py`: the path follower, the
inspector); on Doom levels the level-walk expert (`capture/level_walk.py`) walks from the level's
own start and the inspect expert (`capture/level_inspect.py`) circles the level's own things,
episode i on level i mod n. With a DAgger policy, the policy drives and the expert labels each
step (`imitation/dagger.py`). Episode i uses seed `seed + i`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from playtester.errors import UserError, about

Progress = Callable[[str], Callable[[], None]]
"""Starts a progress task of that title over the episodes; returns what advances it by one."""


def no_progress(title: str) -> Callable[[], None]:
    return lambda: None


def record_demos(out: Path, game: str, *, behavior: str, episodes: int, steps: int, seed: int, resolution: str,
                 rules: str | None, video: bool, dagger: Path | None = None, beta: float = 0.0,
                 checked: Callable[[], None] = lambda: None, progress: Progress = no_progress) -> list[dict[str, Any]]:
    """Record `episodes` expert episodes of `game` (the park, or Doom levels separated by commas)
    into `out`; the episodes' figures. `checked` is called once every input is checked, before the
    first episode is written."""
    from playtester.capture.rules import is_level

    levels = [g.strip() for g in game.split(",") if g.strip()]
    if levels and all(is_level(level) for level in levels):
        checked()
        title = (f"level-walk {'DAgger episodes' if dagger else 'demos'} on {len(levels)} "
                 f"level{'s' if len(levels) > 1 else ''}")
        return record_level_demos(levels, out, behavior=behavior, episodes=episodes, steps=steps, seed=seed,
                                  resolution=resolution, rules=rules, video=video, dagger=dagger, beta=beta,
                                  advance=progress(title))
    return record_park_demos(out, game, behavior=behavior, episodes=episodes, steps=steps, seed=seed,
                             resolution=resolution, rules=rules, video=video, dagger=dagger, beta=beta,
                             checked=checked, progress=progress)


def record_park_demos(out: Path, game: str, *, behavior: str, episodes: int, steps: int, seed: int, resolution: str,
                      rules: str | None, video: bool, dagger: Path | None, beta: float,
                      checked: Callable[[], None], progress: Progress) -> list[dict[str, Any]]:
    """The park's experts (a game with ground truth): path starts or reachable OOIs taken by seed."""
    from playtester.capture.experts import Inspector, PathFollower, inspect_start
    from playtester.capture.games import make_game
    from playtester.datasets.episodes import EpisodeWriter, next_episode_name

    env = make_game(game, resolution=resolution, **({"rules": rules} if rules else {}))
    try:
        layout = getattr(env.unwrapped, "scenario", None) and env.unwrapped.scenario.layout
        if layout is None:
            raise UserError(f"demos --game {game}: the scripted experts need a game with ground truth (doom:park)")
        keymap = env.unwrapped.keymap
        driver, path_starts, reachable = starts_and_driver(layout, keymap, game, behavior, dagger, beta, seed)
        extra = {"dagger": {"policy": str(dagger), "beta": beta}} if driver is not None else {}
        stats = []
        checked()
        advance = progress(f"{behavior} {'DAgger episodes' if driver else 'demos'}")
        for i in range(episodes):
            ep_seed = seed + i
            rng = np.random.default_rng(ep_seed)
            if behavior == "path":
                expert = PathFollower(layout, keymap, rng)
                start: object = path_starts[int(rng.integers(len(path_starts)))]
            else:
                expert = Inspector(layout, keymap, rng, reachable[(seed + i) % len(reachable)])
                start = [round(v, 3) for v in inspect_start(layout, expert.ooi, rng)]
            reset = {"seed": ep_seed, "options": {"start": start}}
            writer = EpisodeWriter(out, next_episode_name(out), game=game, behavior=behavior, keymap=keymap,
                                   fps=env.unwrapped.metadata["render_fps"],
                                   extra={"reset": reset, "expert": type(expert).__name__, **extra})
            stats.append(record_expert_episode(env, writer, expert, driver, reset, steps, layout, behavior))
            _video(writer, video)
            advance()
    finally:
        env.close()
    return stats


def _video(writer, video: bool) -> None:
    if video:
        from playtester.datasets.video import episode_video

        episode_video(writer.final)


def starts_and_driver(layout, keymap, game: str, behavior: str, dagger: Path | None, beta: float, seed: int):
    """`(driver, path starts, reachable OOIs)`: the park's, or with --dagger the policy that drives
    and the starts and targets it was trained from."""
    path_starts = [i for i, s in enumerate(layout.starts) if s.on_path] or list(range(len(layout.starts)))
    reachable = [o for o in layout.oois if o.reachable]
    if dagger is None:
        return None, path_starts, reachable
    from playtester.imitation.dagger import load_driver, training_starts, training_targets

    with about("--dagger"):
        driver, scoring = load_driver(dagger, behavior, keymap, beta, seed)
    if behavior == "path":
        path_starts = [i for i in training_starts(scoring, dagger, game) if i < len(layout.starts)]
    else:
        known = set(training_targets(scoring, dagger, game))
        reachable = [o for o in reachable if o.id in known]
    if not path_starts or not reachable:
        raise UserError(f"--dagger {dagger}: its training starts or targets are not in {game}; use the game it was trained on")
    return driver, path_starts, reachable


def record_level_demos(levels: list[str], out: Path, *, behavior: str, episodes: int, steps: int, seed: int,
                       resolution: str, rules: str | None, video: bool, dagger: Path | None, beta: float,
                       advance: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Episode i on `levels[i % len(levels)]` with seed `seed + i`; the episodes' figures."""
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import LevelWalker
    from playtester.datasets.episodes import EpisodeWriter, next_episode_name

    stats = []
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
                    walker = LevelWalker(game.graph, game.keymap, rng, monsters=game.rules != "no-monsters",
                                         standing=game.rules == "immortal")
                    reset = {"seed": seed + i, "options": None}
                writer = EpisodeWriter(out, next_episode_name(out), game=level, behavior=behavior, keymap=game.keymap,
                                       fps=game.metadata["render_fps"],
                                       extra={"reset": reset, "expert": type(walker).__name__,
                                              **({"game_options": {"rules": rules}} if rules else {}), **extra})
                stats.append(record_expert_episode(env, writer, walker, driver, reset, steps, None, behavior))
                _video(writer, video)
                advance()
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


def record_expert_episode(env, writer, expert, driver, reset: dict[str, Any], steps: int, layout,
                          behavior: str) -> dict[str, float]:
    """Play one scripted episode (the expert acts, or with DAgger labels while the policy drives)
    into `writer`; the episode's figures for the summary line."""
    frame, info = env.reset(**reset)
    expert.reset(info)
    if driver is not None:
        driver.reset()
    keymap = env.unwrapped.keymap
    with writer:
        on_path, cells = 0, set()
        for _ in range(steps):
            taken = expert.act(info)  # jitter included
            label = expert.intended  # what the expert meant: what a policy should learn
            notes = expert.annotations(info)
            action = taken if driver is None else driver.choose(frame, notes.get("test_box"), taken)
            writer.add(
                frame, action, keymap.keys_for(action), position=info["position"], angle=info["angle"],
                pitch=info["pitch"], objects=info.get("objects", []), **notes,
                **({"label": label} if label != action else {}),
            )
            if layout is not None:  # the park's pathways; a level's walker counts its own cells
                on_path += layout.on_pathway(*info["position"][:2])
                cells.add(layout.cell_of(*info["position"][:2]))
            frame, _, terminated, truncated, info = env.step(action)
            if terminated or truncated or expert.done:
                break
        n = writer.n
    if behavior == "path" and layout is None:
        return {"steps": n, "cells": int(expert.visited.sum())}
    if behavior == "path":
        return {"steps": n, "on_path": on_path / n, "cells": len(cells)}
    p = expert.progress
    return {"steps": n, "degrees": p.degrees, "on_screen": p.steps_on_screen / max(1, p.steps)}
