"""`playtester run` against a real game window: the small park in ViZDoom's own window on a
virtual screen, its telemetry sent by UDP the way a dev build would, the studio's map and OOI
list given by file; the game process is killed mid-run and the run ends with a crash finding and
its report. Skipped, with the reason, where Xvfb or xdotool is missing."""

import json
import threading
import time

import pytest
from test_window_display import GAME_TITLE, GameProcess, display, free_udp_port  # noqa: F401  (display: fixture)

from playtester.cli import main
from playtester.tester.runlog import read_jsonl

pytestmark = [pytest.mark.display, pytest.mark.slow]


def when_run_reaches(out, episode, t, act):
    """Do `act()` once the run in `out` has logged step `t` of `episode`, from a thread (started);
    `(thread, event set once done)`."""
    done = threading.Event()

    def watch():
        deadline = time.time() + 120
        while time.time() < deadline:
            if any(r["episode"] == episode and r["t"] >= t for r in read_jsonl(out / "trajectory.jsonl")):
                act()
                done.set()
                return
            time.sleep(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, done


def test_run_on_a_window_game_maps_its_telemetry_and_ends_on_a_crash(display, small_park, tmp_path, capsys):  # noqa: F811
    from playtester.capture.games import park_config_from_spec
    from playtester.capture.park.birdseye import render_birdseye
    from playtester.capture.park.build import build_park

    # what a studio would export from its editor: a top-down picture, its world bounds, the OOIs
    layout = build_park(park_config_from_spec(small_park)).layout()
    view = render_birdseye(layout, oois=False)
    view.save_png(tmp_path / "map.png")
    (tmp_path / "oois.json").write_text(json.dumps([{"id": o.id, "kind": o.kind, "x": o.x, "y": o.y} for o in layout.oois]))
    bounds = ",".join(str(v) for v in view.bounds)

    game = GameProcess(tmp_path, free_udp_port(), spec=small_park)
    out = tmp_path / "run"
    killer, killed = when_run_reaches(out, 1, 10, game.kill)
    try:
        code = main(["run", "window", "--game", f"window:{GAME_TITLE}", "--telemetry-port", str(game.port), "--explorer", "random",
                     "--episodes", "3", "--steps", "30", "--map", str(tmp_path / "map.png"), "--map-bounds", bounds,
                     "--oois", str(tmp_path / "oois.json"), "--out", str(out)])
    finally:
        killer.join(timeout=5)
        game.kill()
    printed = capsys.readouterr().out
    assert code == 0 and killed.is_set()
    assert "cannot be started again" in printed

    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert [r["t"] for r in rows if r["episode"] == 0] == list(range(30))
    assert {r["episode"] for r in rows} == {0, 1}, "the run ends when the crashed game is gone"
    assert all("position" in r for r in rows if r["episode"] == 0), "telemetry positions reach the log"
    crashes = [json.loads(p.read_text()) for p in (out / "findings").glob("*/finding.json")]
    assert [c["kind"] for c in crashes] == ["crash"] and crashes[0]["episode"] == 1

    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["findings"] == {"crash": 1}
    assert summary["oois_total"] == len(layout.oois) and summary["oois_missed"] == len(layout.oois)
    assert 0 < summary["coverage"]["area_share"] < 1, "positions drawn over the studio's map"
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and (out / "coverage.png").exists()


def chromium_dom(page, profile):
    """The page's DOM after a headless Chromium has loaded it (images included)."""
    import subprocess

    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}"]
    return subprocess.run(["chromium", *flags, "--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120).stdout


def test_a_window_run_without_a_map_reports_its_places_and_ends_when_the_window_closes(display, tmp_path, capsys):  # noqa: F811
    """The park in ViZDoom's own window, no telemetry and no map: the report's places view, seen in
    a real browser; the window destroyed in episode two is a crash finding placed on it, and the run
    ends with its report."""
    import shutil
    import subprocess

    if shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    game = GameProcess(tmp_path, free_udp_port(), spec="doom:park:5:24x24")
    out = tmp_path / "run"
    closer, closed = when_run_reaches(out, 1, 8, lambda: subprocess.run(["xdotool", "windowclose", game.window],
                                                                       capture_output=True))
    try:
        code = main(["run", "window", "--game", f"window:{GAME_TITLE}", "--explorer", "random", "--episodes", "3",
                     "--steps", "25", "--out", str(out)])
    finally:
        closer.join(timeout=5)
        game.kill()
    printed = capsys.readouterr().out
    assert code == 0 and closed.is_set()
    assert "the run stopped early" in printed and (out / "report.html").is_file()
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert {r["episode"] for r in rows} == {0, 1} and all("place" in r and "position" not in r for r in rows)
    crash_file = next((out / "findings").glob("*/finding.json"))
    crash = json.loads(crash_file.read_text())
    assert crash["kind"] == "crash" and crash["episode"] == 1
    places = len({r["place"] for r in rows})
    assert len(list((out / "places").glob("*.png"))) == places > 1

    dom = chromium_dom(out / "report.html", tmp_path / "profile")
    assert f"<h2>Places ({places})</h2>" in dom
    shown = min(places, 60)
    images = 1 + 1 + shown  # the curve, tested over episodes, and a thumbnail a place
    assert f'data-images-loaded="{images}/{images}"' in dom, "every thumbnail and the curve decoded in the browser"
    at_crash = next(r["place"] for r in rows if r["episode"] == 1 and r["t"] == crash["step"])
    assert f'class="place found" data-place="{at_crash}"' in dom and f"finding {crash_file.parent.name}: crash" in dom
    assert "distinct places reached (views clustered by pixels)" in dom
    assert dom.index("<h2>Findings") < dom.index("<h2>Places") < dom.index("<h2>Executed tests")


def test_a_game_that_ignores_the_keys_ends_the_run_with_one_line(display, tmp_path, capsys):  # noqa: F811
    """A window that takes no key (xmessage, a stand-in for a game stuck on a dialog): after 100
    steps of key presses with the picture unchanged the run stops, says why in one line, and writes
    its report."""
    import shutil
    import subprocess

    if shutil.which("xmessage") is None:
        pytest.skip("xmessage (Debian: x11-utils) is not installed")
    frozen = subprocess.Popen(["xmessage", "-title", "frozen-game", "-buttons", "", "This game ignores every key."],
                              start_new_session=True)
    try:
        from test_window_display import wait_for_window

        wait_for_window("frozen-game")
        out = tmp_path / "run"
        code = main(["run", "window", "--game", "window:frozen-game", "--explorer", "random", "--episodes", "2",
                     "--steps", "400", "--out", str(out)])
    finally:
        frozen.kill()
        frozen.wait(timeout=10)
    printed = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "the run stopped early: the picture has not changed in the 100 steps of key presses" in printed
    assert "the game ignores the keys" in printed
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert len(rows) == 100, "it stops at once, not at the end of its budget"
    assert "ignores the keys" in json.loads((out / "summary.json").read_text())["stopped_early"]
