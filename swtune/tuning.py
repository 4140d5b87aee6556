"""Tuning through the service: a model (``tune_model``), or any tasks (``tune_layers`` on an embedded
service writing a tuning log, ``tune_on_server`` on a running one).

Every submission is one budget spread over its tasks by the server's task scheduler
(service/budget.py), followed until no task is active, and answered by the best schedule of each
task. TVM and torch are imported inside the functions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swtune.errors import ArgumentError
from swtune.progress import Progress
from swtune.results import LayerResult, ModelTuning, ServiceTuning, TuningPlan, has_draws
from swtune.tuning_log import active_profile, database_url, program_interval

DEFAULT_MODEL_TRIALS = 64  # trials per GEMM-like task of a model (tune_model, `swtune submit --model`)
DEFAULT_PER_ROUND = 16  # trials a task of a model is granted at a time


def trials_per_round(trials: int) -> int:
    """Trials a task of a training step is granted at a time: half of ``trials``, so every task's
    warm-up takes about half the budget and the server's task scheduler (service/budget.py) grants the
    other half by the tasks' shares of the step time (call count x best time so far)."""
    from service.budget import MIN_TRIALS_PER_TASK

    return max(MIN_TRIALS_PER_TASK, trials // 2)


def tune_on_server(url: str, token: str | None, name: str, layers: Sequence[Any], target: str, budget: int, *,
                   strategy: str | None = None, timeout: float = 1800.0, per_round: int = DEFAULT_PER_ROUND,
                   progress: Progress | None = None) -> ServiceTuning:
    """Submit ``layers`` (``tuner.bridge.extract.Layer``: name, workload, calls) to the service at ``url``
    as one submission named ``name`` with one trial ``budget`` (``per_round`` trials a grant), follow it
    until no task is active or ``timeout`` seconds pass (``progress.following`` gets the tasks as they
    stand), and fetch the best schedules. The tasks come back in ``layers`` order. Raises
    ``service.client.ServiceError`` for a refused submission (e.g. an unknown strategy)."""
    from service.client import ServiceClient
    from service.demo import follow_tasks

    progress = progress or Progress()
    with ServiceClient(url, token) as client:
        created = client.submit_model(name[:128], [{"name": l.name, "workload": l.workload.to_json(),
                                                     "calls": l.weight} for l in layers],
                                      target, budget, strategy=strategy, per_round=per_round)
        progress.submission_warned(created.get("warnings", []))
        # layers sharing a workload are one task on the server: follow the tasks, report per layer
        by_key = {t["workload_key"]: t["task_id"] for t in created["tasks"]}
        submitted = {"batch": created["id"], "task_ids": [t["task_id"] for t in created["tasks"]]}
        names = [", ".join(t["layer_names"]) for t in created["tasks"]]
        with progress.following(submitted["task_ids"], names) as show:
            followed = follow_tasks(client, submitted, time.monotonic() + timeout, show)
        by_id = {t["id"]: t for t in followed}
        best = client.best_batch([l.workload.key for l in layers], target)["found"]
    return ServiceTuning([by_id[by_key[l.workload.key]] for l in layers], best)


def tune_layers(layers: Sequence[Any], db: str | None, *, name: str, target: str = "sw26010",
                trials: int | None = None, budget: int | None = None, per_round: int | None = None,
                workers: int = 2, strategy: str | None = None, timeout: float = 3600.0,
                progress: Progress | None = None) -> ServiceTuning:
    """Tune ``layers`` (``tuner.bridge.extract.Layer``) on an embedded service (the API on a free loopback
    port, ``workers`` simulator worker processes) writing the tuning log ``db`` (a path or a URL; None:
    ``./swtune.db``), as one submission named ``name``.

    The budget is ``trials`` per GEMM-like task and a quarter of it (at least 8) per memory-bound task
    (``tuner.bridge.extract.trial_budget``), or ``budget`` for them all; give one. ``per_round`` trials a
    grant: by default ``trials_per_round(trials)`` with ``trials`` (a training step's half-and-half), else
    16. ``progress.tuning_planned`` gets the plan before the service starts. Raises ``ArgumentError`` for
    a bad budget and ``ValueError`` for a ``db`` that names no tuning log."""
    from service.embedded import embedded_service
    from tuner.bridge.extract import trial_budget

    if (trials is None) == (budget is None):
        raise ArgumentError("give trials (per task) or budget (the whole submission's), one of them")
    url = database_url(db)
    layers = list(layers)
    whole = budget if budget is not None else trial_budget(layers, trials or 0)
    if whole < 1:
        raise ArgumentError(f"a budget of {whole} trials tunes nothing")
    rounds = per_round or (trials_per_round(trials) if trials is not None else DEFAULT_PER_ROUND)
    progress = progress or Progress()
    progress.tuning_planned(TuningPlan(name, layers, whole, url))
    with embedded_service(url, workers=workers, target=target) as service:
        return tune_on_server(service.url, None, name, layers, target, whole, strategy=strategy, timeout=timeout,
                              per_round=rounds, progress=progress)


def load_model(model: Any, *, batch: int = 1, width: float = 1.0, image: int = 224,
               example_inputs: Sequence[Any] | None = None) -> Any:
    """The Relax module of ``model``: a zoo model's name (alexnet, resnet18, ...; ``batch``, ``width`` and
    ``image`` size it), a path to an .onnx file, a torch module (called on ``example_inputs``) or a Relax
    module. Raises ``ValueError`` for an unknown name, ``FileNotFoundError`` for a missing file."""
    if isinstance(model, str):
        from tuner.bridge.extract import load_relax

        return load_relax(model, batch=batch, width=width, image=image)
    from tuner.aot.compiler import to_relax

    return to_relax(model, example_inputs)


def model_name(model: Any) -> str:
    """How a report names ``model``: a zoo name as given, an ONNX file by its stem, a module by its class."""
    if isinstance(model, str):
        return Path(model).stem if model.endswith(".onnx") else model
    return type(model).__name__


def tune_model(model: Any, *, target: str = "sw26010", cgs: int = 1, trials: int | None = None,
               budget: int | None = None, db: str | None = None, server: str | None = None,
               token: str | None = None, workers: int = 2, strategy: str | None = None, batch: int = 1,
               width: float = 1.0, image: int = 224, example_inputs: Sequence[Any] | None = None,
               timeout: float = 1800.0, progress: Progress | None = None) -> ModelTuning:
    """Tune every task of a model (conv / dense / batch_matmul, expression and memory-bound operators) as
    one submission, and time the program ``compile_model`` would build from the result.

    ``model``: as ``load_model`` takes it (a zoo name, an .onnx path, a torch module with
    ``example_inputs``, a Relax module). ``target``: a preset name; ``cgs`` > 1 lets each kernel split over
    that many core groups. The one trial budget is ``trials`` per GEMM-like task plus a quarter of it (at
    least 8) per memory-bound task (default 64), or ``budget`` for the whole model; a budget too small to
    give every task its baseline and a few trials is warned about (``progress.submission_warned``).
    Tuning runs on the service at ``server`` (with ``token``), else on an embedded one with ``workers``
    simulator workers writing the tuning log ``db`` (a path or a URL; None: ``./swtune.db``), which
    ``compile_model(db=...)`` reads.

    Before any tuning the whole model goes through the compiler's reader: an operator that cannot compile
    raises ``ArgumentError`` naming its binding, and nothing is submitted. Returns a ``ModelTuning``: per
    layer its baseline and best time (None: untuned, no successful measurement), and the whole program's
    simulated timing. Raises ``ArgumentError`` for both ``trials`` and ``budget``, ``ValueError`` for an
    unknown model or a bad ``db``, ``tuner.errors.UnknownTargetError`` for an unknown target."""
    from service.demo import baselines
    from tuner.aot import AotError
    from tuner.aot.compiler import lower_model
    from tuner.aot.lookup import TuningLog
    from tuner.bridge.extract import extract_relax, trial_budget
    from tuner.calibrate.intervals import simulated_interval
    from tuner.ir.relax_reader import read_relax
    from tuner.space.chip import split_label
    from tuner.targets import get_target, with_cgs

    progress = progress or Progress()
    tgt = with_cgs(target, cgs) if cgs != 1 else get_target(target)
    target = tgt.name
    if budget is not None and trials is not None:
        raise ArgumentError("give trials (per task) or budget (the whole model's), not both")
    log_url = None if server else database_url(db)  # a bad db is refused before any work
    name = model_name(model)
    mod = load_model(model, batch=batch, width=width, image=image, example_inputs=example_inputs)
    extracted = extract_relax(mod, target=target)
    try:
        read_relax(mod, target)  # every operator must compile before anything is tuned
    except AotError as exc:
        raise ArgumentError(f"{model if isinstance(model, str) else name} cannot be compiled for Sunway, nothing "
                            f"was tuned: {exc}") from exc
    layers = extracted.layers
    whole = budget if budget is not None else trial_budget(layers, trials or DEFAULT_MODEL_TRIALS)
    plan = TuningPlan(name, layers, whole, log_url, dict(extracted.untuned))
    progress.tuning_planned(plan)
    start = time.monotonic()
    if server:
        tuned = tune_on_server(server, token, name, layers, target, whole, strategy=strategy, timeout=timeout,
                               progress=progress)
    else:
        from service.embedded import embedded_service

        assert log_url is not None
        with embedded_service(log_url, workers=workers, target=target) as service:
            tuned = tune_on_server(service.url, None, name, layers, target, whole, strategy=strategy,
                                   timeout=timeout, progress=progress)
    profile = active_profile(target, server=server, token=token, db_url=log_url, progress=progress)
    base = baselines(layers, target)
    results = []
    for layer, task in zip(layers, tuned.tasks):
        found = tuned.best.get(layer.workload.key)
        results.append(LayerResult(
            layer.name, layer.workload, layer.weight, int(task.get("trials_done", 0)), base[layer.name],
            found["mean_time"] if found and found["mean_time"] else None, found["config"] if found else None,
            simulated_interval(profile, layer.workload, found["config"]) if has_draws(profile) and found else None,
            (split_label(found["config"]) if found else None) if tgt.cgs > 1 else None))
    elapsed = time.monotonic() - start
    # the program compile_model would build from this log: fused, offloaded and grouped the same way
    program = lower_model(mod, profile.apply(target) if profile else target, TuningLog(tuned.config))
    return ModelTuning(name, target, plan, results, elapsed, program.timing(), profile,
                       program_interval(profile, program.graph, program.kernels))
