"""Window backend parts that need no display: telemetry over a real UDP socket, hotkeys, regions,
the errors a user meets without a display, and replay of a `doom:park` episode bit for bit."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.capture.window.record_config import Hotkeys
from playtester.capture.window.telemetry import TelemetryListener, parse_record


def run_cli(*args, env=None, cwd=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "playtester", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
    )


def assert_one_line_error(proc, *words):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    text = " ".join(proc.stderr.split())
    assert text.startswith("error:"), text
    for word in words:
        assert word in text, text


# -- telemetry ------------------------------------------------------------------------------------
def test_telemetry_lines_are_merged_in_info_names():
    listener = TelemetryListener(0)
    try:
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        lines = [
            {"pos": [1.5, 2.0, 3.0], "angle": 370, "fps": 50},
            "not json at all",
            {"event": "door_opened", "level": "E1M1"},
            {"events": ["a", "b"], "pos": [4, 5]},
        ]
        payload = "\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines)
        sender.sendto(payload.encode(), ("127.0.0.1", listener.port))
        sender.sendto(b"[1, 2]\n", ("127.0.0.1", listener.port))  # JSON, but not an object
        deadline = time.time() + 5
        while listener.received + listener.bad_lines < 5 and time.time() < deadline:
            time.sleep(0.01)
        got = listener.poll()
        assert got["position"] == (4.0, 5.0)  # the latest
        assert got["angle"] == 10.0
        assert got["fps"] == 50.0 and got["frame_time_ms"] == pytest.approx(20.0)
        assert got["events"] == ["door_opened", "a", "b"]
        assert got["telemetry"] == {"level": "E1M1"}
        assert listener.bad_lines == 2
        assert "events" not in listener.poll()  # events are handed out once
    finally:
        listener.close()


def test_telemetry_rejects_a_malformed_known_key():
    with pytest.raises(ValueError):
        parse_record({"pos": [1, 2, 3, 4]})


def test_telemetry_port_in_use_is_a_user_error():
    listener = TelemetryListener(0)
    try:
        with pytest.raises(UserError, match=f"--telemetry-port {listener.port}"):
            TelemetryListener(listener.port)
    finally:
        listener.close()


# -- options ----------------------------------------------------------------------------------------
def test_hotkeys_are_checked():
    keymap = KeyMap.default()
    assert Hotkeys.parse("F8", "f9", "F10", keymap) == Hotkeys("f8", "f9", "f10")
    with pytest.raises(UserError, match="unknown key 'F99'"):
        Hotkeys.parse("F99", "f9", "f10", keymap)
    with pytest.raises(UserError, match="uses it for playing"):
        Hotkeys.parse("w", "f9", "f10", keymap)
    with pytest.raises(UserError, match="three different keys"):
        Hotkeys.parse("f8", "f8", "f10", keymap)


def test_a_bad_region_is_refused_by_its_option_type_in_one_line(tmp_path, capfd):
    """`record --region` takes the vocabulary's `Region` (tests/test_cli_types.py has its values):
    refused before a display is looked for, nothing written."""
    from playtester.cli import main

    for bad in ("10,20,640", "a,b,c,d", "0,0,0,10"):
        assert main(["record", "--region", bad, "--behavior", "x", "--out", str(tmp_path / "rec")]) == 2
        err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 1 and err[0].startswith(f"error: --region {bad}: give X,Y,W,H"), err
    assert list(tmp_path.iterdir()) == []


def test_record_without_a_display_names_display_and_xvfb(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    proc = run_cli("record", "--window", "Game", "--behavior", "inspect", "--out", str(tmp_path / "d"), env=env)
    assert_one_line_error(proc, "DISPLAY", "Xvfb")


def test_record_with_an_unknown_hotkey_says_so(tmp_path):
    proc = run_cli("record", "--window", "Game", "--behavior", "x", "--out", str(tmp_path / "d"), "--quit-key", "hyper")
    assert_one_line_error(proc, "--quit-key", "unknown key 'hyper'")


def test_window_spec_needs_a_display():
    from playtester.capture.games import make_game

    old = os.environ.pop("DISPLAY", None)
    try:
        with pytest.raises(UserError, match="DISPLAY is not set.*Xvfb"):
            make_game("window:Some Game")
    finally:
        if old is not None:
            os.environ["DISPLAY"] = old


# -- replay ------------------------------------------------------------------------------------------
def write_park_episode(root, spec, steps=40, seed=11):
    """An episode the way `playtester demos` writes one: a seeded reset, actions, the frames seen."""
    from playtester.capture.games import make_game
    from playtester.datasets.episodes import EpisodeWriter

    env = make_game(spec)
    rng = np.random.default_rng(seed)
    try:
        frame, info = env.reset(seed=seed)
        with EpisodeWriter(root, "ep0000", game=spec, behavior="path", keymap=env.keymap, fps=8.75,
                           extra={"reset": {"seed": seed, "options": {}}}) as writer:
            for _ in range(steps):
                action = int(rng.integers(env.action_space.n))
                writer.add(frame, action, keys=env.keymap.keys_for(action), position=info["position"])
                frame, _, terminated, truncated, info = env.step(action)
                assert not terminated
        return root / "ep0000"
    finally:
        env.close()


@pytest.mark.slow
def test_replay_of_a_park_episode_is_bit_for_bit(tmp_path, small_park):
    episode = write_park_episode(tmp_path / "demos", small_park)
    proc = run_cli("replay", str(episode), "--game", small_park, "--speed", "0", "--strict", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "40 of 40 frames identical" in " ".join(proc.stdout.split())

    # The comparison can fail: one changed action changes the frames from the next one on.
    tampered = tmp_path / "tampered"
    shutil.copytree(episode, tampered)
    steps = [json.loads(l) for l in (tampered / "steps.jsonl").read_text().splitlines()]
    steps[20]["action"] = 4 if steps[20]["action"] != 4 else 5  # turn instead
    (tampered / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    proc = run_cli("replay", str(tampered), "--game", small_park, "--speed", "0", "--strict", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "first difference at frame 21" in " ".join(proc.stdout.split())


def test_replay_of_a_missing_episode_is_one_line(tmp_path):
    proc = run_cli("replay", str(tmp_path / "nope"), "--game", "doom:park")
    assert_one_line_error(proc, "nope")


# -- the capture path's resize -----------------------------------------------------------------------
def test_the_one_resize_averages_and_stays_close_to_inter_area():
    import cv2

    from playtester.capture.frames import resize as mipmap_resize

    # Halving is an exact 2x2 mean: a checkerboard of 0 and 200 becomes flat 100.
    board = (np.indices((480, 640)).sum(axis=0) % 2 * 200).astype(np.uint8)
    board = np.repeat(board[..., None], 4, axis=2)
    assert np.all(mipmap_resize(board, (320, 240)) == 100)
    # 640x480 -> 128x128 (mixed factors 5 and 3.75): close to OpenCV's INTER_AREA on a smooth
    # picture with edges, and far from plain subsampling of the checkerboard (no aliasing).
    y, x = np.mgrid[0:480, 0:640]
    picture = np.stack([(x * 255 // 639), (y * 255 // 479), ((x // 40 + y // 40) % 2) * 255], axis=2).astype(np.uint8)
    ours = mipmap_resize(picture, (128, 128)).astype(int)
    area = cv2.resize(picture, (128, 128), interpolation=cv2.INTER_AREA).astype(int)
    assert ours.shape == (128, 128, 3)
    assert np.abs(ours - area).mean() < 3
    flat = mipmap_resize(board, (128, 128))
    assert np.abs(flat.astype(int) - 100).max() <= 2
    # Kept buffers are used when given, and growing falls back to INTER_AREA.
    kept = {}
    scratch = lambda shape: kept.setdefault(shape, np.empty(shape, np.uint8))  # noqa: E731
    out = mipmap_resize(picture, (128, 128), scratch=scratch)
    assert any(out is buf for buf in kept.values()) and np.array_equal(out, ours)
    assert mipmap_resize(picture[:10, :10], (20, 20)).shape == (20, 20, 3)
