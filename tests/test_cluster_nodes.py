"""Ray across nodes, on this machine: a head and two worker nodes, each a raylet of its own
(`ray.cluster_utils.Cluster`, Ray's multi-node harness). A run's game instances spread over the
nodes and go on when a node is removed mid-run (its game restarts on another node; the run ends
with its report and a finding for the lost game); a population's games spread over the nodes
(`run evolve --cluster`). Issue 39."""

from __future__ import annotations

import json

import pytest

from playtester.cli import main
from playtester.tester.runlog import read_jsonl

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def three_nodes():
    """A head and two worker nodes, 2 logical CPUs each; node deaths noticed within a few seconds."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "include_dashboard": False,
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4}})
    for _ in range(2):
        cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_a_run_spreads_over_nodes_and_a_removed_nodes_game_goes_on_elsewhere(three_nodes, small_park, tmp_path, monkeypatch,
                                                                             capsys, run_config):
    from playtester.exploration.ray_env import RayVectorEnv

    head = three_nodes.head_node.node_id
    seen: dict = {"answers": 0}
    real = RayVectorEnv.answer

    def answer_then_remove_a_node(self, i, result):
        seen["answers"] += 1
        if seen["answers"] == 12:  # both instances under way: remove a worker node with a game on it
            victim = next(j for j in range(self.num_envs) if self.nodes[j] not in (None, head))
            node = next(n for n in three_nodes.worker_nodes if n.node_id == self.nodes[victim])
            seen["victim"], seen["node"], seen["before"] = victim, node.node_id, set(self.nodes)
            three_nodes.remove_node(node)
        return real(self, i, result)

    monkeypatch.setattr(RayVectorEnv, "answer", answer_then_remove_a_node)
    out = tmp_path / "run"
    assert main(["run", "explore", "--game", small_park, "--explorer", "inspector", "--envs", "2", "--episodes", "4",
                 "--steps", "20", *run_config(rollout=8), "--out", str(out), "--cluster", "auto"]) == 0, capsys.readouterr().err
    assert "lost" in capsys.readouterr().out
    assert len(seen["before"]) == 2, "the two instances played on two nodes"
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert {r["episode"] for r in rows} == {0, 1, 2, 3} and (out / "report.html").exists()
    lost = [json.loads(p.read_text()) for p in (out / "findings").glob("lost-e*/finding.json")]
    assert len(lost) == 1 and lost[0]["kind"] == "lost" and lost[0]["details"]["node"] == seen["node"]
    assert lost[0]["details"]["env"] == seen["victim"] and "goes on in a new worker" in lost[0]["message"]
    episode = lost[0]["episode"]
    assert len([r for r in rows if r["episode"] == episode]) == lost[0]["steps"] < 20  # ended where the worker was lost
    later = [r for r in rows if r["env"] == seen["victim"] and r["episode"] > episode and "node" in r]
    assert later and all(r["node"] != seen["node"] for r in later), "its game went on on another node"
    assert json.loads((out / "summary.json").read_text())["findings"].get("lost") == 1


def test_a_population_plays_on_every_node(three_nodes, tmp_path):
    from playtester.capture.block_maze import ENV_ID

    out = tmp_path / "evolve"
    assert main(["run", "evolve", "--game", f"gym:{ENV_ID}", "--population", "2", "--generations", "1", "--steps", "20",
                 "--envs", "2", "--out", str(out), "--cluster", "auto"]) == 0
    rows = list(read_jsonl(out / "generations.jsonl"))
    alive = {n["NodeID"] for n in __import__("ray").nodes() if n["Alive"]}
    assert [r["generation"] for r in rows] == [0, 1]
    assert all(len(r["nodes"]) == 2 and set(r["nodes"]) <= alive for r in rows)
