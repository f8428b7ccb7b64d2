"""The `playtester` command line.

Each command lives in its own module under `playtester/commands/` and is registered here, so
`playtester --help` stays quick: heavy libraries (torch, the engine) load inside the commands.
Bad input raises `UserError`, printed as one line with exit status 2; Ctrl-C exits with 130.
"""

from __future__ import annotations

import logging
import sys

import typer
from rich.console import Console
from rich.logging import RichHandler

from playtester.capture.errors import UserError

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
app.add_typer(eval_app, name="eval")


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages.")) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False, show_time=False)],
        force=True,
    )


def _register() -> None:
    from playtester.commands import scenario, window

    app.command("games")(scenario.games)
    app.command("shots")(scenario.shots)
    app.command("demos")(scenario.demos)

    from playtester.commands import perception

    train_app.command("detector")(perception.train_detector)
    eval_app.command("detector")(perception.eval_detector)
    train_app.command("encoder")(perception.train_encoder)
    app.command("record")(window.record)
    app.command("replay")(window.replay)

    from playtester.commands import demo, imitation, report, run

    app.command("demo")(demo.demo)
    app.command("run")(run.run)
    app.command("report")(report.report)

    train_app.command("policy")(imitation.train_policy)
    eval_app.command("policy")(imitation.eval_policy)

    from playtester.commands.plan import plan_app

    app.add_typer(plan_app, name="plan")


_register()


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning bad input into one line instead of a traceback.

    Usage errors (a missing option, a seed that is not a number) are click's, printed with the
    usage line and exit status 2; `UserError` from inside a command is printed as one line, also
    with status 2.
    """
    try:
        app(args=argv, prog_name="playtester")
    except UserError as e:
        console.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        console.print("interrupted; everything written so far is kept")
        return 130
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
