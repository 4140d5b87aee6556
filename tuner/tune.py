"""In-process tuning: search strategies + a measurement backend, no service (what `swtune tune` runs).

Each task measures its OpenACC-like baseline schedule in its first batch, so a reported best is never
slower than the baseline it is compared against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tuner.backends.registry import BackendName, BackendOptions, backend_for
from tuner.calibrate.intervals import simulated_interval
from tuner.calibrate.quantile import QuantileRanking
from tuner.measure.base import MeasureBackend
from tuner.measure.noise import DEFAULT_NOISE
from tuner.profile import Profile
from tuner.search.scheduler import GradientScheduler
from tuner.space.factory import space_for
from tuner.space.space import Config, config_hash
from tuner.targets import Target, get_target
from tuner.task_kind import kind_of
from tuner.workloads import Workload

if TYPE_CHECKING:
    from rich.console import Console


@dataclass
class TuneResult:
    workload: Workload
    best_time: float
    best_config: Config | None
    trials: int
    curve: list[float] = field(default_factory=list)  # best-so-far seconds after each trial
    baseline_time: float | None = None  # the OpenACC-like baseline as measured here (same backend)
    # the best config's simulated time under each draw of a fitted profile (tuner/calibrate/intervals.py)
    best_interval: tuple[float, float] | None = None

    @property
    def gflops(self) -> float:
        return self.workload.flops / self.best_time / 1e9 if self.best_config else 0.0


def tune_workloads(workloads: Sequence[Workload], target: Target | str, trials: int = 200,
                   strategy: str = "model", batch: int = 32, seed: int = 0, noise: float = DEFAULT_NOISE,
                   weights: Sequence[float] | None = None, total_trials: int | None = None,
                   early_stop: int | None = None, backend: MeasureBackend | None = None,
                   console: Console | None = None, profile: Profile | None = None,
                   rank_quantile: float | None = None,
                   seed_configs: Sequence[Sequence[Config]] | None = None) -> list[TuneResult]:
    """Tune workloads with up to ``trials`` measurements each.

    Rounds go to the task with the largest expected gain in weighted end-to-end time (the gradient
    scheduler), until every task's budget is used, ``total_trials`` are spent, or tasks stop early.
    ``profile`` (a calibrated simulator profile) sets the simulator's uncertain costs; each result then
    carries its best time's interval under the profile's uncertainty. ``rank_quantile`` (with such a
    profile) makes the search rank configs by that quantile of their time over the profile's draws
    (tuner/calibrate/quantile.py); the reported times stay the measured ones. ``seed_configs`` (one list
    per workload) are measured first, after the baseline, as part of the trials: records of another
    space that start the search (a one-CG record of a chip target: tuner.space.chip.chip_seeds).
    """
    from tuner.search import STRATEGIES

    target = profile.apply(target) if profile is not None else get_target(target)
    backend = backend or backend_for(BackendName.SIMULATOR, target,
                                     BackendOptions(noise=noise, seed=seed, profile=profile))
    STRATEGIES.get(strategy)  # ValueError naming the registered strategies, before any measurement
    if trials < 1 or batch < 1:
        raise ValueError("trials and batch must be positive")
    if rank_quantile is not None and profile is None:
        raise ValueError("ranking by a quantile needs a fitted profile (its draws give the quantile)")
    ranking = QuantileRanking(profile, rank_quantile) if rank_quantile is not None and profile else None
    backend.preflight()  # a machine that cannot measure fails here (InfrastructureError), before any search
    searches = [kind_of(w).strategy(space_for(w, target), strategy, seed=seed) for w in workloads]
    scheduler = GradientScheduler(list(weights or [1.0] * len(workloads)), [trials] * len(workloads),
                                  early_stop=early_stop)
    curves: list[list[float]] = [[] for _ in workloads]
    progress = None
    bars = []
    if console is not None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console)
        progress.start()
        bars = [progress.add_task(w.key[:48], total=trials, status="") for w in workloads]
    spent = 0
    # the baseline, then the seeds, among the first candidates (within the task's trials)
    seeds = list(seed_configs or [])
    baselines = [s.queue_start(seeds[i] if i < len(seeds) else ()) for i, s in enumerate(searches)]
    baseline_times: list[float | None] = [None] * len(workloads)
    measured_time: list[dict[str, float]] = [{} for _ in workloads]  # config hash -> measured mean time
    try:
        while (i := scheduler.next_task()) is not None:
            if total_trials is not None and spent >= total_trials:
                break
            search, workload = searches[i], workloads[i]
            configs = search.ask_next(min(batch, trials - search.n_measured))
            if not configs:
                scheduler.tasks[i].stopped = True  # space exhausted
                continue
            measured = backend.measure(workload, target, configs)
            if baseline_times[i] is None and baselines[i] is not None:  # ask_next hands out the queued object
                baseline_times[i] = next((r.mean_time for c, r in zip(configs, measured) if c is baselines[i]), None)
            search.tell(configs, ranking.rank(workload, measured) if ranking else measured)
            measured_time[i].update((config_hash(r.config), r.mean_time) for r in measured if r.ok)
            spent += len(measured)
            for r in measured:
                curves[i].append(min(curves[i][-1], r.mean_time) if curves[i] else r.mean_time)
            scheduler.record(i, search.n_measured, search.best_time)
            if progress is not None:
                gflops = workload.flops / search.best_time / 1e9 if search.best_config else 0.0
                progress.update(bars[i], completed=search.n_measured,
                                status=f"best {search.best_time * 1e3:.4f} ms, {gflops:.1f} GFLOPS")
    finally:
        if progress is not None:
            progress.stop()
    return [TuneResult(w, times.get(config_hash(s.best_config), s.best_time) if s.best_config else s.best_time,
                       s.best_config, s.n_measured, c, b,
                       simulated_interval(profile, w, s.best_config) if profile and s.best_config else None)
            for w, s, c, b, times in zip(workloads, searches, curves, baseline_times, measured_time)]
