"""What every command prints through: one rich console (stdout), JSON, and the time/GFLOPS formats."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console

# Help is prose: docstrings and option help are Markdown, so a paragraph re-wraps to the terminal and
# only a blank line breaks it (rich's default mode keeps the source's hard line breaks). Every app and
# sub-app is made with this mode; tests/cli_tests/test_help_text.py renders every command's help.
HELP_MARKUP = "markdown"

# rich resolves sys.stdout at print time, so a console made at import still writes where the
# command's caller (a terminal, a pipe, typer's CliRunner) points stdout
console = Console()


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2))


def ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.4f}" if seconds else "-"


def gflops(value: float | None) -> str:
    return f"{value:.1f}" if value else "-"
