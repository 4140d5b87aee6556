"""One trial budget per model submission: which of its tasks gets the next round (the driver's policy).

The gradient task scheduler of in-process tuning (tuner.search.scheduler) decides, here for the
service. Its objective is the model's end-to-end time, sum_i w_i * best_i, with w_i a task's call
count: its gain for task i, w_i * best_i / trials_i, is then the call count times the task's time per
trial so far, i.e. the task's share of end-to-end time, so the layers that dominate the model get
the rounds. The stored ``weight``, call count x baseline time (tuner.baseline.baseline_time), is that share
before any trial is measured: every task gets one warm-up round first, heaviest first.

Nothing is kept in memory between driver rounds: the scheduler is rebuilt from the database each
time (a task's finished trials, replayed in rounds of ``per_round``; what it was granted), so a
restarted driver continues the same submission with the same budget. Measurements are asynchronous,
so a granted round counts as trials at once; a submission has at most ``in_flight_cap`` granted
trials unfinished, which keeps grants following results instead of handing the budget out at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from db.states import SubmissionState, TaskState
from db.submissions import Submission
from tuner.search.scheduler import GradientScheduler

# A task's warm-up: its baseline schedule plus a few candidates. A budget below this per task leaves
# tasks that never get a successful measurement (they end "untuned", db.domain.untuned_reason).
MIN_TRIALS_PER_TASK = 4


def thin_budget_warning(budget: int, tasks: int) -> str | None:
    """The warning for a model budget that cannot give every task its baseline plus a few trials."""
    need = MIN_TRIALS_PER_TASK * tasks
    if tasks <= 0 or budget >= need:
        return None
    return (f"a budget of {budget} trials cannot give each of the {tasks} tasks its baseline plus "
            f"{MIN_TRIALS_PER_TASK - 1} trials (that needs {need}): some tasks may end untuned")


@dataclass(frozen=True)
class Plan:
    """What the driver does to a submission now: grant rounds, stop converged tasks, or close it."""

    grants: tuple[tuple[int, int], ...] = ()  # (task id, trials) in grant order
    stop: tuple[int, ...] = ()  # active tasks the scheduler stopped, with nothing in flight
    finish: SubmissionState | None = None  # done or cancelled: the submission is over


def _replay(scheduler: GradientScheduler, i: int, times: Sequence[float | None], per_round: int) -> None:
    """Feed a task's finished trials (None: failed) to the scheduler in rounds of ``per_round``."""
    best = math.inf
    for k, t in enumerate(times, 1):
        if t is not None and t < best:
            best = t
        if k % per_round == 0 or k == len(times):
            scheduler.record(i, k, best)


def plan(sub: Submission, times: Mapping[int, Sequence[float | None]], in_flight_cap: int) -> Plan:
    """The next grants of a submission's budget, given its tasks' finished trials (db.submissions.trial_times)."""
    # the heaviest tasks first: the scheduler breaks ties (every warm-up round) by position
    tasks = sorted(sub.tasks, key=lambda t: (-(t.weight or 0.0), t.task_id))
    if not tasks:
        return Plan(finish=SubmissionState.DONE)
    scheduler = GradientScheduler([float(t.call_count) for t in tasks], [sub.trial_budget] * len(tasks),
                                  early_stop=sub.early_stop)
    for i, t in enumerate(tasks):
        _replay(scheduler, i, times.get(t.task_id, ()), sub.per_round)
    active = [i for i, t in enumerate(tasks) if t.state == TaskState.ACTIVE]
    # converged: the scheduler stopped giving it trials (no improvement in early_stop trials)
    stop = tuple(tasks[i].task_id for i in active if scheduler.tasks[i].stopped and tasks[i].queued == 0)
    for i, t in enumerate(tasks):
        progress = scheduler.tasks[i]
        active_now = t.state == TaskState.ACTIVE
        if not active_now:
            progress.stopped = True
        # a granted round counts as trials when it is granted, not when its results arrive
        progress.trials = max(t.granted, t.trials_done + t.queued) if active_now else t.trials_done + t.queued
        # a task with no valid result yet has an unknown (infinite) gain: one round at a time
        if active_now and not math.isfinite(progress.best) and t.granted > t.trials_done:
            progress.stopped = True
    remaining = sub.trial_budget - sub.spent
    in_flight = sum(max(tasks[i].granted - tasks[i].trials_done, 0) for i in active)
    grants: list[tuple[int, int]] = []
    # a budget smaller than a round per task still gives every task its warm-up (its baseline and
    # first candidates): warm-up rounds shrink to an equal share of the budget
    warm_up = max(1, min(sub.per_round, sub.trial_budget // len(tasks)))
    while remaining > 0 and in_flight < in_flight_cap:
        pick = scheduler.next_task()
        if pick is None:
            break
        i = pick
        progress = scheduler.tasks[i]
        n = min(sub.per_round if progress.trials else warm_up, remaining, progress.budget - progress.trials)
        grants.append((tasks[i].task_id, n))
        progress.trials += n
        remaining -= n
        in_flight += n
        if not math.isfinite(progress.best):
            progress.stopped = True
    if remaining <= 0:  # the budget is all granted: a task with nothing left in flight has had its trials
        granted_now = {task_id for task_id, _ in grants}
        stop += tuple(tasks[i].task_id for i in active
                      if tasks[i].task_id not in stop and tasks[i].task_id not in granted_now
                      and tasks[i].queued == 0 and tasks[i].trials_done >= tasks[i].granted)
    if grants:
        return Plan(grants=tuple(grants), stop=stop)
    still = [tasks[i] for i in active if tasks[i].task_id not in stop]
    settled = all(t.queued == 0 and t.trials_done >= t.granted for t in still)
    if settled and (remaining <= 0 or scheduler.next_task() is None):
        everything_cancelled = all(t.state == TaskState.CANCELLED for t in tasks)
        return Plan(stop=stop, finish=SubmissionState.CANCELLED if everything_cancelled else SubmissionState.DONE)
    return Plan(stop=stop)
