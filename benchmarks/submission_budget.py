"""One budget per model on the service: a model submission against the same budget split equally.

Both arms run the real service pieces in-process on a fresh SQLite tuning log each: the tuning
driver (service.driver) fills the queues, and a loop plays the worker (lease, simulate with the
default noise, post). Arm ``submission``: POST /submissions's model function, one budget of
``budget`` trials that the driver grants round by round with the gradient task scheduler. Arm
``equal``: POST /tasks's, ``budget // tasks`` trials per task (the old way, same total cap).

Each arm is scored on the true (noise-free) simulated time of the best-measured config per task,
times the task's call count: the model's end-to-end time of its tuned operators. The OpenACC-like
baseline is scored the same way. Last line: one JSON object.

    python benchmarks/submission_budget.py [--model resnet18] [--budget 384] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit

from db import jobs as jobs_db
from db import migrate
from db import results as results_db
from db import submissions as submissions_db
from db import tasks as tasks_db
from db.domain import ResultIn
from db.engine import Database
from service.budget import baseline_time
from service.driver import TuningDriver
from service.settings import Settings
from tuner.measure.noise import DEFAULT_NOISE
from tuner.measure.simulator import Simulator, simulate
from tuner.models.zoo import model_layers
from tuner.space.factory import space_for

TARGET = "sw26010"


def _true_time(workload: Any, config: dict[str, Any] | None) -> float | None:
    if config is None:
        return None
    space = space_for(workload, TARGET)
    return float(simulate(space, space.encode(config)[None, :])[0])


def _run(db: Database, task_ids: list[int], seed: int, per_round: int, deadline: float) -> None:
    """Driver rounds and a simulated worker until no task of ``task_ids`` is active."""
    sim = Simulator(noise=DEFAULT_NOISE, seed=seed)
    driver = TuningDriver(db, Settings(database_url=db.url, driver_enabled=False, queue_depth=per_round))
    while time.monotonic() < deadline:
        driver.run_once()
        with db.session() as s:
            got = jobs_db.lease(s, target=TARGET, worker="bench", max_jobs=64, lease_seconds=60)
        if got.jobs:
            results = []
            for job in got.jobs:
                (m,) = sim.measure(job.workload, TARGET, [job.config])
                results.append(ResultIn(job_id=job.id, status=m.status, times=m.times, error=m.error,
                                        source=m.source))
            with db.session() as s:
                results_db.post_results(s, lease_token=got.token, worker="bench", results=results)
            continue
        with db.session() as s:
            if all(tasks_db.get_task(s, t, curve=False).state != "active" for t in task_ids):
                return
    raise TimeoutError("the run did not finish in time")


def _score(db: Database, task_ids: list[int], calls: dict[str, int]) -> tuple[float, list[int]]:
    total, trials = 0.0, []
    with db.session() as s:
        tasks = [tasks_db.get_task(s, t) for t in task_ids]
    for t in tasks:
        true = _true_time(t.workload, t.best_config)
        base = baseline_time(t.workload, TARGET)
        assert base is not None
        total += calls[t.workload.key] * (true if true is not None else base)
        trials.append(t.trials_done)
    return total, trials


def arm(kind: str, layers: list[Any], budget: int, seed: int, per_round: int, strategy: str,
        deadline: float) -> dict[str, Any]:
    calls = {layer.workload.key: layer.weight for layer in layers}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'log.db'}"
        migrate.upgrade(url)
        db = Database(url)
        try:
            with db.session() as s:
                if kind == "submission":
                    sub = submissions_db.create_submission(
                        s, "bench", [submissions_db.LayerSpec(layer.name, layer.workload, layer.weight)
                                     for layer in layers], TARGET, budget, strategy, per_round=per_round, seed=seed)
                    task_ids = [t.task_id for t in sub.tasks]
                else:
                    task_ids = [t.id for t in tasks_db.create_tasks(s, [layer.workload for layer in layers], TARGET,
                                                                    budget // len(layers), strategy, seed=seed)]
            start = time.monotonic()
            _run(db, task_ids, seed, per_round, deadline)
            seconds = time.monotonic() - start
            e2e, trials = _score(db, task_ids, calls)
        finally:
            db.dispose()
    return {"e2e_s": e2e, "trials": trials, "measured": sum(trials), "seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--budget", type=int, default=384)
    parser.add_argument("--per-round", type=int, default=16)
    parser.add_argument("--strategy", default="model")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-seconds", type=float, default=1800.0, help="per run")
    args = parser.parse_args()
    layers = model_layers(args.model)
    base = sum(layer.weight * (baseline_time(layer.workload, TARGET) or 0.0) for layer in layers)
    runs: dict[str, list[dict[str, Any]]] = {"submission": [], "equal": []}
    for seed in args.seeds:
        for kind in runs:
            r = arm(kind, layers, args.budget, seed, args.per_round, args.strategy,
                    time.monotonic() + args.max_seconds)
            runs[kind].append(r)
            print(kind, seed, r, flush=True)
    speedups = {k: [base / r["e2e_s"] for r in rs] for k, rs in runs.items()}
    share = [layer.weight * (baseline_time(layer.workload, TARGET) or 0.0) / base for layer in layers]
    emit({
        "model": args.model, "target": TARGET, "budget": args.budget, "per_round": args.per_round,
        "strategy": args.strategy, "seeds": args.seeds, "tasks": len(layers), "noise": DEFAULT_NOISE,
        "layers": [layer.name for layer in layers], "calls": [layer.weight for layer in layers],
        "baseline_share": [round(x, 4) for x in share],
        "baseline_e2e_s": base,
        "submission_measured": [r["measured"] for r in runs["submission"]],
        "equal_measured": [r["measured"] for r in runs["equal"]],
        "submission_trials_per_task": [r["trials"] for r in runs["submission"]],
        "speedup_submission": [round(x, 3) for x in speedups["submission"]],
        "speedup_equal_split": [round(x, 3) for x in speedups["equal"]],
        "median_speedup_submission": round(statistics.median(speedups["submission"]), 3),
        "median_speedup_equal_split": round(statistics.median(speedups["equal"]), 3),
    })


if __name__ == "__main__":
    main()
