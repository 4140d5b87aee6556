"""How the commands show a workflow as it runs: ``ConsoleProgress``, the swtune API's progress hooks
(swtune/progress.py) printed to the console.

Warnings go to the console in yellow, the service's warnings on a submission to stderr (cli.output.warn),
and a followed submission is a live table of its tasks (cli.task_table). A command that prints more of a
workflow's stages subclasses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from cli.output import console as default_console
from cli.output import warn
from cli.task_table import tasks_table
from swtune.progress import Progress, TaskStates


class ConsoleProgress(Progress):
    """The progress of a workflow on the console; ``verbose``: every task in the live table."""

    def __init__(self, verbose: bool = False, console: Console | None = None) -> None:
        self.verbose = verbose
        self.console = console or default_console

    def warning(self, message: str) -> None:
        self.console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True, highlight=False)

    def submission_warned(self, messages: Sequence[str]) -> None:
        warn(list(messages))

    @contextmanager
    def following(self, task_ids: Sequence[int], names: Sequence[str]) -> Iterator[Callable[[TaskStates], None]]:
        def table(tasks: TaskStates) -> Table:
            return tasks_table(tasks, task_ids, names, self.verbose)

        with Live(table({}), console=self.console, refresh_per_second=4) as live:
            yield lambda tasks: live.update(table(tasks))
        if not self.console.is_terminal:  # off a terminal, Live ends its last frame without a line break
            self.console.line()
