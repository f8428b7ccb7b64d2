"""scripts/bench_prelabel.py's rounds: the first batch a person picks class by class, and how many
frames are labelled after each round, against hand-worked values."""

import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import bench_prelabel  # noqa: E402


def frames(**labels: list[int]) -> dict[int, SimpleNamespace]:
    return {int(k[1:]): SimpleNamespace(labels=v) for k, v in labels.items()}


def test_picked_first_takes_frames_until_every_class_has_k_boxes():
    by_id = frames(f1=[0], f2=[1, 1], f3=[0, 0], f4=[2], f5=[1], f6=[2, 2], f7=[0, 2])
    # 1: class 0 has 1; 2: class 1 has 2 (done); 3: class 0 has 3 (done); 4: class 2 has 1;
    # 5 shows only class 1 (done): skipped; 6: class 2 has 3; every class done before 7.
    assert bench_prelabel.picked_first([1, 2, 3, 4, 5, 6, 7], by_id, 2) == [1, 2, 3, 4, 6]


def test_picked_first_skips_empty_frames_and_stops_when_frames_run_out():
    by_id = frames(f1=[], f2=[0], f3=[1], f4=[])
    assert bench_prelabel.picked_first([1, 2, 3, 4], by_id, 1) == [2, 3]
    assert bench_prelabel.picked_first([1, 2, 3, 4], by_id, 5) == [2, 3]  # not enough anywhere: every frame that helps


def test_round_ends():
    assert bench_prelabel.round_ends(100, 50, 50) == [50, 100]  # rounds of 50 from a random first batch of 50
    assert bench_prelabel.round_ends(1174, 50, 50)[-2:] == [1150, 1174]  # the last round is what is left
    assert bench_prelabel.round_ends(11, 3, 4) == [3, 7, 11]
    assert bench_prelabel.round_ends(10, 3, 4) == [3, 7, 10]
    assert bench_prelabel.round_ends(3, 3, 4) == [3]


def test_a_workdir_refuses_rounds_of_other_settings(tmp_path):
    import pytest

    args = SimpleNamespace(workdir=tmp_path, batch=50, steps=528, warm_steps=264, image_size=128, pretrained="none")
    bench_prelabel.same_rounds(args, 0, [3, 1, 2])
    bench_prelabel.same_rounds(args, 0, [3, 1, 2])  # the same settings go on where they were
    with pytest.raises(SystemExit, match=r"s0: its rounds were made with other first_batch .*use another --workdir"):
        bench_prelabel.same_rounds(args, 0, [5, 1, 2])
    with pytest.raises(SystemExit, match="other batch, image_size"):
        bench_prelabel.same_rounds(SimpleNamespace(**{**vars(args), "batch": 25, "image_size": 256}), 0, [3, 1, 2])
