"""The one episode splitter that the encoder and the policies share (datasets/splits.py)."""

from types import SimpleNamespace

import numpy as np
import pytest

from playtester.errors import UserError
from playtester.datasets.splits import part_sizes, split_episodes

POLICY = {"train": 0.7, "val": 0.1, "test": 0.2}


def fake(behavior: str, n: int) -> list:
    """Stand-ins with what the splitter reads: a path and a behaviour."""
    return [SimpleNamespace(path=f"/demos/{behavior}/ep{i:04d}", behavior=behavior) for i in range(n)]


@pytest.mark.parametrize("n, want", [
    (0, {"val": 0, "test": 0, "train": 0}),
    (1, {"val": 0, "test": 0, "train": 1}),  # one episode stays for training
    (2, {"val": 1, "test": 0, "train": 1}),
    (3, {"val": 1, "test": 1, "train": 1}),  # at least one each: round(0.3) = 0, round(0.6) = 1
    (10, {"val": 1, "test": 2, "train": 7}),
    (15, {"val": 2, "test": 3, "train": 10}),  # round(1.5) = 2
])
def test_part_sizes_hand_worked(n, want):
    assert part_sizes(n, POLICY) == want


def test_whole_episodes_stratified_by_behaviour_cut_in_the_listed_order():
    eps = fake("path", 10) + fake("inspect", 5)
    parts = split_episodes(eps[::-1], POLICY, seed=3)  # input order does not matter: path order does
    assert parts == split_episodes(eps, POLICY, seed=3)
    assert sorted(map(id, sum(parts.values(), []))) == sorted(map(id, eps))
    assert [e.behavior for e in parts["val"]] == ["inspect", "path"]
    assert [e.behavior for e in parts["test"]] == ["inspect", "path", "path"]
    # behaviours in name order share one generator, each cut in the order the shares list the parts
    rng = np.random.default_rng(3)
    inspect_order, path_order = rng.permutation(5), rng.permutation(10)
    assert parts["train"][:3] == [eps[10 + i] for i in inspect_order[:3]]
    assert parts["val"][1] is eps[path_order[7]] and parts["test"][1:] == [eps[i] for i in path_order[8:]]
    held = split_episodes(eps, {"val": 0.2, "train": 0.8}, seed=3)["val"]
    assert held[0] is eps[10 + inspect_order[0]]  # held-out first when listed first
    assert split_episodes(eps, POLICY, seed=4) != parts


@pytest.mark.parametrize("shares", [{"val": 0.5, "test": 0.5}, {"train": 0.9, "val": 0.2}, {"train": 1.2, "val": -0.2}])
def test_bad_shares_are_one_line_errors(shares):
    with pytest.raises(UserError, match="give a train part"):
        split_episodes(fake("path", 4), shares)
