"""The plan runner on the small park: rules interrupt and resume, a hand-written plan passes and
fails when its object is removed, bad input fails only its node, recorded plans replay, sight."""

import copy
import dataclasses
import json
import math
import shutil
import time

import yaml
from conftest import TelemetryStripped

from playtester.files import write_bytes_atomic
from playtester.capture.doom import DoomGame
from playtester.capture.games import doom_scenario
from playtester.capture.park.layout import OOI_KINDS
from playtester.capture.park.wad import park_wad
from playtester.cli import main
from playtester.plans.record import plan_from_episode
from playtester.plans.report import write_plan_report
from playtester.plans.runner import PlanRunner, RunnerConfig
from playtester.datasets.plans import load_plan, parse_plan
from playtester.plans.validation import ValidationRegistry
from playtester.tester.runlog import read_jsonl
from playtester.tester.loop import GroundTruthDetector

HAND_WRITTEN = """
name: barrel-then-tire
start: 4
nodes:
  - {name: the barrel, target: {ooi: 6}, action: jump, timeout: 150}
  - {name: a tire, target: {kind: tire}, action: jump, timeout: 200}
rules:
  - {name: hop at tires, when: [{see: tire, min_size: 0.15}], action: jump, cooldown: 30}
"""


def jump_checks() -> ValidationRegistry:
    """A jump leaves the ground (checked two steps on) and lands again (bound to an event)."""
    reg = ValidationRegistry()

    @reg.pre("jump")
    def height(m):
        return m.info["position"][2]

    @reg.post("jump", delay=1)
    def rose(before, after):
        return after.info["position"][2] > before.data["height"] or "the jump did not leave the ground"

    @reg.event("landed")
    def landed(m):
        return m.info["position"][2] <= 0.5

    @reg.post("jump", event="landed", within=20)
    def came_down(before, after):
        return after.step > before.step

    return reg


def run_plan(env, plan, out, registry=None, **kwargs):
    result = PlanRunner(env, plan, detector=GroundTruthDetector(), out=out, game="doom:park:5:24x24",
                        classes=OOI_KINDS, registry=registry or ValidationRegistry(), **kwargs).run()
    write_plan_report(out, result)
    return result


def test_rules_interrupt_by_priority_and_the_sequence_resumes(park_env, tmp_path):
    plan = parse_plan(yaml.safe_load("""
start: 4
nodes:
  - {name: spin, action: turn_left, repeat: 6}
  - {name: hop, action: jump}
rules:
  - {name: low, when: [{telemetry: step, op: ">=", value: 3}], action: look_up, priority: 1, cooldown: 100}
  - {name: high, when: [{telemetry: step, op: ">=", value: 3}], action: look_down, priority: 5, cooldown: 100}
  - {name: never, when: [{telemetry: z, op: ">", value: 1000}], action: jump, priority: 9}
"""))
    result = run_plan(park_env, plan, tmp_path / "out")
    rows = list(read_jsonl(tmp_path / "out" / "trajectory.jsonl"))
    names = park_env.unwrapped.keymap.names
    trace = [(names[r["action"]], r["mode"], r["owner"]) for r in rows]
    assert trace == [
        ("turn_left", "node", "spin"), ("turn_left", "node", "spin"), ("turn_left", "node", "spin"),
        ("look_down", "rule", "high"),  # both rules hold at step 3: the higher priority goes first
        ("look_up", "rule", "low"),     # then the other, while the first cools down
        ("turn_left", "node", "spin"), ("turn_left", "node", "spin"), ("turn_left", "node", "spin"),  # resumed
        ("jump", "node", "hop"),
    ]
    assert [(r.name, r.interrupted, r.start) for r in result.rules] == [("high", "spin", 3), ("low", "spin", 4)]
    assert result.passed and [n.steps for n in result.nodes] == [6, 1]


def test_a_hand_written_plan_passes_on_the_park(park_env, tmp_path):
    """Walking to the barrel's place from the park's ground truth: the ablation flag, which the
    report names (by default objects are found by sight: see the tests below)."""
    out = tmp_path / "out"
    result = run_plan(park_env, parse_plan(yaml.safe_load(HAND_WRITTEN)), out, jump_checks(),
                      config=RunnerConfig(ground_truth_positions=True))
    assert result.passed, [r.reasons for r in result.nodes]
    assert [n.reached for n in result.nodes] == [True, True]
    for node in result.nodes:
        assert {c["name"] for c in node.checks} == {"rose", "came_down"} and all(c["passed"] for c in node.checks)
    (hop,) = result.rules  # the rule fired once on the way to the tire, and its jump was validated too
    assert hop.interrupted == "a tire" and hop.passed and {c["name"] for c in hop.checks} == {"rose", "came_down"}
    # the agent really stood by OOI 6 when it jumped there
    layout = park_env.unwrapped.scenario.layout
    barrel = next(o for o in layout.oois if o.id == 6)
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    jump_at = rows[result.nodes[0].end - 1]
    assert jump_at["owner"] == "the barrel" and math.dist(jump_at["position"][:2], (barrel.x, barrel.y)) <= 128 + 30
    report = json.loads((out / "plan_report.json").read_text())
    assert report["passed"] and not list((out / "findings").iterdir())
    assert "--ground-truth-positions, an ablation" in report["objects_found_by"]
    assert "PASSED" in (out / "plan_report.html").read_text()


def park_without(spec: str, ooi: int, folder) -> DoomGame:
    """The park with one object taken off the map (the paper's "moved button"): its ground truth
    still lists it, as a plan written before the change would expect."""
    scenario = doom_scenario(spec)
    layout = copy.deepcopy(scenario.layout)
    layout.oois = [o for o in layout.oois if o.id != ooi]
    wad = write_bytes_atomic(folder / "park-without.wad", park_wad(layout))
    return DoomGame(dataclasses.replace(scenario, pwad=wad))


def test_the_same_plan_fails_with_a_clear_report_when_its_object_is_removed(small_park, tmp_path):
    env = park_without(small_park, 6, tmp_path)
    out = tmp_path / "out"
    try:
        _, info = env.reset(seed=0, options={"start": (1363.0, 1244.0, 90.0)})
        assert not any(o["ooi"] == 6 for o in info["objects"]), "the barrel is gone from the map"
        result = run_plan(env, parse_plan(yaml.safe_load(HAND_WRITTEN)), out, jump_checks(),
                          config=RunnerConfig(ground_truth_positions=True))
    finally:
        env.close()
    barrel, tire = result.nodes
    assert not result.passed and not barrel.passed and barrel.reached is False
    assert barrel.reasons == ["reached where OOI 6 (barrel) should stand (1363, 1344) but did not see it there in a full turn"]
    assert tire.passed, "the runner goes on to the next node"
    (finding,) = barrel.findings
    folder = out / "findings" / finding
    assert (folder / "frames.npy").exists() and (folder / "clip.mp4").stat().st_size > 0
    html = (out / "plan_report.html").read_text()
    assert "FAILED" in html and "did not see it there" in html and "data:video/mp4;base64," in html


def test_bad_input_fails_its_node_with_the_reason_and_the_runner_goes_on(park_env, tmp_path):
    reg = jump_checks()

    @reg.pre("look_up", timeout=1.0)
    def broken(m):
        raise ValueError("no such variable")

    @reg.post("look_down", timeout=0.3)
    def stuck(before, after):
        time.sleep(5)

    plan = parse_plan(yaml.safe_load("""
start: 4
nodes:
  - {name: dance, action: dance}
  - {name: dragon, target: {kind: dragon}}
  - {name: glance up, action: look_up}
  - {name: glance down, action: look_down}
  - {name: hop, action: jump}
rules:
  - {name: wave, when: [{see: tire}], action: wave}
"""))
    t0 = time.monotonic()
    result = run_plan(park_env, plan, tmp_path / "out", reg)
    assert time.monotonic() - t0 < 4, "a hanging callback is abandoned after its timeout"
    reasons = {n.name: n.reasons for n in result.nodes}
    assert reasons["dance"][0].startswith("unknown action 'dance': the key map 'default' has forward")
    assert reasons["dragon"] == ["unknown class 'dragon': the detector knows pillar, barrel, tire, chair"]
    assert reasons["glance up"] == ["broken raised ValueError: no such variable"]
    assert reasons["glance down"] == ["stuck hung (no answer within 0.3 s)"]
    assert reasons["hop"] == [] and result.nodes[-1].steps == 1, "the last node still ran, and passed"
    (wave,) = result.rules
    assert wave.reasons[0].startswith("rule disabled: unknown action 'wave'")
    failed = json.loads((tmp_path / "out" / "plan_report.json").read_text())
    assert [n["passed"] for n in failed["nodes"]] == [False, False, False, False, True]
    assert len(list((tmp_path / "out" / "findings").iterdir())) == 5


def test_a_plan_recorded_from_a_demo_replays_to_the_same_places(small_park, tmp_path):
    demos = tmp_path / "demos"
    assert main(["demos", "--game", small_park, "--behavior", "path", "--episodes", "1", "--steps", "90",
                 "--seed", "3", "--out", str(demos)]) == 0
    plan_file = tmp_path / "recorded.yaml"
    assert main(["plan", "record", str(demos / "ep0000"), "--out", str(plan_file), "--every", "15"]) == 0
    plan = load_plan(plan_file)
    recorded = [json.loads(line) for line in (demos / "ep0000" / "steps.jsonl").read_text().splitlines()]
    assert len(plan.nodes) >= 4 and plan.start is not None
    for node in plan.nodes:  # every node is a place the demo went through
        assert any(math.dist(node.target.position, s["position"][:2]) < 1 for s in recorded)
    # without telemetry the same session becomes the objects it approached, in order
    blind = tmp_path / "blind"
    shutil.copytree(demos / "ep0000", blind)
    seen = [{k: v for k, v in s.items() if k not in ("position", "angle", "pitch")} for s in recorded]
    (blind / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in seen))
    by_sight = plan_from_episode(blind)
    approached = []
    for s in recorded:
        for o in s["objects"]:
            if (o["box"][3] - o["box"][1]) / 240 >= 0.25 and o["ooi"] not in approached:
                approached.append(o["ooi"])
    assert approached and [n.target.ooi for n in by_sight.nodes if n.target] == approached
    out = tmp_path / "replay"
    assert main(["plan", "run", str(plan_file), "--game", small_park, "--out", str(out)]) == 0
    replayed = [r["position"][:2] for r in read_jsonl(out / "trajectory.jsonl")]
    for node in plan.nodes:
        assert min(math.dist(node.target.position, p) for p in replayed) <= node.tolerance


def test_without_telemetry_the_runner_finds_its_target_by_sight(park_env, tmp_path):
    # start 477 map units from barrel 5, facing away from it: it has to search, then walk up
    plan = parse_plan(yaml.safe_load("""
start: [704, 2752, 57]
nodes: [{name: a barrel, target: {kind: barrel}, view: 0.3, timeout: 200}]
"""))
    _, info = park_env.reset(seed=0, options={"start": plan.start})
    assert not any(o["class"] == "barrel" for o in info["objects"]), "no barrel in view at the start"
    result = run_plan(TelemetryStripped(park_env), plan, tmp_path / "out")
    assert result.passed, result.nodes[0].reasons
    x, y, _ = park_env.unwrapped.position
    barrel = next(o for o in park_env.unwrapped.scenario.layout.oois if o.id == 5)
    assert math.hypot(barrel.x - x, barrel.y - y) < 160, "it walked up to the barrel"
    rows = list(read_jsonl(tmp_path / "out" / "trajectory.jsonl"))
    assert "position" not in rows[0] and len(rows) > 20


VALIDATIONS = '''
def register(registry):
    @registry.pre("*")
    def seen(m):
        return [d["ooi"] for d in m.detections]

    @registry.post("inspect", delay=0)
    def looked_at_it(before, after):
        return 10 in before.data["seen"] or "OOI 10 was not in view when the inspection began"
'''


def test_plan_run_with_a_behaviour_and_validations_from_the_command_line(small_park, tiny_inspect_policy, tmp_path, capsys):
    (tmp_path / "checks.py").write_text(VALIDATIONS)
    plan = tmp_path / "inspect.yaml"
    plan.write_text("start: 4\nnodes:\n  - {name: inspect barrel 10, target: {ooi: 10}, action: inspect, repeat: 10}\n")
    out = tmp_path / "out"
    args = ["plan", "run", str(plan), "--game", small_park, "--oracle-labels", "--out", str(out), "--validations",
            str(tmp_path / "checks.py")]
    assert main([*args, "--behavior", f"inspect={tiny_inspect_policy}"]) == 0
    assert "PASSED" in capsys.readouterr().out
    (node,) = json.loads((out / "plan_report.json").read_text())["nodes"]
    assert node["checks"] == [{"name": "looked_at_it", "when": "post", "passed": True, "reason": None, "action": "inspect",
                               "step": node["end"]}]
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert len(rows) == node["steps"] > 10, "walked there, then ran the policy for its 10 steps"
    # without the checkpoint the behaviour is unknown: the node fails, the command says so and exits 1
    assert main([*args, "--overwrite"]) == 1
    said = capsys.readouterr().out.replace("\n", "")
    assert "FAILED" in said and "unknown action 'inspect'" in said
    assert main([*args]) == 2 and "--overwrite" in capsys.readouterr().err
