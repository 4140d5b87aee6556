"""API test fixtures: a ``Progress`` that records what each hook was told."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from swtune import Progress


class Recorder(Progress):
    """Every hook's argument, by hook name, in call order."""

    def __init__(self) -> None:
        self.calls: dict[str, list[Any]] = {}

    def _note(self, hook: str, value: Any) -> None:
        self.calls.setdefault(hook, []).append(value)

    def warning(self, message: str) -> None:
        self._note("warning", message)

    def submission_warned(self, messages: Sequence[str]) -> None:
        self._note("submission_warned", list(messages))

    def tuning_planned(self, plan: Any) -> None:
        self._note("tuning_planned", plan)

    @contextmanager
    def following(self, task_ids: Sequence[int], names: Sequence[str]) -> Iterator[Callable[[Any], None]]:
        self._note("following", list(task_ids))
        yield lambda tasks: self._note("tasks", tasks)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
