"""The run report from a run played by the scripted experts: numbers, maps, and a real browser."""

import json
import re
import shutil
import subprocess

import cv2
import numpy as np
import pytest
import yaml

from playtester.errors import UserError
from playtester.capture.experts import Inspector, PathFollower, inspect_start
from playtester.report.build import AMBER, GREEN, GREY, RED, build_report
from playtester.tester.runlog import JsonlWriter


@pytest.fixture(scope="module")
def run(tmp_path_factory, small_park):
    """Two episodes: walk the pathways, then test two OOIs (one passes, one fails its texture)."""
    from playtester.capture.games import make_game

    folder = tmp_path_factory.mktemp("runs") / "r1"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump({"game": small_park, "agent": "scripted experts"}))
    env = make_game(small_park)
    layout = env.scenario.layout
    traj, tests = JsonlWriter(folder / "trajectory.jsonl"), JsonlWriter(folder / "tests.jsonl")
    visited = set()
    targets = [o for o in layout.oois if o.reachable][:2]
    for episode, ooi in enumerate(targets):
        rng = np.random.default_rng(episode)
        frame, info = env.reset(seed=episode, options={"start": next(i for i, s in enumerate(layout.starts) if s.on_path)})
        walker = PathFollower(layout, env.keymap, rng)
        walker.reset(info)
        for t in range(60):
            a = walker.act(info)
            traj.write({"episode": episode, "t": t, "action": a, "mode": "explore", "ooi": None, "position": list(info["position"])})
            visited.add(layout.cell_of(*info["position"][:2]))
            frame, _, _, _, info = env.step(a)
        frame, info = env.reset(seed=episode, options={"start": inspect_start(layout, ooi, rng)})
        tester = Inspector(layout, env.keymap, rng, ooi)
        tester.reset(info)
        for t in range(60, 200):
            a = tester.act(info)
            traj.write({"episode": episode, "t": t, "action": a, "mode": "test", "ooi": ooi.id, "position": list(info["position"])})
            visited.add(layout.cell_of(*info["position"][:2]))
            frame, _, _, _, info = env.step(a)
            if tester.done:
                break
        tests.write({"episode": episode, "step": t, "ooi": ooi.id, "kind": ooi.kind, "steps": t - 59, "jsd": 0.01 * (episode + 1),
                     "success": True, "texture": {"bug": "stretched" if episode == 1 else None}})
    # a third OOI whose test the policy did not perform (JSD over its threshold), no bug seen: the
    # game may be fine, the test did not happen as asked
    failed = [o for o in layout.oois if o.reachable][2]
    tests.write({"episode": 0, "step": 30, "ooi": failed.id, "kind": failed.kind, "steps": 20, "jsd": 0.9,
                 "success": False, "texture": {"bug": None}})
    targets.append(failed)
    env.close()
    traj.close()
    tests.close()
    finding = folder / "findings" / "0000"
    finding.mkdir(parents=True)
    (finding / "finding.json").write_text(json.dumps({"kind": "stuck", "message": "no change for 20 steps", "episode": 1, "step": 120}))
    return folder, layout, visited, targets


def test_summary_numbers_match_the_trajectory(run):
    folder, layout, visited, targets = run
    build_report(folder)
    summary = json.loads((folder / "summary.json").read_text())
    path_cells = {tuple(c) for c in np.argwhere(layout.pathway_mask)[:, ::-1]}
    expected = len(visited & path_cells) / len(path_cells)
    assert summary["coverage"]["pathway_share"] == pytest.approx(expected)
    assert summary["coverage"]["area_share"] == pytest.approx(len(visited) / layout.grid.size)
    assert summary["oois_tested"] == 3 and summary["oois_total"] == len(layout.oois)
    assert summary["oois_missed"] == len(layout.oois) - 3
    assert summary["oois_by_state"] == {"bug": 1, "failed": 1, "passed": 1, "untested": len(layout.oois) - 3}
    assert summary["episodes"] == 2 and summary["test_success_rate"] == pytest.approx(2 / 3)
    assert summary["findings"] == {"stuck": 1}


def layout_game(folder):
    return yaml.safe_load((folder / "config.yaml").read_text())["game"]


def test_ooi_map_colours_each_ooi_by_its_verdict(run):
    folder, layout, _, targets = run
    build_report(folder)
    img = cv2.cvtColor(cv2.imread(str(folder / "ooi_map.png")), cv2.COLOR_BGR2RGB)
    from playtester.report.maps import map_source

    view = map_source(folder, {"game": layout_game(folder)})[0].view
    assert max(view.image.shape[:2]) >= 640, "a small park's map is scaled up for legible marks"
    for o in layout.oois:
        px, py = (int(v) for v in view.to_pixel(o.x, o.y))
        want = {targets[0].id: GREEN, targets[1].id: RED, targets[2].id: AMBER}.get(o.id, GREY)
        assert tuple(int(v) for v in img[py, px]) == want, f"OOI {o.id}"
    cov = cv2.cvtColor(cv2.imread(str(folder / "coverage.png")), cv2.COLOR_BGR2RGB)
    red = (cov[..., 0] > 180) & (cov[..., 1] < 90) & (cov[..., 2] < 90)
    assert red.sum() > 50, "the traces are drawn in red"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_opens_in_a_real_browser_with_every_image(run, tmp_path):
    folder, *_ = run
    report = build_report(folder)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(["chromium", *flags, "--virtual-time-budget=3000", "--dump-dom", report.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert 'data-images-loaded="3/3"' in dom  # coverage, object map, tested over episodes
    # a QA lead's reading order: what ran, the findings first, then maps with their legends, then the tests
    order = [dom.index(h) for h in ("test policy", "<h2>Findings (1)", "<h2>Maps", "<h2>Objects missed", "<h2>Executed tests")]
    assert order == sorted(order)
    for label in ("bug found by an oracle", "behaviour test failed", "not tested", "walkable cell visited", "pathway"):
        assert label in dom, label
    assert "playtester replay " + str(folder / "findings" / "0000") in dom
    done = [tuple(map(int, m)) for m in re.findall(r"<tr><td>(\d+)</td><td>(\d+)</td>", dom.split("<h2>Executed tests")[1])]
    assert len(done) == 3 and done == sorted(done), "tests by episode and step"
    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", *flags, "--window-size=1200,1600", f"--screenshot={shot}", report.as_uri()],
                   capture_output=True, timeout=120)
    pixels = cv2.imread(str(shot))
    assert pixels is not None and pixels.std() > 10, "the page shows something"
    # the park's green grass appears on the screenshot: the maps were drawn
    b, g, r = pixels[..., 0].astype(int), pixels[..., 1].astype(int), pixels[..., 2].astype(int)
    assert ((g > r + 30) & (g > b + 30)).sum() > 5000


def test_bad_run_folders_are_named(tmp_path):
    with pytest.raises(UserError, match="not found"):
        build_report(tmp_path / "nope")
    with pytest.raises(UserError, match="config.yaml is missing"):
        build_report(tmp_path)


def test_only_known_objects_count_as_tested_where_the_run_knows_them(run):
    """Tests of detections no known OOI matched (named by sight, `kind@episode:t`) are counted
    apart, not as OOIs tested: the summary's figure never passes the number of known OOIs."""
    from playtester.report.build import known_ids, tested_counts
    from playtester.report.maps import map_source

    folder, layout, _, targets = run
    tests_file = folder / "tests.jsonl"
    before = tests_file.read_text()
    extra = [{"env": 0, "episode": e, "step": 5, "ooi": f"tire@{e}:5", "kind": "tire", "box": [1, 2, 3, 4], "steps": 10,
              "jsd": 0.5, "success": False, "crops": 0, "texture": None} for e in (0, 1)]
    tests_file.write_text(before + "".join(json.dumps(t) + "\n" for t in extra))
    try:
        build_report(folder)
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["oois_tested"] == 3 and summary["tests_unmatched"] == 2 and summary["tests"] == 5
        html = (folder / "report.html").read_text()
        assert "no known object matched" in html and "3 of " in html
        tests = [json.loads(line) for line in tests_file.read_text().splitlines()]
        known = known_ids(map_source(folder, {"game": layout_game(folder)})[0])
        assert tested_counts(tests, 2, known)[-1] == 3 and tested_counts(tests, 2)[-1] == 5
    finally:
        tests_file.write_text(before)
        build_report(folder)
