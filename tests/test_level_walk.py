"""The level-walk expert's grid and choices on levels drawn by hand (no engine): moves checked line
by line, locked doors and their keys, monsters in the way, doors too thin for a cell, walking on
while turning, and progress toward a far goal."""

from __future__ import annotations

import math

import numpy as np

from playtester.capture.keymap import load_keymap
from playtester.capture.level_graph import LevelGraph
from playtester.capture.level_map import parse_udmf
from playtester.capture import level_walk
from playtester.capture.level_walk import LevelWalker, NavGrid, coverage_cell
from playtester.capture.park.level_builder import DOOR_RAISE, Join, LevelPlan, Room, guarded_corridor_level, level_textmap


def graph_of(plan: LevelPlan) -> tuple[LevelGraph, dict[str, int]]:
    level = parse_udmf("MAP01", level_textmap(plan))
    order = [k for k in plan.rooms if plan.cells(k)]
    return LevelGraph(level), {k: i for i, k in enumerate(order)}


def walker_on(graph: LevelGraph, **kw) -> LevelWalker:
    return LevelWalker(graph, load_keymap("level"), np.random.default_rng(0), jitter=0.0, **kw)


def moves_between(nav: NavGrid, a: int, b: int) -> int:
    src, dst, _ = nav.edges
    sector = nav.sectors[nav.cells[:, 0], nav.cells[:, 1]]
    return int(((sector[src] == a) & (sector[dst] == b)).sum())


def thin_door_level() -> LevelPlan:
    """Rooms a (the start) and b, 64 units wide, with a door D 8 units thick between them."""
    door = Join(special=DOOR_RAISE, args=(0, 32, 100))
    plan = LevelPlan(rows=["#" * 18, "#" + "a" * 8 + "D" + "b" * 7 + "#", "#" * 18], cell=8,
                     rooms={"a": Room(), "D": Room(ceiling=0), "b": Room()}, joins={("a", "D"): door, ("b", "D"): door},
                     start="a")
    plan.rows = [plan.rows[0]] + [plan.rows[1]] * 8 + [plan.rows[2]]
    return plan


def test_a_ledge_is_not_climbed_where_a_step_elsewhere_joins_the_same_two_sectors():
    """a (floor 0) meets c (floor 40) along a ledge and through a step s (20) at the east end: the
    grid walks a → s → c and drops c → a, but never climbs the ledge a → c (two passages in a row
    elsewhere used to count as a move across any line between them)."""
    plan = LevelPlan(rows=["######", "#aaaa#", "#ccas#", "#cccs#", "######"], cell=32,
                     rooms={"a": Room(), "s": Room(floor=20), "c": Room(floor=40)}, start="a")
    graph, s = graph_of(plan)
    nav = NavGrid(graph)
    assert moves_between(nav, s["a"], s["c"]) == 0
    assert moves_between(nav, s["c"], s["a"]) > 0, "the drop from the ledge"
    assert moves_between(nav, s["a"], s["s"]) > 0 and moves_between(nav, s["s"], s["c"]) > 0
    ax, ay = plan.centre(1, 3)
    cx, cy = plan.centre(1, 1)
    dist, _ = nav.routes(nav._node_near(ax, ay))
    ledge = dist[nav._node_near(cx, cy)]
    assert math.isfinite(ledge) and ledge > 8, "round by the step, not over the ledge"


def test_a_locked_door_is_a_wall_until_its_key_is_picked_up():
    locked = Join(special=13, args=(0, 32, 100, 2))  # Door_LockedRaise, lock 2: the blue key
    plan = LevelPlan(rows=["#######", "#aaaDb#", "#######"], rooms={"a": Room(), "D": Room(ceiling=0), "b": Room()},
                     joins={("a", "D"): locked, ("b", "D"): locked}, start="a", things=[(5, "a", {})])
    graph, s = graph_of(plan)
    walker = walker_on(graph)
    (lock, kx, ky), = walker.key_spots
    assert lock == "blue" and walker.nav.shut, "the door's faces stand as walls"
    start, beyond = walker.nav._node_near(*plan.centre(1, 1)), walker.nav._node_near(*plan.centre(5, 1))
    assert not math.isfinite(walker.nav.routes(start)[0][beyond])
    walker._plan(*plan.centre(1, 1))
    assert walker.goal_key == "blue" and walker.route, "cells behind the door are left: it goes for the key"
    walker._pick_up(kx + 20.0, ky - 20.0)
    assert walker.keys == {"blue"} and not walker.nav.shut
    assert math.isfinite(walker.nav.routes(start)[0][beyond])


def test_a_monster_costs_a_detour_but_does_not_wall_a_corridor_off():
    plan = LevelPlan(rows=["#######", "#aaaaa#", "#######"], rooms={"a": Room()}, start="a",
                     things=[(3001, "a", {"x": 160, "y": 96})])  # an imp in the corridor's middle
    graph, _ = graph_of(plan)
    ends = [plan.centre(1, 1), plan.centre(5, 1)]
    with_imp, without = NavGrid(graph), NavGrid(graph, monsters=False)
    costs = [nav.routes(nav._node_near(*ends[0]))[0][nav._node_near(*ends[1])] for nav in (with_imp, without)]
    assert math.isfinite(costs[0]) and costs[0] > costs[1] + 20


def test_cells_past_a_monster_standing_in_the_only_way_are_no_target():
    """Under `immortal` no monster moves and nothing fires: an imp in a 64-unit corridor (the player,
    32 wide, cannot pass its 40) keeps everyone from the room beyond, so those cells are not
    reachable (not the walker's targets, not the report's); in a corridor twice as wide it keeps no
    one; under `play` (monsters move and die) nothing is left out."""
    plan = guarded_corridor_level(1)
    graph, _ = graph_of(plan)
    walker = walker_on(graph)
    beyond = [coverage_cell(walker.bounds, *plan.centre(col, row)) for col, row in ((7, 2), (8, 1))]
    start = coverage_cell(walker.bounds, *plan.centre(2, 2))
    assert all(walker.behind_monsters[cell] and not walker.targets_mask[cell] for cell in beyond)
    assert walker.targets_mask[start] and not walker.behind_monsters[start]
    assert graph.reachable_cells(level_walk.CELL)[beyond[0]], "the graph alone counts the room reachable"
    assert (level_walk.past_monsters(graph, "immortal") == walker.behind_monsters).all()
    assert not level_walk.past_monsters(graph, "play").any()
    assert walker_on(graph, standing=False).targets_mask[beyond[0]], "monsters that move (`play`): the room is a target"
    wide, _ = graph_of(guarded_corridor_level(2))
    assert not walker_on(wide).behind_monsters.any(), "a corridor 128 units wide: the player walks past the imp"


def test_a_door_too_thin_for_a_cell_is_seen_ahead_where_the_route_crosses_its_line():
    graph, s = graph_of(thin_door_level())
    walker = walker_on(graph)
    assert moves_between(walker.nav, s["a"], s["D"]) == 0 and moves_between(walker.nav, s["a"], s["b"]) > 0, \
        "no cell in the door: moves cross it from a to b"
    x, y = 40.0, 40.0
    walker.visited[:, :coverage_cell(walker.bounds, x, y)[1] + 1] = True  # a's cells walked: the next ones lie past the door
    walker._plan(x, y)
    assert walker.route and walker._movers_ahead(x + 16.0, y) == {s["D"]}
    assert walker._movers_ahead(x - 24.0, y, reach=24.0) == set(), "out of reach"


def test_it_walks_on_while_it_turns_round():
    """Facing away from where it goes and standing still, the walker steps back (or sideways)
    toward it; still carried on by its last step, it turns; facing it, it walks forward."""
    plan = LevelPlan(rows=["#####", "#aaa#", "#aaa#", "#####"], rooms={"a": Room()}, start="a")
    graph, _ = graph_of(plan)
    walker = walker_on(graph)
    acts = walker.actions
    walker.track = [(96.0, 96.0), (96.0, 96.0)]
    assert walker._toward({"angle": 0.0}, 180.0) == acts.backward
    assert walker._toward({"angle": 0.0}, 90.0) == acts.strafe_left
    assert walker._toward({"angle": 0.0}, 270.0) == acts.strafe_right
    walker.track = [(96.0, 96.0), (96.0, 140.0)]  # moving north fast
    assert walker._toward({"angle": 0.0}, 90.0) == acts.turn_left
    assert walker._toward({"angle": 88.0}, 90.0) == acts.forward


def test_a_long_walk_through_walked_cells_toward_a_far_goal_is_progress():
    plan = LevelPlan(rows=["#########", "#aaaaaaa#", "#########"], rooms={"a": Room()}, start="a")
    graph, _ = graph_of(plan)
    walker = walker_on(graph)
    walker.route = list(range(10, 20))
    walker.t = 5
    walker._closer()
    assert (walker.closing_on, walker.fewest, walker.last_closer) == (19, 10, 0), "a new goal: nothing gained yet"
    walker.route, walker.t = list(range(12, 20)), 9
    walker._closer()
    assert walker.last_closer == 9
    walker.route, walker.t = list(range(12, 20)), 30
    walker._closer()
    assert walker.last_closer == 9, "no nearer: no progress"


def test_a_pit_with_no_way_back_waits_until_nothing_else_is_left():
    """The pit p (64 units down, no lift: the softlock oracle would end the episode there) is left
    for last: with cells of a still to walk the walker heads for those even where the pit is
    nearer; a pit with a step out of it is walked as any room."""
    for floor, trap in ((-64, True), (-24, False)):
        plan = LevelPlan(rows=["#######", "#aaapp#", "#aaapp#", "#######"], rooms={"a": Room(), "p": Room(floor=floor)},
                         start="a")
        graph, s = graph_of(plan)
        walker = walker_on(graph)
        assert walker._trap(s["p"]) == trap and not walker._trap(s["a"])
        x, y = plan.centre(3, 1)
        walker.visited[:, 2:coverage_cell(walker.bounds, x, y)[1] + 1] = True  # a walked but its west end
        walker._plan(x, y)
        goal = graph.sector_at(*walker.nav.centre(walker.route[-1]))
        assert goal == (s["a"] if trap else s["p"])
        walker.visited[:, :coverage_cell(walker.bounds, x, y)[1] + 1] = True
        walker._plan(x, y)
        assert graph.sector_at(*walker.nav.centre(walker.route[-1])) == s["p"], "nothing else left"


def test_a_door_worked_from_one_side_only_is_a_wall_from_the_other_until_opened():
    """Doom works a line from its front only: a door whose only face opens it from b (E1M2's bars)
    is entered from b, never from a, until the walker has opened it; a door with a face on each
    side is entered from both."""
    door = Join(special=DOOR_RAISE, args=(0, 32, 100))
    for joins, from_a in (({("b", "D"): door}, False), ({("a", "D"): door, ("b", "D"): door}, True)):
        plan = LevelPlan(rows=["#########", "#aaaDbbb#", "#aaaDbbb#", "#########"],
                         rooms={"a": Room(), "D": Room(ceiling=0), "b": Room()}, joins=joins, start="b")
        graph, s = graph_of(plan)
        walker = walker_on(graph)
        a, b = walker.nav._node_near(*plan.centre(1, 1)), walker.nav._node_near(*plan.centre(7, 1))
        assert math.isfinite(walker.nav.routes(b)[0][a]), "through the door from its face's side"
        assert math.isfinite(walker.nav.routes(a)[0][b]) == from_a
        walker.opened.add(s["D"])
        walker._regrid()
        assert math.isfinite(walker.nav.routes(a)[0][b]), "opened: either way"


def test_a_cell_given_up_in_two_episodes_waits_for_last_in_the_next_when_the_walker_remembers():
    plan = LevelPlan(rows=["######", "#aaaa#", "######"], rooms={"a": Room()}, start="a")
    graph, _ = graph_of(plan)
    for remember, waits in ((True, [False, True]), (False, [False, False])):
        walker = walker_on(graph, remember=remember)
        cell = (0, 1)
        for wait in waits:
            walker._give_up(cell)
            walker._give_up(cell)  # twice in one episode counts once
            walker.reset({})
            assert bool(walker.given_up[cell]) == wait


def test_the_walker_does_not_press_use_on_an_exit_switch(monkeypatch):
    """Whatever makes it press USE (a door it expects, being stuck), facing an exit switch within
    reach it turns instead: a tester walking the level does not leave it (a pressed exit restarts
    the level and throws the walk's progress away)."""
    from playtester.capture.experts import _Expert
    from playtester.capture.park.level_builder import EXIT_NORMAL

    plan = LevelPlan(rows=["#####", "#aaa#", "#aaa#", "#####"], rooms={"a": Room()}, start="a",
                     joins={("a", "#"): Join(special=EXIT_NORMAL)})
    graph, _ = graph_of(plan)
    walker = walker_on(graph)
    monkeypatch.setattr(_Expert, "act", lambda self, info: self.use)
    near_wall = {"position": (160.0, 160.0, 0.0), "angle": 90.0}  # 32 units south of the north wall, facing it
    far_from_wall = {"position": (160.0, 160.0, 0.0), "angle": 0.0}  # facing east: the east wall 96 away
    assert walker.act(near_wall) == walker.actions.turn_left
    assert walker.act(far_from_wall) == walker.use, "nothing within reach: USE goes through"


def test_a_switch_pressed_from_below_its_ledge_is_one_the_walker_goes_to():
    """A switch whose own sector the player never stands in (at the back of a ledge too high to
    climb; E1M2's switch 1854 in an 8-unit recess, which opens the bars before 212 cells) is
    pressed from the room below, as the level graph says: the walker counts it among the switches
    it goes to, and once it is pressed the closet behind the door it opens is on the grid. The
    walker used to count only switches whose front sector the graph reached."""
    from test_softlock import ledge_switch_level

    graph, s = graph_of(ledge_switch_level(32))
    walker = walker_on(graph)
    switch = next(i for i, a in enumerate(graph.actions) if a is not None and a.kind == "door")
    assert graph.level.linedefs[switch].front == s["L"] not in graph.reachable() and s["c"] in graph.reachable()
    assert switch in walker.switches

    def closet_routed() -> bool:
        nav = walker.nav
        sector = nav.sectors[nav.cells[:, 0], nav.cells[:, 1]]
        room = int(np.flatnonzero(sector == s["a"])[0])
        return bool(np.isfinite(nav.routes(room)[0][sector == s["c"]]).any())

    assert not closet_routed(), "the door is shut until the switch is pressed"
    walker._set_off(switch)
    assert closet_routed()


def test_stuck_at_a_door_it_turns_to_face_it_so_that_use_opens_it():
    """Stuck against a door it walks into sideways (strafing toward a route that turned), the
    walker turns to face the way instead of strafing on: USE works only what the player faces
    (Freedoom 2 MAP07: 500 steps an episode strafing along a door at x 208, USE pressed facing north)."""
    graph, s = graph_of(thin_door_level())
    walker = walker_on(graph)
    x, y = 40.0, 40.0
    walker.visited[:, :coverage_cell(walker.bounds, x, y)[1] + 1] = True
    walker._plan(x, y)
    x += 16.0
    assert walker._movers_ahead(x, y) == {s["D"]}
    walker.t = walker.last_use = 100  # USE was just pressed
    walker.stuck_steps = 6
    facing_north = {"position": (x, y, 0.0), "angle": 90.0}
    assert walker._unstick(facing_north, x, y) == walker.actions.turn_right, "the door lies east: turn to it"
    assert walker._toward(facing_north, walker._heading(x, y)) == walker.actions.strafe_right, \
        "not stuck, it strafes on while it turns (the test's premise)"


def test_stuck_with_nothing_to_open_ahead_it_gives_its_goal_cell_up():
    plan = LevelPlan(rows=["#########", "#aaaaaaa#", "#########"], rooms={"a": Room()}, start="a")
    graph, _ = graph_of(plan)
    walker = walker_on(graph)
    x, y = plan.centre(1, 1)
    walker.visited[:, :coverage_cell(walker.bounds, x, y)[1] + 1] = True  # the next cells lie east
    walker._plan(x, y)
    goal = walker.goal_cell
    assert goal is not None and walker.route and not walker._movers_ahead(x, y)
    walker.stuck_steps = level_walk.BLOCKED_PATIENCE
    walker._unstick({"position": (x, y, 0.0), "angle": 0.0}, x, y)
    assert walker.given_up[goal] and walker.route == []


def test_a_switch_it_gets_no_nearer_to_counts_as_tried():
    """A switch chased for `GIVE_UP_STEPS` without the route getting shorter is left for the
    episode, as one tried twice is: the walker went on pushing toward one behind a wall the grid
    thought open (MAP07: 500 steps an episode)."""
    from test_softlock import ledge_switch_level

    graph, _ = graph_of(ledge_switch_level(32))
    walker = walker_on(graph)
    switch = next(i for i, a in enumerate(graph.actions) if a is not None and a.kind == "door")
    node = walker._switch_node(switch)
    x, y = walker.nav.centre(int(np.flatnonzero(walker.nav.sectors[walker.nav.cells[:, 0], walker.nav.cells[:, 1]] == 0)[0]))
    start = walker.nav.node_at(x, y)
    _, pred = walker.nav.routes(start)
    walker.goal_switch = switch
    walker._head_for(node, pred, x, y, None)
    assert walker.tries.get(switch, 0) == 0
    walker.t = level_walk.GIVE_UP_STEPS + 1
    walker.goal_switch = switch
    walker._head_for(node, pred, x, y, None)
    assert walker.tries[switch] == level_walk.SWITCH_TRIES


def test_after_setting_off_a_door_that_closes_again_it_makes_for_the_door_first(monkeypatch):
    """A switch that opens a door for a while (open, wait, close): the walker heads through the
    door before the unwalked cells nearer it (Freedoom 2 MAP01's north rooms lie behind a door that
    a walk-over line 500 units away opens for a few seconds; the walker got there by luck before)."""
    from test_softlock import ledge_switch_level

    plan = ledge_switch_level(32)
    graph, s = graph_of(plan)
    switch = next(i for i, a in enumerate(graph.actions) if a is not None and a.kind == "door")
    assert not graph.actions[switch].lasts
    x, y = plan.centre(6, 2)  # the room's east end, by the ledge
    for hurry, into_door in ((level_walk.HURRY_STEPS, True), (0, False)):
        monkeypatch.setattr(level_walk, "HURRY_STEPS", hurry)
        walker = walker_on(graph)
        walker._set_off(switch)
        walker._plan(x, y)
        sectors = {int(walker.nav.sectors[tuple(walker.nav.cells[n])]) for n in walker.route}
        assert (s["D"] in sectors) == into_door, (hurry, sectors)


def test_an_episode_goes_into_a_pit_first_when_the_pit_holds_more_than_the_last_episode_gained():
    """A walker that remembers leaves a pit with no way back for last within an episode, but when
    more of the pit is left to walk than the last episode gained outside it, the next episode goes
    into the pit first (the episode ends there; the next starts outside again). An episode in the
    pit that gained less than the one outside is not tried again."""
    plan = LevelPlan(rows=["##########"] + ["#aaaaappp#"] * 3 + ["##########"],
                     rooms={"a": Room(), "p": Room(floor=-64)}, start="a")
    graph, s = graph_of(plan)
    walker = walker_on(graph, remember=True)
    a_cells = [coverage_cell(walker.bounds, *plan.centre(c, r)) for c, r in plan.cells("a")]
    pit_cells = [coverage_cell(walker.bounds, *plan.centre(c, r)) for c, r in plan.cells("p")]
    assert len(a_cells) == 15 and len(pit_cells) == 9 and walker._trap(s["p"])
    x, y = plan.centre(5, 2)  # the east end of a, beside the pit

    def episode(walked: list[tuple[int, int]]) -> None:
        for cell in walked:
            walker.visited[cell] = True
        walker.t = 1000
        walker.reset({})

    def goal_sector() -> int:
        walker._plan(x, y)
        return graph.sector_at(*walker.nav.centre(walker.route[-1]))

    episode(a_cells[:10])  # gained 10 outside, the pit holds 9: the pit still waits
    assert not walker.into_pits and goal_sector() == s["a"]
    episode(a_cells[10:13])  # gained 3, the pit holds 9: into the pit first, with cells of a left
    assert walker.into_pits and goal_sector() == s["p"]
    episode([])  # the pit episode gained nothing (it never got in): not tried again
    assert not walker.into_pits and goal_sector() == s["a"]
