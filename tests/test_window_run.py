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
    killed = threading.Event()

    def kill_in_episode_two():
        deadline = time.time() + 120
        while time.time() < deadline:
            if any(r["episode"] == 1 and r["t"] >= 10 for r in read_jsonl(out / "trajectory.jsonl")):
                game.kill()
                killed.set()
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_in_episode_two, daemon=True)
    killer.start()
    try:
        code = main(["run", "--game", f"window:{GAME_TITLE}", "--telemetry-port", str(game.port), "--explorer", "random",
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
