"""service.budget.plan, the driver's policy for a model submission's one budget, on hand-made states."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from db.submissions import Submission, SubmissionTask
from service.budget import plan
from tuner.workloads import Dense


def task(task_id: int, *, calls: int = 1, weight: float | None = None, state: str = "active", granted: int = 0,
         done: int = 0, pending: int = 0) -> SubmissionTask:
    return SubmissionTask(task_id=task_id, workload=Dense(1, 64 * task_id, 128, "float32"), label=f"l{task_id}",
                          layer_names=(f"l{task_id}",), call_count=calls, weight=weight, state=state, granted=granted,
                          done=done, failed=0, pending=pending, leased=0, best_time=None)


def submission(*tasks: SubmissionTask, budget: int = 64, per_round: int = 8,
               early_stop: int | None = None) -> Submission:
    return Submission(id="s", model="m", target="sw26010", trial_budget=budget, per_round=per_round,
                      early_stop=early_stop, strategy="random", seed=0, state="active", submitter="", created_at=None,
                      updated_at=None, tasks=tuple(tasks))


def times(*per_task: list[Any]) -> dict[int, list[Any]]:
    return {i + 1: t for i, t in enumerate(per_task)}


def test_warm_up_goes_to_the_heaviest_task_first_within_the_in_flight_cap() -> None:
    sub = submission(task(1, weight=1e-4), task(2, weight=5e-4), task(3, weight=None))
    assert plan(sub, {}, in_flight_cap=8).grants == ((2, 8),)
    assert plan(sub, {}, in_flight_cap=24).grants == ((2, 8), (1, 8), (3, 8))


def test_a_task_without_a_valid_result_gets_one_round_at_a_time() -> None:
    sub = submission(task(1, weight=5e-4, granted=8, pending=8), task(2, weight=1e-4))
    assert plan(sub, {}, in_flight_cap=32).grants == ((2, 8),)


def test_the_task_that_weighs_more_in_end_to_end_time_gets_the_next_round() -> None:
    # same measured times; task 1 runs 4 times per model run: its gain (calls x time per trial) is larger
    sub = submission(task(1, calls=4, granted=8, done=8), task(2, calls=1, granted=8, done=8))
    same = [2e-4] * 7 + [1e-4]
    assert plan(sub, times(same, same), in_flight_cap=8).grants == ((1, 8),)
    # ... and one that is 10x slower per call wins against call counts 4:1
    slow = [t * 10 for t in same]
    assert plan(sub, times(same, slow), in_flight_cap=8).grants == ((2, 8),)


def test_never_more_than_the_budget_and_idle_tasks_stop_once_it_is_all_granted() -> None:
    sub = submission(task(1, calls=4, granted=56, done=56), task(2, granted=0), budget=60)
    step = plan(sub, times([1e-4] * 56, []), in_flight_cap=32)
    assert step.grants == ((2, 4),) and step.stop == (1,) and step.finish is None


def test_the_submission_finishes_when_the_budget_is_spent_and_nothing_is_in_flight() -> None:
    full = submission(task(1, granted=40, done=40), task(2, granted=24, done=24))
    assert plan(full, times([1e-4] * 40, [1e-4] * 24), in_flight_cap=8).finish == "done"
    busy = submission(task(1, granted=40, done=32, pending=8), task(2, granted=24, done=24))
    step = plan(busy, times([1e-4] * 32, [1e-4] * 24), in_flight_cap=8)
    assert step.finish is None and step.grants == () and step.stop == (2,)


def test_converged_tasks_stop_and_end_the_submission_early() -> None:
    flat = [1e-4] + [2e-4] * 31  # no improvement after the first trial
    sub = submission(task(1, granted=32, done=32), task(2, granted=32, done=32), budget=1000, early_stop=16)
    step = plan(sub, times(flat, flat), in_flight_cap=8)
    assert step.grants == () and set(step.stop) == {1, 2} and step.finish == "done"


def test_cancelled_tasks_free_their_unused_grant_and_all_cancelled_cancels() -> None:
    sub = submission(task(1, state="cancelled", granted=32, done=8), task(2, granted=8, done=8), budget=48)
    step = plan(sub, times([1e-4] * 8, [1e-4] * 8), in_flight_cap=64)
    assert step.grants == ((2, 8),) * 4  # 48 - the 8 task 1 used - the 8 task 2 was granted
    gone = submission(replace(task(1), state="cancelled"), replace(task(2), state="cancelled"))
    assert plan(gone, {}, in_flight_cap=8).finish == "cancelled"


def test_a_budget_smaller_than_a_round_per_task_still_warms_every_task_up() -> None:
    # 12 trials for 4 tasks with rounds of 8: two full rounds would starve two tasks of any trial
    sub = submission(*(task(i, weight=1e-4 * i) for i in range(1, 5)), budget=12, per_round=8)
    grants = plan(sub, {}, in_flight_cap=64).grants
    assert sorted(t for t, _ in grants) == [1, 2, 3, 4] and {n for _, n in grants} == {3}


def test_a_training_step_s_budget_is_half_warm_up_and_half_by_share() -> None:
    """swtune train grants half a task's trials at a time (swtune.trials_per_round): after every
    task's warm-up the rest of the budget goes to the task that weighs most in the step."""
    from swtune import trials_per_round

    rounds = trials_per_round(8)
    assert rounds == 4
    fresh = submission(task(1), task(2), budget=16, per_round=rounds)
    assert plan(fresh, {}, in_flight_cap=32).grants == ((1, 4), (2, 4))  # warm-ups of half the share
    warm = submission(task(1, granted=4, done=4), task(2, granted=4, done=4), budget=16, per_round=rounds)
    heavy, light = [4e-4] * 3 + [3e-4], [1e-4] * 3 + [5e-5]
    assert plan(warm, times(light, heavy), in_flight_cap=4).grants == ((2, 4),)
