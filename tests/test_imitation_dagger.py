"""DAgger episodes: the policy drives, the scripted expert labels, training learns the labels."""

import numpy as np
import pytest
import torch
from conftest import TINY_POLICY

from playtester.errors import UserError
from playtester.capture.games import make_game
from playtester.cli import main
from playtester.datasets.episodes import load_episodes
from playtester.imitation.data import encode_episodes, split_demos, trained_on
from playtester.imitation.fit import fit_policy
from playtester.imitation.live import load_policy
from playtester.imitation.training import TrainConfig
from playtester.perception.training import read_checkpoint


def dagger(small_park, policy, out, *extra):
    return main(["demos", "--game", small_park, "--behavior", "path", "--episodes", "3", "--steps", "40", "--seed", "50",
                 "--dagger", str(policy), "--out", str(out), *map(str, extra)])


def test_the_policy_drives_from_its_training_starts_and_the_expert_labels(tiny_parts, small_park, tmp_path, one_torch_thread):
    demos, _, policy = tiny_parts("path")
    out = tmp_path / "dagger"
    assert dagger(small_park, policy, out) == 0
    episodes = load_episodes(out)
    training_starts = trained_on(load_policy(policy).scoring, small_park)[0]
    assert training_starts
    assert len(episodes) == 3
    for ep in episodes:
        assert ep.meta["dagger"] == {"policy": str(policy), "beta": 0.0} and not ep.expert_driven
        assert ep.meta["reset"]["options"]["start"] in training_starts
    executed = np.concatenate([ep.actions for ep in episodes])
    labels = np.concatenate([ep.labels for ep in episodes])
    assert (executed != labels).mean() > 0.2, "a one-epoch policy drives unlike the expert"

    # `action` is what was executed: the episode replays to the same positions
    ep = episodes[0]
    env = make_game(small_park)
    try:
        _, info = env.reset(**ep.meta["reset"])
        for step in ep.steps:
            assert np.allclose(info["position"], step["position"])
            _, _, _, _, info = env.step(int(step["action"]))
    finally:
        env.close()


def test_with_beta_one_the_expert_drives(tiny_parts, small_park, tmp_path, one_torch_thread):
    _, _, policy = tiny_parts("path")
    assert dagger(small_park, policy, tmp_path / "d", "--beta", "1") == 0
    episodes = load_episodes(tmp_path / "d")
    keymap = episodes[0].keymap
    jitter = {keymap.index(n) for n in ("look_up", "look_down", "jump", "strafe_left", "strafe_right")}
    executed = np.concatenate([ep.actions for ep in episodes])
    differ = executed != np.concatenate([ep.labels for ep in episodes])
    # the expert drives, jitter included: only its jittered steps differ from what it meant
    assert differ.mean() < 0.15 and set(executed[differ].tolist()) <= jitter


def test_dagger_episodes_train_on_their_labels_and_never_validate(tiny_parts, small_park, tmp_path, one_torch_thread):
    demos, _, policy = tiny_parts("path")
    assert dagger(small_park, policy, tmp_path / "d") == 0
    expert_eps = load_episodes(demos)
    dagger_eps = load_episodes(tmp_path / "d")
    train, val, test = split_demos(expert_eps + dagger_eps, seed=0)
    names = lambda eps: {str(e.path) for e in eps}  # noqa: E731
    assert names(dagger_eps) <= names(train)
    assert not names(dagger_eps) & (names(val) | names(test))
    assert names(val) | names(test) and (names(val) | names(test)) <= names(expert_eps)
    trajs = encode_episodes(dagger_eps, lambda frames: torch.zeros(len(frames), 4), teacher=False)
    for traj, ep in zip(trajs, dagger_eps):
        assert traj.actions.tolist() == ep.labels.tolist()


def test_bad_dagger_options_are_one_line_errors(tiny_parts, small_park, tmp_path, capsys):
    _, _, inspect_policy = tiny_parts("inspect")
    _, _, path_policy = tiny_parts("path")
    assert dagger(small_park, inspect_policy, tmp_path / "a") == 2
    err = capsys.readouterr().err
    assert "trained on inspect demos, not path; pass --behavior inspect" in err and "Traceback" not in err
    assert dagger(small_park, path_policy, tmp_path / "b", "--beta", "1.5") == 2
    assert "--beta 1.5" in capsys.readouterr().err
    assert main(["demos", "--game", small_park, "--behavior", "path", "--beta", "0.5", "--out", str(tmp_path / "c")]) == 2
    assert "pass --dagger" in capsys.readouterr().err
    assert not any((tmp_path / d).exists() for d in "abc"), "nothing is written"


def test_a_round_trains_on_several_folders_from_the_last_policy(tiny_parts, small_park, tmp_path, one_torch_thread):
    """`train policy --demos A --demos B --init last.ckpt`: episodes of both folders, weights from
    the last round (with a learning rate of nearly nothing they stay the last round's)."""
    demos, encoder, policy = tiny_parts("path")
    assert dagger(small_park, policy, tmp_path / "d") == 0
    said = []
    still = TrainConfig(epochs=1, batch_size=2, chunk=16, lr_start=1e-12, lr_peak=1e-12, lr_end=1e-12)
    fit_policy([demos, tmp_path / "d", demos], encoder, tmp_path / "next.ckpt", still, shape=TINY_POLICY, progress=False,
               logdir=tmp_path / "logs", say=said.append, init=policy)
    assert any("8 episodes" in m and "3 DAgger or video episodes train only" in m for m in said), said
    _, before = read_checkpoint(policy, "policy")
    _, after = read_checkpoint(tmp_path / "next.ckpt", "policy")
    for k, v in before.items():
        assert torch.allclose(v, after[k], atol=1e-6), k

    with pytest.raises(UserError, match="--init .*global_hidden is 32, this policy's is 64"):
        fit_policy(demos, encoder, tmp_path / "x.ckpt", still, shape={**TINY_POLICY, "global_hidden": 64}, progress=False,
                   logdir=tmp_path / "logs", say=said.append, init=policy)


def test_starts_and_targets_are_kept_per_park():
    from types import SimpleNamespace

    from playtester.imitation.dagger import training_starts, training_targets
    from playtester.imitation.data import demo_starts_and_targets, trained_on

    def ep(game, start=None, target=None):
        reset = {"options": {"start": start}} if start is not None else {}
        return SimpleNamespace(meta={"game": game, "reset": reset}, steps=[{"target_ooi": target}] if target is not None else [{}])

    by_game = demo_starts_and_targets([ep("doom:park:1", start=3), ep("doom:park:1", start=3), ep("doom:park:3", start=5),
                                       ep("doom:park:3", target=12), ep("doom:park:1", target=4)])
    assert by_game == {"doom:park:1": {"starts": [3], "targets": [4]}, "doom:park:3": {"starts": [5], "targets": [12]}}
    level = SimpleNamespace(meta={"game": "doom:freedoom2:MAP02", "reset": {"seed": 7, "options": None}}, steps=[{}])
    assert demo_starts_and_targets([level]) == {"doom:freedoom2:MAP02": {"starts": [], "targets": []}}, "a level's demos: no start options"
    scoring = {"demo_games": ["doom:park:1", "doom:park:3"], "demo_starts": [3, 3, 5, None, None], "demo_targets": [4, 12],
               "demo_by_game": by_game}
    assert trained_on(scoring, "doom:park:3") == ({5}, {12})  # not park 1's start 3
    assert trained_on(scoring, "doom:park:2") == (set(), set())
    assert training_starts(scoring, "p.ckpt", "doom:park:1") == [3]
    assert training_targets(scoring, "p.ckpt", "doom:park:3") == [12]
    with pytest.raises(UserError, match=r"no start points on doom:park:2; use --game doom:park:1 or doom:park:3"):
        training_starts(scoring, "p.ckpt", "doom:park:2")
    # a checkpoint from before the per-park record: its starts and targets count on each park it names
    old = {k: v for k, v in scoring.items() if k != "demo_by_game"}
    assert trained_on(old, "doom:park:3") == ({3, 5}, {4, 12}) and trained_on(old, "doom:park:2") == (set(), set())
