"""The fuzzing of the command line, shared by tests/test_cli_fuzz.py (a fixed budget, in CI) and
scripts/fuzz_cli.py (a longer run): walk `playtester.cli.app`'s click tree, draw values for each
option from its type in the vocabulary (`playtester/options.py`) — valid, at its bounds
and hostile — run each command in this process through `playtester.cli.main`, and check what a
user may expect of bad input: exit status 0 or 2 (never 130, never a traceback), one line of error
for 2, and the disk as it was (no folder made, none half-written) after a refusal.

A command stops where its inputs are all checked (`playtester.files.inputs_checked`, with
`STOP_AFTER_CHECKS` set): its checks are fuzzed, not its work, and the disk must be as it was
there too — what a command writes before its inputs are checked is a defect the same way. The
commands without such a point (`games`, `report`) run whole.

Options are found in the tree, so a new option is fuzzed without editing this file; `GOOD` and
`BASE` give what a command needs to get past the options not under test (good input files, a
small park), by the option's type and name.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st

from playtester import options as o

SMALL_PARK = "doom:park:5:24x24"

BASE: dict[str, list[str]] = {
    "run explore": ["--explorer", "random"],
    "run window": ["--explorer", "random"],
    "run load": ["--explorer", "inspector"],
    "shots": ["--game", SMALL_PARK, "--n", "2"],
    "demos": ["--game", SMALL_PARK, "--episodes", "1", "--steps", "5"],
    "eval policy": ["--game", SMALL_PARK, "--episodes", "1", "--steps", "5"],
    "plan run": ["--oracle-labels", "--max-steps", "5"],
    "demo": ["--profile", "smoke", "--game", "doom:park:5:24x24"],
}
"""Good options a command takes besides its required ones, so that an invocation can pass its
checks (by the command's words)."""

TEXT_BY_OPTION = {"--game": SMALL_PARK, "--behavior": "path"}
"""A good value of a `Text` option, by its name (anything else: a word)."""


@dataclass
class Good:
    """Good inputs of every kind the options name, in a folder the fuzzing never writes to."""

    files: dict[str, Path]
    """By the `what` of `InFile` (e.g. "policy checkpoint")."""
    folders: dict[str, Path]
    """By the `what` of `InFolder` (e.g. "folder of demo episodes")."""
    root: Path

    def file(self, what: str) -> Path:
        return self.files.get(what, self.files["any"])

    def folder(self, what: str) -> Path:
        return self.folders.get(what, self.folders["any"])


# -- the command tree ------------------------------------------------------------------------------

@dataclass
class Command:
    words: list[str]
    params: list[Any]
    """Its click parameters (options, arguments, flags), `--help` left out."""

    @property
    def name(self) -> str:
        return " ".join(self.words)


def commands(app) -> list[Command]:
    """Every command of the app, hidden ones too, as the click tree has them."""
    import typer

    found: list[Command] = []

    def walk(cmd, words):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*words, name])
        else:
            found.append(Command(words, [p for p in cmd.params if p.name != "help"]))

    walk(typer.main.get_command(app), [])
    return found


def label(param) -> str:
    return param.opts[0] if param.param_type_name == "option" else param.name.upper()


# -- drawn values --------------------------------------------------------------------------------------
# A drawn value is a small description (what to make in the sandbox, or a text), turned into the
# command-line text by `make` once the example's sandbox exists.

HOSTILE_TEXT = ["", " ", "-", "--", "-1", "nan", "inf", "x" * 300, "é\u202e", "\n", "a b", "%s%n", "../..", "NUL\0"]
HUGE = [10**19, 2**63, 10**80, -(10**19)]


def numbers(low: float | None, high: float | None, whole: bool) -> st.SearchStrategy:
    """Valid, bound and hostile numbers for a range, as the texts a user types."""
    lo = -1e6 if low is None else low
    hi = 1e6 if high is None else high
    edges = [v for v in (low, high) if v is not None]
    near = [v + d for v in edges for d in (-1, 1)] if whole else [v + d for v in edges for d in (-1e-9, 1e-9, -0.5, 0.5)]
    valid = st.integers(int(lo), int(min(hi, lo + 3))) if whole else st.floats(lo, hi, allow_nan=False)
    hostile = st.sampled_from([*HUGE, -1, 0, 1.5, "1e3", "0x10", "1_000", "٣", "+2", " 2 ", "nan", "inf", "-inf",
                               "1e400", "", "abc"])
    return st.one_of(valid, st.sampled_from(edges + near) if edges else valid, hostile).map(str)


def path_kinds(output: bool) -> st.SearchStrategy:
    """Paths as descriptions: good, missing, a folder, a file, under a file, in a missing folder, odd."""
    kinds = ["good", "good", "missing", "folder", "empty-folder", "empty-file", "random-file", "under-file",
             "missing-parent", "empty-text", "nul", "root", "dash", "too-long"]
    if output:
        kinds += ["fresh", "fresh", "existing-file", "existing-folder"]
    return st.sampled_from(kinds).map(lambda k: ("path", k))


def values(param) -> st.SearchStrategy:
    """What to draw for one parameter: from its type in the vocabulary (a flag: on or off)."""
    kind = o.kind_of(param)
    if kind is None:
        return st.just(("flag",))
    if isinstance(kind, o.Count):  # Seed and Size too
        return numbers(kind.low, kind.high, whole=True)
    if isinstance(kind, o.Number):
        return numbers(kind.low, kind.high, whole=False)
    if isinstance(kind, o.Choice):
        return st.one_of(st.sampled_from(kind.names), st.sampled_from(["", "X", kind.names[0].upper(), kind.names[0] + " "]))
    if isinstance(kind, o.NameOrFile):
        return st.one_of(st.sampled_from(kind.names), path_kinds(output=False))
    if isinstance(kind, (o.InFile, o.InFolder)):
        return path_kinds(output=False)
    if isinstance(kind, (o.OutFile, o.OutFolder)):
        return path_kinds(output=True)
    if isinstance(kind, o.FrameSize):
        return st.one_of(st.sampled_from(["160x120", "320x240", "1x1", "0x5", "5x0", "-1x-1", "4097x10", "320X240", "x",
                                          "320x240x2", ""]), st.tuples(st.integers(-2, 5000), st.integers(-2, 5000))
                         .map(lambda wh: f"{wh[0]}x{wh[1]}"))
    if isinstance(kind, (o.Bounds, o.Region)):  # four numbers: world bounds, a screen rectangle
        return st.one_of(st.sampled_from(["0,0,1000,1000", "0,0,640,480", "-5,-5,10,10", "1,1,0,0", "0,0,0,10",
                                          "0,0,99999999999,5", "nan,0,1,1", "0,0,inf,1", "0,0,1", "a,b,c,d", ""]),
                         st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6)),
                                  min_size=3, max_size=5).map(lambda v: ",".join(map(str, v))))
    return st.one_of(st.just(("good-text",)), st.sampled_from(HOSTILE_TEXT), st.text(max_size=20))


@dataclass
class Sandbox:
    """The example's own folder: where drawn paths are made and outputs go."""

    root: Path
    good: Good
    made: int = 0

    def fresh(self, name: str = "p") -> Path:
        self.made += 1
        return self.root / f"{name}{self.made}"


def make(param, drawn: Any, box: Sandbox) -> list[str]:
    """The command-line words of `param` with the drawn value (none for a flag drawn off)."""
    kind = o.kind_of(param)
    if drawn == ("flag",):
        return [param.opts[0]]
    if drawn == ("good-text",):
        text = TEXT_BY_OPTION.get(label(param), "word")
    elif isinstance(drawn, tuple) and drawn[0] == "path":
        text = make_path(kind, drawn[1], box)
    else:
        text = str(drawn)
    return [param.opts[0], text] if param.param_type_name == "option" else [text]


def make_path(kind, how: str, box: Sandbox) -> str:
    good = box.good
    if how == "good":
        if isinstance(kind, o.InFolder):
            return str(good.folder(kind.what))
        if isinstance(kind, (o.InFile, o.NameOrFile)):
            return str(good.file(kind.what))
        how = "fresh"
    if how == "fresh":
        return str(box.fresh("out"))
    if how == "missing":
        return str(box.fresh("missing"))
    if how in ("folder", "existing-folder"):
        path = box.fresh("folder")
        path.mkdir()
        (path / "something.txt").write_text("x")
        return str(path)
    if how == "empty-folder":
        path = box.fresh("empty")
        path.mkdir()
        return str(path)
    if how in ("empty-file", "existing-file"):
        path = box.fresh("file")
        path.write_bytes(b"")
        return str(path)
    if how == "random-file":
        path = box.fresh("random")
        path.write_bytes(os.urandom(512))
        return str(path)
    if how == "under-file":
        path = box.fresh("file")
        path.write_text("a file\n")
        return str(path / "inside")
    if how == "missing-parent":
        return str(box.fresh("nowhere") / "deeper" / "x")
    if how == "too-long":  # more than a file name may hold: the system refuses even to look
        return str(box.root / ("x" * 300) / "y")
    return {"empty-text": "", "nul": "a\0b", "root": "/", "dash": "-"}[how]


# -- one invocation ------------------------------------------------------------------------------

def good_words(command: Command, box: Sandbox) -> dict[str, list[str]]:
    """The command's required parameters with good values, by label."""
    words = {}
    for param in command.params:
        if param.required or (label(param) == "--game" and o.kind_of(param) is not None):
            kind = o.kind_of(param)
            drawn: Any = ("good-text",) if isinstance(kind, o.Text) else ("path", "good")
            words[label(param)] = make(param, drawn, box)
    return words


@dataclass
class Outcome:
    code: int | str
    """The exit status, or "checked" where the command stopped at its inputs' check."""
    out: str
    err: str
    argv: list[str]
    changed: list[str] = field(default_factory=list)
    """Paths the invocation made, changed or removed (looked at after a refusal or a stop)."""


ENGINE_DROPPINGS = "_vizdoom"
"""The empty folder ViZDoom's engine makes in the folder it starts in, whatever it is asked
(hard-coded in its executable): not the command's writing."""


def snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    seen = {}
    for root in roots:
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [s for s in subfolders if s != ENGINE_DROPPINGS]
            for name in subfolders + names:
                path = Path(folder) / name
                try:
                    st_ = path.lstat()
                except OSError:
                    continue
                seen[str(path)] = (st_.st_size if not path.is_dir() else 0, st_.st_mtime_ns if not path.is_dir() else 0)
    return seen


def invoke(argv: list[str], box: Sandbox, read: Callable[[], tuple[str, str]]) -> Outcome:
    """Run `playtester ARGV` here, in the sandbox, stopped at its inputs' check; what it said and did."""
    from playtester import files
    from playtester.cli import main

    before = snapshot(box.root, box.good.root)
    read()
    cwd = os.getcwd()
    os.chdir(box.root)
    files.STOP_AFTER_CHECKS = True
    try:
        code: int | str = main(argv)
    except files.InputsChecked:
        code = "checked"
    finally:
        files.STOP_AFTER_CHECKS = False
        os.chdir(cwd)
    out, err = read()
    outcome = Outcome(code, out, err, argv)
    if code != 0:
        after = snapshot(box.root, box.good.root)
        outcome.changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    return outcome


def problems(outcome: Outcome) -> list[str]:
    """What is wrong with an outcome; empty when it is what bad (or good) input should give."""
    found = []
    text = outcome.out + outcome.err
    if outcome.code not in (0, 2, "checked"):
        found.append(f"exit status {outcome.code}")
    if "Traceback" in text:
        found.append("a traceback")
    if outcome.code == 2:
        lines = [line for line in outcome.err.splitlines() if line.strip()]
        if len(lines) != 1 or not lines[0].startswith("error:"):
            found.append(f"{len(lines)} lines of error, not one")
    if outcome.code != 0 and outcome.changed:
        found.append(f"{'refused' if outcome.code == 2 else 'stopped at its check'} but changed the disk: "
                     f"{', '.join(outcome.changed[:4])}")
    leftovers = [p for p in outcome.changed if p.endswith((".partial", ".replaced"))]
    if leftovers:
        found.append(f"left {leftovers[0]}")
    return found


def draw_invocation(data, command: Command, box: Sandbox, focus: Any | None) -> tuple[list[str], list[str]]:
    """argv and the labels of the parameters drawn: `focus` (or a drawn one) and perhaps a second,
    over the command's good words."""
    words = good_words(command, box)
    params = command.params
    chosen = [focus] if focus is not None else [data.draw(st.sampled_from(params), label="option")]
    if len(params) > 1 and data.draw(st.booleans(), label="a second option"):
        chosen.append(data.draw(st.sampled_from(params), label="second option"))
    drawn = {}
    for param in chosen:
        value = data.draw(values(param), label=label(param))
        drawn[label(param)] = make(param, value, box)
    argv = list(command.words)
    arguments = [p for p in params if p.param_type_name == "argument"]
    for param in arguments:
        argv += drawn.get(label(param)) or words.get(label(param)) or []
    base = list(BASE.get(command.name, []))
    given = {label(p) for p in chosen} | set(words)
    i = 0
    while i < len(base):  # the base's options not drawn
        if base[i] not in given:
            argv += base[i:i + 2] if i + 1 < len(base) and not base[i + 1].startswith("--") else base[i:i + 1]
        i += 2 if i + 1 < len(base) and not base[i + 1].startswith("--") else 1
    for name, ws in words.items():
        if name not in drawn and name.startswith("-"):
            argv += ws
    for name, ws in drawn.items():
        if name.startswith("-"):
            argv += ws
    return argv, sorted(drawn)


def fresh_sandbox(parent: Path, good: Good) -> Sandbox:
    root = parent / "box"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return Sandbox(root, good)
