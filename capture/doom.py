"""`DoomGame`: the ViZDoom engine in-process as a `gymnasium.Env`.

Headless or windowed, deterministic by seed, telemetry from game variables (`position`, `angle`,
`pitch`, `frame_time_ms`), ground-truth `objects` with screen boxes from the labels buffer. On the
park scenario each episode starts at one of the park's start points (random unless chosen with
`reset(options={"start": …})`) facing a random direction.

A Doom level (a stock level, a user's WAD, a ViZDoom scenario: `DoomScenario.level`) plays with
the `level` key map (the park's 9 actions and USE) under tester rules (`capture/rules.py`,
`immortal` unless told otherwise): the level starts again within the episode after a death or
the exit, and USE presses, deaths and exits are told in `info` (`capture/level_play.py`).

The engine is a process of its own. When it dies (killed, crashed: the library raises, or it
stops running), `step` ends the episode with `info["crashed"] = True` and a `crash_reason`
instead of raising, and the next `reset` starts a fresh engine (`restarts` counts them). A
Ctrl-C, which kills the engine too, stays a KeyboardInterrupt; in a game worker of a run, which
leaves Ctrl-C to the run's process, the step ends truncated with `info["interrupted"]`. An engine killed while it held
the lock of its message queue would leave the library waiting for ever; `StallGuard` releases
that lock when the engine is dead and a call has not come back in 2 s. A watchdog process
(`engine_guard.EngineWatchdog`) kills the engine and frees its shared memory if this process
dies without closing it.

`frame_time_ms` is what the step cost: by default (`frame_clock="cpu"`) the CPU time of the engine
process and of this thread over the step, which other processes on a shared machine do not
change; `frame_clock="wall"` makes it the wall clock (`capture/timing.py` says why the CPU clock
is the default). Both readings are in `info` as `frame_cpu_ms` and `frame_wall_ms`. They are the
only things in `info` that differ between two runs of the same seed and actions;
`frame_timing=False` leaves them out, for exact comparisons such as Gymnasium's determinism check.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import vizdoom as vzd

from playtester.capture import engine_guard
from playtester.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.capture.timing import FRAME_CLOCKS, StepCpuClock
from playtester.capture.park.layout import ParkLayout, parse_actor

TICRATE = 35

KEY_BUTTONS: dict[str, vzd.Button] = {
    "w": vzd.Button.MOVE_FORWARD,
    "s": vzd.Button.MOVE_BACKWARD,
    "a": vzd.Button.MOVE_LEFT,
    "d": vzd.Button.MOVE_RIGHT,
    "left": vzd.Button.TURN_LEFT,
    "right": vzd.Button.TURN_RIGHT,
    "up": vzd.Button.LOOK_UP,
    "down": vzd.Button.LOOK_DOWN,
    "space": vzd.Button.JUMP,
    "ctrl": vzd.Button.ATTACK,
    "e": vzd.Button.USE,
    "c": vzd.Button.CROUCH,
    "shift": vzd.Button.SPEED,
    **{str(d): getattr(vzd.Button, f"SELECT_WEAPON{d}") for d in range(1, 10)},
}
"""How key names drive the engine: the same bindings a human uses in the engine's window."""

RESOLUTIONS = {
    "160x120": vzd.ScreenResolution.RES_160X120,
    "256x192": vzd.ScreenResolution.RES_256X192,
    "320x240": vzd.ScreenResolution.RES_320X240,
    "400x300": vzd.ScreenResolution.RES_400X300,
    "640x480": vzd.ScreenResolution.RES_640X480,
    "800x600": vzd.ScreenResolution.RES_800X600,
}

_VARIABLES = [
    vzd.GameVariable.POSITION_X, vzd.GameVariable.POSITION_Y, vzd.GameVariable.POSITION_Z,
    vzd.GameVariable.ANGLE, vzd.GameVariable.PITCH,
]


ENGINE_DEATH = (
    vzd.ViZDoomErrorException, vzd.ViZDoomUnexpectedExitException, vzd.ViZDoomIsNotRunningException,
    vzd.MessageQueueException, vzd.SharedMemoryException,
)
"""What the library raises when the engine process has died under it."""


def iwad_path(name: str) -> Path:
    """A WAD shipped with ViZDoom (`freedoom2`, `freedoom1`)."""
    return Path(os.path.dirname(vzd.__file__)) / f"{name}.wad"


def engine_config() -> Path:
    """The engine's own settings file (ViZDoom writes one at every start; by default into the
    folder playtester runs in), kept with the generated scenarios instead."""
    from playtester.capture.park.build import cache_root

    folder = cache_root()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "vizdoom.ini"


@dataclass
class DoomScenario:
    """What the engine loads: the base game, an optional scenario PWAD, the map."""

    spec: str
    iwad: Path
    map: str
    pwad: Path | None = None
    layout: ParkLayout | None = None
    """Ground truth of a generated park (start points, OOIs, pathways), when there is one."""
    map_png: Path | None = None
    args: list[str] = field(default_factory=list)
    level: bool = False
    """A Doom level a tester walks (a stock level, a user's WAD, a ViZDoom scenario), not the park:
    tester rules, the USE key and doors apply."""


def wrap_angle(deg: float) -> float:
    """An angle difference folded into (-180, 180]."""
    d = (deg + 180.0) % 360.0 - 180.0
    return 180.0 if d == -180.0 else d


def _check_options(
    resolution: str, frame_clock: str, frame_skip: int, render_mode: str | None, render_modes: list[str], rules: str | None,
) -> None:
    """Refuse in one line, before the engine starts, an option the Doom backend does not take."""
    from playtester.capture.rules import RULES

    if resolution not in RESOLUTIONS:
        raise UserError(f"resolution {resolution!r}: use one of {', '.join(RESOLUTIONS)}")
    if frame_clock not in FRAME_CLOCKS:
        raise UserError(f"frame clock {frame_clock!r}: use one of {', '.join(FRAME_CLOCKS)}")
    if frame_skip < 1:
        raise UserError(f"frame skip {frame_skip}: use a whole number of tics of at least 1")
    if render_mode not in (None, *render_modes):
        raise UserError(f"render mode {render_mode!r}: use rgb_array or human")
    if rules is not None and rules not in RULES:
        raise UserError(f"rules {rules!r}: use one of {', '.join(RULES)}")


def _bound_keymap(keymap: KeyMap) -> KeyMap:
    """`keymap`, refused in one line when it names a key the Doom backend has no button for."""
    unknown = sorted(k for k in keymap.keys if k not in KEY_BUTTONS)
    if unknown:
        raise UserError(
            f"key map {keymap.name!r}: the Doom backend has no binding for {', '.join(unknown)}; "
            f"it binds {', '.join(KEY_BUTTONS)}"
        )
    return keymap


def _engine_buttons(keymap: KeyMap) -> list[vzd.Button]:
    """The engine buttons the key map's keys press, in `KEY_BUTTONS` order, and the two turns
    (used to face a start angle) whether the key map has them or not."""
    buttons: list[vzd.Button] = []
    for key in sorted(keymap.keys, key=list(KEY_BUTTONS).index):
        if KEY_BUTTONS[key] not in buttons:
            buttons.append(KEY_BUTTONS[key])
    for extra in (vzd.Button.TURN_LEFT, vzd.Button.TURN_RIGHT):  # used to face a start angle
        if extra not in buttons:
            buttons.append(extra)
    return buttons


def _button_vectors(keymap: KeyMap, buttons: list[vzd.Button]) -> list[list[float]]:
    """Each action of the key map as the engine's button vector (1 for each button it presses)."""
    vectors = []
    for action in keymap.actions:
        vec = [0.0] * len(buttons)
        for key in action.keys:
            vec[buttons.index(KEY_BUTTONS[key])] = 1.0
        vectors.append(vec)
    return vectors


def _object_ids_by_place(layout: ParkLayout | None, graph) -> dict[tuple[int, int], int]:
    """Each object's id by where it was placed (rounded map units), to name the engine's labels:
    the park's OOIs, or a level's things (named where they stand, as monsters move)."""
    ooi_at = {} if layout is None else {(round(o.x), round(o.y)): o.id for o in layout.oois}
    if graph is not None:  # a level's things are named by their id where they stand (monsters move)
        ooi_at = {(round(t.x), round(t.y)): t.id for t in graph.level.objects()}
    return ooi_at


class DoomGame(gym.Env):
    """ViZDoom as a Gymnasium env: RGB frames in, `Discrete(n)` key-map actions out."""

    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": TICRATE / 4}

    def __init__(
        self,
        scenario: DoomScenario,
        *,
        keymap: KeyMap | None = None,
        resolution: str = "320x240",
        frame_skip: int = 4,
        render_mode: str | None = None,
        max_steps: int | None = None,
        spectator: bool = False,
        labels: bool = True,
        random_start: bool = True,
        frame_timing: bool = True,
        rules: str | None = None,
        frame_clock: str = "cpu",
    ) -> None:
        _check_options(resolution, frame_clock, frame_skip, render_mode, self.metadata["render_modes"], rules)
        self.scenario = scenario
        self.rules = rules if rules is not None or not scenario.level else "immortal"
        """Tester rules (`capture/rules.py`); None: the game as it plays (the park)."""
        self.keymap = _bound_keymap(keymap or KeyMap.builtin("level" if scenario.level else "default"))
        self.frame_skip = int(frame_skip)
        self.render_mode = render_mode
        self.max_steps = max_steps
        self.spectator = spectator
        self.labels = labels
        self.random_start = random_start
        self.frame_timing = frame_timing
        self.frame_clock = frame_clock
        self._cpu_clock = StepCpuClock(None)
        self.metadata = dict(self.metadata, render_fps=TICRATE / self.frame_skip)

        self.buttons = _engine_buttons(self.keymap)
        self._vectors = _button_vectors(self.keymap, self.buttons)
        self._noop = [0.0] * len(self.buttons)
        self._uses = [vzd.Button.USE in (KEY_BUTTONS[k] for k in action.keys) for action in self.keymap.actions]
        self.graph = None
        """The level's `LevelGraph` (a Doom level's), for USE presses and causes of death."""
        if scenario.level:
            from playtester.capture.level_play import scenario_graph

            self.graph = scenario_graph(scenario)

        w, h = (int(v) for v in resolution.split("x"))
        self.observation_space = gym.spaces.Box(0, 255, shape=(h, w, 3), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(self.keymap.n)
        self.resolution = resolution
        self.engine_pid: int | None = None
        self.engine_id: str | None = None
        self.restarts = 0
        """Engines started again after one died."""
        self._dead: str | None = None
        """Why the engine died, until `reset` starts a new one."""
        self._stall = engine_guard.StallGuard()
        self.game = self._make_engine(resolution, visible=render_mode == "human" or spectator)
        self._frame = np.zeros((h, w, 3), dtype=np.uint8)
        self._ooi_at = _object_ids_by_place(scenario.layout, self.graph)
        self._steps = 0
        self._started = False

    # -- engine -------------------------------------------------------------------------------
    def _make_engine(self, resolution: str, *, visible: bool) -> vzd.DoomGame:
        if visible and not os.environ.get("DISPLAY"):
            raise UserError(
                "the Doom window needs a display: DISPLAY is not set; run under Xvfb "
                "(xvfb-run playtester …) or use the headless mode"
            )
        game = vzd.DoomGame()
        game.set_doom_config_path(str(engine_config()))  # not _vizdoom.ini in the user's folder
        game.set_doom_game_path(str(self.scenario.iwad))
        if self.scenario.pwad is not None:
            game.set_doom_scenario_path(str(self.scenario.pwad))
        game.set_doom_map(self.scenario.map)
        game.set_screen_resolution(RESOLUTIONS[resolution])
        game.set_screen_format(vzd.ScreenFormat.RGB24)
        game.set_labels_buffer_enabled(self.labels)
        game.set_render_hud(False)
        game.set_render_weapon(False)
        game.set_render_crosshair(False)
        game.set_render_messages(False)
        game.set_render_particles(False)
        game.set_render_effects_sprites(False)
        game.set_window_visible(visible)
        game.set_sound_enabled(False)
        game.set_mode(vzd.Mode.SPECTATOR if self.spectator else vzd.Mode.PLAYER)
        game.set_available_buttons(self.buttons)
        game.set_available_game_variables(_VARIABLES)
        game.set_episode_timeout(0)
        game.add_game_args("+sv_cheats 1 +freelook 1")
        from playtester.capture.level_play import engine_args

        for arg in [*self.scenario.args, *engine_args(self.scenario.level, self.rules)]:
            game.add_game_args(arg)
        engine_guard.watch_interrupts()
        before = engine_guard.engine_pids()
        try:
            game.init()
        except Exception as e:  # the engine says why in its own words
            raise UserError(f"game {self.scenario.spec!r} could not start: {e}") from None
        started = {pid: iid for pid, iid in engine_guard.engine_pids().items() if pid not in before}
        self.engine_pid, self.engine_id = next(iter(started.items()), (None, None))
        if self.engine_pid is not None:
            engine_guard.EngineWatchdog.here().watch(self.engine_pid, self.engine_id)
            self._stall.engine = (self.engine_pid, self.engine_id)
        self._cpu_clock = StepCpuClock(self.engine_pid if self.frame_timing else None)
        return game

    def _close_engine(self) -> None:
        """Close the engine (a dead one too), cross it off the watchdog's list, free its memory."""
        game, self.game = self.game, None
        if game is not None:
            try:
                with self._stall.call():  # a dead engine may still hold a lock that close needs
                    game.close()
            except ENGINE_DEATH:
                pass
        if self.engine_pid is not None:
            engine_guard.EngineWatchdog.here().forget(self.engine_pid, self.engine_id)
            engine_guard.remove_shared_memory(self.engine_id)
        self.engine_pid = self.engine_id = None

    def _engine_died(self, error: Exception) -> str | None:
        """The engine is gone: say why. Ctrl-C killed it: raise KeyboardInterrupt, or in a worker
        that leaves Ctrl-C to its run, return None (the run is ending; not a crash)."""
        if engine_guard.interrupted_recently():
            if not engine_guard.parent_handles_interrupts():
                raise KeyboardInterrupt
            self._dead = "interrupted (Ctrl-C)"
            self._close_engine()
            return None
        pid = f"pid {self.engine_pid}, " if self.engine_pid is not None else ""
        self._dead = f"the ViZDoom engine ({pid}{self.scenario.spec}) died: {type(error).__name__}: {error}"
        self._close_engine()
        return self._dead

    def _restart_engine(self) -> None:
        self._close_engine()
        self.game = self._make_engine(self.resolution, visible=self.render_mode == "human" or self.spectator)
        self.restarts += 1
        self._dead = None

    # -- gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self._dead is not None:
            self._restart_engine()
        elif self.game is None:
            raise RuntimeError("this DoomGame is closed")
        try:
            with self._stall.call():
                return self._new_episode(options or {})
        except ENGINE_DEATH as e:  # died while starting the episode: one fresh engine, one more try
            reason = self._engine_died(e)
            self._restart_engine()
            try:
                with self._stall.call():
                    return self._new_episode(options or {})
            except ENGINE_DEATH as again:
                self._engine_died(again)
                raise UserError(f"game {self.scenario.spec!r}: the engine died twice while starting an episode "
                                f"({reason}; then {again})") from None

    def _start_level(self) -> None:
        self.game.new_episode()
        if self.rules == "immortal":  # god mode, and monsters that do not hunt the tester (they crowd round and block the way)
            self.game.send_game_command("god")
            self.game.send_game_command("notarget")

    def _new_episode(self, options: dict[str, Any]):
        self.game.set_seed(int(self.np_random.integers(0, 2**31 - 1)))
        self._start_level()
        self._last: dict[str, Any] = {}
        self._recent_objects: deque[list[dict[str, Any]]] = deque(maxlen=8)
        """The objects in view in the last steps, for what killed the player."""
        self._steps = 0
        self._started = True
        start = self._choose_start(options.get("start"))
        if start is not None:
            x, y, angle = start
            self.game.send_game_command(f"warp {int(round(x))} {int(round(y))}")
            self.game.make_action(self._noop, 1)
            self.face(angle)
        state = self.game.get_state()
        self._cpu_ms = 0.0 if self._cpu_clock.available else None  # no step was played yet
        return self._observe(state), self._info(state, 0.0)

    def _choose_start(self, start: Any) -> tuple[float, float, float] | None:
        """`(x, y, angle)` to start from, or None for the map's own start."""
        layout = self.scenario.layout
        if start is None:
            if layout is None or not self.random_start or not layout.starts:
                return None
            start = int(self.np_random.integers(len(layout.starts)))
        if isinstance(start, (int, np.integer)):
            if layout is None or not (0 <= start < len(layout.starts)):
                n = 0 if layout is None else len(layout.starts)
                raise UserError(f"start {start}: this game has {n} start points")
            s = layout.starts[int(start)]
            return s.x, s.y, float(self.np_random.uniform(0, 360))
        x, y, *rest = start
        return float(x), float(y), float(rest[0]) if rest else float(self.np_random.uniform(0, 360))

    def face(self, angle: float, tolerance: float = 2.0) -> None:
        """Turn on the spot until the view points at `angle` degrees (within a turn tic)."""
        left = self._noop.copy()
        left[self.buttons.index(vzd.Button.TURN_LEFT)] = 1.0
        right = self._noop.copy()
        right[self.buttons.index(vzd.Button.TURN_RIGHT)] = 1.0
        for _ in range(64):
            diff = wrap_angle(angle - self.game.get_game_variable(vzd.GameVariable.ANGLE))
            if abs(diff) <= tolerance:
                break
            tics = max(1, min(8, int(abs(diff) / 3.5)))
            self.game.make_action(left if diff > 0 else right, tics)
            self.game.make_action(self._noop, 2)  # let the turn settle before measuring

    def step(self, action):
        if not self._started:
            raise RuntimeError("call reset() before step()")
        index = int(action)
        if not 0 <= index < len(self._vectors) or index != action:
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        if self._dead is not None:
            raise RuntimeError("the engine died in this episode; call reset() to start a fresh one")
        events = self._use_event(index)
        self._cpu_clock.start()
        t0 = time.perf_counter()
        try:
            with self._stall.call():  # an engine killed at the wrong instant would hang the library
                reward = self.game.make_action(self._vectors[index], self.frame_skip)
                frame_time_ms = (time.perf_counter() - t0) * 1000.0
                self._cpu_ms = self._cpu_clock.stop()
                finished = self.game.is_episode_finished()
                terminated = bool(finished or self.game.is_player_dead())
                if terminated and self.rules is not None:  # the level ended: it starts again in this episode
                    events |= self._level_ended()
                    terminated = finished = False
                state = None if finished else self.game.get_state()
        except ENGINE_DEATH as e:
            reason = self._engine_died(e)
            self._steps += 1
            self._cpu_ms = None
            info = self._info(None, (time.perf_counter() - t0) * 1000.0)
            if reason is None:  # Ctrl-C, which the run's own process is acting on
                return self._frame, 0.0, False, True, info | {"interrupted": True}
            return self._frame, 0.0, True, False, info | {"crashed": True, "crash_reason": reason}
        self._steps += 1
        truncated = bool(self.max_steps is not None and self._steps >= self.max_steps and not terminated)
        return self._observe(state), float(reward), terminated, truncated, self._info(state, frame_time_ms) | events

    def _use_event(self, index: int) -> dict[str, Any]:
        """`{"used": …}` when action `index` presses USE facing a line it works (`level_play.used_line`)."""
        if self.graph is None or not self._uses[index] or "position" not in self._last:
            return {}
        from playtester.capture.level_play import use_event, used_line

        x, y, _ = self._last["position"]
        line = used_line(self.graph, x, y, self._last["angle"])
        return {} if line is None else {"used": use_event(self.graph, line)}

    def _level_ended(self) -> dict[str, Any]:
        """The player died or left the level: say how and where, and start the level again."""
        position = self._last.get("position")
        if self.game.is_player_dead():
            from playtester.capture.level_play import death_cause

            seen = [o for objects in self._recent_objects for o in objects]
            cause = death_cause(self.graph, position, seen) if self.graph and position else "unknown"
            events = {"death": {"position": position, "cause": cause}, "restarted": "death"}
        else:
            events = {"level_exit": {"position": position}, "restarted": "exit"}
        self._start_level()
        return events

    def render(self):
        if self.render_mode == "rgb_array":
            return self._frame.copy()
        return None

    def close(self) -> None:
        if getattr(self, "game", None) is not None or getattr(self, "engine_pid", None) is not None:
            self._close_engine()
        if getattr(self, "_stall", None) is not None:
            self._stall.close()

    # -- observation and telemetry --------------------------------------------------------------
    def _observe(self, state) -> np.ndarray:
        if state is not None and state.screen_buffer is not None:
            self._frame = state.screen_buffer
        return self._frame

    def _info(self, state, frame_time_ms: float) -> dict[str, Any]:
        info: dict[str, Any] = {"step": self._steps}
        if self.frame_timing:
            cpu_ms = getattr(self, "_cpu_ms", None)
            info["frame_wall_ms"] = frame_time_ms
            if cpu_ms is not None:
                info["frame_cpu_ms"] = cpu_ms
            info["frame_time_ms"] = cpu_ms if self.frame_clock == "cpu" and cpu_ms is not None else frame_time_ms
        if state is None:
            return info
        x, y, z, angle, pitch = state.game_variables.tolist()
        info.update(position=(x, y, z), angle=angle % 360.0, pitch=pitch)
        if self.labels:
            info["objects"] = self._objects(state)
            if self.graph is not None:
                self._recent_objects.append(info["objects"])
        self._last = info
        return info

    def _objects(self, state) -> list[dict[str, Any]]:
        """Visible objects with their screen boxes `[x0, y0, x1, y1]` (pixels, end exclusive).

        On the park only OOIs count, each with `ooi`, its ground-truth id. This runs every step,
        so it avoids work: attribute reads once, the OOI found by its exact map position.
        """
        on_park = self.scenario.layout is not None
        objects = []
        for label in state.labels:
            name = label.object_name
            parsed = parse_actor(name)
            if parsed is None:
                if on_park:
                    continue
                parsed = (name, None)
            x, y = label.object_position_x, label.object_position_y
            lx, ly = label.x, label.y
            obj = {
                "id": label.object_id,
                "class": parsed[0],
                "bug": parsed[1],
                "position": (x, y, label.object_position_z),
                "box": [lx, ly, lx + label.width, ly + label.height],
            }
            if on_park or self.graph is not None:
                obj["ooi"] = self._ooi_at.get((round(x), round(y)))
            objects.append(obj)
        return objects

    @property
    def position(self) -> tuple[float, float, float]:
        return tuple(float(self.game.get_game_variable(v)) for v in _VARIABLES[:3])  # type: ignore[return-value]

    @property
    def angle(self) -> float:
        return float(self.game.get_game_variable(vzd.GameVariable.ANGLE)) % 360.0
