"""The table of a submission's tuning tasks that ``tune-model`` and ``train`` follow live.

A training step has dozens of tasks, so the table shows the ``TOP`` tasks that take most of the
program (calls x best time so far; tasks without a time yet after them) and one line for the rest:
their count, trials and states. ``verbose`` shows every task.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from cli.output import task_state

TOP = 10  # rows shown before the "rest" line


def _weight(task: dict[str, Any]) -> float:
    """The task's time in the program so far: calls x best time (0 without a time)."""
    return float(task.get("call_count") or 1) * float(task.get("best_time") or 0.0)


def tasks_table(tasks: dict[int, dict[str, Any]], task_ids: Sequence[int], names: Sequence[str],
                verbose: bool = False) -> Table:
    """The tasks ``task_ids`` (named ``names``) as they stand in ``tasks`` (by id); see the module."""
    t = Table(title="tuning tasks")
    for col in ("layer", "state", "trials", "best ms"):
        t.add_column(col, justify="left" if col in ("layer", "state") else "right")
    rows = [(name, tasks.get(tid, {})) for tid, name in zip(task_ids, names)]
    if not verbose and len(rows) > TOP + 1:
        rows.sort(key=lambda r: -_weight(r[1]))  # stable: submission order among equals
    shown, rest = (rows, []) if verbose or len(rows) <= TOP + 1 else (rows[:TOP], rows[TOP:])
    for name, task in shown:
        best = task.get("best_time")
        t.add_row(name, task_state(task), f"{task.get('trials_done', 0)}/{task.get('trial_budget', '?')}",
                  f"{best * 1e3:.4f}" if best else "-")
    if rest:
        states = Counter(task_state(task) for _, task in rest)
        done = sum(int(task.get("trials_done", 0)) for _, task in rest)
        budget = sum(int(task.get("trial_budget") or 0) for _, task in rest)
        t.add_row(f"{len(rest)} more tasks (--verbose lists them)", ", ".join(f"{s} {n}" for s, n in states.items()),
                  f"{done}/{budget}", "-")
    return t
