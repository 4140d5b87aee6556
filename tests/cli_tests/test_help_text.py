"""Help reads as prose at any width: every command's description re-wraps to the terminal, and a hard
line break comes only between the paragraphs of its docstring (blank lines)."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from cli.app import build_app

app = build_app()


def _commands() -> list[tuple[list[str], Any]]:
    """(argv, click command) of every command and sub-command."""
    found: list[tuple[list[str], Any]] = []

    def walk(path: list[str], command: Any) -> None:
        found.append((path, command))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk([*path, name], sub)

    walk([], get_command(app))
    return found


COMMANDS = _commands()


def _paragraphs(text: str) -> list[list[str]]:
    """The words of each paragraph (lines separated by blank ones)."""
    out: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip():
            out[-1].extend(line.split())
        elif out[-1]:
            out.append([])
    return [p for p in out if p]


def _description(argv: list[str], width: int) -> list[list[str]]:
    """The description block of ``argv --help`` at ``width`` columns: its paragraphs, as lines."""
    result = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.lstrip().startswith("╭"))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def test_every_command_is_walked() -> None:
    names = {" ".join(argv) for argv, _ in COMMANDS}
    assert {"tune-model", "compile", "submit", "db upgrade", "token create", "tasks list"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize("width", [60, 100, 250])
@pytest.mark.parametrize("argv", [argv for argv, _ in COMMANDS], ids=lambda a: " ".join(a) or "swtune")
def test_help_paragraphs_rewrap_to_the_terminal(argv: list[str], width: int) -> None:
    command = dict((" ".join(a), c) for a, c in COMMANDS)[" ".join(argv)]
    doc = inspect.cleandoc(command.help or "")
    shown = _description(argv, width)
    # the docstring's paragraphs, word for word (Markdown code spans lose their backticks)
    expected = [[w.replace("`", "") for w in p] for p in _paragraphs(doc)]
    assert [" ".join(p).split() for p in shown] == expected
    for paragraph in shown:
        for line, following in zip(paragraph, paragraph[1:]):
            # a line ends only where the next word would not fit: no hard break inside a paragraph
            assert len(line) + 1 + len(following.split()[0]) > width - 4, (line, following)
            assert len(line) <= width


def test_tune_model_help_keeps_its_sentences_whole() -> None:
    """The issue's example: "single-input reductions" and "the whole model goes through" on one line."""
    text = "\n".join(" ".join(p) for p in _description(["tune-model"], 250))
    assert re.search(r"single-input reductions", text) and re.search(r"the whole model goes through", text)
