"""Where a player can go on a level: the sector graph read from a built WAD's geometry, against
levels drawn by hand for each rule (steps, drops, doors, lifts, keys, switches, teleporters)."""

from __future__ import annotations

import numpy as np
import pytest

from playtester.capture.level_graph import DOOR_PASSAGE, DROP, LIFT_PASSAGE, TELEPORT, WALK, LevelGraph
from playtester.capture.level_map import parse_udmf
from playtester.capture.park.level_builder import (DOOR_RAISE, PLAT_DOWN_WAIT_UP_STAY, LevelPlan, Join, Room,
                                                   door_lift_hom_level, level_textmap)

DOOR = Join(special=DOOR_RAISE, args=(0, 32, 100))


def graph_of(plan: LevelPlan) -> tuple[LevelGraph, dict[str, int]]:
    """The graph of a plan, and each room's sector index by its character."""
    level = parse_udmf("MAP01", level_textmap(plan))
    order = [k for k in plan.rooms if plan.cells(k)]
    return LevelGraph(level), {k: i for i, k in enumerate(order)}


def kinds(graph: LevelGraph, a: int, b: int) -> set[str]:
    return {p.kind for p in graph.passages() if (p.source, p.target) == (a, b)}


def test_steps_up_to_24_units_are_walked_and_higher_ledges_are_one_way_drops():
    plan = LevelPlan(rows=["######", "#abcp#", "######"],
                     rooms={"a": Room(), "b": Room(floor=24), "c": Room(floor=56), "p": Room(floor=-64)}, start="a")
    graph, s = graph_of(plan)
    assert kinds(graph, s["a"], s["b"]) == {WALK} and kinds(graph, s["b"], s["a"]) == {WALK}
    assert kinds(graph, s["b"], s["c"]) == set(), "32 units up is no step"
    assert kinds(graph, s["c"], s["b"]) == {DROP}
    assert graph.reachable() == {s["a"], s["b"]}, "the ledge c (and the pit beyond it) cannot be climbed to"
    assert graph.can_return(s["c"]), "from the ledge the player drops back to the start"
    assert kinds(graph, s["c"], s["p"]) == {DROP} and not graph.can_return(s["p"]), "the pit is a dead end"


def test_a_low_ceiling_stops_the_player():
    plan = LevelPlan(rows=["#####", "#abc#", "#####"], rooms={"a": Room(), "b": Room(ceiling=50), "c": Room()}, start="a")
    graph, s = graph_of(plan)
    assert graph.reachable() == {s["a"]}


def test_a_door_opened_by_hand_lets_the_player_through():
    plan = LevelPlan(rows=["#####", "#aDb#", "#####"], rooms={"a": Room(), "D": Room(ceiling=0), "b": Room()},
                     joins={("a", "D"): DOOR, ("b", "D"): DOOR}, start="a")
    graph, s = graph_of(plan)
    assert [d.sector for d in graph.doors] == [s["D"]] and graph.doors[0].manual
    assert kinds(graph, s["a"], s["D"]) == {DOOR_PASSAGE}
    assert graph.reachable() == {s["a"], s["D"], s["b"]}
    shut = LevelPlan(rows=plan.rows, rooms=plan.rooms, start="a")  # the same door sector without its special
    assert graph_of(shut)[0].reachable() == {0}


def test_a_locked_door_opens_only_once_its_key_is_reachable():
    locked = Join(special=13, args=(0, 32, 100, 2))  # Door_LockedRaise, lock 2: the blue key
    rooms = {"a": Room(), "D": Room(ceiling=0), "b": Room()}
    joins = {("a", "D"): locked, ("b", "D"): locked}
    without = LevelPlan(rows=["#####", "#aDb#", "#####"], rooms=rooms, joins=joins, start="a")
    graph, s = graph_of(without)
    assert graph.doors[0].key == "blue" and graph.reachable() == {s["a"]}
    with_key = LevelPlan(rows=without.rows, rooms=rooms, joins=joins, start="a", things=[(5, "a", {})])  # a blue keycard
    assert graph_of(with_key)[0].reachable() == {0, 1, 2}


def test_a_switch_opens_a_door_elsewhere_once_the_player_reaches_it():
    switch = Join(special=DOOR_RAISE, args=(7, 32, 100))  # on a wall of a: opens the doors tagged 7
    plan = LevelPlan(rows=["######", "#aaDb#", "######"],
                     rooms={"a": Room(), "D": Room(ceiling=0, tag=7), "b": Room()}, joins={("a", "#"): switch}, start="a")
    graph, s = graph_of(plan)
    assert not graph.doors[0].manual and graph.reachable() == {s["a"], s["D"], s["b"]}


def test_the_test_level_every_room_reachable_through_the_door_and_up_the_lift():
    graph, s = graph_of(door_lift_hom_level())
    assert graph.reachable() == set(s.values())
    assert kinds(graph, s["b"], s["L"]) == {LIFT_PASSAGE} and kinds(graph, s["L"], s["c"]) == {WALK}
    assert kinds(graph, s["c"], s["b"]) == {DROP}
    cells = graph.reachable_cells(64.0)
    assert cells.sum() == graph.level.walkable_cells(64.0).sum() > 40


def test_a_lift_without_its_special_leaves_the_gallery_unreachable():
    plan = door_lift_hom_level()
    plan.joins = {k: v for k, v in plan.joins.items() if v.special != PLAT_DOWN_WAIT_UP_STAY}
    graph, s = graph_of(plan)
    assert s["c"] not in graph.reachable() and s["L"] not in graph.reachable()
    assert 0 < graph.reachable_cells(64.0).sum() < graph.level.walkable_cells(64.0).sum()


def test_a_teleporter_leads_to_its_destination_and_is_one_way():
    tele = Join(special=70, args=(0, 3), use=False)  # Teleport(tid 0, sector tag 3), walked over
    plan = LevelPlan(rows=["######", "#aT#b#", "######"],
                     rooms={"a": Room(), "T": Room(), "b": Room(tag=3)}, joins={("a", "T"): tele}, start="a",
                     things=[(14, "b", {})])  # the teleport destination in b
    graph, s = graph_of(plan)
    assert kinds(graph, s["a"], s["b"]) == {TELEPORT}
    assert graph.reachable() == {s["a"], s["T"], s["b"]}
    assert not graph.can_return(s["b"])


def test_a_part_of_a_reachable_sector_no_passage_enters_holds_no_reachable_cell():
    """One sector in two parts (a monster closet drawn as part of a room, as MAP07's 159 and 190):
    the player drops from h into l's first part; l's closet, walled off by rock, is in a reachable
    sector but no passage enters it. A sealed room reached only by a teleporter still counts."""
    tele = Join(special=70, args=(0, 3), use=False)
    plan = LevelPlan(rows=["############", "#hhhlll#l#b#", "#hhhlll#l#b#", "#TT#########", "############"],
                     rooms={"h": Room(), "l": Room(floor=-64), "T": Room(), "b": Room(tag=3)},
                     joins={("h", "T"): tele}, start="h", things=[(14, "b", {})])
    graph, s = graph_of(plan)
    assert kinds(graph, s["h"], s["l"]) == {DROP} and graph.reachable() == set(s.values())
    cells = graph.reachable_cells(64.0)
    x0, y0 = graph.level.bounds[:2]

    def counted(room: str) -> list[bool]:
        return [bool(cells[int((y - y0) // 64), int((x - x0) // 64)]) for x, y in (plan.centre(c, r) for c, r in plan.cells(room))]

    l_parts = counted("l")
    assert l_parts == [True, True, True, False, True, True, True, False]  # row by row from the north-west: the closet last in each row
    assert all(counted("h")) and all(counted("b")), "the drop's foot and the teleporter's room are entered"


def test_passages_join_through_a_sector_with_no_point_to_stand_on_beside_their_lines():
    """Rooms a and b either side of a sector D 16 units across: with D's standable points taken
    away, a and b are parts that do not touch, and the passages a → D → b still lead from a to b
    (through D itself, as through a door's thickness)."""
    plan = LevelPlan(rows=["###########", *["#aaaaDbbbb#"] * 4, "###########"], cell=16,
                     rooms={"a": Room(), "D": Room(), "b": Room()}, start="a")
    graph, s = graph_of(plan)
    keep = np.ones(len(graph.level.sectors) + 1, dtype=bool)
    keep[-1] = False
    sector = graph._stand_points[2]
    stand = graph.standable(keep) & (sector != s["D"])
    entered = graph.entered(stand)
    assert (entered & (sector == s["a"])).any() and (entered & (sector == s["b"])).any()
    alone = stand & (sector != s["b"])  # b's points gone as well: nothing of b is entered
    assert not (graph.entered(alone) & (sector == s["b"])).any()


@pytest.mark.parametrize("x, y, inside", [(96.0, 96.0, True), (-300.0, -300.0, False), (2000.0, 96.0, False)])
def test_points_are_placed_in_their_sectors(x, y, inside):
    graph, _ = graph_of(LevelPlan(rows=["####", "#aa#", "####"], rooms={"a": Room()}, start="a"))
    assert (graph.sector_at(x, y) is not None) == inside


def test_a_cell_counts_reachable_only_where_the_players_centre_can_stand_in_it():
    """A room 80 units wide: its east 64-unit cell is a quarter walkable (a 16-unit strip), but the
    player's centre keeps 16 units from the wall, so no more than the cell's edge: not a cell a
    player can be in. A corridor 32 units wide keeps its cells (its middle is 16 from each wall)."""
    room = LevelPlan(rows=["#######", "#aaaaa#", "#aaaaa#", "#aaaaa#", "#aaaaa#", "#######"], cell=16,
                     rooms={"a": Room()}, start="a")
    graph, _ = graph_of(room)
    assert graph.level.walkable_cells(64.0).sum() == 2 and graph.reachable_cells(64.0).sum() == 1
    corridor = LevelPlan(rows=["####", *["#aa#"] * 8, "####"], cell=16, rooms={"a": Room()}, start="a")
    graph, _ = graph_of(corridor)
    assert graph.reachable_cells(64.0).sum() == graph.level.walkable_cells(64.0).sum() == 2


def test_no_passage_through_an_opening_narrower_than_the_player():
    """Rooms a and b meet only across a gap in a wall: 16 units lets no player through, 32 does."""
    for gap, through in ((2, False), (4, True)):
        wall = "#" * 4 + "b" * gap + "#" * (10 - gap)
        plan = LevelPlan(rows=["#" * 14, *["#aaaaaaaaaaaa#"] * 4, "#" + wall[:12] + "#", *["#bbbbbbbbbbbb#"] * 4, "#" * 14],
                         cell=8, rooms={"a": Room(), "b": Room()}, start="a")
        graph, s = graph_of(plan)
        assert (s["b"] in graph.reachable()) == through


def test_a_key_a_standing_monster_covers_cannot_be_picked_up_under_immortal():
    """MAP10's red key lies under a cacodemon: under `immortal` (guards) it stands there for good and
    the door the key opens stays shut; a monster beside the key leaves it to be picked up."""
    locked = Join(special=13, args=(0, 32, 100, 2))  # Door_LockedRaise, lock 2: the blue key
    for offset, lying in ((8, False), (60, True)):
        plan = LevelPlan(rows=["########", "#aaaaDb#", "#aaaa#b#", "########"],
                         rooms={"a": Room(), "D": Room(ceiling=0), "b": Room()},
                         joins={("a", "D"): locked, ("b", "D"): locked}, start="a",
                         things=[(5, "a", {"x": 96, "y": 96}), (3005, "a", {"x": 96 + offset, "y": 96})])
        level = parse_udmf("MAP01", level_textmap(plan))
        assert len(LevelGraph(level).keys_lying()) == 1
        guarded = LevelGraph(level, guards=True)
        assert len(guarded.keys_lying()) == int(lying)
        assert (len(guarded.reachable()) == 3) == lying


def trench_level(width_cells: int) -> LevelPlan:
    """Two rooms `a` and `b` on one floor with a trench `t` 96 units deep between them,
    `width_cells` 8-unit cells wide, walled at both ends; the start `s` is one cell in the middle
    of `a`, at (44, 44)."""
    row = "#" + "a" * 10 + "t" * width_cells + "b" * 10 + "#"
    rows = [row] * 10
    rows[4] = row[:5] + "s" + row[6:]
    return LevelPlan(rows=["#" * len(row)] + rows + ["#" * len(row)], cell=8,
                     rooms={"a": Room(), "s": Room(), "t": Room(floor=-96), "b": Room()}, start="s")


def test_a_trench_narrower_than_the_player_is_narrow_and_no_cell_of_it_is_reachable():
    """An 8-unit trench 96 deep: the box never rests in it (`narrow`; the 8-unit start cell too),
    and no cell of it holds a point to stand on. The graph passes no trench (the engine walks
    over this one: next test), so `b` is out of its reach either way: it under-counts, never over."""
    narrow, s = graph_of(trench_level(1))
    assert narrow.narrow == {s["s"], s["t"]} and not narrow.reachable_cells(8.0, {s["t"]}).any()
    assert narrow.reachable() == {s["s"], s["a"], s["t"]}
    wide, s = graph_of(trench_level(16))
    assert s["t"] not in wide.narrow and wide.reachable() == {s["s"], s["a"], s["t"]}


@pytest.mark.slow
def test_the_engine_walks_over_the_narrow_trench_and_falls_into_the_wide_one(tmp_path):
    """What the graph leaves out, in the real engine: walking east from the start, the player
    crosses the 8-unit trench at floor height into `b` (and a 40-unit one too, falling less than
    a step), and drops into the 128-unit one."""
    from conftest import walk_built_level

    for cells, crosses in ((1, True), (16, False)):
        graph, infos = walk_built_level(tmp_path / f"trench{cells}.wad", trench_level(cells),
                                        [("go", (11 + cells + 8) * 8, 44)], patience=60)
        lowest = min(0.0, *(float(info["position"][2]) for info in infos))
        end = graph.sector_at(*infos[-1]["position"][:2])
        assert (end == 3 and lowest > -8) == crosses and (lowest < -80) != crosses, (cells, end, lowest)
        assert 3 not in graph.reachable(), "the graph passes no trench"
