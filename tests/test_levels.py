"""Any Doom level: its geometry from the WAD against the engine, shots of its own objects, and
runs of every explorer on stock Freedoom levels ending with a map, coverage and a report."""

from __future__ import annotations

import collections
import json
import math
import os
import shutil
import struct

import numpy as np
import pytest
import vizdoom as vzd

from playtester.errors import UserError
from playtester.capture.games import level_of_game, level_objects
from playtester.capture.level_map import read_level, render_level, wad_lumps
from playtester.cli import main

MAP01, E1M1 = "doom:freedoom2:MAP01", "doom:freedoom1:E1M1"


def engine_objects(wad: str, level: str):
    """Every object the engine spawned on a level, by its own objects info."""
    game = vzd.DoomGame()
    game.set_doom_game_path(os.path.join(os.path.dirname(vzd.__file__), f"{wad}.wad"))
    game.set_doom_map(level)
    game.set_screen_resolution(vzd.ScreenResolution.RES_160X120)
    game.set_window_visible(False)
    game.set_objects_info_enabled(True)
    game.init()
    game.new_episode()
    objects = [(o.name, round(o.position_x), round(o.position_y)) for o in game.get_state().objects if o.name != "DoomPlayer"]
    game.close()
    return objects


@pytest.mark.parametrize("spec", [MAP01, E1M1])
def test_things_read_from_the_wad_are_the_objects_the_engine_spawns(spec):
    _, wad, level = spec.split(":")
    mine = sorted((t.kind, round(t.x), round(t.y)) for t in level_of_game(spec).objects())
    assert len(mine) > 100
    assert mine == sorted(engine_objects(wad, level))


def test_the_player_walks_only_on_walkable_cells(one_torch_thread):
    """A random walk in the engine stays on the area the level map calls walkable, and the
    walls the map draws hold it: a few hundred steps, no position off the walkable raster."""
    from playtester.capture.games import make_game

    level = level_of_game(E1M1)
    step = 8.0
    raster = level.walkable_raster(step)
    x0, _, _, y1 = level.bounds
    env = make_game(E1M1, max_steps=300)
    rng = np.random.default_rng(0)
    positions = []
    try:
        _, info = env.reset(seed=0)
        positions.append(info["position"])
        for _ in range(300):
            _, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
            if "position" in info:
                positions.append(info["position"])
            if terminated or truncated:
                break
    finally:
        env.close()
    spread = np.ptp(np.array(positions)[:, :2], axis=0)
    assert spread.max() > 100, "the walk went somewhere"
    off = 0
    for x, y, _ in positions:
        row, col = int((y1 - y) // step), int((x - x0) // step)
        off += not raster[max(0, row - 1):row + 2, max(0, col - 1):col + 2].any()  # a pixel's slack at edges
    assert off == 0, f"{off} of {len(positions)} positions off the walkable area"
    walkable = level.walkable_cells(64.0)
    assert 0.2 < walkable.mean() < 0.8, "walkable cells are part of the bounding box, not all or none"


def test_the_parks_udmf_map_reads_back_as_its_layout(small_park):
    """The park's PWAD holds a UDMF TEXTMAP: one sector per terrain, read back at every cell."""
    from playtester.capture.games import doom_scenario
    from playtester.capture.park.wad import SECTORS

    scenario = doom_scenario(small_park)
    level = read_level([scenario.pwad], scenario.map)
    layout = scenario.layout
    assert level.udmf and len(level.sectors) == len(SECTORS)
    cell = layout.config.cell
    upp = 16.0
    raster = level.sector_raster(upp)
    x0, _, _, y1 = level.bounds
    order = list(SECTORS)
    rows, cols = layout.grid.shape
    got = np.array([[raster[int((y1 - (r + 0.5) * cell) // upp), int(((c + 0.5) * cell - x0) // upp)] for c in range(cols)]
                    for r in range(rows)])
    want = np.vectorize(order.index)(layout.grid)
    assert (got == want).mean() > 0.99, "the sector at each cell centre is the cell's terrain"
    assert sorted((round(t.x), round(t.y)) for t in level.things if t.type >= 20000) == \
        sorted((round(o.x), round(o.y)) for o in layout.oois)


def test_an_unreadable_wad_is_named(tmp_path):
    wad = tmp_path / "broken.wad"
    wad.write_bytes(b"PWAD" + b"\0" * 4)
    with pytest.raises(UserError, match="broken.wad: not a WAD file"):
        wad_lumps(wad)
    empty = tmp_path / "empty.wad"
    empty.write_bytes(b"PWAD" + struct.pack("<ii", 0, 12))
    with pytest.raises(UserError, match="map MAP01: not found in .*empty.wad"):
        read_level([empty], "MAP01")


def test_the_level_map_draws_walls_doors_and_floor():
    view = render_level(level_of_game(MAP01))
    img = view.image
    assert max(img.shape[:2]) == 720
    from playtester.capture.level_map import DOOR, FLOOR, WALL

    def share(colour):
        return float(np.all(img == colour, axis=-1).mean())

    assert share(FLOOR) > 0.2 and share(WALL) > 0.005 and share(DOOR) > 0.0005
    # the player's start (a thing of type 1) lies on walkable floor
    start = next(t for t in level_of_game(MAP01).things if t.type == 1)
    px, py = (int(v) for v in view.to_pixel(start.x, start.y))
    assert tuple(img[py, px]) == FLOOR


def test_shots_label_a_stock_levels_own_classes(tmp_path, capsys):
    out = tmp_path / "shots"
    assert main(["shots", "--game", MAP01, "--classes", "Zombieman,ExplosiveBarrel", "--n", "6", "--out", str(out)]) == 0
    coco = json.loads((out / "labels.json").read_text())
    assert [c["name"] for c in coco["categories"]] == ["Zombieman", "ExplosiveBarrel"]
    assert len(coco["images"]) == 6
    per_image = collections.Counter(a["image_id"] for a in coco["annotations"])
    assert set(per_image) == {im["id"] for im in coco["images"]}, "every shot frames an object of a class asked for"
    kinds = collections.Counter(a["category_id"] for a in coco["annotations"])
    assert set(kinds) == {1, 2}, "both classes are framed (balanced over the classes)"
    capsys.readouterr()
    assert main(["shots", "--game", MAP01, "--classes", "Zombieman,Cyberdemon", "--n", "2", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has no Cyberdemon; it has" in err and "Zombieman" in err


def test_a_box_on_screen_is_placed_on_the_levels_thing_by_telemetry():
    """What `run` does with a trained detector's box on a stock level: the box's bearing from the
    player names the level's thing of that class (here the engine's own box stands for the
    detector's, so that the placement is tested on its own)."""
    from playtester.capture.games import make_game
    from playtester.tester.loop import match_ooi

    things = level_objects(MAP01, ["ExplosiveBarrel"])
    assert len(things) == 6 and not level_objects("doom:park", ["ExplosiveBarrel"])
    env = make_game(MAP01)
    placed = 0
    try:
        for thing in things:
            x, y = thing.x - 150, thing.y
            _, info = env.reset(seed=1, options={"start": (x, y, 0.0)})
            seen = [o for o in info["objects"] if o["class"] == "ExplosiveBarrel"
                    and math.hypot(o["position"][0] - thing.x, o["position"][1] - thing.y) < 1]
            if not seen:
                continue  # a wall between: the box is not on screen
            placed += 1
            assert match_ooi(things, info, seen[0]["box"], "ExplosiveBarrel", 320) == thing.id
    finally:
        env.close()
    assert placed >= 2


def _check_run(out, game):
    summary = json.loads((out / "summary.json").read_text())
    assert summary["game"] == game
    cov = summary["coverage"]
    assert cov["cell_size"] == 64 and cov["walkable_cells"] > 100
    assert 0 < cov["walkable_share"] < 1
    assert cov["walkable_share_cumulative"][-1] == pytest.approx(cov["walkable_share"])
    assert (out / "report.html").exists() and (out / "coverage.png").exists()
    return summary


@pytest.fixture(scope="module")
def level_detector(tmp_path_factory, one_step_detector):
    """A detector checkpoint for MAP01's barrels and zombies, trained one step on a few auto-labelled
    shots: enough to run the loop with (what it finds is not the point here)."""
    return one_step_detector(tmp_path_factory.mktemp("level-detector"),
                             ["--game", MAP01, "--classes", "ExplosiveBarrel,Zombieman", "--n", "6"],
                             classes=["ExplosiveBarrel", "Zombieman"], backbone="mobilenet")


def test_random_run_on_a_stock_level_tests_with_a_level_detector(tiny_inspect_policy, level_detector, tmp_path):
    out = tmp_path / "random"
    assert main(["run", "explore", "--game", MAP01, "--explorer", "random", "--tester", str(tiny_inspect_policy),
                 "--detector", str(level_detector), "--episodes", "2", "--steps", "30", "--test-steps", "6",
                 "--out", str(out)]) == 0
    summary = _check_run(out, MAP01)
    assert summary["oois_total"] == 11 + 6, "MAP01's zombies and barrels are the objects under test"
    assert (out / "ooi_map.png").exists()
    assert "objects_found_by" in summary and str(level_detector) in summary["objects_found_by"]
    rows = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    assert all("position" in r or "frame_cell" not in r for r in rows), "a game with telemetry places steps by position only"
    if shutil.which("chromium") is not None:
        dom, shot = open_in_chromium(out / "report.html", tmp_path)
        assert 'data-images-loaded="5/5"' in dom  # coverage, object map, tested, low-FPS map, frame times
        for label in ("walkable floor", "wall", "door", "an object placed on the level", "bug found by an oracle",
                      "behaviour test failed", "not tested", f"Objects missed ({summary['oois_missed']})"):
            assert label in dom, label
        from playtester.capture.level_map import FLOOR

        floor = np.all(np.abs(shot.astype(int) - FLOOR[::-1]) < 30, axis=-1)  # BGR screenshot; the yellow shading aside
        assert floor.sum() > 20000, "the level's floor is drawn on the page"


def open_in_chromium(page, tmp_path):
    """The page's DOM after load, and a screenshot of it (BGR), from headless Chromium."""
    import subprocess

    import cv2

    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(["chromium", *flags, "--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", *flags, "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    return dom, cv2.imread(str(shot))


@pytest.mark.parametrize("explorer, game", [("inspector", E1M1), ("ppgta", MAP01)])
def test_ppo_explorers_run_on_stock_levels(explorer, game, tiny_parts, tmp_path):
    out = tmp_path / explorer
    assert main(_stock_run_args(explorer, game, tiny_parts, out)) == 0
    summary = _check_run(out, game)
    assert summary["episodes"] == 2 and "no test policy" in summary["objects_note"]


@pytest.mark.slow
@pytest.mark.parametrize("explorer, game", [("random", E1M1), ("inspector", MAP01), ("ppgta", E1M1)])
def test_every_explorer_on_the_other_stock_level(explorer, game, tiny_parts, tmp_path):
    out = tmp_path / explorer
    assert main(_stock_run_args(explorer, game, tiny_parts, out)) == 0
    _check_run(out, game)


def _stock_run_args(explorer: str, game: str, tiny_parts, out) -> list[str]:
    """A short run of `explorer` on a stock level (ppgta with the tiny path policy as its preference)."""
    (out.parent / f"{explorer}.yaml").write_text("rollout: 16\n")
    args = ["run", "explore", "--game", game, "--explorer", explorer, "--episodes", "2", "--steps", "24", "--envs", "1",
            "--config", str(out.parent / f"{explorer}.yaml"), "--out", str(out)]
    return args + (["--preference", str(tiny_parts("path")[2])] if explorer == "ppgta" else [])


def test_a_level_whose_map_cannot_be_read_still_gets_its_report(tmp_path, monkeypatch):
    """The run goes on without geometry; its report says the map is missing and why."""
    import yaml

    from playtester.capture import games
    from playtester.report.build import build_report
    from playtester.tester.runlog import JsonlWriter

    def unreadable(spec):
        raise UserError(f"map MAP01 of {spec}: its geometry could not be read (struct.error: unpack requires a buffer)")

    monkeypatch.setattr(games, "level_of_game", unreadable)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"game": MAP01, "agent": "random explorer"}))
    trajectory = JsonlWriter(tmp_path / "trajectory.jsonl")
    for t in range(5):
        trajectory.write({"episode": 0, "t": t, "action": 0, "position": [float(t), 0.0, 0.0], "frame_time_ms": 1.0})
    trajectory.close()
    report = build_report(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert "geometry could not be read" in summary["map_missing"]
    assert "No map: map MAP01" in report.read_text() and not (tmp_path / "coverage.png").exists()
