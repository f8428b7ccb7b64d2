"""The window game's harness in parts: the screen comparisons against hand-worked values, the
out-of-play watch, reset recipes and plans, and `LaunchedGame` with real processes on a virtual
screen (xmessage, from x11-utils, stands in for a game's window); bad input is one line with
nothing left running. The whole harness on real games: test_game_lbreakout2.py and
test_game_chocolate_doom.py."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import cv2
import numpy as np
import pytest
from test_window_display import desktop_keys_down, display  # noqa: F401  (display: a fixture, Xvfb for this module)

from playtester.errors import UserError
from playtester.capture.window.play_state import OutOfPlay, distinct_looks, look, similarity
from playtester.capture.window.reset import ResetRecipe, parse_reset_keys


def flat(value: float) -> np.ndarray:
    return np.full((48, 64), value, dtype=np.float32)


def test_similarity_is_ssim_on_hand_worked_values():
    assert similarity(flat(100), flat(100)) == pytest.approx(1.0)
    # two flat pictures differ in light only: (2·100·50 + C1) / (100² + 50² + C1), C1 = (0.01·255)²
    c1 = (0.01 * 255) ** 2
    assert similarity(flat(100), flat(50)) == pytest.approx((2 * 100 * 50 + c1) / (100**2 + 50**2 + c1), rel=1e-4)
    stripes = np.tile(np.repeat([0.0, 255.0], 4), (48, 8)).astype(np.float32)
    assert similarity(stripes, 255 - stripes) < -0.5, "a picture and its negative: opposite structure"
    frame = np.zeros((480, 640, 3), np.uint8)
    frame[:, :320] = 200
    assert look(frame).shape == (48, 64) and look(frame)[0, 0] == pytest.approx(200, abs=1) and look(frame)[0, -1] == 0


def test_distinct_looks_tells_a_moving_thing_from_a_blink():
    still = flat(40)
    blink = flat(40)
    blink[20:24, 10:30] = 200
    moved = [flat(40) for _ in range(5)]
    for i, m in enumerate(moved):
        m[40:42, 10 + 3 * i:14 + 3 * i] = 220  # a paddle a few pixels on each step
    assert distinct_looks([still, still + 7.9, still], 10) == 1, "under the tolerance: one picture"
    assert distinct_looks([still, blink, still, blink], 10) == 2
    assert distinct_looks(moved, 10) == 5 and distinct_looks(moved, 3) == 3


def test_out_of_play_by_a_still_picture_and_by_a_screenshot(tmp_path):
    rng = np.random.default_rng(0)
    play = [rng.integers(0, 255, (120, 160, 3), dtype=np.uint8) for _ in range(30)]
    over = np.zeros((120, 160, 3), np.uint8)
    over[50:70, 40:120] = 255  # a dialog
    watch = OutOfPlay(still_steps=5, cycle=1)
    assert all(watch.observe(f) is None for f in play) and watch.moved
    said = [watch.observe(over) for _ in range(5)]
    assert said[:4] == [None] * 4 and "one look for 5 steps" in said[4], "out of play after exactly still_steps still frames"
    watch = OutOfPlay(still_steps=5, cycle=2)
    blinking = [over if i % 2 else over // 2 for i in range(5)]
    assert [watch.observe(f) for f in blinking][-1] is not None and not watch.moved, "a blink is no play"

    shot = tmp_path / "game-over.png"
    cv2.imwrite(str(shot), cv2.cvtColor(cv2.resize(over, (320, 240)), cv2.COLOR_RGB2BGR))  # any size
    watch = OutOfPlay([shot])
    assert watch.observe(play[0]) is None
    assert re.search(r"matches game-over.png \(SSIM 0.9\d\)", watch.observe(over)), "a screenshot at another size still matches"
    (tmp_path / "broken.png").write_bytes(b"not a picture")
    with pytest.raises(UserError, match="--out-of-play .*broken.png: missing or not an image"):
        OutOfPlay([tmp_path / "broken.png"])


def test_reset_keys_and_what_a_recipe_may_press():
    steps = parse_reset_keys("5 y 10 down enter 3 ctrl+s, esc")
    assert [(s["keys"], s.get("wait", 0)) for s in steps] == [
        ([], 5), (["y"], 10), (["down"], 0), (["enter"], 3), (["ctrl", "s"], 0), (["esc"], 0)]
    for bad, why in [("alt+f4", "Alt\\+F4 closes the window"), ("enter ctrl+q", "Ctrl\\+Q quits"),
                     ("down jump", "unknown key 'jump'"), ("", "no steps")]:
        with pytest.raises(UserError, match=why):
            parse_reset_keys(bad)


def test_a_recipe_plays_its_keys_and_waits_for_its_screen(tmp_path):
    start = np.full((60, 80, 3), 30, np.uint8)
    start[20:40, 20:60] = 250
    cv2.imwrite(str(tmp_path / "start.png"), start)
    recipe = ResetRecipe([{"keys": ["down"], "hold": 2}, {"keys": ["enter"], "until": str(tmp_path / "start.png"),
                                                          "timeout": 6, "name": "start"}], "--reset test")
    held, screens = [], iter([np.zeros_like(start)] * 6 + [start] * 9)
    failed = recipe.play(held.append, lambda: next(screens))
    assert failed is None
    assert held == [("down",), (), ("enter",), ()], "each step's keys, then let go"
    assert next(screens) is start and len(list(screens)) == 7, "2 + 1 steps of down, 1 + 1 of enter, until on step 7"
    never = recipe.play(lambda keys: None, lambda: np.zeros_like(start))
    assert "step 2 (start) waited 6 steps for the screen of start.png and never saw it" in never
    with pytest.raises(UserError, match="--reset test: until .*missing.png: missing or not an image"):
        ResetRecipe([{"keys": [], "wait": 1, "until": str(tmp_path / "missing.png")}], "--reset test")


def test_a_reset_plan_is_a_plan_of_keys_and_waits(tmp_path):
    from playtester.tester.reset import reset_recipe

    (tmp_path / "title.png").write_bytes(cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))[1].tobytes())
    plan = tmp_path / "reset.yaml"
    plan.write_text(textwrap.dedent("""\
        name: to a level start
        nodes:
          - {name: title, wait: 2, until: title.png, timeout: 30}
          - {name: menu, keys: [down, enter], repeat: 2}
          - {name: jump in, action: jump, wait: 4}
          - {name: save, keys: ctrl+s}
    """))
    recipe = reset_recipe(str(plan))
    assert recipe["from"] == f"--reset {plan}"
    assert [(s["name"], s["keys"], s["hold"], s["wait"], s["timeout"]) for s in recipe["steps"]] == [
        ("title", [], 1, 2, 30), ("menu", ["down", "enter"], 2, 0, 300), ("jump in", ["space"], 1, 4, 300),
        ("save", ["ctrl", "s"], 1, 0, 300)]
    assert recipe["steps"][0]["until"] == str(tmp_path / "title.png"), "a screenshot beside the plan"
    for node, why in [("{name: go, target: {kind: barrel}}", "no targets"), ("{name: go, action: fly}", "not in the key map"),
                      ("{name: bye, keys: [alt, f4]}", "Alt\\+F4"), ("{name: x, keys: [warp]}", "unknown key 'warp'")]:
        plan.write_text(f"nodes:\n  - {node}\n")
        with pytest.raises(UserError, match=why) as e:
            reset_recipe(str(plan))
        assert str(plan) in str(e.value)
    with pytest.raises(UserError, match="no such file"):
        reset_recipe(str(tmp_path / "nowhere.yaml"))


# -- launching real processes on a virtual screen ---------------------------------------------

def desktop():
    from playtester.capture.window.x11 import X11Desktop

    return X11Desktop()


@pytest.mark.display
def test_launch_waits_for_the_window_and_ends_the_whole_group(display):  # noqa: F811
    from playtester.capture.window.launch import LaunchedGame, group_alive

    d = desktop()
    game = LaunchedGame("sh -c 'xmessage -title \"Harness Probe\" hello & sleep 60'", title="harness probe")
    try:
        window = game.start(d)
        assert window.title == "Harness Probe" and game.alive()
        group = game.pgid
    finally:
        game.stop()
        d.close()
    assert not group_alive(group), "the shell, xmessage and sleep all ended"


@pytest.mark.display
def test_a_launch_that_fails_is_one_line_and_leaves_nothing(display):  # noqa: F811
    from playtester.capture.window.launch import LaunchedGame

    with pytest.raises(UserError, match="/no/such/game is not a program"):
        LaunchedGame("/no/such/game -windowed", title="x")
    d = desktop()
    try:
        exits = LaunchedGame("sh -c 'echo no GPU found; exit 3'", title="x")
        with pytest.raises(UserError, match="exited \\(status 3\\) before its window appeared; it said: no GPU found"):
            exits.start(d)
        silent = LaunchedGame("sleep 30.123", title="My Game", wait=1.0)
        with pytest.raises(UserError, match="no window titled 'My Game' appeared within 1 s") as e:
            silent.start(d)
        assert "visible windows" in str(e.value) and silent.proc is None
    finally:
        d.close()
    assert not running("sleep\0" "30.123"), "the game that showed no window was ended"


def running(cmdline: str) -> bool:
    """Whether a live process has this command line (arguments joined by NUL)."""
    from playtester.capture.window.platform import process_alive

    for proc in os.listdir("/proc"):
        try:
            with open(f"/proc/{proc}/cmdline") as f:
                if f.read().rstrip("\0") == cmdline and process_alive(int(proc)):
                    return True
        except (OSError, ValueError):
            continue
    return False


@pytest.mark.display
def test_a_launched_game_dies_with_a_killed_playtester(display):  # noqa: F811
    from playtester.capture.window.launch import group_alive

    script = textwrap.dedent("""
        import time
        from playtester.capture.window.keys import KeySender
        from playtester.capture.window.launch import LaunchedGame
        from playtester.capture.window.desktops import open_keyboard
        from playtester.capture.window.x11 import X11Desktop
        game = LaunchedGame("xmessage -title 'Orphan Probe' hi", title="Orphan Probe")
        game.start(X11Desktop())
        KeySender(open_keyboard(), {"w", "left"}).hold(["w"])
        print(game.pgid, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        group = int(parent.stdout.readline())
        assert group_alive(group) and "w" in desktop_keys_down()
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.time() + 10
        while group_alive(group) and time.time() < deadline:
            time.sleep(0.1)
        assert not group_alive(group), "the engine watchdog ended the game of a playtester killed with SIGKILL"
        while "w" in desktop_keys_down() and time.time() < deadline:
            time.sleep(0.1)
        assert "w" not in desktop_keys_down(), "and let go of the key it held"
    finally:
        parent.kill()


@pytest.mark.display
@pytest.mark.parametrize("extra, words", [
    (["--launch", "/nonexistent/game-binary"], "/nonexistent/game-binary is not a program"),
    (["--launch", "sh -c 'exit 4'"], "exited (status 4) before its window appeared"),
    (["--reset", "enter alt+f4"], "--reset 'enter alt+f4', step 2 ('alt+f4'): alt+f4 is not a key a reset may press"),
    (["--reset", "missing-plan.yaml"], "no such file"),
    (["--reset", "x" * 300], "--reset 'xxxxxxxx"),  # too long a name for a file: keys, and no such key
    (["--reset", "y" * 300 + ".yaml"], "no such file"),
    (["--out-of-play", "missing.png"], "--out-of-play missing.png: not found; give a screenshot"),
])
def test_bad_harness_input_is_one_line_and_leaves_no_run_folder(display, tmp_path, capsys, extra, words):  # noqa: F811
    from playtester.cli import main

    out = tmp_path / "run"
    code = main(["run", "window", "--game", "window:No Such Game", "--explorer", "random", "--episodes", "1",
                 "--steps", "5", "--out", str(out), *extra])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and words in err and "Traceback" not in err, err
    assert not out.exists()


def test_the_harness_is_for_window_games(tmp_path, capsys):
    from playtester.cli import main

    code = main(["run", "window", "--game", "doom:park", "--launch", "true", "--explorer", "random", "--out", str(tmp_path / "r2")])
    assert code == 2 and "--launch: only a window game" in capsys.readouterr().err
