"""Any WAD a user names, ViZDoom's scenarios by name, tester rules, and bad level input: one line
each, nothing written."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from playtester.capture.doom import iwad_path
from playtester.capture.park.level_builder import LevelPlan, Room, door_lift_hom_level, level_wad
from playtester.cli import main


@pytest.fixture(scope="module")
def levels(tmp_path_factory):
    """WAD files of the test levels: `test` (door, lift, hall of mirrors), `arena` (two chaingunners
    facing the start), `nostart` (no player start)."""
    root = tmp_path_factory.mktemp("wads")
    arena = LevelPlan(rows=["#######", "#aaaaa#", "#aaaaa#", "#aaaaa#", "#######"], rooms={"a": Room()}, start="a",
                      things=[(65, "a", {"angle": 180}), (65, "a", {"x": 96, "y": 96, "angle": 90})])
    plans = {"test": door_lift_hom_level(), "arena": arena,
             "nostart": LevelPlan(rows=["####", "#aa#", "####"], rooms={"a": Room()}, start=None)}
    out = {}
    for name, plan in plans.items():
        out[name] = root / f"{name}.wad"
        out[name].write_bytes(level_wad(plan))
    return out


def test_games_lists_the_maps_of_a_wad(levels, capsys):
    assert main(["games", "--wad", str(iwad_path("freedoom1"))]) == 0
    listed = capsys.readouterr().out
    assert "E1M1" in listed and "E4M9" in listed and "IWAD" in listed
    assert main(["games", "--wad", str(levels["test"])]) == 0
    listed = capsys.readouterr().out
    assert "MAP01" in listed and "PWAD, 1 maps" in listed and "MAP02" not in listed


def _bad_wads(tmp_path, levels) -> dict[str, tuple[str, str]]:
    """Each bad input: the game spec (or the extra options) and what its one line must say."""
    text = tmp_path / "notes.wad"
    text.write_text("not a wad at all\n")
    empty = tmp_path / "empty.wad"
    empty.write_bytes(b"")
    truncated = tmp_path / "cut.wad"
    truncated.write_bytes(levels["test"].read_bytes()[:40])
    return {
        "text": (f"doom:wad:{text}", "not a WAD file (it starts with 'not '"),
        "zero bytes": (f"doom:wad:{empty}", "not a WAD file (it is empty)"),
        "truncated": (f"doom:wad:{truncated}", "a truncated or damaged WAD"),
        "no such file": (f"doom:wad:{tmp_path / 'gone.wad'}", "no such WAD file"),
        "missing map": (f"doom:wad:{levels['test']}:MAP40", "map MAP40 is neither in"),
        "missing map of an IWAD": (f"doom:wad:{iwad_path('freedoom2')}:MAP99", "has no map MAP99"),
        "no player start": (f"doom:wad:{levels['nostart']}", "has no player start"),
        "IWAD missing": (f"doom:wad:{levels['test']}:MAP01:iwad=doom2", "the IWAD doom2 is missing"),
        "a PWAD as IWAD": (f"doom:wad:{levels['test']}:MAP01:iwad={levels['arena']}", "is a PWAD, not an IWAD"),
        "unknown scenario": ("doom:scenario:my_way_out", "unknown scenario 'my_way_out'; ViZDoom ships"),
    }


@pytest.mark.parametrize("case", ["text", "zero bytes", "truncated", "no such file", "missing map", "missing map of an IWAD",
                                  "no player start", "IWAD missing", "a PWAD as IWAD", "unknown scenario"])
def test_bad_level_input_is_one_line_and_nothing_is_written(case, levels, tmp_path, capsys):
    game, says = _bad_wads(tmp_path, levels)[case]
    out = tmp_path / "run"
    code = main(["run", "explore", "--game", game, "--explorer", "random", "--episodes", "1", "--steps", "5", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err
    assert not out.exists()


def test_an_unknown_rule_is_refused_on_every_command(levels, tmp_path, capsys):
    game = f"doom:wad:{levels['test']}"
    for argv in (["run", "explore", "--game", game, "--explorer", "random", "--out", str(tmp_path / "r")],
                 ["demos", "--game", game, "--behavior", "path", "--out", str(tmp_path / "d")],
                 ["shots", "--game", game, "--classes", "x", "--out", str(tmp_path / "s")]):
        assert main([*argv, "--rules", "fly"]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--rules fly: use immortal, no-monsters or play" in err
    assert main(["run", "explore", "--game", "gym:CartPole-v1", "--explorer", "random", "--rules", "play",
                 "--out", str(tmp_path / "g")]) == 2
    assert "only Doom levels have tester rules" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_wad_file_plays_with_use_and_its_door_opens(levels):
    """A user's PWAD over Freedoom 2: the level key map has USE; facing the door and pressing it
    names the door's line (`used`), and the player then walks through into the hall."""
    from playtester.capture.games import make_game

    env = make_game(f"doom:wad:{levels['test']}")
    try:
        game = env.unwrapped
        assert game.rules == "immortal" and game.keymap.names[-1] == "use"
        _, info = env.reset(seed=0)
        door = game.graph.doors[0]
        assert game.graph.sector_at(*info["position"][:2]) == game.graph.start_sector() != door.sector
        _, _, _, _, info = env.step(game.keymap.index("use"))
        assert info["used"]["kind"] == "door" and info["used"]["line"] in door.lines
        for _ in range(12):
            _, _, _, _, info = env.step(game.keymap.index("forward"))
        hall = game.graph.sector_at(*info["position"][:2])
        assert hall not in (door.sector, game.graph.start_sector()) and info["position"][0] > 200
    finally:
        env.close()


def test_a_vizdoom_scenario_plays_by_name():
    from playtester.capture.games import make_game

    env = make_game("doom:scenario:my_way_home", max_steps=5)
    try:
        scenario = env.unwrapped.scenario
        assert scenario.pwad.name == "my_way_home.wad" and scenario.map == "MAP01" and env.unwrapped.rules == "immortal"
        _, info = env.reset(seed=0)
        steps = 0
        while True:
            _, _, terminated, truncated, info = env.step(0)
            steps += 1
            if terminated or truncated:
                break
        assert steps == 5 and not terminated and "position" in info
    finally:
        env.close()


@pytest.mark.parametrize("rules, deaths", [("play", True), ("immortal", False), ("no-monsters", False)])
def test_the_rules_decide_deaths_and_no_episode_ends_early(rules, deaths, levels, tmp_path):
    """Two chaingunners face the start: under `play` the random tester dies and each death is a
    finding with its place and killer, the level starting again in the same episode; under
    `immortal` and `no-monsters` no one dies. Every episode plays all its steps."""
    out = tmp_path / rules
    assert main(["run", "explore", "--game", f"doom:wad:{levels['arena']}", "--explorer", "random", "--rules", rules,
                 "--episodes", "2", "--steps", "150", "--seed", "1", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    assert sorted(np.bincount([r["episode"] for r in rows])) == [150, 150]
    findings = [json.loads(p.read_text()) for p in out.glob("findings/*/finding.json")]
    died = [f for f in findings if f["kind"] == "death"]
    assert bool(died) == deaths and len(died) == sum("death" in r for r in rows)
    for f in died:
        assert "ChaingunGuy" in f["details"]["cause"] or "unknown" in f["details"]["cause"]
        x, y = f["details"]["position"][:2]
        assert 64 <= x <= 384 and 64 <= y <= 256, "the death's place is in the arena"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rules"] == rules and f"<td>{rules}</td>" in (out / "report.html").read_text()
