"""One vocabulary of option types, used by every command (and by `run --config`).

A command declares each option with the type of what it takes; the type turns the text of the
command line (or the same option's value in a `--config` YAML file) into the value, or refuses
it in one line that names the option, the value and what to give (a `UserError`: exit status 2,
no traceback). Nothing is checked by hand in a command, and nothing is created by a type:

    seed: int = option(Seed(), 0, "--seed", help="Seed of the split and of training.")
    epochs: int = option(Count(1, MANY), 4, "--epochs", help="Passes over the training split.")
    out: Path = option(OutFile(".ckpt"), ..., "--out", help="Checkpoint to write.")

The types:

    Seed()                 a whole number 0 … 2³²−1 (what numpy and torch seed with)
    Count(low, high)       a whole number in [low, high]: episodes, steps, workers, a port
    Size(high)             a positive whole number whose memory the command estimates before it
                           allocates (`check_memory`): a batch, a hidden size, an image side
    Number(low, high)      a finite number in a range (nan and inf refused); `above=True` makes
                           `low` itself refused (a positive rate)
    Choice(*names)         one of a few words
    Switch()               on or off: a flag (`--overwrite`), true or false in a --config file
    Text()                 any non-empty text (a game spec, a class name); its reader checks it
    InFile(what)           an existing file (a checkpoint, a COCO file …); its reader checks what
                           is in it, with `about(option)` naming the option (`folder_ok`: or a
                           folder of them)
    InFolder(what)         an existing folder (demos, a run)
    NameOrFile(names, what) one of a few words, or an existing file (`--pretrained auto|PATH`)
    OutFile(suffix)        a file to write: not a folder; its parent an existing, writable folder
    OutFolder()            a folder to write: not a file; its parent an existing, writable folder
    FrameSize()            WIDTHxHEIGHT in pixels
    Region()               X,Y,W,H: a rectangle of the screen in whole pixels
    Bounds()               X0,Y0,X1,Y1: four finite numbers with X1 > X0 and Y1 > Y0

`option(...)` and `argument(...)` make the typer parameter; `kind_of(param)` finds a click
parameter's type again (the fuzz test of the command line draws values from it).

What a count costs is checked against what the machine has before anything is written:
`check_free_disk` for output, `check_memory` for buffers and models (refused above a share of
the memory available now, a quarter unless `playtester --memory-budget SHARE` raises it, with
the estimate in the message). `inputs_checked()` (from `playtester/files.py`) marks, in a
command, the point where every input has been checked and the first thing is about to be
written; what is written after it goes inside `new_folder` (same module).
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from playtester.errors import UserError, about  # noqa: F401 - the commands take `about` from here with the vocabulary
from playtester.files import inputs_checked  # noqa: F401 - the commands take it from here with the vocabulary

MANY = 1_000_000
"""Upper bound of counts of episodes, steps, generations: more than a run can play."""
WIDE = 65_536
"""Upper bound of sizes: batch sizes, hidden sizes, image sides."""
RULES_HELP = ("How a Doom level is played: immortal (god mode; the default for stock levels, WADs and scenarios), "
              "no-monsters, or play (as shipped; a death starts the level again).")
"""The help of `--rules` on the commands that play a Doom level (`run` takes it from `RunSpec`)."""
SEEDS = 2**32 - 1
"""The largest seed: numpy's and torch's seeds are 32-bit."""


class Refused(ValueError):
    """Why a value is not one an option takes (the option and the value are put in front)."""


def shown(value: Any) -> str:
    """A value as the message quotes it: a text as typed (quoted when empty, spaced or odd), else as is."""
    if isinstance(value, str):
        plain = value and value.isprintable() and value.strip() == value and " " not in value
        return value if plain else repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return repr(value) if not isinstance(value, (int, float, Path)) else str(value)


class OptionType:
    """What an option takes: `parse` turns a command-line text or a YAML value into the value, or
    raises `Refused` saying what to give instead; `describe` says what it takes, for the help."""

    metavar = "VALUE"
    description = "a value"

    def parse(self, value: Any) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        return self.description


# -- numbers ---------------------------------------------------------------------------------------

def _whole(value: Any, wanted: str) -> int:
    if isinstance(value, bool) or isinstance(value, float):
        raise Refused(f"give {wanted}")
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:  # not digits, or more digits than Python converts
        raise Refused(f"not a whole number; give {wanted}") from None


@dataclass(frozen=True)
class Count(OptionType):
    """A whole number in [low, high]."""

    low: int = 1
    high: int = MANY
    metavar = "N"

    def describe(self) -> str:
        return f"a whole number from {self.low} to {self.high}"

    def parse(self, value: Any) -> int:
        n = _whole(value, self.describe())
        if not self.low <= n <= self.high:
            raise Refused(f"out of range; give {self.describe()}")
        return n


@dataclass(frozen=True)
class Seed(Count):
    """A seed: 0 … 2³²−1."""

    low: int = 0
    high: int = SEEDS
    metavar = "SEED"

    def describe(self) -> str:
        return f"a seed, a whole number from 0 to {self.high}"


@dataclass(frozen=True)
class Size(Count):
    """A positive size (a batch, a hidden size, an image side) up to `high` (from `low`), whose
    memory the command estimates from all its options before it allocates (`check_memory`)."""

    high: int = WIDE
    low: int = 1
    metavar = "SIZE"

    def __init__(self, high: int = WIDE, low: int = 1) -> None:
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "low", low)


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class Number(OptionType):
    """A finite number in [low, high] (`above`: low itself refused; `below`: high itself refused)."""

    low: float | None = None
    high: float | None = None
    above: bool = False
    below: bool = False
    metavar = "X"

    def describe(self) -> str:
        low = "" if self.low is None else f" {'above' if self.above else 'from'} {_plain(self.low)}"
        high = "" if self.high is None else f" {'below' if self.below else 'up to' if self.low is None else 'to'} {_plain(self.high)}"
        return f"a number{low}{high}"

    def parse(self, value: Any) -> float:
        if isinstance(value, bool):
            raise Refused(f"give {self.describe()}")
        try:
            x = float(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError, OverflowError):
            raise Refused(f"not a number; give {self.describe()}") from None
        if not math.isfinite(x):
            raise Refused(f"not a finite number; give {self.describe()}")
        if self.low is not None and (x < self.low or (self.above and x == self.low)):
            raise Refused(f"out of range; give {self.describe()}")
        if self.high is not None and (x > self.high or (self.below and x == self.high)):
            raise Refused(f"out of range; give {self.describe()}")
        return x


# -- words -----------------------------------------------------------------------------------------

@dataclass(frozen=True, init=False)
class Choice(OptionType):
    """One of a few words."""

    names: tuple[str, ...]

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", tuple(names))

    @property
    def metavar(self) -> str:  # type: ignore[override]
        return "|".join(self.names)

    def describe(self) -> str:
        return " or ".join([", ".join(self.names[:-1]), self.names[-1]] if len(self.names) > 1 else self.names)

    def parse(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.names:
            raise Refused(f"use {self.describe()}")
        return value


@dataclass(frozen=True)
class Switch(OptionType):
    """On or off: a flag on the command line (typer's own), true or false in a --config file."""

    metavar = ""
    description = "true or false"

    def parse(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise Refused(f"give {self.description}")
        return value


@dataclass(frozen=True)
class Text(OptionType):
    """Any non-empty text; what it names is checked by its reader."""

    metavar = "TEXT"
    description = "a text"

    def parse(self, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise Refused("give a text")
        text = str(value)
        if not text.strip():
            raise Refused("empty; give a text")
        if "\0" in text:
            raise Refused("holds a NUL character")
        return text


# -- paths -----------------------------------------------------------------------------------------

def _path(value: Any) -> Path:
    if isinstance(value, Path):
        return value
    if not isinstance(value, str) or not value.strip():
        raise Refused("give a path")
    if "\0" in value:
        raise Refused("a path cannot hold a NUL character")
    return Path(value)


def _writable_parent(path: Path) -> None:
    """Refuse a path whose parent is not an existing, writable folder (nothing is created)."""
    parent = path.parent
    if not parent.exists():
        above = parent
        while not above.exists() and above != above.parent:
            above = above.parent
        if above.exists() and not above.is_dir():
            raise Refused(f"{above} is a file, not a folder; give a path inside a folder")
        raise Refused(f"its parent folder {parent} does not exist; create it first")
    if not parent.is_dir():
        raise Refused(f"its parent {parent} is a file, not a folder; give a path inside a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise Refused(f"cannot write in {parent}; give a folder you can write to")


@dataclass(frozen=True)
class InFile(OptionType):
    """An existing file of a kind (`what`, e.g. "policy checkpoint"): its reader checks its contents.
    `folder_ok`: a folder of such files too (`demos --from-video FILE|FOLDER`). `inside`: the name
    such a file has in the folder a command writes it to (`labels.json` of `shots --out`): a folder
    given for the file is refused with that file's path where the folder holds one. `made_by`: the
    command that makes such a file, named when it is missing. `retired`: (word, what to give now)
    for a word that once named something else (`--detector ground-truth`)."""

    what: str = "file"
    folder_ok: bool = False
    inside: str = ""
    made_by: str = ""
    retired: tuple[tuple[str, str], ...] = ()
    metavar = "FILE"

    def describe(self) -> str:
        return f"a {self.what}"

    def parse(self, value: Any) -> Path:
        for word, instead in self.retired:
            if str(value) == word:
                raise Refused(instead)
        path = _path(value)
        if not path.exists():
            made = f" (make one with `{self.made_by}`)" if self.made_by else ""
            raise Refused(f"not found; give a {self.what}{made}")
        if path.is_dir() and not self.folder_ok:
            if self.inside and (path / self.inside).is_file():
                raise Refused(f"is a folder; give {path / self.inside}")
            raise Refused(f"is a folder; give a {self.what}")
        if not os.access(path, os.R_OK):
            raise Refused(f"cannot be read (permissions); give a {self.what} you can read")
        return path


DETECTOR_CHECKPOINT = InFile("detector checkpoint", made_by="playtester train detector")
OBJECT_DETECTOR = InFile("detector checkpoint", made_by="playtester train detector", retired=(
    ("ground-truth", "the engine's labels are the --oracle-labels flag now (an ablation); "
                     "give a trained detector checkpoint, or --oracle-labels"),))
"""A run's or a plan's `--detector`, where `ground-truth` once named the engine's labels."""


@dataclass(frozen=True)
class InFolder(OptionType):
    """An existing folder of a kind (`what`, e.g. "folder of demo episodes")."""

    what: str = "folder"
    metavar = "FOLDER"

    def describe(self) -> str:
        return f"a {self.what}"

    def parse(self, value: Any) -> Path:
        path = _path(value)
        if not path.exists():
            raise Refused(f"not found; give a {self.what}")
        if not path.is_dir():
            raise Refused(f"is a file, not a folder; give a {self.what}")
        if not os.access(path, os.R_OK | os.X_OK):
            raise Refused(f"cannot be read (permissions); give a {self.what} you can read")
        return path


@dataclass(frozen=True)
class NameOrFile(OptionType):
    """One of a few words, or an existing file (`what`): `--pretrained auto|coco|none|PATH`."""

    names: tuple[str, ...] = ()
    what: str = "file"
    metavar = "NAME|FILE"

    def describe(self) -> str:
        return f"{' or '.join(self.names)}, or a {self.what}"

    def parse(self, value: Any) -> str:
        if isinstance(value, str) and value in self.names:
            return value
        try:
            return str(InFile(self.what).parse(value))
        except Refused as e:
            raise Refused(f"{e} (or {' or '.join(self.names)})") from None


@dataclass(frozen=True)
class OutFile(OptionType):
    """A file to write: not a folder, in an existing folder you can write to. Nothing is created."""

    suffix: str = ""
    metavar = "FILE"

    def describe(self) -> str:
        return "a file to write, in an existing folder"

    def parse(self, value: Any) -> Path:
        path = _path(value)
        if path.is_dir():
            raise Refused(f"is a folder; give a file name such as {path / ('out' + self.suffix)}")
        _writable_parent(path)
        return path


@dataclass(frozen=True)
class OutFolder(OptionType):
    """A folder to write: not a file, in an existing folder you can write to. Nothing is created;
    whether an existing folder may be added to or replaced is the command's (--resume, --overwrite)."""

    metavar = "FOLDER"

    def describe(self) -> str:
        return "a folder to write, in an existing folder"

    def parse(self, value: Any) -> Path:
        path = _path(value)
        if path.exists() and not path.is_dir():
            raise Refused("is a file, not a folder; give the path of a folder (it is created)")
        if path.resolve() == Path(path.resolve().anchor):
            raise Refused("is the root of the file system; give a folder inside it")
        _writable_parent(path.resolve())
        return path


# -- several numbers -------------------------------------------------------------------------------

@dataclass(frozen=True)
class FrameSize(OptionType):
    """WIDTHxHEIGHT in pixels, each side 1 … `high`; the value is the text `WxH` (as games take it)."""

    high: int = 4096
    metavar = "WxH"

    def describe(self) -> str:
        return f"WIDTHxHEIGHT in pixels (each 1 to {self.high}), e.g. 320x240"

    def parse(self, value: Any) -> str:
        w, h = frame_size(value, self.high)
        return f"{w}x{h}"


def frame_size(value: Any, high: int = 4096) -> tuple[int, int]:
    """`320x240` → (320, 240), or `Refused`."""
    try:
        w, h = (int(v) for v in str(value).lower().split("x"))
    except ValueError:
        raise Refused(f"give WIDTHxHEIGHT in pixels (each 1 to {high}), e.g. 320x240") from None
    if not (1 <= w <= high and 1 <= h <= high):
        raise Refused(f"out of range; give WIDTHxHEIGHT in pixels (each 1 to {high}), e.g. 320x240")
    return w, h


@dataclass(frozen=True)
class Region(OptionType):
    """`X,Y,W,H`: a rectangle of the screen in whole pixels, its corner anywhere within `high` of
    the origin and its width and height 1 … `high`; the value is the tuple (x, y, w, h)."""

    high: int = WIDE
    metavar = "X,Y,W,H"

    def describe(self) -> str:
        return f"X,Y,W,H in whole screen pixels (W and H 1 to {self.high}), e.g. 0,0,640,480"

    def parse(self, value: Any) -> tuple[int, int, int, int]:
        parts = value.split(",") if isinstance(value, str) else value
        if not isinstance(parts, (list, tuple)) or len(parts) != 4:
            raise Refused(f"give {self.describe()}")
        try:
            x, y = (Count(-self.high, self.high).parse(v) for v in parts[:2])
            w, h = (Count(1, self.high).parse(v) for v in parts[2:])
        except Refused:
            raise Refused(f"give {self.describe()}") from None
        return x, y, w, h


@dataclass(frozen=True)
class Bounds(OptionType):
    """`X0,Y0,X1,Y1` (or a YAML list of four): finite numbers with X1 > X0 and Y1 > Y0."""

    metavar = "X0,Y0,X1,Y1"

    def describe(self) -> str:
        return "four numbers X0,Y0,X1,Y1 with X1 > X0 and Y1 > Y0"

    def parse(self, value: Any) -> list[float]:
        parts = value.split(",") if isinstance(value, str) else value
        if not isinstance(parts, (list, tuple)) or len(parts) != 4:
            raise Refused(f"give {self.describe()}")
        try:
            x0, y0, x1, y1 = (Number().parse(v) for v in parts)
        except Refused:
            raise Refused(f"give {self.describe()}") from None
        if not (x1 > x0 and y1 > y0):
            raise Refused(f"encloses no area; give {self.describe()}")
        return [x0, y0, x1, y1]


# -- typer parameters ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Parser:
    """The typer `parser` of one option: its type's `parse`, a refusal made one line naming the option."""

    kind: OptionType
    name: str
    __name__ = "parse"  # typer on click names a parser's type after its function

    def __call__(self, value: Any) -> Any:
        try:
            return self.kind.parse(value)
        except Refused as e:
            raise UserError(f"{self.name} {shown(value)}: {e}") from None
        except OSError as e:  # a path the system will not look at: a name too long, a folder one may not enter
            raise UserError(f"{self.name} {shown(value)}: {e.strerror or e}; give another path") from None


def option(kind: OptionType, default: Any, *names: str, help: str, **more: Any) -> Any:
    """A typer option of type `kind`: `seed: int = option(Seed(), 0, "--seed", help=...)`."""
    more.setdefault("metavar", kind.metavar)
    return typer.Option(default, *names, help=help, parser=Parser(kind, names[0]), **more)


def argument(kind: OptionType, name: str, help: str, default: Any = ...) -> Any:
    """A typer argument of type `kind`; `name` is how its messages call it (e.g. "run")."""
    return typer.Argument(default, help=help, metavar=name.upper(), parser=Parser(kind, name))


def kind_of(param: Any) -> OptionType | None:
    """The vocabulary type a click parameter was declared with, or None (a flag, or not declared with it)."""
    info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
    parser = getattr(info, "parser", None) or getattr(getattr(param, "type", None), "func", None)
    return parser.kind if isinstance(parser, Parser) else None


def config_value(kind: OptionType, key: str, value: Any, where: str) -> Any:
    """A value of a YAML file (`where`, e.g. "--config run.yaml") through its option's type."""
    try:
        return kind.parse(value)
    except Refused as e:
        raise UserError(f"{where}: {key} {shown(value)}: {e}") from None
    except OSError as e:
        raise UserError(f"{where}: {key} {shown(value)}: {e.strerror or e}; give another path") from None


# -- budgets ---------------------------------------------------------------------------------------

def human_bytes(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def _existing(folder: Path) -> Path:
    folder = folder.resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_free_disk(folder: Path, needed: float, what: str) -> None:
    """Refuse, in one line naming `what`, a job whose estimated output (`needed` bytes, an upper
    bound) would not fit in the free space of `folder`'s disk (with 5 % to spare)."""
    free = shutil.disk_usage(_existing(folder)).free
    if needed > 0.95 * free:
        raise UserError(f"{what}: up to {human_bytes(needed)} to write, but {_existing(folder)} has {human_bytes(free)} free; "
                        "ask for less, or free some space")


def available_memory() -> int:
    """Bytes of memory available to a new allocation (MemAvailable on Linux, else free pages)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


MEMORY_SHARE = 0.25
"""The share of the memory available now that a command's estimated models and buffers may take,
unless `playtester --memory-budget SHARE` says otherwise."""
memory_share = MEMORY_SHARE
"""This invocation's share (`playtester --memory-budget`, set by the command line's root)."""


def memory_budget_option() -> Any:
    """`playtester --memory-budget SHARE`: one option for every command, before the command's name."""
    return option(Number(0.0, 1.0, above=True), MEMORY_SHARE, "--memory-budget",
                  help="The share of the memory available now that a command's models and buffers, estimated from its "
                       "options before anything is allocated, may take; raise it (up to 1) on a machine with nothing "
                       "else to do, e.g. `playtester --memory-budget 0.5 train policy ...`.")


def threads_option(more: str = "") -> Any:
    """`--threads N`: the cores a command that computes may use, shared among the processes it
    starts (`playtester/cores.py`); 0, the default, for this machine's. `more` is appended to the help."""
    from playtester.cores import THREADS_HELP

    return option(Count(0, 1024), 0, "--threads", help=THREADS_HELP + more)


def check_memory(needed: float, what: str) -> None:
    """Refuse, in one line naming `what` and the estimate, a job whose models and buffers
    (`needed` bytes, estimated from its options) would take more than this invocation's share of
    the memory available now (`memory_share`)."""
    available = available_memory()
    if needed > memory_share * available:
        raise UserError(f"{what}: needs about {human_bytes(needed)} of memory, more than {memory_share:g} of the "
                        f"{human_bytes(available)} available; ask for less, or raise the share with "
                        "`playtester --memory-budget SHARE ...` (up to 1)")
