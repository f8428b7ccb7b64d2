"""Level oracles and the level's report on the test level the builder makes (a door, a lift, a
hall-of-mirrors niche), and the level-walk expert and its demos on it, in the real engine."""

from __future__ import annotations

import json

import numpy as np
import pytest

from playtester.capture.park.level_builder import (DOOR_RAISE, Join, LevelPlan, Room, door_lift_hom_level, guarded_corridor_level,
                                                   level_wad)
from playtester.cli import main


@pytest.fixture(scope="module")
def wads(tmp_path_factory):
    """`test` (door, lift, the HOM niche), `textured` (the same, the niche's walls textured), `broken`
    (a door whose special moves the sectors tagged 99: none)."""
    root = tmp_path_factory.mktemp("level-oracles")
    textured = door_lift_hom_level()
    textured.joins = {k: v for k, v in textured.joins.items() if not v.missing}
    broken = Join(special=DOOR_RAISE, args=(99, 32, 100))
    plans = {"test": door_lift_hom_level(), "textured": textured,
             "broken": LevelPlan(rows=["######", "#aaDb#", "######"], rooms={"a": Room(), "D": Room(ceiling=0), "b": Room()},
                                 joins={("a", "D"): broken, ("b", "D"): broken}, start="a")}
    out = {}
    for name, plan in plans.items():
        out[name] = root / f"{name}.wad"
        out[name].write_bytes(level_wad(plan))
    return out


def _run(wad, out, seed=0, steps=300, rules="immortal"):
    assert main(["run", "explore", "--game", f"doom:wad:{wad}", "--explorer", "random", "--episodes", "1",
                 "--steps", str(steps), "--seed", str(seed), "--out", str(out), "--rules", rules]) == 0
    findings = [json.loads(p.read_text()) for p in sorted(out.glob("findings/*/finding.json"))]
    return json.loads((out / "summary.json").read_text()), findings


def test_a_run_on_a_wad_of_its_own_finds_the_hall_of_mirrors_and_opens_the_door(wads, tmp_path):
    """The bar: the random tester, from the closet, opens the door, walks into the hall and sees the
    untextured niche smear the previous frame while it turns; the report says so and draws the door opened.
    The same level with the niche textured gives no such finding."""
    summary, findings = _run(wads["test"], tmp_path / "hom")
    hom = [f for f in findings if f["kind"] == "hall_of_mirrors"]
    assert len(hom) == 1 and "kept the previous frame" in hom[0]["message"] and hom[0]["details"]["share"] >= 0.006
    level = summary["level"]
    assert level["doors"]["opened"] == level["doors"]["total"] == 1
    assert summary["coverage"]["reachable_cells"] == summary["coverage"]["walkable_cells"]
    page = (tmp_path / "hom" / "report.html").read_text()
    assert "The level" in page and "door opened (the player went through)" in page and "hall_of_mirrors" in page
    summary, findings = _run(wads["textured"], tmp_path / "textured")
    assert not [f for f in findings if f["kind"] == "hall_of_mirrors"] and summary["level"]["doors"]["opened"] == 1


def test_sectors_no_one_reached_are_listed(wads, tmp_path):
    """A run too short to leave the closet: every other sector (the door's, the hall, the niche, the
    lift, the gallery) is listed as reachable and not reached, and the door is not opened."""
    summary, _ = _run(wads["test"], tmp_path / "short", steps=3)
    unreached = {u["sector"] for u in summary["level"]["unreached_sectors"]}
    assert unreached == {1, 2, 3, 4, 5}, "all but the closet (sector 0)"
    assert summary["level"]["doors"]["opened"] == 0


def test_a_room_past_a_monster_standing_in_the_only_way_is_out_of_reach_under_immortal(tmp_path):
    """An imp stands in a corridor 64 units wide: under `immortal` the report counts the corridor
    from the imp on and the room beyond out of reach (6 of the 16 walkable cells: by hand, the imp
    and the player keep 36 units apart) and says why the room was not reached; under `play` the
    imp moves and dies, and every walkable cell counts."""
    wad = tmp_path / "guarded.wad"
    wad.write_bytes(level_wad(guarded_corridor_level(1)))
    summary, _ = _run(wad, tmp_path / "immortal", steps=3)
    coverage = summary["coverage"]
    assert coverage["walkable_cells"] == 16 and coverage["reachable_cells"] == 10
    why = {u["sector"]: u["why"] for u in summary["level"]["unreached_sectors"]}
    assert why[2] == "past a standing monster", "room b"
    assert "past a monster standing in the way" in (tmp_path / "immortal" / "report.html").read_text()
    summary, _ = _run(wad, tmp_path / "play", steps=3, rules="play")
    assert summary["coverage"]["reachable_cells"] == 16
    assert not any(u["why"] for u in summary["level"]["unreached_sectors"])


def test_out_of_the_map_is_found_by_geometry(wads):
    from playtester.bugs.level_oracles import OutOfMapOracle
    from playtester.capture.games import make_game

    env = make_game(f"doom:wad:{wads['test']}")
    try:
        oracle = OutOfMapOracle(env.unwrapped.graph)
        frame, info = env.reset(seed=0)
        assert oracle.observe(frame, info, None, 0, 0) == []
        frame, info = env.reset(seed=0, options={"start": (-400.0, -400.0, 0.0)})  # into the void beyond the walls
        oracle.reset()
        found = oracle.observe(frame, info, None, 0, 0)
        assert [f.kind for f in found] == ["out_of_map"] and "outside every sector" in found[0].message
    finally:
        env.close()


@pytest.mark.parametrize("wad, finding", [("broken", True), ("test", False)])
def test_a_door_that_does_not_open_when_used_is_a_finding(wad, finding, wads):
    """Face the door, use it, walk into it: the broken door (its special opens the sectors tagged 99,
    none) is a finding; the working one lets the player into its sector."""
    from playtester.bugs.level_oracles import DoorOracle
    from playtester.capture.games import make_game

    env = make_game(f"doom:wad:{wads[wad]}")
    try:
        game = env.unwrapped
        oracle = DoorOracle(game.graph, game.keymap.index("forward"))
        door = [s for s, ld in enumerate(game.graph.level.sectors) if ld.ceiling == ld.floor][0]
        frame, info = env.reset(seed=0, options={"start": (160.0, 96.0, 0.0)} if wad == "broken" else None)  # facing the door
        found, entered = [], False
        for t, action in enumerate(["use"] + ["forward"] * 30):
            a = game.keymap.index(action)
            frame, _, _, _, info = env.step(a)
            found += oracle.observe(frame, info, a, 0, t)
            entered |= game.graph.sector_at(*info["position"][:2]) == door
        assert bool(found) == finding and entered != finding
        if finding:
            assert found[0].kind == "door" and found[0].details["sector"] == door and "did not open" in found[0].message
    finally:
        env.close()


def test_the_level_walker_covers_the_test_level(wads):
    """The scripted level-walk expert opens the door, rides the lift and walks ≥ 80 % of the reachable cells."""
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import LevelWalker

    env = make_game(f"doom:wad:{wads['test']}", max_steps=500)
    try:
        game = env.unwrapped
        walker = LevelWalker(game.graph, game.keymap, np.random.default_rng(0), jitter=0.0)
        _, info = env.reset(seed=0)
        walker.reset(info)
        heights = set()
        for _ in range(500):
            _, _, terminated, truncated, info = env.step(walker.act(info))
            heights.add(round(info["position"][2]))
            if terminated or truncated:
                break
        share = (walker.visited & walker.targets_mask).sum() / walker.targets_mask.sum()
        assert share >= 0.8 and 64 in heights, f"covered {share:.0%}, heights {sorted(heights)}"
    finally:
        env.close()


def test_demos_on_levels_in_one_command(wads, tmp_path, capsys):
    out = tmp_path / "demos"
    assert main(["demos", "--game", f"doom:wad:{wads['test']},doom:wad:{wads['textured']}", "--behavior", "path",
                 "--episodes", "2", "--steps", "40", "--out", str(out)]) == 0
    metas = [json.loads(p.read_text()) for p in sorted(out.glob("*/meta.json"))]
    assert [m["game"] for m in metas] == [f"doom:wad:{wads['test']}", f"doom:wad:{wads['textured']}"]
    assert all(m["keymap"]["name"] == "level" and m["expert"] == "LevelWalker" and m["steps"] == 40 for m in metas)
    steps = [json.loads(line) for line in (out / "ep0000" / "steps.jsonl").read_text().splitlines()]
    assert {s["keys"][0] for s in steps if s["keys"]} >= {"w", "e"}, "it walks and presses USE (the door)"
    assert "cells of 64 map units walked" in " ".join(capsys.readouterr().out.split())
    inspect = tmp_path / "inspect"
    assert main(["demos", "--game", f"doom:wad:{wads['test']}", "--behavior", "inspect", "--episodes", "1", "--steps", "120",
                 "--out", str(inspect)]) == 0
    meta = json.loads((inspect / "ep0000" / "meta.json").read_text())
    steps = [json.loads(line) for line in (inspect / "ep0000" / "steps.jsonl").read_text().splitlines()]
    assert meta["expert"] == "Inspector" and steps[0]["target_ooi"] is not None
    assert sum(s["test_box"] is not None for s in steps) > len(steps) / 2, "the barrel is on screen most of the time"
    assert any(s["circling"] for s in steps), "it reaches the barrel and circles it"


@pytest.mark.slow
def test_no_secret_message_stays_on_screen_for_the_hall_of_mirrors_oracle_to_take():
    """Walking into a secret sector of Freedoom 2 MAP01 prints no "a secret is revealed!" (yellow
    text that stays put while the view turns: the hall-of-mirrors oracle took it for a smear)."""
    from playtester.capture.games import make_game
    from playtester.capture.level_graph import RASTER_UNITS

    env = make_game("doom:freedoom2:MAP01", max_steps=10)
    try:
        game = env.unwrapped
        level = game.graph.level
        secret = [i for i, sector in enumerate(level.sectors) if sector.special == 9]  # secret sectors
        rows, cols = np.nonzero(np.isin(game.graph.raster, secret))
        row, col = rows[len(rows) // 2], cols[len(cols) // 2]  # a cell of one the player can stand in
        x, y = level.bounds[0] + (col + 0.5) * RASTER_UNITS, level.bounds[3] - (row + 0.5) * RASTER_UNITS
        env.reset(seed=0, options={"start": (x, y, 90.0)})
        for _ in range(3):
            frame, *_ = env.step(game.keymap.index("turn_left"))
        band = frame[70:110].astype(int)  # where the message is printed: 82 of its yellow pixels at this view
        assert int(((band[..., 0] > 180) & (band[..., 1] > 120) & (band[..., 2] < 60)).sum()) == 0
    finally:
        env.close()


def test_a_hall_of_mirrors_stays_in_place_over_the_turning_steps():
    """Frames of noise, the view turning 11° a step, each frame keeping a 40 × 40 patch of the one
    before: kept in the same place two steps in a row it is a hall of mirrors; kept once here and
    once elsewhere (a close wall's coarse texels matching by chance) it is not."""
    from playtester.bugs.level_oracles import HallOfMirrorsOracle

    rng = np.random.default_rng(0)

    def findings(places):
        oracle = HallOfMirrorsOracle()
        previous = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
        oracle.observe(previous, {"angle": 0.0, "pitch": 0.0}, None, 0, 0)
        out = []
        for step, (x, y) in enumerate(places, start=1):
            frame = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
            frame[y:y + 40, x:x + 40] = previous[y:y + 40, x:x + 40]
            out += oracle.observe(frame, {"angle": 11.0 * step, "pitch": 0.0}, None, 0, step)
            previous = frame
        return out

    assert [f.kind for f in findings([(100, 100), (104, 100)])] == ["hall_of_mirrors"]
    assert findings([(20, 20), (200, 150)]) == []
