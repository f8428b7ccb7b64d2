"""Bad input, as a hostile tester gives it: every file-taking option × {missing, empty, truncated,
random bytes, wrong kind}, every count option × {0, negative, huge, not a number}. Each is
refused with exit status ≠ 0 and exactly one line of error naming the option, no traceback,
before any game starts (issue 20)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from playtester.cli import main

GAME = "doom:park:5:24x24"

FILE_VARIANTS = ("missing", "empty", "truncated", "random", "wrong-kind")
"""What is wrong with a file: not there, 0 bytes, a good one cut in half, random bytes, or a
folder where a file belongs (a file where a folder belongs)."""
OTHER_MODEL = "other-model"
"""A checkpoint option's sixth case: a good playtester checkpoint of another model (a detector
for a policy, a policy for a detector)."""
DETECTOR_OPTIONS = {"run explore --detector", "train encoder --detector", "eval detector --ckpt"}

# (command line before the option, the option, what it takes, what follows the path)
# `{out}` is a fresh output path. The other inputs a command needs are good ones, so that the
# option under test is the one refused.
FILE_OPTIONS = [
    (["run", "explore", "--game", GAME, "--out", "{out}", "--explorer", "random", "--oracle-labels"], "--tester", "checkpoint", ""),
    (["run", "explore", "--game", GAME, "--out", "{out}", "--explorer", "ppgta"], "--preference", "checkpoint", ""),
    (["run", "explore", "--game", GAME, "--out", "{out}", "--explorer", "random"], "--detector", "checkpoint", ""),
    (["run", "explore", "--game", GAME, "--out", "{out}", "--explorer", "random"], "--texture-reference", "json", ""),
    (["run", "load", "--game", GAME, "--out", "{out}", "--explorer", "inspector"], "--load-threshold", "json", ""),
    (["run", "window", "--game", GAME, "--out", "{out}", "--explorer", "random"], "--oois", "json", ""),
    (["run", "window", "--game", GAME, "--out", "{out}", "--explorer", "random", "--map-bounds", "0,0,1000,1000"], "--map",
     "image", ""),
    (["run", "evolve", "--game", GAME, "--out", "{out}", "--reward", "{python}:score"], "--assert", "python", ":check"),
    (["run", "evolve", "--game", GAME, "--out", "{out}"], "--reward", "python", ":score"),
    (["demos", "--game", GAME, "--behavior", "path", "--out", "{out}"], "--dagger", "checkpoint", ""),
    (["shots", "--out", "{out}"], "--demos", "demos", ""),
    (["train", "policy", "--encoder", "{encoder}", "--out", "{out}"], "--demos", "demos", ""),
    (["train", "policy", "--demos", "{demos}", "--out", "{out}"], "--encoder", "checkpoint", ""),
    (["train", "policy", "--demos", "{demos}", "--encoder", "{encoder}", "--out", "{out}"], "--init", "checkpoint", ""),
    (["eval", "policy", "--game", GAME], "--ckpt", "checkpoint", ""),
    (["plan", "run", "{plan}", "--game", GAME, "--out", "{out}", "--oracle-labels"], "--validations", "python", ""),
    (["plan", "run", "{plan}", "--game", GAME, "--out", "{out}", "--oracle-labels"], "--path-policy", "checkpoint", ""),
    (["plan", "from-text", "{steps}", "--out", "{out}"], "--keymap", "keymap", ""),
    (["record", "--out", "{out}", "--behavior", "path", "--game", GAME], "--keymap", "keymap", ""),
    (["demos", "--from-video", "{video}", "--behavior", "path", "--out", "{out}"], "--idm", "checkpoint", ""),
    (["train", "encoder", "--out", "{out}"], "--demos", "demos", ""),
    (["train", "encoder", "--demos", "{demos}", "--out", "{out}"], "--detector", "checkpoint", ""),
    (["train", "encoder", "--demos", "{demos}", "--out", "{out}"], "--pretrained", "checkpoint", ""),
    (["train", "detector", "--out", "{out}"], "--coco", "json", ""),
    (["eval", "detector", "--coco", "{coco}"], "--ckpt", "checkpoint", ""),
]

# Inputs given as a positional argument: (command line before it, its name, what it takes, what follows
# it). The error must name the path given.
FILE_ARGUMENTS = [
    (["replay"], "episode", "episode", []),
    (["report"], "run", "run", []),
    (["plan", "run"], "plan", "plan", ["--game", GAME, "--out", "{out}", "--oracle-labels"]),
    (["plan", "record"], "episode", "episode", ["--out", "{out}"]),
]

COUNT_VALUES = {"0": "0", "negative": "-3", "huge": "1000000000000000", "not-a-number": "many"}

# (command line before the option, the option, the values that are wrong for it)
ALL = tuple(COUNT_VALUES)
NOT_ZERO = ("negative", "huge", "not-a-number")  # 0 is a meaningful value of these
SEED = ("negative", "not-a-number")  # 0 and a large number are good seeds
RUN = ["run", "explore", "--game", GAME, "--out", "{out}", "--explorer", "random"]
EVOLVE = ["run", "evolve", "--game", GAME, "--out", "{out}"]
COUNT_OPTIONS = [
    (RUN, "--episodes", ALL), (RUN, "--steps", ALL), (RUN, "--envs", ALL), (RUN, "--test-steps", ALL),
    (RUN, "--seed", SEED), (RUN, "--threads", SEED), (["run", "window", "--game", GAME, "--out", "{out}"], "--telemetry-port", ALL),
    (EVOLVE, "--stuck-steps", ALL), (EVOLVE, "--population", ALL), (EVOLVE, "--generations", ALL),
    (["demos", "--game", GAME, "--behavior", "path", "--out", "{out}"], "--episodes", ALL),
    (["demos", "--game", GAME, "--behavior", "path", "--out", "{out}"], "--steps", ALL),
    (["demos", "--game", GAME, "--behavior", "path", "--out", "{out}"], "--seed", SEED),
    (["shots", "--game", GAME, "--out", "{out}"], "--n", ALL),
    (["shots", "--demos", "{demos}", "--out", "{out}"], "--every", ALL),
    (["shots", "--game", GAME, "--out", "{out}"], "--min-box", ALL),
    (["shots", "--game", GAME, "--out", "{out}"], "--seed", SEED),
    (["record", "--out", "{out}", "--behavior", "path", "--game", GAME], "--fps", ALL),
    (["record", "--out", "{out}", "--behavior", "path", "--game", GAME], "--max-steps", ALL),
    (["record", "--out", "{out}", "--behavior", "path", "--game", GAME], "--telemetry-port", ALL),
    (["record", "--out", "{out}", "--behavior", "path", "--game", GAME], "--seed", SEED),
    (["replay", "{episode}"], "--speed", ("negative", "not-a-number")),
    (["train", "policy", "--demos", "{demos}", "--encoder", "{encoder}", "--out", "{out}"], "--epochs", ALL),
    (["train", "policy", "--demos", "{demos}", "--encoder", "{encoder}", "--out", "{out}"], "--batch-size", ALL),
    (["train", "policy", "--demos", "{demos}", "--encoder", "{encoder}", "--out", "{out}"], "--chunk", ALL),
    (["train", "policy", "--demos", "{demos}", "--encoder", "{encoder}", "--out", "{out}"], "--global-hidden", ALL),
    (["train", "policy", "--demos", "{demos}", "--encoder", "{encoder}", "--out", "{out}"], "--local-hidden", ALL),
    (["eval", "policy", "--ckpt", "{policy}", "--game", GAME], "--episodes", ALL),
    (["eval", "policy", "--ckpt", "{policy}", "--game", GAME], "--steps", ALL),
    (["plan", "run", "{plan}", "--game", GAME, "--out", "{out}", "--oracle-labels"], "--max-steps", ALL),
    (["plan", "record", "{episode}", "--out", "{out}"], "--every", ALL),
    (["train", "encoder", "--demos", "{demos}", "--out", "{out}"], "--epochs", ALL),
    (["train", "encoder", "--demos", "{demos}", "--out", "{out}"], "--batch-size", ALL),
    (["train", "encoder", "--demos", "{demos}", "--out", "{out}"], "--image-size", ALL),
    (["train", "detector", "--coco", "{coco}", "--out", "{out}"], "--epochs", ALL),
    (["train", "detector", "--coco", "{coco}", "--out", "{out}"], "--batch-size", ALL),
]

XFAIL: dict[str, str] = {}
"""Cases known to fail, with the reason; strict, so a fixed one shows (none today)."""
NOT_RUN: set[str] = set()
"""Cases that would start long work if they failed: not run, each with its reason in XFAIL."""


# -- good inputs, and bad ones made from them ------------------------------------------------------

@pytest.fixture(scope="module")
def good(tmp_path_factory, small_park):
    """Good inputs of every kind: a real demo episode (recorded on the small park), checkpoints
    with playtester's header, COCO labels, a plan, a key map, a Python file, a video."""
    import torch

    root = tmp_path_factory.mktemp("good")
    demos = root / "demos"
    assert main(["demos", "--game", small_park, "--behavior", "path", "--episodes", "1", "--steps", "6",
                 "--out", str(demos)]) == 0
    [episode] = [p for p in demos.iterdir() if p.is_dir()]
    made = {"demos": demos, "episode": episode}
    for kind in ("encoder", "policy", "detector"):
        made[kind] = root / f"{kind}.ckpt"
        torch.save({"playtester": {"model": kind, "version": 1}, "hyper_parameters": {"size": 4},
                    "state_dict": {"model.w": torch.arange(4000, dtype=torch.float32)}}, made[kind])
    made["checkpoint"] = made["policy"]
    import cv2
    import numpy as np

    made["coco"] = root / "labels.json"  # ten shots of a barrel: enough to train on
    for i in range(1, 11):
        cv2.imwrite(str(root / f"shot{i}.png"), np.full((48, 64, 3), 12 * i, np.uint8))
    made["coco"].write_text(json.dumps({
        "images": [{"id": i, "file_name": f"shot{i}.png", "width": 64, "height": 48} for i in range(1, 11)],
        "annotations": [{"id": i, "image_id": i, "category_id": 1, "bbox": [i, 2, 10, 12], "area": 120, "iscrowd": 0}
                        for i in range(1, 11)],
        "categories": [{"id": 1, "name": "barrel"}]}))
    made["json"] = made["coco"]
    made["image"] = root / "shot1.png"  # a map image
    made["plan"] = root / "plan.yaml"  # flow style: cut anywhere, it no longer parses
    made["plan"].write_text("{name: walk, nodes: [{name: a, target: {position: [100, 200]}, action: forward, repeat: 4},"
                            " {name: b, action: turn_left, repeat: 2}]}\n")
    made["keymap"] = root / "keys.yaml"
    made["keymap"].write_text("{name: mine, actions: [{name: forward, keys: [w]}, {name: turn_left, keys: [left]},"
                              " {name: jump, keys: [space]}]}\n")
    made["python"] = root / "checks.py"
    made["python"].write_text("def check(frame, info):\n    return None\n\n\ndef score(frame, info):\n    return float(\n        len(info)\n    )\n\nregistry = None\n")
    source = made["python"].read_text()
    with pytest.raises(SyntaxError):  # cut in half (the truncated case), it is no longer Python
        compile(source[: len(source) // 2], "cut.py", "exec")
    made["steps"] = root / "steps.txt"
    made["steps"].write_text("Walk to the barrel.\n")
    made["video"] = root / "clip.mp4"
    made["video"].write_bytes(b"\0" * 10)  # the --idm cases fail on --idm before the video is read
    made["run"] = root / "run"
    return made


def bad_file(good: dict, kind: str, variant: str, where: Path, wants_detector: bool = False) -> Path:
    """A bad `kind` input (`variant` of FILE_VARIANTS, or OTHER_MODEL) under `where`."""
    folder_kind = kind in ("demos", "episode", "run")
    path = where / ("bad" if folder_kind else f"bad{Path(str(good[kind])).suffix or '.bin'}")
    if variant == OTHER_MODEL:
        path.write_bytes(Path(good["policy" if wants_detector else "detector"]).read_bytes())
        return path
    if variant == "missing":
        return path
    if variant == "wrong-kind":
        if folder_kind:
            path.write_text("a file, not a folder\n")
        else:
            path.mkdir()
        return path
    if not folder_kind:
        source = Path(good[kind]).read_bytes()
        path.write_bytes({"empty": b"", "truncated": source[: len(source) // 2],
                          "random": os.urandom(4096)}[variant])
        return path
    path.mkdir()  # a folder: empty, or its files cut or garbled
    if variant == "empty":
        return path
    episode = good["episode"]
    target = path / episode.name if kind == "demos" else path
    target.mkdir(exist_ok=True)
    names = ("frames.npy", "steps.jsonl", "meta.json") if kind != "run" else ("config.yaml", "trajectory.jsonl")
    for name in names:
        src = episode / name if kind != "run" else episode / "meta.json"
        data = src.read_bytes()
        (target / name).write_bytes(data[: len(data) // 2] if variant == "truncated" else os.urandom(len(data) or 64))
    return path


def fill(argv: list[str], good: dict, where: Path) -> list[str]:
    values = {k: str(v) for k, v in good.items()} | {"out": str(where / "out")}
    return [a.format(**values) if "{" in a else a for a in argv]


def refused_in_one_line(argv: list[str], names: str, capsys) -> str:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0, f"accepted: {' '.join(argv)}\n{out}{err}"
    assert "Traceback" not in out + err, err
    assert len(lines) == 1, f"{len(lines)} lines of error:\n{err}"
    assert lines[0].startswith("error:") and names in lines[0], lines[0]
    return lines[0]


# -- the matrix -------------------------------------------------------------------------------------

def _command(before: list[str]) -> str:
    """The command's words: `train policy`, `run`."""
    words = []
    for a in before:
        if a.startswith("-") or "{" in a:
            break
        words.append(a)
    return " ".join(words)


def _file_cases():
    for before, option, kind, after in FILE_OPTIONS:
        for variant in FILE_VARIANTS + ((OTHER_MODEL,) if kind == "checkpoint" else ()):
            case = f"{_command(before)} {option} {variant}"
            yield pytest.param(before, option, kind, after, variant, id=case, marks=_marks(case))
    for before, name, kind, after in FILE_ARGUMENTS:
        for variant in FILE_VARIANTS:
            yield pytest.param(before, None, kind, after, variant, id=f"{' '.join(before)} {name.upper()} {variant}")


def _count_cases():
    for before, option, variants in COUNT_OPTIONS:
        for variant in variants:
            case = f"{_command(before)} {option} {variant}"
            yield pytest.param(before, option, variant, id=case, marks=_marks(case))


def _marks(case: str) -> tuple:
    if case in NOT_RUN:
        return (pytest.mark.xfail(reason=XFAIL.get(case, "it would start long work"), run=False),)
    if case in XFAIL:
        return (pytest.mark.xfail(reason=XFAIL[case], strict=True),)
    return ()


@pytest.mark.parametrize("before, option, kind, after, variant", list(_file_cases()))
def test_bad_file(before, option, kind, after, variant, good, tmp_path, capsys):
    path = bad_file(good, kind, variant, tmp_path, wants_detector=f"{_command(before)} {option}" in DETECTOR_OPTIONS)
    argv = fill(before, good, tmp_path)
    argv += [option, f"{path}{after}"] if option else [str(path), *fill(after, good, tmp_path)]
    refused_in_one_line(argv, option or path.name, capsys)


@pytest.mark.parametrize("before, option, variant", list(_count_cases()))
def test_bad_count(before, option, variant, good, tmp_path, capsys):
    argv = fill(before, good, tmp_path) + [option, COUNT_VALUES[variant]]
    refused_in_one_line(argv, option, capsys)


@pytest.mark.parametrize("key, variants", [("rollout", ALL), ("stuck_steps", ALL), ("max_restarts", NOT_ZERO)])
def test_bad_count_from_a_config_file(key, variants, good, tmp_path, capsys):
    """The counts `run explore` takes from --config only are checked as the command line's are: one
    line naming the file and the key."""
    config = tmp_path / "options.yaml"
    for variant in variants:
        config.write_text(f"{key}: {COUNT_VALUES[variant]}\n")
        refused_in_one_line([*fill(RUN, good, tmp_path), "--config", str(config)], f"--config {config}: {key}", capsys)
    assert not (tmp_path / "out").exists()


def test_texture_reference_of_objects_the_run_cannot_find_is_refused(tmp_path, capsys):
    """A reference whose categories the run never finds (the park has no dragons) would never be
    used: refused in one line naming the category and what the run finds (it was accepted)."""
    import cv2
    import numpy as np

    shot = np.full((120, 160, 3), (60, 40, 20), np.uint8)  # a plain background, and the dragon: a grey square
    shot[10:90, 10:90] = 200
    cv2.imwrite(str(tmp_path / "dragon.png"), shot)
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({
        "images": [{"id": 1, "file_name": "dragon.png", "width": 160, "height": 120}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 80, 80], "area": 6400, "iscrowd": 0}],
        "categories": [{"id": 1, "name": "dragon"}]}))
    argv = ["run", "explore", "--game", GAME, "--out", str(tmp_path / "out"), "--explorer", "random", "--texture-reference",
            str(labels)]
    line = refused_in_one_line(argv, "--texture-reference", capsys)
    assert "dragon" in line and "barrel" in line
    assert not (tmp_path / "out").exists()
