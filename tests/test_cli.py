"""Command-line smoke runs with tiny budgets, and bad input answered in one line."""

import json
import subprocess
import sys

import pytest

from playtester.datasets.episodes import load_episodes


def run(*args, ok=True):
    proc = subprocess.run([sys.executable, "-m", "playtester", *args], capture_output=True, text=True, timeout=300)
    if ok:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def assert_one_line_error(proc, *words):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr + proc.stdout
    assert err.startswith("error:") or "Error" in err
    for w in words:
        assert w in " ".join(err.split()), err


def test_help_lists_the_commands():
    out = run("--help").stdout
    for cmd in ("games", "shots", "demos", "train", "eval"):
        assert cmd in out
    assert "--behavior" in run("demos", "--help").stdout


def test_games_lists_the_specs():
    out = run("games").stdout
    assert "doom:park" in out and "doom:freedoom2:MAPxx" in out and "gym:ENV_ID" in out


def test_demos_and_shots_write_where_they_say(tmp_path, small_park):
    demos = tmp_path / "demos"
    out = run("demos", "--game", small_park, "--behavior", "inspect", "--episodes", "2", "--steps", "40", "--out", str(demos)).stdout
    assert str(demos) in " ".join(out.split()).replace(" ", "") or "wrote 2 inspect episodes" in out
    eps = load_episodes(demos)
    assert len(eps) == 2 and all(e.behavior == "inspect" and len(e) <= 40 for e in eps)
    assert eps[0].meta["reset"]["seed"] == 0 and "start" in eps[0].meta["reset"]["options"]

    shots = tmp_path / "shots"
    run("shots", "--game", small_park, "--n", "12", "--out", str(shots))
    doc = json.loads((shots / "labels.json").read_text())
    assert len(doc["images"]) == 12
    assert {c["name"] for c in doc["categories"]} == {"pillar", "barrel", "tire", "chair"}
    per_cat = {c["id"]: 0 for c in doc["categories"]}
    for a in doc["annotations"]:
        per_cat[a["category_id"]] += 1
        img = doc["images"][a["image_id"] - 1]
        x, y, w, h = a["bbox"]
        assert 0 <= x and 0 <= y and x + w <= img["width"] and y + h <= img["height"]
    assert min(per_cat.values()) >= 3, per_cat
    assert all((shots / i["file_name"]).exists() for i in doc["images"])

    from_demos = tmp_path / "from_demos"
    run("shots", "--demos", str(demos), "--every", "10", "--out", str(from_demos))
    doc = json.loads((from_demos / "labels.json").read_text())
    assert len(doc["images"]) == sum((len(e) + 9) // 10 for e in eps)


@pytest.mark.parametrize("args, words", [
    (["demos", "--game", "quake:e1m1", "--behavior", "path", "--out", "{tmp}/d"], ["unknown game spec", "doom:park"]),
    (["demos", "--game", "doom:park:abc", "--behavior", "path", "--out", "{tmp}/d"], ["seed", "abc"]),
    (["demos", "--behavior", "fly", "--out", "{tmp}/d"], ["--behavior", "fly"]),
    (["demos", "--behavior", "path", "--out", "{tmp}/no/such/d"], ["does not exist"]),
    (["shots", "--out", "{tmp}/s"], ["--game", "--demos"]),
    (["shots", "--demos", "{tmp}", "--out", "{tmp}/s"], ["no complete episodes"]),
])
def test_bad_input_is_one_clear_line(tmp_path, args, words):
    proc = run(*[a.replace("{tmp}", str(tmp_path)) for a in args], ok=False)
    assert_one_line_error(proc, *words)
    assert len(proc.stderr.strip().splitlines()) == 1


def test_seed_that_is_not_a_number_is_a_usage_error(tmp_path):
    proc = run("demos", "--behavior", "path", "--seed", "abc", "--out", str(tmp_path / "d"), ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--seed" in proc.stderr and "whole number" in proc.stderr
