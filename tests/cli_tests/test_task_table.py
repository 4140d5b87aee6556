"""Issue #46: the tuning-task table as a user reads it. A step with dozens of tasks shows the tasks that
take most of it and one line for the rest (``--verbose``: every row); off a terminal, the live table
ends with a line break, so the next table's title starts a line of its own."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table

from cli.task_table import TOP, tasks_table


def _tasks(n: int) -> dict[int, dict[str, Any]]:
    """Task i: done, 8 trials, best time i ms, called once (the last ones take most of the program)."""
    return {i: {"id": i, "state": "done", "trials_done": 8, "trial_budget": 8, "best_time": (i + 1) * 1e-3,
                "call_count": 1} for i in range(n)}


def _cells(table: Table, column: int) -> list[str]:
    return [str(c) for c in table.columns[column].cells]


def test_a_long_table_shows_the_top_tasks_and_one_line_for_the_rest() -> None:
    tasks = _tasks(30)
    names = [f"layer{i}" for i in range(30)]
    table = tasks_table(tasks, list(tasks), names)
    layers = _cells(table, 0)
    assert len(layers) == TOP + 1
    assert layers[:TOP] == [f"layer{i}" for i in range(29, 29 - TOP, -1)]  # most time first
    assert layers[-1].startswith(f"{30 - TOP} more tasks")
    assert _cells(table, 1)[-1] == f"done {30 - TOP}" and _cells(table, 2)[-1] == f"{8 * (30 - TOP)}/{8 * (30 - TOP)}"
    assert _cells(tasks_table(tasks, list(tasks), names, verbose=True), 0) == names  # every row, in order


def test_the_live_table_ends_its_line_off_a_terminal() -> None:
    from cli.progress import ConsoleProgress

    console = Console(file=io.StringIO(), force_terminal=False, width=80)
    tasks = _tasks(2)
    with ConsoleProgress(console=console).following([0, 1], ["a", "b"]) as show:
        show(tasks)
    after = Table(title="next table")
    after.add_column("a column wide enough for the title")
    console.print(after)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    last_border = text.rindex("┘", 0, text.index("next table"))
    assert "\n" in text[last_border:text.index("next table")]
