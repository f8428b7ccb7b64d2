"""scripts/bench_ppo.py: the contenders' settings, the skip of a missing library, the summary."""

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_ppo  # noqa: E402


def test_recurrent_ppo_gets_the_shared_settings_and_our_recurrent_size():
    """RecurrentPPO built as the bench builds it: the Zoo's shared rollout and update settings, one
    minibatch of the whole rollout (as ours), and an LSTM as wide as our GRU."""
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env

    envs = make_vec_env("CartPole-v1", n_envs=bench_ppo.SHARED["num_envs"], seed=1)
    model = RecurrentPPO("MlpLstmPolicy", envs, policy_kwargs=bench_ppo.recurrent_policy_kwargs(), **bench_ppo.sb3_kwargs(1))
    ours = bench_ppo.ours_config("CartPole-v1", 1000, 1, "unused")
    assert (model.n_envs, model.n_steps, model.n_epochs) == (ours.num_envs, ours.num_steps, ours.update_epochs)
    assert model.batch_size == ours.num_envs * ours.num_steps and ours.num_minibatches == 1
    assert (model.gamma, model.gae_lambda, model.ent_coef) == (ours.gamma, ours.gae_lambda, ours.ent_coef)
    assert (model.vf_coef, model.max_grad_norm, model.normalize_advantage) == (ours.vf_coef, ours.max_grad_norm, ours.norm_adv)
    assert model.lr_schedule(1.0) == pytest.approx(ours.learning_rate) and model.lr_schedule(0.0) == 0.0
    assert model.clip_range(1.0) == pytest.approx(ours.clip_coef)
    assert model.policy.lstm_actor.hidden_size == ours.rnn_dim
    envs.close()


def test_a_missing_library_skips_its_row_with_one_line_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "sb3_contrib", None)  # import fails as if not installed
    assert bench_ppo.available(["ours", "recurrent"]) == ["ours"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sb3_contrib" in err[0] and "RecurrentPPO" in err[0] and ".[bench]" in err[0]


def test_summary_gives_mean_and_spread_over_seeds_and_ratios_to_each_peer():
    rows = [
        {"ours": {"eval": 500.0, "train_last20": 480.0, "sps": 400.0}, "sb3": {"eval": 500.0, "train_last20": 500.0, "sps": 1000.0},
         "recurrent": {"eval": 250.0, "train_last20": 300.0, "sps": 200.0}},
        {"ours": {"eval": 400.0, "train_last20": 500.0, "sps": 600.0}, "sb3": {"eval": 500.0, "train_last20": 500.0, "sps": 1000.0},
         "recurrent": {"eval": 450.0, "train_last20": 300.0, "sps": 300.0}},
    ]
    lines = bench_ppo.summary_table(rows, argparse.Namespace(env="CartPole-v1", timesteps=100, seeds=[1, 2], threads=1)).splitlines()
    assert lines[3].split() == ["ours", "450.0", "±", "70.7", "490.0", "±", "14.1", "500"]
    assert lines[5].split() == ["RecurrentPPO", "350.0", "±", "141.4", "300.0", "±", "0.0", "250"]
    assert lines[6].split()[:4] == ["ratio", "0.90", "0.98", "0.50"] and lines[6].endswith("(ours / SB3 PPO)")
    assert lines[7].split()[:4] == ["ratio", "1.29", "1.63", "2.00"] and lines[7].endswith("(ours / RecurrentPPO)")


def test_the_update_part_times_each_seq_len_in_every_round(capsys):
    """`--part update` at a tiny budget: a time for each seq_len in each round, printed with the
    ratio to the first (the whole rollout)."""
    bench_ppo.main(["--part", "update", "--envs", "1", "--rollout", "8", "--seq-lens", "0", "4", "--rounds", "2"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("seq_len")]
    assert [line.split(":")[0] for line in lines] == ["seq_len whole", "seq_len 4"]
    rounds = [line.split("(")[1].split(")")[0].split(", ") for line in lines]
    assert lines[0].endswith("×1.00") and [len(r) for r in rounds] == [2, 2]
