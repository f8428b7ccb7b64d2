"""Run logs after a stop mid-write: `--resume` cuts a torn last line back to the last whole
record (issue 20, item 6), so the next record starts on a line of its own."""

import json

from playtester.tester.runlog import JsonlWriter, cut_torn_lines, cut_torn_tail, read_jsonl


def test_a_torn_last_line_is_cut_and_the_next_record_stands_on_its_own(tmp_path):
    log = tmp_path / "trajectory.jsonl"
    whole = json.dumps({"episode": 0, "t": 0}) + "\n" + json.dumps({"episode": 0, "t": 1}) + "\n"
    log.write_bytes(whole.encode() + b'{"episode": 0, "t": 2, "pos')  # 27 bytes torn off mid-record
    (tmp_path / "tests.jsonl").write_text('{"ooi": 3}\n')  # whole: left alone
    said = cut_torn_lines(tmp_path)
    assert len(said) == 1 and said[0].startswith(f"{log}: its last line was torn")
    assert "2 kept, 27 bytes dropped" in said[0]
    assert log.read_text() == whole
    assert (tmp_path / "tests.jsonl").read_text() == '{"ooi": 3}\n'
    assert not list(tmp_path.glob("*.partial")), "the cut went through a .partial file and a rename"

    writer = JsonlWriter(log)  # what a resumed run does next
    writer.write({"episode": 1, "t": 0})
    writer.close()
    assert [r["t"] for r in read_jsonl(log)] == [0, 1, 0]


def test_clean_and_empty_logs_are_not_touched(tmp_path):
    clean, empty = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    clean.write_text('{"t": 0}\n')
    empty.write_bytes(b"")
    before = clean.stat().st_mtime_ns
    assert cut_torn_tail(clean) == 0 and cut_torn_tail(empty) == 0 and cut_torn_tail(tmp_path / "none.jsonl") == 0
    assert clean.stat().st_mtime_ns == before and empty.read_bytes() == b""
    # a file that is one torn line and nothing else is cut to nothing
    only = tmp_path / "c.jsonl"
    only.write_bytes(b'{"t": ')
    assert cut_torn_tail(only) == 6 and only.read_bytes() == b""
