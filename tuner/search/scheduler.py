"""Multi-task scheduling of trials over a model's tasks (Ansor's / MetaSchedule's gradient scheme).

The objective is the model's end-to-end time, sum_i weight_i * best_time_i. Each round goes to the
task whose next batch is expected to cut that sum the most: the gradient of a task's best time with
respect to its trials is estimated from its recent history (backward difference) blended with an
optimistic guess (best_time / trials: what was gained per trial so far), then scaled by the task's
weight. Every task gets one warm-up round first; a task stops early after ``early_stop`` trials
without improvement, or when its own budget is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class TaskProgress:
    weight: float
    budget: int
    trials: int = 0
    history: list[tuple[int, float]] = field(default_factory=list)  # (trials, best seconds) per round
    last_improvement: int = 0
    stopped: bool = False

    @property
    def best(self) -> float:
        return self.history[-1][1] if self.history else np.inf


class GradientScheduler:
    def __init__(self, weights: list[float], budgets: list[int], alpha: float = 0.2, backward_rounds: int = 3,
                 early_stop: int | None = None) -> None:
        if len(weights) != len(budgets):
            raise ValueError("one weight and one budget per task")
        self.tasks = [TaskProgress(float(w), int(b)) for w, b in zip(weights, budgets)]
        self.alpha = alpha
        self.backward_rounds = backward_rounds
        self.early_stop = early_stop

    def _active(self) -> list[int]:
        return [i for i, t in enumerate(self.tasks) if not t.stopped and t.trials < t.budget]

    def expected_gain(self, i: int) -> float:
        """Estimated decrease of weight * best time per trial if task i gets the next round."""
        t = self.tasks[i]
        if not t.history or not np.isfinite(t.best):
            return np.inf  # untried or nothing valid yet: always worth a round
        optimistic = t.best / max(t.trials, 1)
        backward = 0.0
        if len(t.history) > self.backward_rounds:
            then_trials, then_best = t.history[-1 - self.backward_rounds]
            if np.isfinite(then_best) and t.trials > then_trials:
                backward = (then_best - t.best) / (t.trials - then_trials)
        return t.weight * (self.alpha * backward + (1 - self.alpha) * optimistic)

    def next_task(self) -> int | None:
        """Index of the task to give the next round to, or None when every task is finished."""
        active = self._active()
        if not active:
            return None
        gains = [self.expected_gain(i) for i in active]
        return active[int(np.argmax(gains))]

    def record(self, i: int, trials: int, best_time: float) -> None:
        t = self.tasks[i]
        if best_time < t.best:
            t.last_improvement = trials
        t.trials = trials
        t.history.append((trials, min(best_time, t.best)))
        if self.early_stop is not None and trials - t.last_improvement >= self.early_stop:
            t.stopped = True

    def total_time(self) -> float:
        return float(sum(t.weight * t.best for t in self.tasks))
