"""The command line fuzzed, not listed (issue 36): every option of every command, found in
`playtester.cli.app`'s click tree, drawn by Hypothesis from its type — valid, at its bounds and
hostile — over a command line that is otherwise good; each invocation must exit 0 or 2 (never
130, never a traceback), say a refusal in one line, and leave the disk as it was when it refuses
or stops where its inputs are checked (tests/cli_fuzz.py says how). A fixed, derandomized budget
(`FUZZ_EXAMPLES` per option); `scripts/fuzz_cli.py --examples N` draws more."""

from __future__ import annotations

import json
import os
import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from cli_fuzz import Good, commands, draw_invocation, fresh_sandbox, invoke, label, problems
from playtester.cli import app, main

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1"))
"""Drawn invocations per option (scripts/fuzz_cli.py raises it and changes the seed)."""
SEED = os.environ.get("FUZZ_SEED")
"""None: derandomized (the same draws every run, as CI wants); a number: other draws."""
ONLY = os.environ.get("FUZZ_COMMANDS")
"""Comma-separated command names (e.g. "train policy,report") to fuzz only those, while fixing them."""


@pytest.fixture(scope="module")
def good(tmp_path_factory, tiny_parts, tiny_detector, small_park):
    """Good inputs of every kind the options take: real demos, encoder, policy and detector
    checkpoints (the session's tiny ones), COCO shots, a plan, a run folder …"""
    import cv2
    import numpy as np

    root = tmp_path_factory.mktemp("fuzz-good")
    _, encoder, policy = tiny_parts("inspect")
    demos = root / "demos"  # three short episodes: what reads the demos reads them in a blink
    assert main(["demos", "--game", small_park, "--behavior", "inspect", "--episodes", "3", "--steps", "6",
                 "--out", str(demos)]) == 0
    episode = sorted(p for p in demos.iterdir() if (p / "meta.json").exists())[0]
    shots = tiny_detector.parent / "shots"
    run = root / "run"
    assert main(["run", "explore", "--game", small_park, "--explorer", "random", "--episodes", "1", "--steps", "5",
                 "--out", str(run)]) == 0
    files = {"policy checkpoint": policy, "path policy checkpoint": policy, "encoder checkpoint": encoder,
             "detector checkpoint": tiny_detector, "weights file": tiny_detector, "COCO labels.json": shots / "labels.json"}
    for name, text in {"plan (YAML)": "{name: walk, nodes: [{name: a, action: forward, repeat: 2}]}\n",
                       "text file of steps": "Walk to the barrel.\n",
                       "key map YAML": "{name: mine, actions: [{name: forward, keys: [w]}, {name: turn_left, keys: [left]}]}\n",
                       "YAML file of run options": "{steps: 5, episodes: 1}\n",
                       "JSON list of OOIs": json.dumps([{"id": 1, "kind": "barrel", "x": 10, "y": 20}]),
                       "load threshold JSON": json.dumps({"threshold_ms": 30.0}),
                       "video file or folder of videos": "not a video", "any": "a file\n"}.items():
        files[name] = root / f"{len(files)}.txt"
        files[name].write_text(text)
    files["map image (PNG or JPEG)"] = root / "map.png"
    cv2.imwrite(str(files["map image (PNG or JPEG)"]), np.zeros((40, 60, 3), np.uint8))
    folders = {"folder of demo episodes": demos, "episode folder": episode, "demo episode folder": episode,
               "run folder": run, "folder of images": shots / "images", "any": demos}
    return Good(files, folders, root)


def fuzz_options(good: Good, where, read, examples: int, seed: int | None) -> tuple[list, list[str], int]:
    """Every option of every command, `examples` drawn invocations each: (commands, failures, invocations)."""
    found = [c for c in commands(app) if ONLY is None or c.name in ONLY.split(",")]
    failures: list[str] = []
    count = 0
    for command in found:
        started = time.time()
        for param in command.params:
            @settings(max_examples=examples, derandomize=seed is None, database=None, deadline=None,
                      phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
            @given(st.data())
            def fuzz(data):
                nonlocal count
                count += 1
                box = fresh_sandbox(where, good)
                argv, _ = draw_invocation(data, command, box, focus=param)
                outcome = invoke(argv, box, read)
                wrong = problems(outcome)
                assert not wrong, (f"playtester {' '.join(argv)}: {'; '.join(wrong)} (exit {outcome.code})\n"
                                   f"{(outcome.out + outcome.err)[-1500:]}")

            if seed is not None:
                from hypothesis import seed as hypothesis_seed

                fuzz = hypothesis_seed(seed + count)(fuzz)
            try:
                fuzz()
            except Exception as e:  # an AssertionError, or Hypothesis's group of several
                failures.append(f"{command.name} {label(param)}: {first_failure(e)}")
        seconds[command.name] = time.time() - started
    return found, failures, count


seconds: dict[str, float] = {}
"""Each command's time in the last `fuzz_options`."""


def first_failure(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    return str(e).splitlines()[0] if str(e) else repr(e)


@pytest.mark.slow
def test_every_option_of_every_command_fuzzed(good, tmp_path, capfd):
    started = time.time()
    found, failures, count = fuzz_options(good, tmp_path, capfd.readouterr, EXAMPLES, None if SEED is None else int(SEED))
    options = sum(len(c.params) for c in found)
    with capfd.disabled():
        print(f"\nfuzzed {len(found)} commands, {options} options and arguments, {count} invocations "
              f"in {time.time() - started:.0f} s; {len(failures)} failed")
        print("slowest: " + ", ".join(f"{name} {s:.0f} s" for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:6]))
        for failure in failures:
            print(f"failed: {failure}")
    assert ONLY is not None or (len(found) >= 19 and options >= 200)  # 20 with the hidden `run all` of earlier versions
    assert not failures, "\n".join(failures)
