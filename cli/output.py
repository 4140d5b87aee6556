"""What every command prints through: one rich console (stdout), JSON, and the time/GFLOPS formats."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

import typer
from rich.console import Console

# Help is prose: docstrings and option help are Markdown, so a paragraph re-wraps to the terminal and
# only a blank line breaks it (rich's default mode keeps the source's hard line breaks). Every app and
# sub-app is made with this mode; tests/cli_tests/test_help_text.py renders every command's help.
HELP_MARKUP: Literal["markdown"] = "markdown"


def sized_at_print() -> Console:
    """A console that takes its size from ``COLUMNS`` and ``LINES`` (else the terminal) when it prints.

    rich reads the two variables once, into the console, when they are set as a console is made (and on
    every print only when they are not). A console made at import would keep that moment's: a process may
    start with a ``COLUMNS`` nobody chose for it, e.g. a child of one that imported GNU readline, which
    exports terminfo's 80x24 off a terminal (pytest's, to every pytest-xdist worker), and ``COLUMNS=250``
    of the caller that runs the command later (typer's CliRunner) would not count."""
    made = Console()
    made._width = made._height = None
    return made


# rich resolves sys.stdout at print time, so a console made at import still writes where the
# command's caller (a terminal, a pipe, typer's CliRunner) points stdout; it is sized then too
console = sized_at_print()


def sub_app(help: str, commands: Sequence[tuple[str, Callable[..., Any]]]) -> typer.Typer:
    """A new sub-app (e.g. ``swtune db``) with ``commands``, each a (name, function), in that order."""
    app = typer.Typer(no_args_is_help=True, rich_markup_mode=HELP_MARKUP, help=help)
    for name, command in commands:
        app.command(name)(command)
    return app


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2))


def warn(messages: list[str]) -> None:
    """Warnings (e.g. the server's on a submission) on stderr, one line each, whatever else is printed."""
    for message in messages:
        typer.echo(f"warning: {message}", err=True)


def task_state(task: dict[str, Any]) -> str:
    """A task's state as tables show it: ``done, untuned`` when it ended without any successful
    measurement (the API's ``untuned_reason``), so "done" never reads as "tuned"."""
    state = str(task.get("state", "?"))
    return f"{state}, untuned" if task.get("untuned_reason") else state


def workload_name(task: dict[str, Any]) -> str:
    """The short name of a task's workload (op, shapes, dtype); its key from a server without labels."""
    return str(task.get("workload_label") or task.get("workload_key", "?"))


def ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.4f}" if seconds else "-"


def gflops(value: float | None) -> str:
    return f"{value:.1f}" if value else "-"


RATE = "GFLOPS | GB/s"  # the header of a column rating each task in its unit (tuner.workloads.rate_of)


def task_rate(task: dict[str, Any]) -> str:
    """A task's best rate as tables show it: GB/s for a memory-bound task (the API's ``best_gbps``), else GFLOPS."""
    gbps = task.get("best_gbps")
    return f"{gbps:.1f} GB/s" if gbps else gflops(task.get("best_gflops"))
