"""What a workflow tells its caller while it runs: one ``Progress`` object, a hook per stage.

Every hook of the base class is silent, except ``warning`` (the ``swtune`` logger) and
``submission_warned`` (the same): a Python caller passes nothing and reads the result object; the
command line passes a subclass that prints each stage as it happens (cli/progress.py). The hooks get
the workflow's own objects (a plan, a chunk, a program), never text to print.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from swtune.results import CompiledStep, StepInfo, TuningPlan

LOG = logging.getLogger("swtune")

# the tasks of a submission as they stand, by task id (the API's task documents)
TaskStates = dict[int, dict[str, Any]]


class Progress:
    """The hooks of the workflows; subclass and override the ones to show."""

    def warning(self, message: str) -> None:
        """Something the caller should know that does not stop the workflow (e.g. an unreadable log)."""
        LOG.warning("%s", message)

    def submission_warned(self, messages: Sequence[str]) -> None:
        """The service's warnings on a submission (e.g. a budget too small for its tasks)."""
        for message in messages:
            LOG.warning("%s", message)

    def tuning_planned(self, plan: TuningPlan) -> None:
        """The tasks are extracted and the budget set; nothing is submitted yet."""

    @contextmanager
    def following(self, task_ids: Sequence[int], names: Sequence[str]) -> Iterator[Callable[[TaskStates], None]]:
        """While a submission is followed: the function yielded gets its tasks each time they are polled."""
        yield lambda tasks: None

    def step_built(self, info: StepInfo) -> None:
        """``train``: the training step and its data are built."""

    def step_compiled(self, compiled: CompiledStep) -> None:
        """``train``: the step's program is written (before it is built and run)."""

    def overlap_started(self, tasks: int, every: int) -> None:
        """``train(overlap=True)``: ``tasks`` tasks are tuning; programs switch at checkpoints every ``every``."""

    def overlap_chunk(self, chunk: Any) -> None:
        """``train(overlap=True)``: a run of steps on one program ended (a ``tuner.train.overlap.Chunk``)."""
