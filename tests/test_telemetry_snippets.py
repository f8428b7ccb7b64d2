"""The telemetry senders of docs/telemetry.md against the real receiver.

For each engine the test reads the snippet's packet format and argument list from the page, builds
in Python the very bytes the snippet sends for a known player pose (the format rendered as that
language renders it: C#'s composite format with invariant culture, printf for GDScript and
Unreal's `FString::Printf`; the string literal unescaped as that language does; UTF-8), sends them
over UDP to a `TelemetryListener`, and checks that the pose comes back in the map's frame: x to the
east, y to the north, the heading counter-clockwise from east. The poses are worked by hand from
each engine's axes (docs/telemetry.md)."""

import math
import re
import socket
import time
from pathlib import Path

import pytest

from playtester.capture.window.telemetry import TelemetryListener

DOC = Path(__file__).resolve().parents[1] / "docs" / "telemetry.md"
STRING = r'"(?:[^"\\]|\\.)*"'


def snippet(language: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1, f"one {language} block in {DOC.name}"
    return blocks[0]


def unescape(literal: str) -> str:
    """A C#, C++ or GDScript string literal's text (the escapes these snippets use)."""
    body = literal[1:-1]
    return re.sub(r'\\(["\'\\nt])', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def csharp_format(fmt: str, args: list[float]) -> str:
    """.NET composite formatting of `{i:Fn}` items with the invariant culture; `{{` and `}}` are braces."""
    def item(m):
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        return f"{args[int(m.group(1))]:.{int(m.group(2))}f}"

    return re.sub(r"\{\{|\}\}|\{(\d+):F(\d+)\}", item, fmt)


def split_args(text: str) -> list[str]:
    return [a.strip() for a in text.replace("\n", " ").split(",")]


def received(packet: bytes) -> dict:
    listener = TelemetryListener(0)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(packet, ("127.0.0.1", listener.port))
        deadline = time.time() + 5
        while listener.received + listener.bad_lines == 0 and time.time() < deadline:
            time.sleep(0.01)
        assert listener.bad_lines == 0, listener.problems
        return listener.poll()
    finally:
        listener.close()


def test_unity_snippet_packet_is_read_in_the_maps_frame():
    code = snippet("csharp")
    fmt, args = re.search(rf"string\.Format\(CultureInfo\.InvariantCulture, ({STRING}), ([^;]*)\);", code).groups()
    assert split_args(args) == ["p.x", "p.z", "p.y", "heading", "1f / Time.unscaledDeltaTime"]
    assert "float heading = 90f - transform.eulerAngles.y;" in code and "Encoding.UTF8.GetBytes(line)" in code
    # the player at Unity (x 12.5, y 2, z 30) facing yaw 30° (clockwise from +z: north-north-east), 50 fps
    values = {"p.x": 12.5, "p.z": 30.0, "p.y": 2.0, "heading": 90 - 30.0, "1f / Time.unscaledDeltaTime": 1 / 0.02}
    packet = csharp_format(unescape(fmt), [values[a] for a in split_args(args)]).encode("utf-8")
    assert packet == b'{"pos":[12.50,30.00,2.00],"angle":60.0,"fps":50.0}\n'
    got = received(packet)
    assert got["position"] == (12.5, 30.0, 2.0) and got["angle"] == 60.0 and got["frame_time_ms"] == pytest.approx(20.0)
    # yaw 30° clockwise from north is 60° counter-clockwise from east: the map's heading
    assert math.cos(math.radians(got["angle"])) == pytest.approx(math.sin(math.radians(30)))


def test_godot_snippet_packet_is_read_in_the_maps_frame():
    code = snippet("gdscript")
    fmt, args = re.search(r"var line := ('(?:[^'\\]|\\.)*') % \[([^\]]*)\]", code).groups()
    assert split_args(args) == ["p.x", "-p.z", "p.y", "heading", "Engine.get_frames_per_second()"]
    assert "var heading := rad_to_deg(global_rotation.y) + 90.0" in code and "line.to_utf8_buffer()" in code
    # the player at Godot (x -3.25, y 1, z -40): 40 units north (forward is -z); turned 90° left
    # (yaw +90°, counter-clockwise seen from above) it faces west: heading 180°; 60 fps
    values = {"p.x": -3.25, "-p.z": 40.0, "p.y": 1.0, "heading": 90.0 + 90.0, "Engine.get_frames_per_second()": 60.0}
    packet = (unescape(fmt) % tuple(values[a] for a in split_args(args))).encode("utf-8")
    assert packet == b'{"pos":[-3.25,40.00,1.00],"angle":180.0,"fps":60.0}\n'
    got = received(packet)
    assert got["position"] == (-3.25, 40.0, 1.0) and got["angle"] == 180.0 and got["fps"] == 60.0


def test_unreal_snippet_packet_is_read_in_the_maps_frame():
    code = snippet("cpp")
    fmt, args = re.search(rf"FString::Printf\(TEXT\(({STRING})\), ([^;]*)\);", code).groups()
    assert split_args(args) == ["P.X", "-P.Y", "P.Z", "-Yaw", "1.0 / DeltaTime"]
    assert "FTCHARToUTF8 Utf8(*Line)" in code and "SetIp(TEXT(\"127.0.0.1\")" in code
    # the pawn at Unreal (X 100, Y 250, Z 90): 250 units to the right of +X is south on the map;
    # yaw 90° (clockwise from +X seen from above) faces +Y, south: heading -90°, i.e. 270°
    values = {"P.X": 100.0, "-P.Y": -250.0, "P.Z": 90.0, "-Yaw": -90.0, "1.0 / DeltaTime": 1 / (1 / 30)}
    packet = (unescape(fmt) % tuple(values[a] for a in split_args(args))).encode("utf-8")
    assert packet == b'{"pos":[100.00,-250.00,90.00],"angle":-90.0,"fps":30.0}\n'
    got = received(packet)
    assert got["position"] == (100.0, -250.0, 90.0) and got["angle"] == 270.0 and got["fps"] == pytest.approx(30.0)


def test_a_packet_of_the_wrong_size_is_one_warning_line(caplog):
    """A binary packet (a struct of three floats), a `pos` of four numbers: counted, said once each."""
    import logging
    import struct

    listener = TelemetryListener(0)
    try:
        with caplog.at_level(logging.WARNING, logger="playtester.capture.window.telemetry"), \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for packet in (struct.pack("<3f", 1.5, -2.0, 0.1), struct.pack("<3f", 1.5, -2.0, 0.1),
                           b'{"pos":[1,2,3,4],"angle":0}\n', b'{"pos":[1,2],"angle":90}\n'):
                s.sendto(packet, ("127.0.0.1", listener.port))
            deadline = time.time() + 5
            while listener.received + listener.bad_lines < 4 and time.time() < deadline:
                time.sleep(0.01)
        lines = [r.getMessage() for r in caplog.records]
        assert listener.bad_lines == 3 and listener.received == 1
        assert len(lines) == 2, lines  # the second binary packet is counted, not said again
        assert f"127.0.0.1:{listener.port}" in lines[0] and "12-byte packet that is not UTF-8" in lines[0]
        assert "pos has 4 numbers (give 2 or 3" in lines[1] and "docs/telemetry.md" in lines[1]
        assert listener.poll()["position"] == (1.0, 2.0), "good lines still count"
    finally:
        listener.close()
