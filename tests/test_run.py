"""`playtester run` from the command line: tiny budgets, Ctrl-C and --resume, bad input."""

import json
import signal
import subprocess
import sys
import time

import pytest

from playtester.cli import main
from playtester.tester.runlog import read_jsonl


def test_run_writes_a_report_and_resumes(tiny_inspect_policy, small_park, tmp_path, capsys):
    out = tmp_path / "r1"
    args = ["run", "explore", "--game", small_park, "--tester", str(tiny_inspect_policy), "--oracle-labels", "--explorer", "random",
            "--steps", "40", "--test-steps", "8", "--out", str(out)]
    assert main([*args, "--episodes", "2"]) == 0
    assert "report" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["steps"] == 80
    assert (out / "report.html").exists() and (out / "coverage.png").exists()
    # an existing folder is refused without --resume or --overwrite
    assert main([*args, "--episodes", "2"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--episodes", "3", "--resume"]) == 0
    assert {r["episode"] for r in read_jsonl(out / "trajectory.jsonl")} == {0, 1, 2}
    assert main([*args, "--episodes", "1", "--overwrite"]) == 0
    assert {r["episode"] for r in read_jsonl(out / "trajectory.jsonl")} == {0}


@pytest.mark.parametrize("explorer", ["random", "ppgta"])
def test_ctrl_c_keeps_what_was_written_and_resume_finishes(tiny_parts, small_park, tmp_path, explorer):
    tester, path = tiny_parts("inspect")[2], tiny_parts("path")[2]
    out = tmp_path / "r2"
    steps = 250  # an episode: the run is cut at 150 rows of its 500, and the resume plays one more
    args = [sys.executable, "-m", "playtester", "run", "explore", "--game", small_park, "--tester", str(tester), "--oracle-labels",
            "--explorer", explorer, "--steps", str(steps), "--episodes", "2", "--test-steps", "8", "--out", str(out)]
    if explorer == "ppgta":  # two game processes; the explorer keeps its last update
        (tmp_path / "rollout.yaml").write_text("rollout: 16\n")
        args += ["--preference", str(path), "--envs", "2", "--config", str(tmp_path / "rollout.yaml")]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 480  # generous: the machine may be busy
    while time.time() < deadline and len(list(read_jsonl(out / "trajectory.jsonl"))) < 150:
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    printed, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    kept = list(read_jsonl(out / "trajectory.jsonl"))
    assert len(kept) >= 150
    if explorer == "ppgta":
        assert (out / "explorer" / "checkpoints" / "last.ckpt").exists() and "resume continues from it" in printed
    # resume with one more episode: what was played (the interrupted episode too) is kept, the new one is played
    more = [a if a != "2" or args[i - 1] != "--episodes" else "3" for i, a in enumerate(args)]
    done = subprocess.run([*more, "--resume"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    if explorer == "ppgta":
        assert "resumed from" in done.stdout  # the explorer goes on from its saved update
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert rows[: len(kept)] == kept, "what was written before Ctrl-C is kept as it was"
    assert {r["episode"] for r in rows} == {0, 1, 2}
    assert [r["t"] for r in rows if r["episode"] == 2] == list(range(steps))
    assert json.loads((out / "summary.json").read_text())["episodes"] == 3
    again = subprocess.run([*more, "--resume"], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "every one of the 3 episodes was played" in " ".join(again.stdout.split())


def test_ppo_explorer_run_on_two_instances(tiny_parts, small_park, tmp_path, capsys, monkeypatch, run_config):
    """The PPGTA explorer trained online on two game instances in their own processes: the run
    plays exactly its episode budget, numbers episodes without clashes, tests each OOI once
    across both instances, saves the explorer, and --resume with a larger budget goes on. Its
    updates run on the trainer's share of the cores given (--threads 6 among 2 workers and the
    trainer: 2), not on the one thread of a forked game worker (the instance the vector env builds
    in this process to read the spaces)."""
    import torch

    from playtester.exploration import ppo

    threads, real_update = torch.get_num_threads(), ppo.update
    update_threads = []
    monkeypatch.setattr(ppo, "update", lambda *a: update_threads.append(torch.get_num_threads()) or real_update(*a))
    monkeypatch.setenv("PLAYTESTER_THREADS", "")  # --threads below sets it; the test's end restores it
    tester, path = tiny_parts("inspect")[2], tiny_parts("path")[2]
    out = tmp_path / "ppo"
    args = ["run", "explore", "--game", small_park, "--tester", str(tester), "--oracle-labels", "--preference", str(path),
            "--envs", "2", *run_config(rollout=16), "--steps", "48", "--test-steps", "8", "--out", str(out)]
    try:
        assert main([*args, "--episodes", "3", "--threads", "6"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert update_threads and set(update_threads) == {2}, update_threads
    printed = capsys.readouterr().out
    assert "explorer:" in printed and "report" in printed
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert {r["episode"] for r in rows} == {0, 1, 2}
    assert {r["env"] for r in rows} == {0, 1}
    assert all(r["episode"] % 2 == r["env"] for r in rows)  # instance i plays episodes i, i + 2, …
    for e in range(3):
        ts = [r["t"] for r in rows if r["episode"] == e]
        assert ts == list(range(48)), f"episode {e} is not one whole episode of 48 steps"
    tests = list(read_jsonl(out / "tests.jsonl"))
    claims = [c["ooi"] for c in read_jsonl(out / "claims.jsonl")]
    assert sorted(claims) == sorted(t["ooi"] for t in tests) and len(set(claims)) == len(claims)
    assert (out / "explorer" / "checkpoints" / "last.ckpt").exists()
    assert list((out / "explorer" / "tensorboard").glob("events.out.tfevents.*"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["agent"] == "PPGTA explorer"
    # a resumed run must keep its options; with a larger budget it plays only the new episodes
    assert main([*args[:-4], "--envs", "1", "--out", str(out), "--episodes", "4", "--resume"]) == 2
    assert "num-envs" in capsys.readouterr().err
    assert main([*args, "--episodes", "4", "--resume"]) == 0
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert {r["episode"] for r in rows} == {0, 1, 2, 3}
    assert [r["t"] for r in rows if r["episode"] == 3] == list(range(48))


@pytest.mark.parametrize("extra, words", [
    (["--game", "gym:CartPole-v1", "--explorer", "random", "--oracle-labels"], ["key map", "train the test policy"]),
    (["--game", "doom:park:5:24x24"], ["--explorer ppgta", "--preference"]),
    (["--game", "doom:park:5:24x24", "--explorer", "episodic"], ["--explorer episodic", "--preference"]),
    (["--game", "doom:park:5:24x24", "--explorer", "inspector", "episodic_weight: 1"], ["--episodic-weight", "--preference"]),
    (["--game", "doom:freedoom2:MAP99", "--explorer", "random", "--oracle-labels"], ["no level"]),
    (["--game", "doom:park:5:24x24", "--explorer", "wander"], ["--explorer", "wander"]),
    (["--game", "doom:freedoom2:MAP01", "--explorer", "random", "--oracle-labels"], ["no engine labels", "--detector"]),
])
def test_bad_runs_are_one_line(tiny_inspect_policy, tmp_path, capsys, extra, words):
    """(A `key: value` goes through --config: `run explore` takes it from a file only.)"""
    for i, given in enumerate(extra):
        if ": " in given:
            (tmp_path / "options.yaml").write_text(given + "\n")
            extra = [*extra[:i], "--config", str(tmp_path / "options.yaml"), *extra[i + 1:]]
    code = main(["run", "explore", "--tester", str(tiny_inspect_policy), "--out", str(tmp_path / "r"), "--episodes", "1",
                 "--steps", "5", *extra])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    for w in words:
        assert w in err


def test_a_studio_map_and_ooi_list_are_checked_up_front(tmp_path):
    import cv2
    import numpy as np

    from playtester.errors import UserError
    from playtester.tester.spec import RunSpec, load_known_oois

    def spec(**kw):
        return RunSpec(game="window:My Game", tester=None, run_dir=str(tmp_path / "r"), explorer="random", **kw)

    image = tmp_path / "map.png"
    cv2.imwrite(str(image), np.zeros((40, 60, 3), np.uint8))
    oois = tmp_path / "oois.json"
    oois.write_text(json.dumps([{"id": 1, "kind": "barrel", "x": 10, "y": 20.5}, {"id": "b", "kind": "chair", "x": 0, "y": 0}]))
    assert [o.id for o in load_known_oois(oois)] == [1, "b"] and load_known_oois(oois)[0].y == 20.5
    spec(map=str(image), map_bounds=[0, 0, 600, 400], oois=str(oois), telemetry_port=7777)  # all good
    cases = [
        (dict(map=str(image)), "--map and --map-bounds go together"),
        (dict(map=str(tmp_path / "none.png"), map_bounds=[0, 0, 1, 1]), "none.png: missing or not an image"),
        (dict(map=str(image), map_bounds=[0, 0, -5, 10]), "X1 > X0"),
        (dict(oois=str(tmp_path / "absent.json")), "absent.json: no such file"),
    ]
    for kwargs, words in cases:
        with pytest.raises(UserError, match=words):
            spec(**kwargs)
    oois.write_text(json.dumps([{"id": 1, "kind": "barrel", "x": 10, "y": 2}, {"id": 2, "kind": "tire", "x": "far"}]))
    with pytest.raises(UserError, match="record 1 .* needs id, kind and numeric x, y"):
        load_known_oois(oois)
    oois.write_text(json.dumps([{"id": 1, "kind": "barrel", "x": 1, "y": 2}, {"id": 1, "kind": "tire", "x": 3, "y": 4}]))
    with pytest.raises(UserError, match="share an id"):
        load_known_oois(oois)
    with pytest.raises(UserError, match="--telemetry-port: only a window game"):
        RunSpec(game="doom:park", tester=None, run_dir=str(tmp_path / "r"), explorer="random", telemetry_port=7777)
    assert main(["run", "window", "--game", "window:x", "--explorer", "random", "--map-bounds", "1,2,3", "--map", str(image),
                 "--out", str(tmp_path / "r")]) == 2


def test_each_run_subcommand_lists_at_most_21_options_and_every_option_is_reachable(capsys):
    """`run explore|window|load|evolve` split the options by purpose; an option none of them takes
    (on its command line or from --config) would be reachable by no command (the one-command
    `run --...` of earlier versions is gone: options before the subcommand are refused in one line).
    (15, then 16 with --rules, 17 with --threads: the cores the run may use, a speed option with its
    reason in its help; 21 when the old one-command form went and explore took the options users
    typed there: --oracle-labels, --test-steps, --serve, --device.)"""
    from dataclasses import fields

    import typer

    from playtester.cli import app
    from playtester.commands.run import SUBCOMMANDS
    from playtester.tester.spec import EvolveSpec, RunSpec

    run = typer.main.get_command(app).commands["run"]
    for sub in SUBCOMMANDS:
        options = [p.opts[0] for p in run.commands[sub.name].params if p.name != "help"]
        assert len(options) <= 21, (sub.name, options)
        assert not set(sub.flags) & set(sub.config_only), sub.name
    for spec in (RunSpec, EvolveSpec):  # evolve has a spec of its own; the tester's subcommands share RunSpec
        reachable = {name for sub in SUBCOMMANDS if sub.spec is spec for name in (*sub.flags, *sub.config_only, *sub.fixed)}
        assert reachable == {f.name for f in fields(spec)}, spec
    assert [sub.name for sub in SUBCOMMANDS if sub.spec is EvolveSpec] == ["evolve"]
    assert main(["run", "explore", "--game", "doom:park", "--explorer", "evolve", "--out", "r"]) == 2  # not an explorer
    assert capsys.readouterr().err.startswith("error: --explorer evolve: ")
    # EvolveSpec's options are RunSpec's where they are the same option: one definition
    shared = {f.name for f in fields(EvolveSpec)} & {f.name for f in fields(RunSpec)}
    assert shared == {"game", "run_dir", "steps", "num_envs", "seed", "assertions", "stuck_steps"}
    assert all(EvolveSpec.__dataclass_fields__[n].metadata["flag"] is RunSpec.__dataclass_fields__[n].metadata["flag"]
               for n in shared)
    assert sorted(run.commands) == sorted(sub.name for sub in SUBCOMMANDS)
    assert main(["run", "--game", "doom:park", "--out", "r"]) == 2
    assert capsys.readouterr().err.strip() == ("error: --game: give what the run is for first, `playtester run "
                                               "explore|window|load|evolve --game ...` (see `playtester run -h`)")
    assert main(["run"]) == 2
    printed = capsys.readouterr().out
    assert all(sub.name in printed for sub in SUBCOMMANDS) and "Traceback" not in printed


def test_run_explore_reads_its_config_file_and_resumes_from_the_folder_alone(small_park, tmp_path, capsys):
    """--config fills what the command line does not give (the command line wins); --resume with
    --out alone continues with the run's own config.yaml."""
    import yaml

    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"game": small_park, "explorer": "random", "steps": 30, "stuck_steps": 7, "seed": 3}))
    out = tmp_path / "r"
    assert main(["run", "explore", "--config", str(config), "--steps", "20", "--episodes", "1", "--out", str(out)]) == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (saved["steps"], saved["stuck_steps"], saved["seed"], saved["game"]) == (20, 7, 3, small_park)
    assert saved["objective"] == "coverage"
    assert main(["run", "explore", "--out", str(out), "--resume", "--episodes", "2"]) == 0
    assert {r["episode"] for r in read_jsonl(out / "trajectory.jsonl")} == {0, 1}
    assert json.loads((out / "summary.json").read_text())["steps"] == 40
    # a run from before --oracle-labels (its config.yaml says detector: ground-truth) resumes from its folder too
    saved["detector"] = "ground-truth"
    saved.pop("oracle_labels")
    (out / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    assert main(["run", "explore", "--out", str(out), "--resume", "--episodes", "2"]) == 0, capsys.readouterr().err
    # a changed kept option is refused; a config naming another subcommand's purpose too
    assert main(["run", "explore", "--out", str(out), "--resume", "--episodes", "3", "--seed", "4"]) == 2
    assert "seed=3, now 4" in capsys.readouterr().err
    config.write_text(yaml.safe_dump({"game": small_park, "objective": "load"}))
    assert main(["run", "explore", "--config", str(config), "--out", str(tmp_path / "r2")]) == 2
    assert "playtester run load" in capsys.readouterr().err
    config.write_text(yaml.safe_dump({"game": small_park, "rollouts": 3}))
    assert main(["run", "explore", "--config", str(config), "--out", str(tmp_path / "r2")]) == 2
    assert "unknown option 'rollouts'" in capsys.readouterr().err
    for bad, words in (({"steps": "abc"}, "steps abc: not a whole number; give a whole number from 1"),
                       ({"seed": -1}, "seed -1: out of range; give a seed, a whole number from 0"),
                       ({"oracle_labels": "no"}, "oracle_labels no: give true or false")):
        config.write_text(yaml.safe_dump({"game": small_park, **bad}))
        assert main(["run", "explore", "--config", str(config), "--out", str(tmp_path / "r2")]) == 2
        assert words in capsys.readouterr().err
    assert not (tmp_path / "r2").exists()


def test_a_run_with_no_options_plays_the_fast_defaults(tiny_inspect_policy, small_park, tmp_path, capsys, monkeypatch):
    """With no performance option a run is as fast as the knobs that paid made it (docs/benchmarks/
    ppo-and-loop.md, "The defaults"): every rollout collected by a fresh int8 copy of the explorer
    (which still learns in fp32, its frozen encoder offered for int8 once), the test policy
    quantised; every update on the rollout of 16 cut into sequences of 8 (from the states the rollout
    kept), in its own thread beside the next rollout, on the process's torch threads; RND trained 2
    steps a rollout (the checkpoint's reward rebuilds with it), beside the next rollout. A --config
    naming the options of earlier versions (seq_len, acting, …) is taken, and they are ignored."""
    import threading

    import torch
    import yaml

    import playtester.exploration.ppo as ppo
    from playtester.exploration.checkpoints import load_agent, load_checkpoint
    from playtester.exploration.ppo import RolloutBatch
    from playtester.exploration.reward import ExplorationReward
    from playtester.imitation.live import LivePolicy

    copies, real = [], ppo.int8_actor
    monkeypatch.setattr(ppo, "int8_actor", lambda module: copies.append(real(module)) or copies[-1])
    quantised, encoders = [], []
    monkeypatch.setattr(ppo, "int8_frozen_encoder", lambda module, real=ppo.int8_frozen_encoder: encoders.append(real(module)))
    monkeypatch.setattr(LivePolicy, "quantise", lambda live, real=LivePolicy.quantise: quantised.append(real(live)) or live)
    cuts, real_cut = [], RolloutBatch.sequences
    monkeypatch.setattr(RolloutBatch, "sequences", lambda batch, n: cuts.append((batch.states.shape[0], n)) or real_cut(batch, n))
    behind, start = [], ExplorationReward._train_in_background
    monkeypatch.setattr(ExplorationReward, "_train_in_background", lambda hook, seed: behind.append(seed) or start(hook, seed))
    updates, real_update = [], ppo.update
    monkeypatch.setattr(ppo, "update", lambda *a: updates.append((threading.current_thread().name, torch.get_num_threads())) or real_update(*a))
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"rollout": 16, "oracle_labels": True, "test_steps": 4, "seq_len": 3, "acting": "fp16",
                                      "overlap_rnd": False}))
    out = tmp_path / "r"
    assert main(["run", "explore", "--game", small_park, "--explorer", "inspector", "--tester", str(tiny_inspect_policy),
                 "--envs", "1", "--episodes", "1", "--steps", "80", "--config", str(config), "--out", str(out)]) == 0, capsys.readouterr().err
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert not {"seq_len", "acting", "overlap_rnd"} & set(saved) and saved["track_every"] == 4
    checkpoint = load_checkpoint(out / "explorer" / "checkpoints" / "last.ckpt")
    assert (checkpoint["config"]["seq_len"], checkpoint["config"]["acting"], checkpoint["config"]["overlap_update"]) == (8, "int8", True)
    assert len(cuts) >= 3 and set(cuts) == {(16, 8)}  # each update, a rollout of 16 kept states cut in 8s
    assert updates == [("ppo-update", torch.get_num_threads())] * len(cuts)
    assert len(behind) >= len(cuts)  # RND's training of every rollout ran beside the next
    rnd = checkpoint["reward_spec"]["config"]["rnd"]
    assert (rnd["train_steps"], rnd["num_predictors"]) == (2, 1)
    assert len(quantised) == 1  # the one instance's test policy (it plays in this process)
    assert len(copies) >= 4 and len({id(c) for c in copies}) == len(copies)  # a copy a rollout
    assert encoders == [False]  # once a run; the inspector's conv GRU trains its whole trunk, so nothing to freeze
    assert all(type(c.rnn).__module__.startswith("torch.ao.nn.quantized.dynamic") for c in copies)
    learnt = load_agent(out / "explorer" / "checkpoints" / "last.ckpt")
    assert type(learnt.rnn) is torch.nn.GRU  # the checkpoint holds the fp32 network that learns
    # ... and learns: the last rollout's copy answers otherwise than the first one's
    frame = torch.full((1, 1, *learnt.config.obs_shape), 128, dtype=torch.uint8)
    first, last = (c(frame, learnt.initial_state(1), torch.ones(1, 1)) for c in (copies[0], copies[-1]))
    assert not torch.allclose(first.values, last.values)


def test_the_explorers_own_defaults_follow_the_device_and_the_rollout():
    """int8 decisions on a CPU, fp32 on a GPU; sequences of 8 where 8 divides a longer rollout, else
    whole rollouts (a rollout of 12, or of 8 itself)."""
    from playtester.exploration.explorer import explorer_options

    assert (explorer_options(2, 64, "cpu")["acting"], explorer_options(2, 64, "cuda")["acting"]) == ("int8", "fp32")
    assert [explorer_options(1, n, "cpu")["seq_len"] for n in (64, 16, 12, 8, 4)] == [8, 8, 0, 0, 0]


def test_a_device_this_machine_lacks_is_one_line(tiny_inspect_policy, small_park, tmp_path, capsys):
    """--device cuda where torch sees no CUDA device, and a device that is not one, are refused in
    one line before anything is written."""
    import torch

    cases = [("tpu", "--device tpu: use cpu or cuda")]
    if not torch.cuda.is_available():
        cases.append(("cuda", "--device cuda: torch sees no CUDA device"))
    for device, words in cases:
        out = tmp_path / device
        code = main(["run", "explore", "--game", small_park, "--tester", str(tiny_inspect_policy), "--oracle-labels", "--explorer",
                     "random", "--episodes", "1", "--steps", "5", "--device", device, "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and words in " ".join(err.split()) and len(err.strip().splitlines()) == 1, err
        assert not out.exists()


def test_a_gpu_run_spawns_its_game_workers_and_the_tester_factories_survive_the_trip(tiny_inspect_policy, small_park, tmp_path):
    """CUDA set up in the run's process does not survive a fork, so on a GPU the game workers are
    spawned (`worker_start`), and a spawned worker gets its env factory pickled: the tester loop's
    factory comes back whole and builds its instance; CartPole's vector env really starts that way."""
    import functools
    import pickle

    import gymnasium as gym
    import numpy as np

    from playtester.capture.frames import FrameSpec
    from playtester.exploration.ppo import PPOConfig
    from playtester.capture.envs import make_env
    from playtester.exploration.vector_env import make_vector_env, worker_start
    from playtester.tester.loop import TesterEnv
    from playtester.tester.runner import _wrap
    from playtester.tester.spec import RunSpec

    assert worker_start("cuda") == "spawn" and worker_start("cpu") is None
    spec = RunSpec(game=small_park, tester=str(tiny_inspect_policy), oracle_labels=True, explorer="random",
                   run_dir=str(tmp_path / "run"), episodes=1, steps=5, device="cpu")
    factory = functools.partial(make_env, small_park, FrameSpec.square(64), mask=True, wrap=functools.partial(_wrap, spec), index=0)
    env = pickle.loads(pickle.dumps(factory))()
    try:
        obs, _ = env.reset(seed=0)
        assert obs.shape == (64, 64, 3)
        tester = next(e for e in _wrappers(env) if isinstance(e, TesterEnv))
        assert tester.tester is not None and tester.run_dir == tmp_path / "run"
    finally:
        env.close()
    cfg = PPOConfig(env_id="state:CartPole-v1", num_envs=2, num_minibatches=1, vector_env="async", accelerator="cuda")
    envs = make_vector_env(cfg)
    try:
        assert all(type(p).__name__ == "SpawnProcess" for p in envs.processes)
        envs.reset(seed=0)
        assert envs.step(np.zeros(2, dtype=np.int64))[0].shape == (2, 4)
    finally:
        envs.close()
    assert isinstance(envs, gym.vector.AsyncVectorEnv)


def _wrappers(env):
    while env is not None:
        yield env
        env = getattr(env, "env", None)


def test_min_score_decides_which_detections_are_tested(tiny_inspect_policy, tiny_detector, small_park, tmp_path, capsys):
    """The same random play with the tiny detector (it keeps every box, scores spread below 1):
    `min_score` 0 from --config tests its detections, 1 tests none; outside [0, 1] is one line."""
    import yaml

    counts = {}
    for score in (0.0, 1.0):
        config = tmp_path / f"c{score}.yaml"
        config.write_text(yaml.safe_dump({"min_score": score, "test_steps": 4}))
        out = tmp_path / f"r{score}"
        assert main(["run", "explore", "--game", small_park, "--explorer", "random", "--tester", str(tiny_inspect_policy),
                     "--detector", str(tiny_detector), "--episodes", "1", "--steps", "60", "--seed", "1", "--config", str(config),
                     "--out", str(out)]) == 0
        assert yaml.safe_load((out / "config.yaml").read_text())["min_score"] == score
        tests = out / "tests.jsonl"
        counts[score] = len(tests.read_text().splitlines()) if tests.exists() else 0

    assert counts[0.0] > 0 and counts[1.0] == 0, counts
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({"min_score": 1.5}))
    capsys.readouterr()
    assert main(["run", "explore", "--game", small_park, "--explorer", "random", "--tester", str(tiny_inspect_policy),
                 "--detector", str(tiny_detector), "--config", str(config), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("min_score 1.5: out of range; give a number from 0 to 1") and len(err.splitlines()) == 1, err


def test_the_novelty_weights_come_from_the_run_config(tiny_parts, small_park, tmp_path, capsys):
    """`--explorer ppgta-episodic` with `episodic_weight: 0.5, rnd_weight: 0, novelty_scale: return,
    episodic_memory: run` in --config (its own scale is step): the run's config.yaml and the
    explorer's checkpoint keep them, RND is left out (one value head); a negative weight, an
    unknown scale, or a run memory for an explorer with no episodic novelty is one line, before
    anything runs."""
    import yaml

    from playtester.exploration.checkpoints import load_checkpoint

    tester, path = tiny_parts("inspect")[2], tiny_parts("path")[2]
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"episodic_weight": 0.5, "rnd_weight": 0, "novelty_scale": "return", "rollout": 8,
                                      "episodic_memory": "run",
                                      "oracle_labels": True, "test_steps": 4}))
    out = tmp_path / "r"
    assert main(["run", "explore", "--game", small_park, "--explorer", "ppgta-episodic", "--preference", str(path),
                 "--tester", str(tester), "--envs", "1", "--episodes", "1", "--steps", "24", "--config", str(config),
                 "--out", str(out)]) == 0, capsys.readouterr().err
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (saved["episodic_weight"], saved["rnd_weight"], saved["explorer"], saved["novelty_scale"], saved["episodic_memory"]) == (
        0.5, 0, "ppgta-episodic", "return", "run")
    checkpoint = load_checkpoint(out / "explorer" / "checkpoints" / "last.ckpt")
    reward = checkpoint["reward_spec"]["config"]
    assert (reward["episodic_weight"], reward["rnd_weight"], reward["novelty_scale"], reward["episodic"]["memory"]) == (
        0.5, 0.0, "return", "run")
    assert checkpoint["agent_spec"]["config"]["num_values"] == 1 and "rnd" not in checkpoint["reward_hook"]

    capsys.readouterr()
    config.write_text(yaml.safe_dump({"episodic_weight": -1}))
    assert main(["run", "explore", "--game", small_park, "--explorer", "episodic", "--preference", str(path),
                 "--config", str(config), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert "episodic_weight -1: out of range" in err and len(err.splitlines()) == 1, err
    config.write_text(yaml.safe_dump({"novelty_scale": "huge"}))
    assert main(["run", "explore", "--game", small_park, "--explorer", "episodic", "--preference", str(path),
                 "--config", str(config), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert "novelty_scale huge: use return or step" in err and len(err.splitlines()) == 1, err
    config.write_text(yaml.safe_dump({"episodic_memory": "run"}))
    assert main(["run", "explore", "--game", small_park, "--explorer", "ppgta", "--preference", str(path),
                 "--config", str(config), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert "episodic_memory run: --explorer ppgta has no episodic novelty" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
@pytest.mark.parametrize("explorer, envs, started_here", [("ppgta", 2, 1), ("random", 1, 2)])
def test_a_run_starts_its_game_once_to_probe_it_and_reads_each_checkpoint_once(tiny_parts, tiny_detector, small_park,
                                                                               tmp_path, monkeypatch, explorer, envs,
                                                                               started_here):
    """In the run's own process, the game is started once to probe it (plus the lone instance that
    plays here, at one instance; at two they play in worker processes, and the vector env reads
    their spaces from the probe), and each checkpoint (test policy, path policy, detector) is read
    from disk once, whoever needs it: the checks, the explorer, the instance, config.yaml. Counted
    by wrapping `torch.load` and `make_game`, which still do their work."""
    from collections import Counter

    import torch

    from playtester.capture import games

    tester, path = tiny_parts("inspect")[2], tiny_parts("path")[2]
    reads, starts, real_load, real_make = Counter(), [], torch.load, games.make_game
    monkeypatch.setattr(torch, "load", lambda f, *a, **k: reads.update([str(f)]) or real_load(f, *a, **k))
    monkeypatch.setattr(games, "make_game", lambda spec, **o: starts.append(spec) or real_make(spec, **o))
    monkeypatch.setattr(games, "_PROBED", {})  # what an earlier test probed in this process is not this run's
    out = tmp_path / "r"
    assert main(["run", "explore", "--game", small_park, "--explorer", explorer, "--tester", str(tester), "--detector",
                 str(tiny_detector), "--preference", str(path), "--envs", str(envs), "--steps", "16", "--episodes", "2",
                 "--out", str(out)]) == 0
    assert len({r["episode"] for r in read_jsonl(out / "trajectory.jsonl")}) == 2  # it played
    assert starts == [small_park] * started_here
    assert reads == Counter({str(tester): 1, str(path): 1, str(tiny_detector): 1}), reads
