"""scripts/bench_int8.py: the gap measures by hand, and the int8 networks' gap on the tiny models."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_int8  # noqa: E402


def test_the_gap_measures_by_hand():
    p = [torch.tensor([0.5, 0.5]).log(), torch.tensor([0.9, 0.1]).log()]
    q = [torch.tensor([0.25, 0.75]).log(), torch.tensor([0.9, 0.1]).log()]
    r = bench_int8.gaps(p, q, np.random.default_rng(0))
    # step 1: KL = ½ ln 2 + ½ ln ⅔ = 0.1438; argmax 0 against 1; |Δlog π| ln 2 or ln 1.5, both past the clip
    assert r["steps"] == 2
    assert r["kl_mean"] == pytest.approx((0.5 * math.log(2) + 0.5 * math.log(2 / 3)) / 2, abs=1e-6)
    assert r["kl_max"] == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3), abs=1e-6)
    assert r["argmax_same"] == 0.5
    assert r["ratio_out_of_clip"] == 0.5
    assert r["dlogp_mean"] in (pytest.approx(math.log(2) / 2, abs=1e-6), pytest.approx(math.log(1.5) / 2, abs=1e-6))


def test_the_int8_networks_act_near_fp32_on_the_tiny_demos(tiny_parts):
    from playtester.imitation.data import load_demo_folders

    rng = np.random.default_rng(0)
    path_demos, _, path_ckpt = tiny_parts("path")
    inspect_demos, _, inspect_ckpt = tiny_parts("inspect")
    explorer = bench_int8.explorer_gap(path_ckpt, load_demo_folders(path_demos, None)[0][:2], rng)
    tester = bench_int8.test_policy_gap(inspect_ckpt, load_demo_folders(inspect_demos, None)[0][:2], rng)
    for r in (explorer, tester):
        assert r["steps"] == 120  # two 60-step demos
        assert 0 < r["kl_mean"] < 0.01 and r["argmax_same"] >= 0.9, r


def test_a_missing_demo_folder_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        bench_int8.main(["--models", str(tmp_path), "--demos", str(tmp_path / "none")])
    assert "path demos" in str(stop.value) and "not a folder" in str(stop.value)
