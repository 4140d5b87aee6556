"""`swtune demo`: tune AlexNet's conv layers and VGG-19's fc layers end to end on this machine
(the layers the swTVM paper reports: 6.71x conv, 2.45x fc over OpenACC).

Embedded mode (``service.embedded.embedded_service``): a SQLite file, the API server in this
process on a free loopback port (auth off: single user, 127.0.0.1 only), N simulator worker
processes, the tasks submitted over HTTP, a live progress view, and a per-layer table of baseline
(OpenACC-like schedule) vs tuned time.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from db.engine import normalize_url
from db.states import TaskState
from service.client import ServiceClient
from service.embedded import embedded_service
from tuner.baseline import baseline_time
from tuner.models.zoo import model_layers
from tuner.profile import Profile


@dataclass(frozen=True)
class LayerResult:
    name: str
    workload_key: str
    flops: int
    baseline_s: float
    tuned_s: float | None
    trials: int

    @property
    def speedup(self) -> float | None:
        return self.baseline_s / self.tuned_s if self.tuned_s else None

    @property
    def gflops(self) -> float | None:
        return self.flops / self.tuned_s / 1e9 if self.tuned_s else None


def baselines(layers: list[Any], target: str, profile: Profile | None = None) -> dict[str, float]:
    """The simulated time of each layer under the OpenACC-like schedule, by layer name, with ``profile``'s
    costs (the one the tuned times were measured with; None: the built-in profile)."""
    out = {}
    for layer in layers:
        t = baseline_time(layer.workload, target, profile)
        if t is None:
            raise RuntimeError(f"no valid OpenACC-like schedule for {layer.workload.key}")
        out[layer.name] = t
    return out


def follow_tasks(client: ServiceClient, submitted: dict[str, Any], deadline: float,
                 show: Callable[[dict[int, dict[str, Any]]], None]) -> list[dict[str, Any]]:
    """Poll a submission's tasks (``show`` gets them by id each time) until none is active or the
    deadline passes; the tasks in submission order."""
    while True:
        tasks = {t["id"]: t for t in client.tasks(batch=submitted["batch"])}
        show(tasks)
        if all(tasks[tid]["state"] != TaskState.ACTIVE for tid in submitted["task_ids"]) or time.monotonic() > deadline:
            return [tasks[tid] for tid in submitted["task_ids"]]
        time.sleep(0.5)


SWTVM = "swtvm"  # AlexNet conv1-5 + VGG-19 fc6-8, as the swTVM paper reports them


def demo_layers(model: str) -> list[Any]:
    """The demo's layers: ``swtvm`` (AlexNet convs + VGG-19 fcs) or every layer of a zoo model."""
    if model == SWTVM:
        return model_layers("alexnet", 1, "float32")[:5] + model_layers("vgg19", 1, "float32")[-3:]
    return model_layers(model, 1, "float32")


def run_demo(*, trials: int = 64, workers: int = 2, db_path: str | None = None, target: str = "sw26010",
             strategy: str | None = None, model: str = SWTVM, console: Console | None = None,
             timeout: float = 900.0) -> list[LayerResult]:
    console = console or Console()
    layers = demo_layers(model)
    with tempfile.TemporaryDirectory(prefix="swtune-demo-") as tmp:
        db_path = db_path or str(Path(tmp) / "swtune-demo.db")
        console.print(f"[bold]swtune demo[/]: {model} conv+dense layers on {target}, {trials} trials per layer, "
                      f"{workers} simulator workers, log {db_path}")
        start = time.monotonic()
        with embedded_service(normalize_url(db_path), workers=workers, target=target) as service, \
                service.client() as client:
            submitted = client.submit([l.workload.to_json() for l in layers], target, trials, strategy=strategy,
                                      labels=[l.name for l in layers])
            console.print(f"API on {service.url}; {len(submitted['task_ids'])} tasks, "
                          f"strategy {submitted['strategy']}")
            # while the workers start measuring; with the profile they measure with (a log may hold a fitted one)
            base = baselines(layers, target, Profile.from_json(client.get_profile(target)["active"]))
            tasks = _follow(client, submitted, layers, console, deadline=start + timeout)
            best = client.best_batch([l.workload.key for l in layers], target)["found"]
    results = []
    for layer, task in zip(layers, tasks):
        found = best.get(layer.workload.key)
        results.append(LayerResult(layer.name, layer.workload.key, layer.workload.flops, base[layer.name],
                                   found["mean_time"] if found else None, task["trials_done"]))
    _report(results, console, time.monotonic() - start, target, model)
    return results


def _follow(client: ServiceClient, submitted: dict[str, Any], layers: list[Any], console: Console,
            deadline: float) -> list[dict[str, Any]]:
    """A progress bar per layer while the tasks run."""
    columns = (TextColumn("{task.description:<6}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[best]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bars = {tid: progress.add_task(l.name, total=None, best="") for tid, l in zip(submitted["task_ids"], layers)}

        def show(tasks: dict[int, dict[str, Any]]) -> None:
            for tid, bar in bars.items():
                t = tasks[tid]
                best = f"best {t['best_time'] * 1e3:8.3f} ms" if t["best_time"] else ""
                progress.update(bar, total=t["trial_budget"], completed=t["trials_done"], best=best)

        tasks = follow_tasks(client, submitted, deadline, show)
    if any(t["state"] == TaskState.ACTIVE for t in tasks):
        console.print("[red]timed out waiting for the tasks[/]")
    return tasks


def _report(results: list[LayerResult], console: Console, elapsed: float, target: str, model: str = SWTVM) -> None:
    what = "AlexNet conv and VGG-19 fc layers" if model == SWTVM else f"{model} layers"
    table = Table(title=f"{what} on {target} (batch 1, float32)")
    for col in ("layer", "GFLOP", "trials", "baseline ms", "tuned ms", "speedup", "GFLOPS"):
        table.add_column(col, justify="left" if col == "layer" else "right")
    for r in results:
        table.add_row(r.name, f"{r.flops / 1e9:.3f}", str(r.trials), f"{r.baseline_s * 1e3:.3f}",
                      f"{r.tuned_s * 1e3:.3f}" if r.tuned_s else "-",
                      f"{r.speedup:.2f}x" if r.speedup else "-", f"{r.gflops:.1f}" if r.gflops else "-")
    console.print(table)
    for kind in ("conv", "fc"):
        sp = [r.speedup for r in results if r.name.startswith(kind) and r.speedup]
        if sp:
            geo = math.exp(statistics.fmean(math.log(s) for s in sp))
            console.print(f"average speedup over {kind} layers: {statistics.fmean(sp):.2f}x "
                          f"(geometric mean {geo:.2f}x)")
    console.print(f"done in {elapsed:.0f} s. baseline: the OpenACC-like schedule (tuner.baseline) on the "
                  "simulator; tuned: the best measured config (simulator worker processes)")
