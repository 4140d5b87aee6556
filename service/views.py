"""Domain values (db.domain) to wire schemas (service.schemas)."""

from __future__ import annotations

import math

from db.domain import BestConfig, Job, TaskInfo
from service.schemas import BestOut, JobOut, TaskOut
from tuner.workloads import Rate, rate, rate_of


def task_out(t: TaskInfo) -> TaskOut:
    gflops = t.workload.flops / t.best_time / 1e9 if t.best_time and math.isfinite(t.best_time) else None
    gbps = rate(t.workload, t.best_time) if rate_of(t.workload) == Rate.GBPS else None
    return TaskOut(id=t.id, state=t.state, untuned_reason=t.untuned_reason, workload_key=t.workload_key,
                   workload_label=t.workload.label, workload=t.workload.to_json(),
                   target=t.target, label=t.label, batch=t.batch, strategy=t.strategy, seed=t.seed,
                   trial_budget=t.trial_budget, trials_done=t.trials_done, failed=t.failed, pending=t.pending,
                   leased=t.leased, best_time=t.best_time, best_gflops=gflops, best_gbps=gbps,
                   best_config=t.best_config,
                   curve=[list(point) for point in t.curve], submitter=t.submitter, created_at=t.created_at,
                   updated_at=t.updated_at, model=t.model, call_count=t.call_count, layer_names=list(t.layer_names))


def job_out(j: Job) -> JobOut:
    return JobOut(id=j.id, task_id=j.task_id, workload=j.workload.to_json(), workload_key=j.workload.key,
                  target=j.target, config=j.config, config_hash=j.config_hash, attempt=j.attempts)


def best_out(b: BestConfig, interval: tuple[float, float] | None = None) -> BestOut:
    return BestOut(workload_key=b.workload_key, target=b.target, config=b.config, config_hash=b.config_hash,
                   mean_time=b.mean_time, times=list(b.times), gflops=b.gflops, source=b.source, worker=b.worker,
                   measured_at=b.measured_at, profile_version=b.profile_version,
                   interval_s=list(interval) if interval else None)
