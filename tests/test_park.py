"""The park generator: determinism, the ground truth's promises, and the engine agreeing with it."""

import json
import math

import numpy as np
import pytest
import vizdoom as vzd

from playtester.capture.doom import iwad_path
from playtester.capture.park import ParkConfig, build_park, generate_park
from playtester.capture.park.layout import BRIDGE, GRASS, OOI_KINDS, PATH, WATER, ParkLayout, parse_actor
from playtester.capture.park.wad import merged_lines, unit_edges

CONFIGS = [ParkConfig(seed=s, cols=c, rows=c) for s, c in ((0, 40), (1, 32), (5, 24), (11, 48))]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.slug)
def test_same_seed_same_park_other_seed_other_park(cfg):
    a, b = generate_park(cfg), generate_park(cfg)
    assert json.dumps(a.to_json()) == json.dumps(b.to_json())
    other = generate_park(ParkConfig(seed=cfg.seed + 100, cols=cfg.cols, rows=cfg.rows))
    assert not np.array_equal(a.grid, other.grid)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.slug)
def test_every_terrain_and_a_connected_pathway_network(cfg):
    park = generate_park(cfg)
    for terrain in (GRASS, PATH, WATER):
        assert (park.grid == terrain).any()
    mask = park.pathway_mask
    cells = [tuple(int(v) for v in c[::-1]) for c in np.argwhere(mask)]
    seen = {cells[0]}
    frontier = [cells[0]]
    while frontier:
        cur = frontier.pop()
        for nxt in park.neighbours(*cur, only=mask):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    assert len(seen) == len(cells), "the pathway network is in pieces"


def test_bridges_cross_water():
    bridges = 0
    for seed in range(6):
        park = generate_park(ParkConfig(seed=seed))
        for row, col in np.argwhere(park.grid == BRIDGE):
            around = park.grid[max(0, row - 1) : row + 2, max(0, col - 1) : col + 2]
            assert (around == WATER).any(), "a bridge cell with no water beside it"
            bridges += 1
    assert bridges > 0


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.slug)
def test_oois_stand_beside_pathways_balanced_and_half_bugged(cfg):
    park = generate_park(cfg)
    assert len(park.oois) >= 4
    for o in park.oois:
        col, row = park.cell_of(o.x, o.y)
        near = [park.grid[row + dr, col + dc] for dc, dr in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))]
        assert PATH in near or BRIDGE in near, f"OOI {o.id} at cell {col},{row} is not on or beside a pathway"
        # and it stands within 0.4 cells of its cell centre, towards the pathway
        cx, cy = park.centre(col, row)
        assert math.hypot(o.x - cx, o.y - cy) <= 0.4 * cfg.cell
    counts = {k: sum(o.kind == k for o in park.oois) for k in OOI_KINDS}
    assert len(set(counts.values())) == 1, f"kinds are not balanced: {counts}"
    per_kind = counts[OOI_KINDS[0]]
    for kind in OOI_KINDS:
        bugged = sum(o.kind == kind and o.bug is not None for o in park.oois)
        assert abs(bugged - per_kind / 2) <= 1, f"{kind}: {bugged} of {per_kind} bugged"
    assert {o.bug for o in park.oois} >= {"stretched", "lowres", None}


def test_boxed_in_oois_are_unreachable_and_others_reachable():
    park = generate_park(ParkConfig(seed=0, cols=48, rows=48))
    start = park.cell_of(park.starts[0].x, park.starts[0].y)
    reach = park.reachable_from(start)
    boxed = [o for o in park.oois if not o.reachable]
    assert boxed, "the default park boxes some OOIs in"
    for o in park.oois:
        col, row = park.cell_of(o.x, o.y)
        assert bool(reach[row, col]) == o.reachable, f"OOI {o.id}"


def test_straight_walk_stops_at_water_walls_and_blocked_corners():
    """An 8×8 park of grass with cells of 128 units, worked by hand: water at (3, 3), an
    invisible wall between (5, 0) and (5, 1), water at (1, 6) and (2, 5) touching at a corner."""
    grid = np.full((8, 8), GRASS)
    grid[3, 3] = WATER
    grid[6, 1] = grid[5, 2] = WATER
    park = ParkLayout(config=ParkConfig(cols=8, rows=8), grid=grid, walls=[(5, 1, 6, 1)])
    c = lambda col, row: park.centre(col, row)  # noqa: E731
    assert park.straight_walk(*c(0, 0), *c(7, 0))  # along the south row: all grass
    assert not park.straight_walk(*c(3, 0), *c(3, 6))  # straight through the water cell
    assert not park.straight_walk(*c(5, 0), *c(5, 2))  # through the invisible wall
    assert park.straight_walk(*c(4, 0), *c(4, 2))  # beside the wall, not through it
    # the body reaches 20 units either side: north along x = 552 (40 units east of the water in
    # column 3) clears it, along x = 522 (10 units) it does not
    assert park.straight_walk(4 * 128 + 40, 64.0, 4 * 128 + 40, 7 * 128 + 64)
    assert not park.straight_walk(4 * 128 + 10, 64.0, 4 * 128 + 10, 7 * 128 + 64)
    # the diagonal from (1, 5) to (2, 6) squeezes between two water cells touching at a corner:
    # blocked even for a body of no width, whose line passes exactly through the corner
    assert not park.straight_walk(*c(1, 5), *c(2, 6))
    assert not park.straight_walk(*c(1, 5), *c(2, 6), margin=0.0)
    assert park.straight_walk(*c(2, 6), *c(3, 7))  # the next diagonal has grass on both sides
    assert park.straight_walk(*c(6, 6), *c(6, 6))  # standing still


def test_starts_are_spread_over_walkable_ground():
    park = generate_park(ParkConfig(seed=2))
    assert len(park.starts) == park.config.n_starts
    xs = np.array([[s.x, s.y] for s in park.starts])
    for s in park.starts:
        assert park.terrain_at(s.x, s.y) != WATER
    # spread: the starts' bounding box covers most of the park
    x0, y0, x1, y1 = park.bounds
    assert np.ptp(xs[:, 0]) > 0.6 * (x1 - x0) and np.ptp(xs[:, 1]) > 0.6 * (y1 - y0)
    assert any(s.on_path for s in park.starts) and any(not s.on_path for s in park.starts)


def test_ground_truth_file_round_trip(tmp_path):
    files = build_park(ParkConfig(seed=4, cols=20, rows=20), tmp_path / "p")
    loaded = ParkLayout.load(files.ground_truth)
    fresh = generate_park(ParkConfig(seed=4, cols=20, rows=20))
    assert np.array_equal(loaded.grid, fresh.grid)
    assert loaded.oois == fresh.oois and loaded.walls == fresh.walls and loaded.starts == fresh.starts
    data = json.loads(files.ground_truth.read_text())
    assert data["pathways"] and all(len(r) == 4 for r in data["pathways"])
    assert files.map_png.stat().st_size > 1000


def _build_into(folder: str) -> str:
    return str(build_park(ParkConfig(seed=6, cols=20, rows=20), folder).ground_truth)


def test_processes_building_the_same_park_at_once_all_get_the_whole_set(tmp_path):
    # Two `playtester demos` side by side on a park not yet cached used to race on one
    # park.wad.partial, and the loser died with a traceback.
    from concurrent.futures import ProcessPoolExecutor

    folder = tmp_path / "p"
    with ProcessPoolExecutor(4) as pool:
        done = list(pool.map(_build_into, [str(folder)] * 8))
    assert done == [str(folder / "park.json")] * 8
    assert sorted(p.name for p in folder.iterdir()) == ["map.png", "park.json", "park.wad"]  # no leftovers
    fresh = generate_park(ParkConfig(seed=6, cols=20, rows=20))
    assert np.array_equal(ParkLayout.load(folder / "park.json").grid, fresh.grid)


def test_merged_lines_cover_exactly_the_unit_edges():
    park = generate_park(ParkConfig(seed=3, cols=24, rows=24))
    edges = unit_edges(park)
    covered = {}
    for (x0, y0), (x1, y1), side in merged_lines(edges):
        n = max(abs(x1 - x0), abs(y1 - y0))
        dx, dy = (x1 - x0) // n, (y1 - y0) // n
        for k in range(n):
            key = (x0 + k * dx, y0 + k * dy, x0 + (k + 1) * dx, y0 + (k + 1) * dy)
            assert key not in covered
            covered[key] = side
    assert covered == edges
    assert len(merged_lines(edges)) < len(edges)


def test_engine_reports_the_ground_truth_oois(tmp_path):
    """Load the PWAD in the real engine and compare every thing it spawned with park.json."""
    files = build_park(ParkConfig(seed=5, cols=24, rows=24), tmp_path / "p")
    park = files.layout()
    game = vzd.DoomGame()
    game.set_doom_game_path(str(iwad_path("freedoom2")))
    game.set_doom_scenario_path(str(files.wad))
    game.set_doom_map("MAP01")
    game.set_screen_resolution(vzd.ScreenResolution.RES_160X120)
    game.set_objects_info_enabled(True)
    game.set_window_visible(False)
    game.init()
    try:
        game.new_episode()
        reported = [o for o in game.get_state().objects if parse_actor(o.name)]
    finally:
        game.close()
    assert len(reported) == len(park.oois)
    for o in park.oois:
        match = [r for r in reported if math.hypot(r.position_x - o.x, r.position_y - o.y) < 1.0]
        assert len(match) == 1, f"OOI {o.id} not reported where the ground truth puts it"
        assert parse_actor(match[0].name) == (o.kind, o.bug)
