"""Scoring a run's tests by the game's labels: matched or phantom, why a test of a real object
failed, and the summary's test precision; hand-worked cases."""

from types import SimpleNamespace

from playtester.report import build
from playtester.report.maps import object_states
from playtester.tester.scoring import TestWitness, labelled, object_key, real_object

TIRE = {"id": 7, "class": "tire", "box": [100, 100, 140, 150], "ooi": 3, "position": (10.0, 20.0, 0.0)}


def test_a_box_on_a_labelled_object_is_matched_and_one_beside_it_is_not():
    assert real_object([100, 100, 140, 150], [TIRE]) is TIRE
    # shifted by half its width: IoU 20·50 / (2·40·50 − 20·50) = 1/3 < 0.5
    assert real_object([120, 100, 160, 150], [TIRE]) is None
    assert real_object([104, 102, 140, 150], [TIRE]) is TIRE  # IoU 36·48/2000 = 0.86


def test_labels_of_other_classes_do_not_count_and_no_labels_means_no_verdict():
    torch = {**TIRE, "class": "torch"}
    assert labelled({"objects": [TIRE, torch]}, ["tire"]) == [TIRE]
    assert labelled({"position": (0, 0, 0)}, ["tire"]) is None


def test_an_object_is_named_by_the_park_by_the_level_list_or_by_the_engine():
    assert object_key(TIRE) == 3
    thing = {**TIRE, "ooi": None}
    known = [SimpleNamespace(id=41, kind="tire", x=12.0, y=21.0), SimpleNamespace(id=42, kind="tire", x=300.0, y=20.0)]
    assert object_key(thing, known) == 41  # 2.2 units away
    assert object_key(thing, known[1:]) == "tire#7"  # 290 units: not that one


def step_info(x: float, seen: bool) -> dict:
    return {"position": (x, 0.0, 0.0), "objects": [TIRE] if seen else []}


def test_why_a_test_failed():
    box = [100, 100, 140, 150]
    moves = frozenset({0})  # action 0 moves, action 4 turns

    def witness(steps):
        w = TestWitness(3, (), moves)
        w.start(step_info(0.0, True))
        for action, x, seen, b in steps:
            w.step(action, step_info(x, seen), b)
        return w.failure()

    # two moves of three went nowhere (0 → 0 → 0.5 → 8): blocked, whatever else
    assert witness([(0, 0.0, True, box), (0, 0.5, True, box), (0, 8.0, True, box)]) == "blocked"
    # it moved, but the object was off the screen on 2 of 3 steps
    assert witness([(0, 5.0, False, box), (4, 5.0, False, None), (0, 10.0, True, box)]) == "turned away"
    # on screen every step, no box on it on 2 of 3
    assert witness([(0, 5.0, True, None), (4, 5.0, True, [0, 0, 10, 10]), (0, 10.0, True, box)]) == "object lost"
    assert witness([(0, 5.0, True, box), (4, 5.0, True, box), (0, 10.0, True, box)]) == "other"


def test_the_summary_counts_phantoms_apart_and_the_map_ignores_them():
    tests = [
        {"episode": 0, "step": 5, "ooi": 3, "target": "matched", "target_ooi": 3, "success": True},
        {"episode": 0, "step": 90, "ooi": 4, "target": "phantom", "success": False},  # named 4 by bearing, nothing there
        {"episode": 1, "step": 9, "ooi": "tire@1:9", "target": "matched", "target_ooi": 5, "success": False, "failure": "blocked"},
        {"episode": 1, "step": 50, "ooi": "tire@1:50", "target": "phantom", "shows": "Medikit", "success": True},
    ]
    trajectory = [{"episode": e, "t": t} for e in (0, 1) for t in range(10)]
    s = build.summarise({"game": "g"}, trajectory, tests, [], None, "no map")
    assert (s["tests"], s["tests_matched"], s["tests_unmatched"], s["test_precision"]) == (4, 2, 2, 0.5)
    assert s["tests_unmatched_showing"] == {"Medikit": 1}  # one phantom's box showed a thing of another kind
    assert s["oois_tested"] == 2 and s["test_success_on_real"] == 0.5 and s["test_failures_on_real"] == {"blocked": 1}
    assert object_states(tests, [{"details": {"ooi": 4, "target": "phantom"}}]) == {3: "passed", 5: "failed"}
    assert build.tested_counts(tests, 2, known={"3", "4", "5"}) == [1, 2]
