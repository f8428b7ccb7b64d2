"""Trapped, not just stuck: the softlock oracle (a level's geometry) and the confinement oracle
(pixels alone), on the test levels the level builder draws: a pit, a door a one-use switch opens
that closes behind the player, a one-way teleporter into a sealed room (traps); a one-way drop to
a hall that goes on to the exit, and a pit with a lift back up (no traps).

The oracles' logic on walks given as telemetry first (no engine: cheap), then the real engine:
a scripted walk into each level, the random tester through the command line, and the replay."""

from __future__ import annotations

import json

import numpy as np
import pytest

from playtester.bugs.confinement import BandHistogram, ConfinementOracle
from playtester.bugs.softlock import PATIENCE, WALKED_CELL, SoftlockOracle, softlock_off, softlock_patience
from playtester.capture.level_graph import LevelGraph, LevelState
from playtester.capture.level_map import JUMP_CLIMB, MAX_STEP, parse_udmf
from playtester.capture.park.level_builder import (Join, LevelPlan, Room, level_textmap, level_wad,
                                                   softlock_levels)

LEVELS = softlock_levels()


def graph_of(plan: LevelPlan) -> LevelGraph:
    return LevelGraph(parse_udmf("MAP01", level_textmap(plan)))


def walk(oracle: SoftlockOracle, points: list[tuple[float, float]], *, hold: int = 0, used: dict[int, int] | None = None):
    """Telemetry of a walk through `points` (map units), then `hold` steps circling the last one;
    `used`: step → the line a USE press worked then. The findings, with the step of each."""
    oracle.reset()
    path = list(points) + [(points[-1][0] + 8 * np.cos(t / 3), points[-1][1] + 8 * np.sin(t / 3)) for t in range(hold)]
    out = []
    for t, (x, y) in enumerate(path):
        info = {"position": (x, y, 0.0), "angle": 0.0}
        if used and t in used:
            info["used"] = {"line": used[t], "kind": "door", "sectors": [], "key": None}
        out += [(t, f) for f in oracle.observe(np.zeros((8, 8, 3), np.uint8), info, 0, 0, t)]
    return out


def line_points(a: tuple[float, float], b: tuple[float, float], step: float = 24.0) -> list[tuple[float, float]]:
    n = max(1, int(np.hypot(b[0] - a[0], b[1] - a[1]) // step))
    return [(a[0] + (b[0] - a[0]) * i / n, a[1] + (b[1] - a[1]) * i / n) for i in range(n + 1)]


# -- the graph under what the player did -----------------------------------------------------------

def test_a_one_use_switch_spent_shuts_the_door_it_opened():
    """The door level: from the closet the start is out of reach whatever happened (the switch is
    outside); from the room, the door opens while a wall's switch is unused, and a spent line no
    longer opens it (the room's other walls still do)."""
    graph = graph_of(LEVELS["door"].plan)
    room, door, closet = 0, 1, 2
    assert graph.reachable(room) == {room, door, closet}
    assert graph.reachable(closet) == {closet}, "the switch is on the room's walls"
    switches = [i for i, a in enumerate(graph.actions) if a is not None]
    assert len(switches) > 1 and all(not graph.actions[i].repeat and not graph.actions[i].lasts for i in switches)
    assert graph.reachable(room, LevelState(fired=frozenset(switches[:1]))) == {room, door, closet}
    assert graph.reachable(room, LevelState(fired=frozenset(switches))) == {room}, "every switch spent: shut for good"


def test_a_door_that_stays_open_stays_open_once_its_line_is_spent():
    stays = Join(special=11, args=(5, 32), repeat=False)  # Door_Open(tag 5): opens and stays open
    plan = LevelPlan(rows=["######", "#aaDb#", "######"], rooms={"a": Room(), "D": Room(ceiling=0, tag=5), "b": Room()},
                     joins={("a", "#"): stays}, start="a")
    graph = graph_of(plan)
    every = frozenset(i for i, a in enumerate(graph.actions) if a is not None)
    assert all(graph.actions[i].lasts for i in every)
    assert graph.reachable(2, LevelState(fired=every)) == {0, 1, 2}, "spent, the open door still lets the player back"
    assert graph.reachable(2) == {2}, "not set off, the door is shut and its switches out of reach"


def ledge_switch_level(cell: int) -> LevelPlan:
    """A room `a` (the start) with a ledge `L` 32 units up along its north side, one cell deep; at
    the ledge's back, the face of a solid block `W` along it is a switch of a door `D` (tag 5) to a closet
    `c`. With 32-unit cells the switch lies 48 units from a player against the ledge (within
    Doom's use range of 64), with 64-unit cells 80."""
    return LevelPlan(rows=["#WWWWWW#",
                           "#LLLLLL#",
                           "#aaaaaa#",
                           "#aaaaaa#",
                           "###DD###",
                           "###cc###",
                           "########"],
                     rooms={"a": Room(), "L": Room(floor=32), "D": Room(ceiling=0, tag=5), "c": Room(),
                            "W": Room(floor=32, ceiling=32)},
                     joins={("L", "W"): Join(special=12, args=(5, 32, 280))}, start="a", cell=cell)


def test_a_switch_on_a_ledge_too_high_to_climb_is_pressed_from_below_within_use_range():
    """Doom's use reaches 64 units through any line with room in it: a switch at the back of a
    ledge 32 units up is pressed from the room below when it lies within 64 - 16 (the player's
    radius) of the ledge's edge; farther, the closet stays out of reach (Freedoom MAP03's start
    region: 38 sectors and no exit without this, 225 and the exit with it)."""
    near, far = graph_of(ledge_switch_level(32)), graph_of(ledge_switch_level(64))
    room, door, closet = 0, 2, 3
    assert near.reachable(room) == {room, door, closet}, "switch 32 units behind the edge; the ledge 32 up stays out of reach"
    assert far.reachable(room) == {room}, "switch 64 units behind the edge: 80 from the player's centre"


def test_a_player_over_a_trench_narrower_than_itself_stands_beside_it_not_in_a_pit():
    """Its centre over an 8-unit trench 96 deep, the player's box rests on the floors either side:
    held there well past the patience, no softlock (the trench's own sector has no way out)."""
    row = "#" + "a" * 10 + "t" + "b" * 10 + "#"
    plan = LevelPlan(rows=["#" * len(row), row, row, row, row, "#" * len(row)], cell=8,
                     rooms={"a": Room(), "t": Room(floor=-96), "b": Room()}, start="a")
    graph = graph_of(plan)
    trench = 1
    assert graph.narrow >= {trench} and graph.reachable(trench) == {trench}
    assert walk(SoftlockOracle(graph), [(60, 24)] + [(92, 24)] * (3 * PATIENCE)) == []


def test_a_jump_climbs_60_units_and_no_more():
    """Built ledges in the engine: with a running start a jump gets onto 60 units, not 64
    (docs/benchmarks/softlock.md); a step is 24."""
    for depth, climbed in ((48, True), (60, True), (64, False), (96, False)):
        plan = LevelPlan(rows=["#####", "#aap#", "#####"], rooms={"a": Room(), "p": Room(floor=-depth)}, start="a")
        graph = graph_of(plan)
        assert (0 in graph.reachable(1, LevelState(climb=JUMP_CLIMB))) == climbed, depth
        assert 0 not in graph.reachable(1, LevelState(climb=MAX_STEP))


def test_what_doom_specials_leave_behind():
    """By hand from Doom's line specials: 1 (DR) and 29 (S1) doors close again, 103 (S1) and 31 (D1)
    stay open; 3 (W1) closes a door for good, 16 (W1) opens it again after 30 s; floors stay moved;
    62 (SR) is a lift that comes back up; Boom's generalised door 0x3C00 + kind 1 << 5 stays open."""
    from playtester.capture.level_specials import describe

    lasts = {n: describe(n).lasts for n in (1, 29, 103, 31, 3, 16, 38, 62)}
    assert lasts == {1: False, 29: False, 103: True, 31: True, 3: True, 16: False, 38: True, 62: False}
    assert describe(0x3C00 | (1 << 5)).lasts and not describe(0x3C00).lasts and describe(0x3C00 | (3 << 5)).kind == "close"


def test_a_walk_over_line_that_shuts_the_door_behind_is_found_and_named():
    """An open door, then a hall whose far end has a walk-over Door_Close line: crossing it shuts the
    door for good (its positions crossed the line: no USE press says so)."""
    close = Join(special=10, args=(5, 32), use=False, repeat=False)  # Door_Close(tag 5), walked over
    plan = LevelPlan(rows=["#########", "#aaDbbww#", "#########"],
                     rooms={"a": Room(), "D": Room(tag=5), "b": Room(), "w": Room()}, joins={("b", "w"): close}, start="a")
    graph = graph_of(plan)
    line = next(i for i, a in enumerate(graph.actions) if a is not None)
    assert graph.actions[line].kind == "close" and graph.actions[line].lasts
    assert graph.reachable(3, LevelState(fired=frozenset({line}))) == {2, 3} and graph.reachable(3) == {0, 1, 2, 3}
    oracle = SoftlockOracle(graph, climb=JUMP_CLIMB)
    found = walk(oracle, line_points((96.0, 96.0), (416.0, 96.0)), hold=PATIENCE)
    assert len(found) == 1 and f"the only way out: the door (sector 1) was shut for good by line {line} at step" in found[0][1].message
    assert str(line) in found[0][1].details["fired"] and found[0][1].details["region"] == [2, 3]


# -- the softlock oracle on walks given as telemetry -----------------------------------------------

def test_the_pit_is_a_softlock_with_its_depth_and_the_lift_pit_is_not():
    pit, lift = (SoftlockOracle(graph_of(LEVELS[k].plan), climb=JUMP_CLIMB) for k in ("pit", "lift"))
    into = line_points((96.0, 352.0), (416.0, 224.0))
    found = walk(pit, into, hold=PATIENCE + 5)
    assert len(found) == 1
    t, f = found[0]
    entered = f.details["entered"]["step"]
    assert f.kind == "softlock" and f.details["new_start"] and t == f.details["trapped_since"] + PATIENCE - 1
    assert "no way up from a pit 96 units deep" in f.message and f.details["depth"] == 96
    assert f.details["region"] == [1] and f.details["trapped_since"] == entered
    assert walk(lift, into, hold=3 * PATIENCE) == [], "the lift's switch, below, brings the player back up"
    assert walk(pit, into[:3], hold=3 * PATIENCE) == [], "wandering the room above is no softlock"


def test_the_episode_ends_once_the_trap_is_walked_not_at_the_finding():
    """In the pit (cells 368–464 × 176–272), a player that stands still is sent to a new start at
    the finding; one that walks on along the pit's walls after the finding, into cells it had not
    been in, is sent once it has been in no new cell for the patience. Walking the same way again
    in a later episode ends at the finding (the cells are new to the run no more)."""
    pit = SoftlockOracle(graph_of(LEVELS["pit"].plan), climb=JUMP_CLIMB)
    into = line_points((96.0, 352.0), (416.0, 224.0))
    found = walk(pit, into, hold=PATIENCE + 5)
    assert len(found) == 1 and pit.ends_episode
    corner = [(368.0, 176.0)] * (PATIENCE - 30) + line_points((368.0, 176.0), (464.0, 176.0), step=4.0) \
        + line_points((464.0, 176.0), (464.0, 272.0), step=4.0)  # a new cell every 16-24 steps
    path = into + corner + [(464.0, 272.0)] * 2 * PATIENCE
    walked: set[tuple[int, int]] = {(int(x // WALKED_CELL), int(y // WALKED_CELL)) for x, y in into + [(416.0, 224.0)]}
    last_new = max(t for t, (x, y) in enumerate(path) if (int(x // WALKED_CELL), int(y // WALKED_CELL)) not in walked
                   and not walked.add((int(x // WALKED_CELL), int(y // WALKED_CELL))))

    def ends_of(oracle: SoftlockOracle) -> tuple[int, int]:
        """The step of the finding and the first step the oracle ends the episode at."""
        oracle.reset()
        reported, ends = None, []
        for t, (x, y) in enumerate(path):
            if oracle.observe(np.zeros((8, 8, 3), np.uint8), {"position": (x, y, 0.0), "angle": 0.0}, 0, 0, t):
                reported = t
            ends.append(oracle.ends_episode)
        return reported, ends.index(True)

    reported, ended = ends_of(pit)
    assert reported < last_new and ended == last_new + PATIENCE - 1, (reported, last_new, ended)
    reported, ended = ends_of(pit)
    assert ended == reported, "walked before: the episode ends at the finding"


def test_leaving_before_the_patience_is_spent_is_no_finding():
    """A player that stands in the closet while the door is still open and walks out is not trapped."""
    oracle = SoftlockOracle(graph_of(LEVELS["door"].plan), climb=JUMP_CLIMB)
    closet, room = (320.0, 96.0), (320.0, 352.0)
    there = line_points(room, closet)
    back = [closet] * (oracle.patience - 10) + line_points(closet, room)
    assert walk(oracle, there + back, hold=10) == []
    assert oracle.trapped(1) is None, "standing in the door, both sides are open to it (a door does not close on the player)"


def test_the_door_closed_for_good_names_its_spent_switch():
    graph = graph_of(LEVELS["door"].plan)
    oracle = SoftlockOracle(graph, climb=JUMP_CLIMB)
    assert oracle.patience == softlock_patience(graph) > PATIENCE, "its door stays open 280 tics: longer than the default"
    north_wall = next(i for i, a in enumerate(graph.actions) if a is not None and graph.line_ends[i][1] == graph.line_ends[i][3] == 448)
    path = line_points((96.0, 416.0), (320.0, 416.0)) + line_points((320.0, 416.0), (320.0, 96.0))
    found = walk(oracle, path, hold=oracle.patience, used={3: north_wall})
    assert len(found) == 1
    f = found[0][1]
    assert f"closed for good: line {north_wall} of one use was set off at step 3" in f.message
    assert f.details["fired"] == {str(north_wall): 3} and f.details["region"] == [2]


def test_a_start_whose_region_holds_most_of_the_level_is_no_trap_even_with_no_exit_in_reach(monkeypatch):
    """Freedoom 2 MAP01's exit switch lies beyond a way the graph does not model: with the exit out
    of the graph's reach but most of the level in the start's region, the start is no trap (it was
    called one in every run on MAP01 before)."""
    graph = graph_of(softlock_levels()["drop"].plan)
    assert graph.exits and graph.exit_within(graph.reachable()) is not None
    start = graph.start()[:2]
    assert walk(SoftlockOracle(graph, climb=JUMP_CLIMB), [start], hold=5) == []
    monkeypatch.setattr(LevelGraph, "exit_within", lambda self, sectors, keys=frozenset(): None)
    assert walk(SoftlockOracle(graph, climb=JUMP_CLIMB), [start], hold=5) == []


def test_a_start_inside_a_trap_is_said_once():
    plan = softlock_levels()["pit"].plan
    plan.start = "p"
    oracle = SoftlockOracle(graph_of(plan), climb=JUMP_CLIMB)
    pit = [(352.0, 224.0), (380.0, 224.0)]
    found = walk(oracle, pit, hold=2 * PATIENCE) + walk(oracle, pit, hold=5)
    assert [f.details.get("at_start") for _, f in found] == [True], "one line, in the first episode only"
    assert "the player starts inside a trap: only 20% of the level's walkable area" in found[0][1].message, "9 of 45 cells"


def test_a_level_whose_start_lies_in_no_sector_turns_the_oracle_off_with_why(tmp_path):
    plan = LevelPlan(rows=["####", "#aa#", "####"], rooms={"a": Room()}, start=None,
                     things=[(1, "a", {"x": -500, "y": -500})])
    wad = tmp_path / "outside.wad"
    wad.write_bytes(level_wad(plan))
    line = softlock_off(f"doom:wad:{wad}")
    assert line.startswith("the softlock oracle is off: map MAP01: its player start (-500, -500) lies outside every sector")
    assert softlock_off("gym:CartPole-v1") is None


# -- the confinement oracle on frames --------------------------------------------------------------

def _frame(view: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A view of its own: each quarter of the frame, top to bottom, at the middle of grey-level bin
    `view[i]` of 8, with some noise, and a bar that moves left and right (so the picture changes
    every step while each band's grey levels stay)."""
    rows = np.repeat(16 + 32 * np.asarray(view), 12)[:, None]
    f = np.clip(rng.normal(rows, 3, (48, 64)), 0, 255).astype(np.uint8)
    f[:, rng.integers(0, 60):][:, :4] = 128
    return np.repeat(f[..., None], 3, axis=2)


BEFORE = [(i, 0, 0, 0) for i in range(6)]  # six views of the level
TRAP = [(7, 7, 7, j) for j in range(3)]  # three views never seen before


def _feed(oracle: ConfinementOracle, views: list[tuple[int, ...]], seed: int = 0) -> list[tuple[int, object]]:
    rng = np.random.default_rng(seed)
    oracle.reset()
    return [(t, f) for t, v in enumerate(views) for f in oracle.observe(_frame(v, rng), {}, t % 5, 0, t)]


def test_confinement_after_a_one_way_trip_is_possibly_trapped():
    """Many views, then a few new ones only, for a whole window: possibly trapped, once, when the
    window holds no step of a view first seen within it."""
    oracle = ConfinementOracle(window=60, min_before=3)
    before = [BEFORE[t // 10 % 6] for t in range(120)]
    trapped = [TRAP[t % 3] for t in range(150)]
    found = _feed(oracle, before + trapped)
    assert len(found) == 1
    t, f = found[0]
    assert f.kind == "confined" and "possibly trapped" in f.message
    assert t == 122 + 60, "the three new views are first seen at steps 120-122; then a whole window with none new"
    assert f.details["since"] == 120 and f.details["places_before"] == 6 and len(f.details["places"]) == 3
    assert _feed(oracle, trapped + trapped) == [], "the episode started there: no trip into it"


def test_confinement_allows_a_glimpse_but_not_a_return():
    """An old view for 1 step in 40 (under `old_share`, 10 %) is a glimpse: still trapped; for 1 step
    in 5 the level comes back: not trapped. A new view every 10 steps: the views still grow."""
    oracle = ConfinementOracle(window=60, min_before=3)
    before = [BEFORE[t // 10 % 6] for t in range(120)]
    glimpse = [BEFORE[0] if t % 40 == 39 else TRAP[t % 3] for t in range(200)]
    assert [f.details["since"] for _, f in _feed(oracle, before + glimpse)] == [120]
    back = [BEFORE[0] if t % 5 == 4 else TRAP[t % 3] for t in range(200)]
    assert _feed(oracle, before + back) == []
    growing = [(6, t // 10 % 8, t // 80, 7) if t % 10 == 0 else TRAP[t % 3] for t in range(240)]
    assert _feed(oracle, before + growing) == []
    many = [(7, 7, t % 4, t // 4 % 4) for t in range(200)]  # 16 views: more than max_places 8
    assert _feed(ConfinementOracle(window=60, min_before=3, max_places=8), before + many) == []
    assert len(_feed(ConfinementOracle(window=60, min_before=3, max_places=16), before + many)) == 1


def test_confinement_needs_moving_varied_input():
    oracle = ConfinementOracle(window=30, min_before=2)
    rng = np.random.default_rng(0)
    frozen = _frame(TRAP[0], rng)
    oracle.reset()
    found = []
    for t in range(100):
        f = _frame(BEFORE[t // 10 % 5], rng) if t < 50 else frozen
        found += oracle.observe(f, {}, t % 5, 0, t)
    assert found == [], "a picture that does not change is the stuck oracle's"


def test_band_histograms_keep_where_the_view_was_taken_but_not_where_it_looks():
    """By hand: a frame dark above and light below (a room: ceiling and floor) puts a quarter of
    its unit vector's weight, 0.5, in bin 0 of bands 0 and 1 and bin 7 of bands 2 and 3; upside
    down (the same grey levels: one histogram of the frame cannot tell them apart) it shares
    none of them. A turn (the picture scrolled sideways) does not move it."""
    embed = BandHistogram()
    room = np.zeros((120, 160), np.uint8)
    room[60:] = 255
    expected = np.zeros(32, np.float32)
    expected[[0, 8, 23, 31]] = 0.5
    assert np.allclose(embed(room), expected)
    assert embed(room) @ embed(room[::-1]) == 0.0
    rng = np.random.default_rng(0)
    view = np.repeat(np.clip(rng.normal(np.linspace(40, 220, 120)[:, None], 20, (120, 160)), 0, 255).astype(np.uint8)[..., None], 3, 2)
    assert 1 - embed(view) @ embed(np.roll(view, 40, axis=1)) < embed.threshold < 1 - embed(view) @ embed(view[::-1])


# -- the real engine -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def wads(tmp_path_factory):
    root = tmp_path_factory.mktemp("softlock")
    out = {}
    for name, level in LEVELS.items():
        out[name] = root / f"{name}.wad"
        out[name].write_bytes(level_wad(level.plan))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name, why", [("pit", "no way up from a pit 96 units deep (dropped 96 units into it"),
                                       ("door", "closed for good: line"),
                                       ("teleport", "a one-way teleporter (line"),
                                       ("drop", None), ("lift", None)])
def test_a_scripted_walk_finds_every_trap_and_nothing_else(name, why, wads):
    """The bar, by the scripted walk: each trap found, with its place and cause; the drop to the
    exit (which the walk takes) and the pit with a lift (which the walk rides up) stay silent."""
    from playtester.bugs.softlock import softlock_oracle
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import WaypointWalk

    env = make_game(f"doom:wad:{wads[name]}")
    try:
        game = env.unwrapped
        oracle = softlock_oracle(game.graph, game.keymap)
        walk = WaypointWalk(game.keymap, list(LEVELS[name].walk))
        _, info = env.reset(seed=0)
        found, sectors, restarted = [], [], False
        for t in range(900):
            a = walk.act(info)
            if a is None or found or (1 in sectors and sectors[-60:] == [0] * 60):  # back in the room above a while
                break
            _, _, _, _, info = env.step(a)
            found += oracle.observe(None, info, a, 0, t)
            sectors.append(game.graph.sector_at(*info["position"][:2]))
            restarted |= bool(info.get("restarted"))
        if why is None:
            assert found == [] and sectors[-60:] == [0] * 60, "no finding, down there and back in the room above"
            assert restarted == (name == "drop"), "the drop's walk left by the exit, the lift's rode the lift"
        else:
            assert len(found) == 1 and why in found[0].message, found
            assert found[0].details["region"] == [1 if name == "pit" else 2] and sectors[-1] in found[0].details["region"]
    finally:
        env.close()


@pytest.mark.slow
def test_the_engine_presses_the_ledge_switch_from_below_as_the_graph_says(tmp_path):
    """The graph's use reach, checked in the real engine: facing the ledge from the start and
    pressing USE opens the door when the switch is 48 units away (the walk then enters the
    closet), not when it is 80."""
    from conftest import walk_built_level

    for cell, opens in ((32, True), (64, False)):
        k = cell // 32
        graph, infos = walk_built_level(tmp_path / f"ledge{cell}.wad", ledge_switch_level(cell),
                                        [("face", 90), ("forward", 10), ("use",), ("wait", 30),
                                         ("go", 128 * k, 80 * k), ("go", 128 * k, 48 * k)])
        used = [info["used"] for info in infos if info.get("used")]
        sectors = {graph.sector_at(*info["position"][:2]) for info in infos}
        assert bool(used) == opens and (3 in sectors) == opens == (3 in graph.reachable(0)), (cell, used)


@pytest.mark.slow
def test_the_pixel_only_oracle_finds_the_pit_from_frames_alone(wads):
    """The bar, from pixels: the pit's scripted walk seen by the confinement oracle only (frames and
    actions; the telemetry only says, here, when the walk entered the pit): possibly trapped, after
    the entry, with the trip starting then."""
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import WaypointWalk

    env = make_game(f"doom:wad:{wads['pit']}")
    try:
        game = env.unwrapped
        oracle = ConfinementOracle()
        walk = WaypointWalk(game.keymap, list(LEVELS["pit"].walk))
        frame, info = env.reset(seed=0)
        found, entry = [], None
        for t in range(700):
            a = walk.act(info)
            if a is None or found:
                break
            frame, _, _, _, info = env.step(a)
            if entry is None and game.graph.sector_at(*info["position"][:2]) == 1:
                entry = t
            found += [(t, f) for f in oracle.observe(frame, {}, a, 0, t)]
        assert len(found) == 1 and entry is not None, (entry, found)
        t, f = found[0]
        assert entry + oracle.window <= t < 700 and entry <= f.details["since"] < entry + 60, (entry, t, f.details["since"])
    finally:
        env.close()


@pytest.mark.slow
def test_the_random_tester_is_sent_to_a_new_start_after_a_softlock_and_the_finding_replays(wads, tmp_path, capsys):
    """`run explore --explorer random` on the teleporter level: the softlock ends its episode once
    the player has been in no cell new to the run for the oracle's patience (the sealed room walked
    first; the next episode starts again), the report lists it on the level's map, and the finding
    plays again frame for frame."""
    from playtester.bugs.findings import replay_finding
    from playtester.cli import main

    out = tmp_path / "run"
    assert main(["run", "explore", "--game", f"doom:wad:{wads['teleport']}", "--explorer", "random", "--episodes", "2",
                 "--steps", "160", "--seed", "0", "--out", str(out)]) == 0
    findings = [json.loads(p.read_text()) | {"folder": p.parent} for p in sorted(out.glob("findings/*/finding.json"))]
    softlocks = [f for f in findings if f["kind"] == "softlock"]
    assert softlocks and "a one-way teleporter (line" in softlocks[0]["message"]
    first = softlocks[0]
    steps = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    ended = max(r["t"] for r in steps if r["episode"] == first["episode"])
    walked, new_at = set(), {}
    for r in steps:  # the step of each episode at which the player was last in a cell new to the run
        cell = (int(r["position"][0] // WALKED_CELL), int(r["position"][1] // WALKED_CELL))
        if cell not in walked:
            walked.add(cell)
            new_at[r["episode"], r["t"]] = True
    last_new = max(t for (e, t) in new_at if e == first["episode"] and t <= ended)
    due = max(first["step"], last_new + PATIENCE - 1)
    assert ended == due < 159, "the episode ended once the trap was walked"
    assert {r["episode"] for r in steps} == {0, 1}, "and the run went on from a new start"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["level"]["softlocks"][0]["region"] == [2] and summary["findings"]["softlock"] == len(softlocks)
    assert summary["softlock_oracle"].startswith("by the level's geometry")
    page = (out / "report.html").read_text()
    assert "Softlocks (" in page and "a softlock: the sectors the player was trapped in" in page
    result = replay_finding(first["folder"])
    assert result.steps == first["steps"] and result.compared > 0 and result.identical == result.compared


@pytest.mark.slow
def test_a_level_whose_geometry_cannot_be_read_plays_and_the_oracle_says_it_is_off_once(tmp_path, capsys):
    """A UDMF map with a hexadecimal height (valid UDMF; this reader takes decimal numbers only): the
    engine plays it, and the softlock oracle says in one line that it is off, and why."""
    from playtester.capture.park.level_builder import softlock_levels
    from playtester.capture.park.wad import pwad
    from playtester.cli import main

    text = level_textmap(softlock_levels()["pit"].plan).replace("heightceiling = 160;", "heightceiling = 0xA0;", 1)
    wad = tmp_path / "hex.wad"
    wad.write_bytes(pwad([("MAP01", b""), ("TEXTMAP", text.encode("ascii")), ("ENDMAP", b"")]))
    out = tmp_path / "run"
    assert main(["run", "explore", "--game", f"doom:wad:{wad}", "--explorer", "random", "--episodes", "2", "--steps", "5",
                 "--out", str(out)]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "softlock oracle is off" in line]
    assert len(said) == 1 and "its geometry could not be read (ValueError" in said[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["softlock_oracle"].startswith("the softlock oracle is off") and summary["steps"] == 10
