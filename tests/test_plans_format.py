"""Plans as data: schema errors that name the node, YAML round trip, text to plan, validation callbacks."""

import threading
import time

import numpy as np
import pytest
import yaml

from playtester.errors import UserError
from playtester.cli import main
from playtester.datasets.plans import Condition, Node, Rule, Target, load_plan, parse_plan, save_plan
from playtester.plans.text import TextParser
from playtester.plans.validation import Moment, PendingCheck, ValidationRegistry, call_with_timeout

GOOD = """
name: tour
start: 4
nodes:
  - {name: barrel, target: {ooi: 6}, action: jump, repeat: 2}
  - {name: tire, target: {kind: tire}, tolerance: 90, timeout: 120}
  - {name: corner, target: {position: [1200, 340]}, wait: 3}
rules:
  - name: jump at tires
    when: [{see: tire, min_size: 0.2}, {telemetry: z, op: "<", value: 8}]
    action: jump
    priority: 2
"""


def test_a_plan_round_trips_through_yaml(tmp_path):
    plan = parse_plan(yaml.safe_load(GOOD))
    assert [n.target for n in plan.nodes] == [Target(ooi=6), Target(kind="tire"), Target(position=(1200.0, 340.0))]
    assert plan.nodes[0].repeat == 2 and plan.nodes[1].tolerance == 90 and plan.nodes[2].wait == 3
    assert plan.rules[0].when == [Condition(see="tire", min_size=0.2), Condition(telemetry="z", op="<", value=8.0)]
    path = save_plan(plan, tmp_path / "tour.yaml")
    assert load_plan(path) == plan


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["nodes"][1]["target"].update(ooi=3), ["node 2 ('tire')", "exactly one of kind, ooi, position"]),
    (lambda d: d["nodes"][2].update(tolerence=5), ["node 3 ('corner')", "'tolerence'", "did you mean 'tolerance'"]),
    (lambda d: d["nodes"][0].update(repeat="many"), ["node 1 ('barrel')", "repeat 'many'"]),
    (lambda d: d["nodes"][2].update(target={"position": [1]}), ["node 3 ('corner')", "[x, y]"]),
    (lambda d: d["nodes"][1].update(timeout=0), ["node 2 ('tire')", "timeout"]),
    (lambda d: d["nodes"].append({"name": "idle"}), ["node 4 ('idle')", "neither a target nor an action"]),
    (lambda d: d["rules"][0]["when"][1].update(op="~"), ["rule 1 ('jump at tires'), condition 2", "op '~'"]),
    (lambda d: d["rules"][0].pop("action"), ["rule 1 ('jump at tires')", "no action"]),
    (lambda d: d.update(nodes=[]), ["'nodes' should be a non-empty list"]),
])
def test_schema_errors_name_the_node(tmp_path, edit, words):
    data = yaml.safe_load(GOOD)
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError) as e:
        load_plan(path)
    message = str(e.value)
    assert message.startswith(f"plan {path}") and "\n" not in message
    for w in words:
        assert w in message


def test_a_bad_plan_is_one_line_on_the_command_line(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("nodes:\n  - {name: a, target: {kind: barrel, ooi: 2}}\n")
    assert main(["plan", "run", str(tmp_path / "bad.yaml"), "--game", "doom:park:5:24x24", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "node 1 ('a')" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


TEN_LINES = """\
1. Walk to the barrel.
2. Jump twice.
3. Examine the seat.
4. Go to object 7.
5. Turn left 3 times.
6. Head to 1200, 340.
7. Wait 2 seconds.
8. Hop over the fallen log.
9. Attack any enemy you see.
10. Then jump whenever you see a tyre.
"""

ACTIONS = ["forward", "strafe_left", "backward", "strafe_right", "turn_left", "turn_right", "look_up", "look_down",
           "jump", "attack"]
CLASSES = ["pillar", "barrel", "tire", "chair", "enemy"]


def test_ten_lines_of_text_become_the_expected_nodes_and_rules():
    plan = TextParser(ACTIONS, CLASSES, ["inspect"], fps=8.75).parse(TEN_LINES, "steps.txt")
    assert plan.nodes == [
        Node("Walk to the barrel", target=Target(kind="barrel")),
        Node("Jump twice", action="jump", repeat=2),
        Node("Examine the seat", target=Target(kind="chair"), action="inspect", repeat=0),
        Node("Go to object 7", target=Target(ooi=7)),
        Node("Turn left 3 times", action="turn_left", repeat=3),
        Node("Head to 1200, 340", target=Target(position=(1200.0, 340.0))),
        Node("Wait 2 seconds", wait=18),
        Node("Hop over the fallen log", action="jump"),  # no class is a log: jump where it stands
    ]
    assert plan.rules == [
        Rule("Attack any enemy you see", when=[Condition(see="enemy")], action="attack", priority=2),
        Rule("Then jump whenever you see a tyre", when=[Condition(see="tire")], action="jump", priority=1),
    ]


@pytest.mark.parametrize("line, words", [
    ("Dance around the chair.", ["line 3", "unknown verb 'dance'"]),
    ("Attack the barrel.", ["line 3", "'attack'", "key map has"]),
    ("Walk to the moon.", ["line 3", "somewhere to go"]),
    ("Jump whenever you like.", ["line 3", "something to see"]),
])
def test_text_that_cannot_be_understood_names_its_line(tmp_path, capsys, line, words):
    steps = tmp_path / "steps.txt"
    steps.write_text(f"Walk to the barrel.\n\n{line}\nJump.\n")
    out = tmp_path / "plan.yaml"
    assert main(["plan", "from-text", str(steps), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{steps} line 3" in err.replace("\n", "") or "line 3" in err
    for w in words:
        assert w in err.replace("\n", "")
    assert not out.exists()


def test_from_text_writes_a_plan_the_runner_reads(tmp_path):
    steps = tmp_path / "steps.txt"
    steps.write_text("Walk to the barrel.\nJmup.\nLook at the rock.\n")  # a misspelt verb still reads as jump
    assert main(["plan", "from-text", str(steps), "--out", str(tmp_path / "p.yaml")]) == 0
    plan = load_plan(tmp_path / "p.yaml")
    assert [(n.target, n.action) for n in plan.nodes] == [
        (Target(kind="barrel"), None), (None, "jump"), (Target(kind="pillar"), "inspect")]


def _moment(step, z=0.0):
    return Moment(step, np.zeros((4, 4, 3), np.uint8), {"position": (0.0, 0.0, z)}, [], "jump", "n")


def test_callbacks_that_raise_or_hang_fail_with_the_reason():
    hang = threading.Event()
    raised = call_with_timeout(lambda m: 1 / 0, (None,), 1.0, "snap")
    assert not raised.ok and raised.reason == "snap raised ZeroDivisionError: division by zero"
    t0 = time.monotonic()
    hung = call_with_timeout(lambda: hang.wait(30), (), 0.2, "slow")
    assert time.monotonic() - t0 < 2 and not hung.ok and "slow hung (no answer within 0.2 s)" == hung.reason
    hang.set()
    assert call_with_timeout(lambda a, b: a + b, (2, 3), 1.0, "add").value == 5


def test_post_checks_wait_for_their_delay_or_their_event():
    reg = ValidationRegistry()

    @reg.event("landed")
    def landed(m):
        return m.info["position"][2] == 0

    @reg.post("jump", event="landed", within=5)
    def came_down(before, after):
        return after.step - before.step <= 3 or "took too long to land"

    @reg.post("jump", delay=2)
    def rose(before, after):
        return after.info["position"][2] > 0

    before = _moment(0)
    (event_check, delay_check) = [PendingCheck(c, before, 0) for c in reg.post_for("jump")]
    assert event_check.check.name == "came_down" and delay_check.check.name == "rose"
    assert delay_check.poll(_moment(1, z=20), reg.events) is False  # still waiting
    assert delay_check.poll(_moment(2, z=20), reg.events) is None  # passed
    assert delay_check.poll(_moment(2, z=0), reg.events) == "rose failed (returned False)"
    assert event_check.poll(_moment(2, z=20), reg.events) is False
    assert event_check.poll(_moment(3, z=0), reg.events) is None
    assert event_check.poll(_moment(4, z=0), reg.events) == "came_down: took too long to land"
    assert event_check.poll(_moment(5, z=9), reg.events) == "came_down: event 'landed' did not happen within 5 steps"
    reg.post("use", event="door_opened")(lambda b, a: True)
    with pytest.raises(UserError, match="event 'door_opened', which is not registered"):
        reg.check()
