"""The `playtester` command line.

Each command lives in its own module under `playtester/commands/` and is registered here, so
`playtester --help` stays quick: heavy libraries (torch, the engine) load inside the commands.
Bad input raises `UserError`, printed as one line with exit status 2; so are click's usage errors
(a count that is not a number, a missing option). Ctrl-C exits with 130 and says what was kept.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import typer
from typer.core import TyperGroup
from rich.console import Console
from rich.logging import RichHandler
from rich.text import Text

from playtester import options
from playtester.commands import demo
from playtester.cores import wait_quietly
from playtester.errors import UserError

try:  # typer >= 0.16 carries its own copy of click
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on click
    from click.exceptions import NoArgsIsHelpError, UsageError

console = Console(stderr=True)

app = typer.Typer(
    name="playtester",
    help=(
        "An AI playtester that sees only pixels. It plays a game through the screen and the "
        "keyboard, explores it the way a tester prefers, tests the objects it finds and reports "
        "coverage and findings.\n\nStart with `playtester demo`, which runs the whole pipeline "
        "on the built-in park."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
train_app = typer.Typer(help="Train a model: detector, encoder or policy.", no_args_is_help=True)
eval_app = typer.Typer(help="Evaluate a trained model.", no_args_is_help=True)
app.add_typer(train_app, name="train")


class _RunGroup(TyperGroup):
    """`playtester run SUBCOMMAND ...`: options before the subcommand (the one-command `run --game ...`
    of earlier versions) are refused in one line that names the subcommands."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0].startswith("-") and args[0] not in ("-h", "--help"):
            raise UserError(f"{args[0]}: give what the run is for first, `playtester run explore|window|load|evolve "
                            f"{args[0]} ...` (see `playtester run -h`)")
        return super().parse_args(ctx, args)


run_app = typer.Typer(
    cls=_RunGroup, no_args_is_help=True,
    help="Run the tester on a game: explore it, test the objects it finds, watch for bugs, write the report. "
         "Pick what the run is for: explore (the tester), window (a game in a desktop window), load (load "
         "testing) or evolve (a population of explorers). Ctrl-C keeps everything written; --resume continues.",
)
app.add_typer(eval_app, name="eval")


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages."),
          memory_budget: float = options.memory_budget_option()) -> None:
    options.memory_share = memory_budget
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False, show_time=False)],
        force=True,
    )


class _Interrupted(Exception):
    """Ctrl-C inside a command, carried past typer (which would turn it into a silent exit 130)."""


def _interruptible(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` with its Ctrl-C raised as `_Interrupted` (typer reads the signature through `wraps`)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            raise _Interrupted() from None

    return run


def _register() -> None:
    from playtester.commands import scenario, window

    app.command("games")(scenario.games)
    app.command("shots")(_interruptible(scenario.shots))
    app.command("demos")(_interruptible(scenario.demos))

    from playtester.commands import perception

    train_app.command("detector")(_interruptible(perception.train_detector))
    eval_app.command("detector")(_interruptible(perception.eval_detector))
    train_app.command("encoder")(_interruptible(perception.train_encoder))
    app.command("record")(_interruptible(window.record))
    app.command("replay")(_interruptible(window.replay))

    from playtester.commands import imitation, report, run

    app.command("demo")(_interruptible(demo.demo))
    for sub in run.SUBCOMMANDS:
        run_app.command(sub.name)(_interruptible(run.command(sub)))
    app.add_typer(run_app, name="run")
    app.command("report")(_interruptible(report.report))

    train_app.command("policy")(_interruptible(imitation.train_policy))
    eval_app.command("policy")(_interruptible(imitation.eval_policy))

    from playtester.commands.plan import plan_app

    for info in plan_app.registered_commands:
        info.callback = _interruptible(info.callback)
    app.add_typer(plan_app, name="plan")


_register()


def _private_runtime_dir() -> None:
    """Give SDL (which Gymnasium's pygame renderers start) a runtime folder when the session has
    none, so that it does not print `error: XDG_RUNTIME_DIR is invalid or not set` on every start."""
    if os.environ.get("XDG_RUNTIME_DIR"):
        return
    folder = Path(tempfile.gettempdir()) / f"playtester-runtime-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        if folder.stat().st_uid != os.getuid() or folder.is_symlink():
            return  # someone else's: better the warning than their folder
        folder.chmod(0o700)
    except OSError:
        return
    os.environ["XDG_RUNTIME_DIR"] = str(folder)


def _one_line_error(message: str) -> None:
    line = Text("error: ", style="bold red")
    line.append(" ".join(message.split()))
    console.print(line, highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning bad input into one line instead of a traceback.

    A `UserError` from inside a command and click's usage errors (a missing option, a count that
    is not a number or out of range) are each printed as one line, with exit status 2. Ctrl-C
    says that what was written is kept, with status 130.
    """
    wait_quietly()  # before torch loads: idle OpenMP threads sleep (playtester/cores.py)
    if os.name == "posix":
        _private_runtime_dir()
    try:
        code = app(args=argv, prog_name="playtester", standalone_mode=False)
    except UserError as e:
        _one_line_error(str(e))
        return 2
    except NoArgsIsHelpError:  # `playtester` or `playtester train` alone: typer printed the help
        return 2
    except UsageError as e:
        where = f"; see `{e.ctx.command_path} -h`" if e.ctx is not None else ""
        _one_line_error(e.format_message().rstrip(".") + where)
        return 2
    except (_Interrupted, KeyboardInterrupt, typer.Abort):
        console.print("interrupted; everything written so far is kept")
        return 130
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code if isinstance(code, int) else 0


demo.command_line = main  # the demo runs each stage as its command line


if __name__ == "__main__":
    sys.exit(main())
