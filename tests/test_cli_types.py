"""The vocabulary of option types (playtester/options.py) and the cases of issue 36 it
was built for: each of them refused in one line naming the option (exit 2, no traceback), the
memory cases with their estimate, and nothing left on the disk by a refused command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from playtester.cli import main
from playtester import options as o
from playtester.options import (
    Bounds, Choice, Count, FrameSize, InFile, InFolder, NameOrFile, Number, OutFile, OutFolder, Refused, Region, Seed, Size, Switch,
    Text,
)

GAME = "doom:park:5:24x24"


# -- the types -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, good, bad", [
    (Seed(), ["0", "4294967295", 7, " 12 "], ["-1", "4294967296", "99999999999", "1" * 70, "1.5", "abc", "", True, 3.0]),
    (Count(1, 64), ["1", "64"], ["0", "65", "-1", "1e3", "nan"]),
    (Size(2048, 32), ["32", "2048"], ["31", "2049"]),
    (Number(0.0, 1.0), ["0", "1", "0.25", 0.5, 1], ["nan", "inf", "-inf", "-0.01", "1.01", "1e400", "x", True]),
    (Number(0.0, 1.0, above=True, below=True), ["0.5"], ["0", "1"]),
    (Choice("cpu", "cuda"), ["cpu", "cuda"], ["CPU", "", "gpu", 1]),
    (Switch(), [True, False], ["yes", 1, None]),
    (Text(), ["doom:park", "a b", 3], ["", "  ", "a\0b", ["x"], True]),
    (FrameSize(), ["320x240", "1X1", "4096x4096"], ["0x5", "4097x1", "x", "320x240x1", "-1x-1", ""]),
    (Region(), ["0,0,640,480", "-10,-20,1,1", [5, 5, 65536, 2]], ["0,0,0,10", "0,0,10,-1", "0,0,65537,5", "0,0,1.5,2", "0,0,1", "a,b,c,d", ""]),
    (Bounds(), ["0,0,1,1", [0, 0, 600, 400], "-5,-5,5.5,5"], ["1,1,0,0", "0,0,1", "nan,0,1,1", "0,0,inf,1", "a,b,c,d", [0, 0, 0, 0]]),
])
def test_each_type_takes_what_it_says_and_refuses_the_rest(kind, good, bad):
    for value in good:
        kind.parse(value)
    for value in bad:
        with pytest.raises(Refused):
            kind.parse(value)


def test_parsed_values_and_what_a_refusal_says():
    assert Seed().parse(" 12 ") == 12 and Number().parse("2.5") == 2.5 and Bounds().parse("0,1,2,3") == [0, 1, 2, 3]
    assert FrameSize().parse("320X240") == "320x240" and Region().parse(" 1, -2,30,40") == (1, -2, 30, 40)
    with pytest.raises(Refused, match="give a seed, a whole number from 0 to 4294967295"):
        Seed().parse("-1")
    with pytest.raises(Refused, match="not a finite number; give a number above 0 to 1000000"):
        Number(0, 1_000_000, above=True).parse("nan")


def test_paths_are_checked_and_nothing_is_made(tmp_path):
    file, folder = tmp_path / "f", tmp_path / "d"
    file.write_text("x")
    folder.mkdir()
    before = sorted(tmp_path.rglob("*"))
    assert InFile("COCO labels.json").parse(str(file)) == file and InFolder().parse(str(folder)) == folder
    assert OutFile().parse(str(folder / "m.ckpt")) == folder / "m.ckpt" and OutFolder().parse(str(folder / "new")) == folder / "new"
    assert NameOrFile(("auto",), "weights file").parse("auto") == "auto" and NameOrFile(("auto",)).parse(str(file)) == str(file)
    cases = [
        (InFile("policy checkpoint"), tmp_path / "none", "not found; give a policy checkpoint"),
        (InFile("policy checkpoint"), folder, "is a folder"),
        (InFile("COCO labels.json", inside="labels.json"), folder, "is a folder; give a COCO labels.json"),
        (InFolder("run folder"), file, "is a file, not a folder; give a run folder"),
        (OutFile(".json"), folder, "is a folder; give a file name such as"),
        (OutFile(), file / "x.json", f"its parent {file} is a file"),
        (OutFile(), tmp_path / "no" / "x.json", "its parent folder"),
        (OutFolder(), file, "is a file, not a folder"),
        (OutFolder(), file / "logs", f"its parent {file} is a file"),
        (OutFolder(), tmp_path / "no" / "deeper" / "x", "does not exist"),
        (OutFolder(), "", "give a path"),
        (NameOrFile(("auto", "none")), tmp_path / "none", "(or auto or none)"),
    ]
    for kind, value, words in cases:
        with pytest.raises(Refused, match=words.replace("(", r"\(").replace(")", r"\)")):
            kind.parse(str(value))
    assert sorted(tmp_path.rglob("*")) == before
    (folder / "labels.json").write_text("{}")  # a folder holding the file: the message gives its path
    with pytest.raises(Refused, match=re.escape(f"is a folder; give {folder / 'labels.json'}")):
        InFile("COCO labels.json", inside="labels.json").parse(str(folder))


def test_every_option_of_every_command_is_declared_with_the_vocabulary():
    """No command checks an option by hand: each option that takes a value has a type of the
    vocabulary (flags are typer's own)."""
    import typer

    from playtester.cli import app

    untyped = []

    def walk(cmd, words):
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, [*words, name])
        for param in cmd.params:
            if param.name != "help" and not getattr(param, "is_flag", False) and o.kind_of(param) is None:
                untyped.append(f"{' '.join(words)} {param.opts[0] if param.opts else param.name}")

    walk(typer.main.get_command(app), [])
    assert not untyped, untyped


# -- the cases ------------------------------------------------------------------------------

def refused(argv: list[str], capfd, *words: str) -> str:
    capfd.readouterr()
    code = main([str(a) for a in argv])
    out, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, f"exit {code}: {out}{err}"
    assert "Traceback" not in out + err and len(lines) == 1 and lines[0].startswith("error:"), err
    line = " ".join(lines[0].split())
    for w in words:
        assert w in line, line
    return line


@pytest.fixture
def files(tmp_path):
    """A file F, a folder D and a COCO-named file, as the audit used them."""
    (tmp_path / "F").write_text("a file\n")
    (tmp_path / "D").mkdir()
    return tmp_path


PARSE_CASES = [  # refused by the option's type before anything runs
    (["train", "detector", "--coco", "{F}", "--out", "{m}", "--seed", "-1"], "--seed -1"),
    (["train", "encoder", "--demos", "{D}", "--out", "{m}", "--seed", "-1"], "--seed -1"),
    (["train", "policy", "--demos", "{D}", "--encoder", "{F}", "--out", "{m}", "--seed", "-1"], "--seed -1"),
    (["eval", "policy", "--ckpt", "{F}", "--seed", "-1"], "--seed -1"),
    (["train", "detector", "--coco", "{F}", "--out", "{m}", "--seed", "99999999999"], "--seed 99999999999"),
    (["run", "explore", "--game", GAME, "--explorer", "inspector", "--seed", "1" * 70, "--out", "{out}"], "--seed 1111"),
    (["train", "detector", "--coco", "{F}", "--out", "{m}", "--workers", "-1"], "--workers -1"),
    (["train", "encoder", "--demos", "{D}", "--out", "{m}", "--workers", "-1"], "--workers -1"),
    (["eval", "detector", "--ckpt", "{F}", "--coco", "{F}", "--batch-size", "0"], "--batch-size 0"),
    (["train", "encoder", "--demos", "{D}", "--out", "{m}", "--feature-dim", "100000000"], "--feature-dim 100000000"),
    (["eval", "detector", "--ckpt", "{F}", "--coco", "{F}", "--json", "{F}/x.json"], "--json", "is a file, not a folder"),
    (["train", "detector", "--coco", "{F}", "--out", "{m}", "--logdir", "{F}/logs"], "--logdir", "is a file, not a folder"),
    (["plan", "record", "{D}", "--out", "{p}", "--tolerance", "nan"], "--tolerance nan", "not a finite number"),
    (["replay", "{D}", "--speed", "nan"], "--speed nan", "not a finite number"),
    (["report", "{F}"], "run", "is a file, not a folder"),
    (["report", "x" * 300], "run", "File name too long"),
    (["train", "detector", "--coco", "{F}", "--out", "y" * 300 + "/m.ckpt"], "--out", "File name too long"),
    (["shots", "--game", GAME, "--out", "z" * 300], "--out", "File name too long"),
    (["eval", "detector", "--ckpt", "{F}", "--coco", "{F}", "--json", "nodir/x.json"], "--json nodir/x.json", "nodir does not exist"),
    (["plan", "record", "{D}", "--out", "{p}", "--tolerance", "-5"], "--tolerance -5", "a number above 0"),
    (["run", "window", "--game", "window:Nothing", "--explorer", "random", "--map", "nosuch.png", "--map-bounds", "0,0,1,1",
      "--out", "{out}"], "--map nosuch.png", "not found"),
]


@pytest.mark.parametrize("argv, words", [(c[0], c[1:]) for c in PARSE_CASES], ids=[(" ".join(c[0][:2]) + " " + c[1])[:60] for c in PARSE_CASES])
def test_the_audits_bad_options_are_one_line(argv, words, files, capfd, monkeypatch):
    monkeypatch.chdir(files)
    values = {"F": files / "F", "D": files / "D", "m": files / "m.ckpt", "p": files / "p.yaml", "out": files / "out"}
    line = refused([a.format(**values) for a in argv], capfd, *words)
    assert "--out" not in line or "--out" in words[0]  # the option at fault is named, not another
    assert sorted(p.name for p in files.iterdir()) == ["D", "F"], "a refused command left something behind"


def test_the_wording_of_a_bad_tolerance_names_it_not_min_size(files, capfd):
    from playtester.errors import UserError
    from playtester.plans.record import RecordConfig

    with pytest.raises(UserError, match=r"--tolerance -5\.0: must be a positive"):
        RecordConfig(tolerance=-5.0)


def test_a_map_that_is_no_image_is_one_line_without_opencvs_warning(files, capfd):
    (files / "map.png").write_bytes(b"not a png")
    refused(["run", "window", "--game", "window:Nothing", "--explorer", "random", "--map", files / "map.png",
             "--map-bounds", "0,0,1,1", "--out", files / "out"], capfd, "--map", "not an image")
    (files / "map.yaml").write_text(f"map: {files / 'map.png'}\nmap_bounds: [0, 0, 1, 1]\n")  # the same image from --config
    line = refused(["run", "window", "--game", "window:Nothing", "--explorer", "random", "--config", files / "map.yaml",
                    "--out", files / "out"], capfd, "--config", "map.yaml: map", "not an image")
    assert "--map " not in line, "blames the command line's --map, which was not given"
    assert not (files / "out").exists()


def test_a_run_spec_built_in_code_has_its_values_checked_by_their_option_types(tmp_path):
    from playtester.errors import UserError
    from playtester.tester.spec import RunSpec

    for wrong, said in ((dict(episodes=0), "--episodes 0: out of range"), (dict(min_score=1.5), "--min-score 1.5: out of range"),
                        (dict(device="tpu"), "--device tpu: use cpu or cuda"), (dict(max_restarts=-1), "--max-restarts -1")):
        with pytest.raises(UserError, match=said):
            RunSpec(game=GAME, tester=None, run_dir=str(tmp_path / "r"), explorer="random", **wrong)


def fake_encoder(path: Path, feature_dim: int = 512) -> Path:
    import torch

    torch.save({"playtester": {"model": "encoder", "version": 1}, "hyper_parameters": {"feature_dim": feature_dim},
                "state_dict": {}}, path)
    return path


@pytest.mark.parametrize("hidden, refused_at_8gb", [(16384, True), (65536, True), (1024, False)])
def test_the_policy_s_memory_is_estimated_before_anything_is_read(hidden, refused_at_8gb, files, capfd, monkeypatch):
    """--global-hidden 16384 (and 65536, the most the type takes) refused with the estimate on a
    machine with 8 GB available (the paper's 1024 passes on to read the demos, refused there:
    the folder holds none)."""
    monkeypatch.setattr(o, "available_memory", lambda: 8 * 10**9)
    argv = ["train", "policy", "--demos", files / "D", "--encoder", fake_encoder(files / "enc.ckpt"), "--out", files / "m.ckpt",
            "--global-hidden", hidden]
    if refused_at_8gb:
        line = refused(argv, capfd, f"--global-hidden {hidden}", "needs about", "GB of memory", "--memory-budget")
        assert float(line.split("needs about ")[1].split(" GB")[0]) > 2.0
    else:
        refused(argv, capfd, "--demos")


def test_the_policy_estimate_is_its_weights_and_activations_worked_by_hand():
    """A GRU of input I and hidden H has 3H(I + H + 2) weights; the policy's core: the local
    bidirectional GRU over 512 features (L = 256), the global GRU over its 2L outputs, the head
    (LayerNorm'd 512 and 256 units, 9 actions). Trained with AdamW: 4 copies of each weight, 4 bytes;
    on top, the larger of a chunk's activations and the training state Lightning serialises in
    memory at each epoch's end (the weights, AdamW's two moments, the teacher's copy)."""
    from playtester.imitation.policy import PolicyConfig, training_memory

    def core(G: int, L: int = 256, F: int = 512) -> int:
        head = (2 * L + G) * 512 + 512 + 2 * 512 + 512 * 256 + 256 + 2 * 256 + 256 * 9 + 9
        return 2 * 3 * L * (F + L + 2) + 3 * G * (2 * L + G + 2) + head

    assert core(16384) == 840_539_657  # as torch counts it on the meta device (checked once by hand)
    for G in (1024, 16384):
        per_step = 4 * 2 * 3 * 256 + 3 * G + 512 + 256 + (2 * 256 + G)  # k windows of the local GRU, the global, the head
        assert per_step < 2 * 8 * 32 * per_step < 3 * core(G)  # the serialised state is the larger here
        assert training_memory(PolicyConfig(feature_dim=512, global_hidden=G), 1, 1, teacher=False) == 4 * (4 * core(G) + 3 * core(G))
        assert training_memory(PolicyConfig(feature_dim=512, global_hidden=G), 8, 32, teacher=True) == \
            4 * (5 * core(G) + 4 * core(G))  # the teacher: a copy of the weights, in memory and in the checkpoint
    from playtester.perception.training import training_bytes

    assert training_bytes(10, activations=50) == 4 * (40 + 50)  # a step's activations above the checkpoint's 10 weights
    assert training_bytes(10, frozen=2, activations=5, resumable=True) == 4 * (42 + 32)  # the state: 3 × 10 + 2


def test_memory_budget_raises_the_share(files, capfd, monkeypatch):
    monkeypatch.setattr(o, "available_memory", lambda: 8 * 10**9)
    argv = ["train", "policy", "--demos", files / "D", "--encoder", fake_encoder(files / "enc.ckpt"), "--out", files / "m.ckpt",
            "--global-hidden", "4096"]  # about 2.2 GB: above a quarter of 4 GB, below 0.6 of it
    monkeypatch.setattr(o, "available_memory", lambda: 4 * 10**9)
    refused(argv, capfd, "--global-hidden 4096", "more than 0.25")
    refused(["--memory-budget", "0.6", *argv], capfd, "--demos")  # past the memory check, to the demos
    refused(["--memory-budget", "1.5", *argv], capfd, "--memory-budget 1.5")


def test_a_rollout_of_200000_in_a_config_is_refused_with_its_estimate(files, capfd, monkeypatch):
    monkeypatch.setattr(o, "available_memory", lambda: 8 * 10**9)
    (files / "big.yaml").write_text("rollout: 200000\n")
    refused(["run", "explore", "--game", GAME, "--explorer", "inspector", "--envs", "1", "--episodes", "1", "--steps", "20",
             "--config", files / "big.yaml", "--out", files / "big"], capfd, "--rollout 200000", "needs about", "GB")
    assert not (files / "big").exists()
    (files / "bad.yaml").write_text("rollout: .nan\n")
    refused(["run", "explore", "--game", GAME, "--config", files / "bad.yaml", "--out", files / "big"], capfd,
            "bad.yaml: rollout nan")


def test_a_plan_target_at_nan_or_inf_is_one_line_and_leaves_no_folder(files, capfd):
    for value in (".nan", ".inf", "-.inf"):
        plan = files / "plan.yaml"
        plan.write_text(f"name: p\nnodes:\n  - {{name: a, target: {{position: [{value}, 5]}}, action: forward}}\n")
        refused(["plan", "run", plan, "--game", GAME, "--oracle-labels", "--out", files / "pr"], capfd, "finite numbers")
        assert not (files / "pr").exists()


def test_a_plan_start_the_game_lacks_leaves_no_folder(files, capfd):
    plan = files / "plan.yaml"
    plan.write_text("name: p\nstart: 999\nnodes:\n  - {name: a, action: forward, repeat: 2}\n")
    refused(["plan", "run", plan, "--game", GAME, "--out", files / "pr", "--max-steps", "5"], capfd, "start 999")
    assert not (files / "pr").exists()
    refused(["plan", "run", plan, "--game", GAME, "--out", files / "pr"], capfd, "start 999")  # not "the folder exists"


def test_a_replayed_episode_whose_actions_the_game_lacks_is_one_line(files, capfd):
    """A park demo replayed on CartPole (2 actions): refused before a step, not CartPole's AssertionError."""
    assert main(["demos", "--game", GAME, "--behavior", "path", "--episodes", "1", "--steps", "8", "--out", str(files / "d")]) == 0
    [episode] = [p for p in (files / "d").iterdir() if p.is_dir()]
    refused(["replay", episode, "--game", "gym:CartPole-v1", "--speed", "0"], capfd, "its actions go up to", "2 actions")


def test_strict_replay_of_a_finding_without_frames_is_refused(files, capfd):
    finding = files / "finding"
    finding.mkdir()
    (finding / "finding.json").write_text(json.dumps({"kind": "stuck", "message": "x", "game": GAME, "game_options": {},
                                                      "reset": {"seed": 1, "options": None}, "frames_from": 0, "steps": 2}))
    (finding / "actions.jsonl").write_text('{"t": 0, "action": 0}\n{"t": 1, "action": 1}\n')
    refused(["replay", finding, "--strict"], capfd, "--strict", "frames.npy is missing")
    capfd.readouterr()
    assert main(["replay", str(finding)]) == 0  # without --strict it replays, and says it compared nothing
    assert "0 of 0 frames identical" in " ".join(capfd.readouterr().out.split())


def test_an_evolve_run_whose_reward_fails_leaves_no_folder(files, capfd, monkeypatch):
    monkeypatch.chdir(files)
    (files / "reward.py").write_text("def score(frame, info):\n    return 'abc'\n")
    refused(["run", "evolve", "--game", GAME, "--reward", "reward.py:score", "--population", "2", "--generations", "1",
             "--steps", "5", "--envs", "1", "--out", files / "ev"], capfd, "--reward", "could not convert")
    assert not (files / "ev").exists()


def test_overwrite_refused_before_its_work_puts_the_old_folder_back(tmp_path):
    """--overwrite sets the old folder aside; a refusal before real work brings it back."""
    from playtester.errors import UserError
    from playtester.files import new_folder

    out = tmp_path / "run"
    out.mkdir()
    (out / "old.txt").write_text("kept")
    with pytest.raises(UserError):
        with new_folder(out, replace=True):
            out.mkdir()
            (out / "config.yaml").write_text("new")
            raise UserError("refused")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] and (out / "old.txt").read_text() == "kept"
    with new_folder(out, replace=True):
        out.mkdir()
        (out / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"] and sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    with pytest.raises(UserError):  # real work done: what was written is kept
        with new_folder(tmp_path / "r2", kept=lambda: True):
            (tmp_path / "r2").mkdir()
            raise UserError("late")
    assert (tmp_path / "r2").is_dir()


def test_crashes_are_said_once_each_from_the_runs_log(tmp_path):
    from playtester.tester.crashes import CrashNews, record_crash

    record_crash(tmp_path, 0, 1, 5, "old one, from before a resume")
    news = CrashNews(tmp_path)
    assert news.lines() == []
    record_crash(tmp_path, 1, 3, 40, "the engine died")
    record_crash(tmp_path, 0, 4, 2, "")
    assert news.lines() == ["the game crashed in episode 3 (instance 1, step 40): the engine died",
                            "the game crashed in episode 4 (instance 0, step 2): the game is gone"]
    assert news.lines() == []


def test_the_rollout_estimate_worked_by_hand():
    """64×64 frames (12288 bytes) through the explorer's convolutions: 32×15×15, 64×6×6 and
    64×4×4 outputs, each with its ReLU, the flattened 1024, the 64-wide linear and its ReLU:
    22208 activations a frame, beside its 12288 floats of input. A step keeps its frame twice
    (rollout, reward); the update passes a minibatch of whole instances: all of one instance's
    steps, or 2 of 8 instances' (8 / gcd(8, 4)), kept for the backward pass (4 bytes each)."""
    from playtester.capture.frames import FrameSpec
    from playtester.exploration.explorer import rollout_memory

    per_frame = 12288 + (7200 * 2 + 2304 * 2 + 1024 * 2 + 1024 + 64 * 2)
    assert per_frame == 12288 + 22208
    assert rollout_memory(10, 1, FrameSpec.square(64)) == 10 * 2 * 12288 + 4 * 10 * per_frame
    assert rollout_memory(10, 8, FrameSpec.square(64)) == 80 * 2 * 12288 + 4 * 20 * per_frame
    # ppgta: the rollout keeps 2304 feature floats a step; its update passes features, no convolution
    assert rollout_memory(10, 1, FrameSpec.square(128), features=2304) == 10 * (3 * 128**2 + 4 * 2304) + 4 * 10 * 2304
