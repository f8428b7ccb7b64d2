"""Game specs: one string names a backend and what it plays.

    doom:park[:SEED[:COLSxROWS]]   the built-in park on ViZDoom (generated and cached)
    doom:park-perf[:SEED[:COLSxROWS]]  the same park with slow-rendering zones (load testing)
    doom:freedoom2:MAPxx           a stock Freedoom: Phase 2 level
    doom:freedoom1:ExMy            a stock Freedoom: Phase 1 level
    doom:wad:PATH[:MAP][:iwad=…]   a map of a user's WAD (a PWAD over Freedoom 2, or an IWAD)
    doom:scenario:NAME             one of ViZDoom's shipped scenarios (e.g. my_way_home)
    gym:ENV_ID                     any Gymnasium env that renders RGB frames
    window:TITLE                   any game in a window whose title contains TITLE
    window:/REGEX/                 … or whose title matches the regular expression

Backends from later issues (the window backend) register themselves in `BACKENDS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap


@dataclass(frozen=True)
class Backend:
    prefix: str
    usage: str
    description: str
    make: Callable[[str, dict[str, Any]], gym.Env]
    example: str


def _parse_int(text: str, what: str, spec: str, low: int = 0, high: int = 2**32 - 1) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"game {spec!r}: {what} {text!r} is not a whole number") from None
    if not low <= value <= high:
        raise UserError(f"game {spec!r}: {what} {value} is out of range; give a whole number from {low} to {high}")
    return value


def park_config_from_spec(spec: str):
    """The `ParkConfig` a `doom:park[:SEED[:COLSxROWS]]` spec names."""
    from playtester.capture.park.layout import ParkConfig

    parts = spec.split(":")
    if len(parts) > 4:
        raise UserError(f"game {spec!r}: use doom:park[:SEED[:COLSxROWS]]")
    seed = _parse_int(parts[2], "seed", spec) if len(parts) > 2 and parts[2] != "" else 0
    kwargs: dict[str, Any] = {"seed": seed}
    if len(parts) > 3:
        m = re.fullmatch(r"(\d+)x(\d+)", parts[3])
        if not m:
            raise UserError(f"game {spec!r}: size {parts[3]!r} should look like 24x24 (columns x rows of cells)")
        kwargs["cols"], kwargs["rows"] = int(m.group(1)), int(m.group(2))
    return ParkConfig(**kwargs)


def doom_scenario(spec: str):
    """The `DoomScenario` for a `doom:…` spec, generating the park when needed."""
    from playtester.capture.doom import DoomScenario, iwad_path
    from playtester.capture.park.build import build_park

    parts = spec.split(":")
    what = parts[1] if len(parts) > 1 else ""
    if what == "park":
        files = build_park(park_config_from_spec(spec))
        return DoomScenario(
            spec=spec, iwad=iwad_path("freedoom2"), map="MAP01", pwad=files.wad,
            layout=files.layout(), map_png=files.map_png,
        )
    if what == "park-perf":
        from playtester.capture.park.perf import PerfParkConfig, build_perf_park

        files = build_perf_park(PerfParkConfig(park=park_config_from_spec(spec)))
        return DoomScenario(
            spec=spec, iwad=iwad_path("freedoom2"), map="MAP01", pwad=files.wad,
            layout=files.layout(), map_png=files.map_png,
        )
    if what in ("freedoom2", "freedoom1"):
        if len(parts) != 3:
            example = "MAP01" if what == "freedoom2" else "E1M1"
            raise UserError(f"game {spec!r}: name the level, e.g. doom:{what}:{example}")
        level = parts[2].upper()
        pattern = r"MAP(0[1-9]|[1-2][0-9]|3[0-2])" if what == "freedoom2" else r"E[1-4]M[1-9]"
        if not re.fullmatch(pattern, level):
            raise UserError(f"game {spec!r}: {what} has no level {parts[2]!r}")
        return DoomScenario(spec=spec, iwad=iwad_path(what), map=level, level=True)
    if what == "wad":
        from playtester.capture.wads import wad_scenario

        return wad_scenario(spec)
    if what == "scenario":
        from playtester.capture.wads import scenario_of

        return scenario_of(spec)
    raise UserError(f"game {spec!r}: unknown Doom game {what!r}; use doom:park, doom:park-perf, doom:freedoom2:MAPxx, "
                    "doom:freedoom1:ExMy, doom:wad:PATH[:MAP] or doom:scenario:NAME")


_DOOM_OPTIONS = {"resolution", "frame_skip", "spectator", "labels", "random_start", "rules", "frame_clock"}


def _make_doom(spec: str, options: dict[str, Any]) -> gym.Env:
    from playtester.capture.doom import DoomGame

    return DoomGame(doom_scenario(spec), **options)


def _make_gym(spec: str, options: dict[str, Any]) -> gym.Env:
    from playtester.capture.gym_game import GymGame

    env_id = spec.split(":", 1)[1]
    if not env_id:
        raise UserError(f"game {spec!r}: name the env, e.g. gym:CartPole-v1")
    options = {k: v for k, v in options.items() if k not in _DOOM_OPTIONS and k != "keymap"}
    return GymGame(env_id, **options)


def _make_window(spec: str, options: dict[str, Any]) -> gym.Env:
    from playtester.capture.window.game import WindowGame

    title = spec.split(":", 1)[1]
    regex = len(title) > 2 and title.startswith("/") and title.endswith("/")
    if regex:
        title = title[1:-1]
    if not title and options.get("region") is None:
        raise UserError(f"game {spec!r}: name the window, e.g. window:\"My Game\", or give --region X,Y,W,H")
    window_options = {"region", "keymap", "fps", "size", "max_steps", "telemetry_port", "render_mode", "launch",
                      "launch_wait", "reset_recipe", "out_of_play", "still_steps"}
    options = {k: v for k, v in options.items() if k in window_options}
    return WindowGame(title or None, regex=regex, **options)


BACKENDS: dict[str, Backend] = {
    "doom": Backend(
        prefix="doom",
        usage="doom:park[:SEED[:COLSxROWS]] | doom:freedoom2:MAPxx | doom:freedoom1:ExMy | doom:wad:PATH[:MAP][:iwad=IWAD] "
              "| doom:scenario:NAME",
        description="ViZDoom in-process: the built-in park (seeded, cached), stock Freedoom levels, any WAD file "
                    "(`playtester games --wad PATH` lists its maps) or a ViZDoom scenario",
        make=_make_doom,
        example="doom:park:7",
    ),
    "gym": Backend(
        prefix="gym",
        usage="gym:ENV_ID",
        description="any Gymnasium env that renders RGB frames (render_mode='rgb_array')",
        make=_make_gym,
        example="gym:CartPole-v1",
    ),
    "window": Backend(
        prefix="window",
        usage="window:TITLE | window:/REGEX/",
        description="any game in a window: screen capture and key presses (needs a display)",
        make=_make_window,
        example='window:"My Game"',
    ),
}


def valid_specs() -> str:
    return "; ".join(b.usage for b in BACKENDS.values())


def make_game(spec: str, *, keymap: KeyMap | dict | None = None, **options: Any) -> gym.Env:
    """Start the game a spec names. Options go to the backend (`max_steps`, `render_mode`, …)."""
    prefix = spec.split(":", 1)[0]
    backend = BACKENDS.get(prefix)
    if backend is None or ":" not in spec:
        raise UserError(f"game {spec!r}: unknown game spec; valid specs are {valid_specs()}")
    if keymap is not None:
        options["keymap"] = keymap
    if isinstance(options.get("keymap"), dict):  # as a run's game options keep it (JSON)
        options["keymap"] = KeyMap.from_dict(options["keymap"], where=f"game {spec!r}: key map")
    return backend.make(spec, options)


def make_state_env(spec: str) -> gym.Env:
    """`state:ID`: Gymnasium's env ID as it is (state vectors, no frames; PPO's own tests use them)."""
    name = spec.split(":", 1)[1]
    try:
        return gym.make(name)
    except gym.error.Error as e:
        raise UserError(f"env {spec!r}: Gymnasium cannot make {name!r} ({e})") from None


@dataclass(frozen=True)
class GameInfo:
    """What a run needs to know of its game before training: its spaces, key map and layout."""

    observation_space: gym.Space
    """As the game gives it (before any resize)."""
    action_space: gym.Space
    keymap: KeyMap | None
    layout: Any
    """The built-in park's layout (`scenario.layout`: its OOIs and pathways); None elsewhere."""


_PROBED: dict[tuple[str, tuple[tuple[str, Any], ...]], GameInfo] = {}


def probe_game(spec: str, **options: Any) -> GameInfo:
    """`GameInfo` of `make_game(spec, **options)`: the game is started once per process for a spec
    and options, then closed; later calls get the same answer without starting it again."""
    key = (spec, tuple(sorted((k, repr(v)) for k, v in options.items())))
    if key not in _PROBED:
        env = make_state_env(spec) if spec.startswith("state:") else make_game(spec, **options)
        try:
            game = env.unwrapped
            _PROBED[key] = GameInfo(env.observation_space, env.action_space, getattr(game, "keymap", None),
                                    getattr(getattr(game, "scenario", None), "layout", None))
        finally:
            env.close()
    return _PROBED[key]
