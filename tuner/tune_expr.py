"""In-process tuning of an expression operator on the simulator (what ``swtune tune --op`` runs).

The same ask/measure/tell as ``tuner.tune`` for one operator: the OpenACC-like baseline among the
first batch (the reported best is never slower), then the chosen search strategy until the budget is
spent. The simulator gets the operator's :class:`ExprSpace` from ``tuner.space.space_for``.
"""

from __future__ import annotations

from tuner.baseline import openacc_baseline
from tuner.expr.workload import ExprWorkload
from tuner.measure.simulator import Simulator, simulate
from tuner.search import STRATEGIES, create_strategy
from tuner.space.expr_space import ExprSpace
from tuner.targets import Target, get_target
from tuner.tune import TuneResult


def tune_expr(workload: ExprWorkload, target: Target | str, trials: int = 200, strategy: str = "model",
              batch: int = 32, seed: int = 0, noise: float = 0.0) -> TuneResult:
    STRATEGIES.get(strategy)  # ValueError naming the registered strategies, before any measurement
    if trials < 1 or batch < 1:
        raise ValueError("trials and batch must be positive")
    target = get_target(target)
    backend = Simulator(noise=noise, seed=seed)  # its space is space_for's ExprSpace
    space = backend.space(workload, target)
    search = create_strategy(strategy, space, seed=seed)
    search.queue_start()  # the baseline first, within the trials
    curve: list[float] = []
    while search.n_measured < trials:
        configs = search.ask_next(min(batch, trials - search.n_measured))
        if not configs:
            break
        results = backend.measure(workload, target, configs)
        search.tell(configs, results)
        for r in results:
            curve.append(min(curve[-1], r.mean_time) if curve else r.mean_time)
    return TuneResult(workload, search.best_time, search.best_config, search.n_measured, curve)


def naive_and_baseline_seconds(space: ExprSpace) -> tuple[float, float]:
    """Noise-free model seconds of the naive (element-wise, one CPE row) and OpenACC-like schedules."""
    naive = float(simulate(space, space.encode(space.naive_config())[None, :])[0])
    base = float(simulate(space, space.encode(openacc_baseline(space))[None, :])[0])
    return naive, base


__all__ = ["naive_and_baseline_seconds", "tune_expr"]
