"""`swtune demo`: tune AlexNet's conv layers and VGG-19's fc layers end to end on this machine
(the layers the swTVM paper reports: 6.71x conv, 2.45x fc over OpenACC).

Embedded mode: a SQLite file, the API server in this process on a free loopback port (auth off:
single user, 127.0.0.1 only), N simulator worker processes, the tasks submitted over HTTP, a live
progress view, and a per-layer table of baseline (OpenACC-like schedule) vs tuned time.
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from db import migrate
from db.engine import Database
from service.app import create_app
from service.client import ServiceClient
from service.embedded import EmbeddedServer
from service.settings import Settings
from tuner.baseline import openacc_baseline
from tuner.measure.simulator import simulate
from tuner.models.zoo import model_layers
from tuner.space.factory import space_for

REPO = Path(__file__).resolve().parents[1]


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


def start_workers(url: str, n: int, target: str, *, batch: int = 8, token: str | None = None,
                  extra: list[str] | None = None) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    if token:
        env["SWTUNE_TOKEN"] = token
    cmd = [sys.executable, "-m", "service.worker", "--server", url, "--target", target, "--backend", "simulator",
           "--jobs-per-lease", str(batch), "--wait", "5", "--log-level", "WARNING", *(extra or [])]
    return [subprocess.Popen(cmd, env=env, cwd=str(REPO)) for _ in range(n)]


def stop_workers(procs: list[subprocess.Popen[bytes]], timeout: float = 15.0) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)  # workers hand their leases back and exit
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def baselines(layers: list[Any], target: str) -> dict[str, float]:
    out = {}
    for layer in layers:
        space = space_for(layer.workload, target)
        out[layer.name] = float(simulate(space, space.encode(openacc_baseline(space))[None, :])[0])
    return out


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
    tmp = None
    if db_path is None:
        tmp = tempfile.TemporaryDirectory(prefix="swtune-demo-")
        db_path = str(Path(tmp.name) / "swtune-demo.db")
    url = f"sqlite:///{Path(db_path).resolve()}"
    migrate.upgrade(url)
    settings = Settings(database_url=url, auth_enabled=False, lease_seconds=30, queue_depth=16,
                        driver_interval_seconds=0.2, lookup_cache_seconds=0)
    app = create_app(settings, db=Database(url))
    console.print(f"[bold]swtune demo[/]: {model} conv+dense layers on {target}, {trials} trials per layer, "
                  f"{workers} simulator workers, log {db_path}")
    start = time.monotonic()
    with EmbeddedServer(app) as server:
        procs = start_workers(server.url, workers, target)
        try:
            with ServiceClient(server.url) as client:
                submitted = client.submit([l.workload.to_json() for l in layers], target, trials, strategy=strategy,
                                          labels=[l.name for l in layers])
                console.print(f"API on {server.url}; {len(submitted['task_ids'])} tasks, "
                              f"strategy {submitted['strategy']}")
                base = baselines(layers, target)  # while the workers start measuring
                tasks = _follow(client, submitted, layers, console, deadline=start + timeout)
                best = client.best_batch([l.workload.key for l in layers], target)["found"]
        finally:
            stop_workers(procs)
    results = []
    for layer, task in zip(layers, tasks):
        found = best.get(layer.workload.key)
        results.append(LayerResult(layer.name, layer.workload.key, layer.workload.flops, base[layer.name],
                                   found["mean_time"] if found else None, task["trials_done"]))
    _report(results, console, time.monotonic() - start, target, model)
    if tmp is not None:
        tmp.cleanup()
    return results


def _follow(client: ServiceClient, submitted: dict[str, Any], layers: list[Any], console: Console,
            deadline: float) -> list[dict[str, Any]]:
    columns = (TextColumn("{task.description:<6}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[best]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bars = {tid: progress.add_task(l.name, total=None, best="") for tid, l in zip(submitted["task_ids"], layers)}
        while True:
            tasks = {t["id"]: t for t in client.tasks(batch=submitted["batch"])}
            for tid, bar in bars.items():
                t = tasks[tid]
                best = f"best {t['best_time'] * 1e3:8.3f} ms" if t["best_time"] else ""
                progress.update(bar, total=t["trial_budget"], completed=t["trials_done"], best=best)
            if all(t["state"] != "active" for t in tasks.values()):
                return [tasks[tid] for tid in submitted["task_ids"]]
            if time.monotonic() > deadline:
                console.print("[red]timed out waiting for the tasks[/]")
                return [tasks[tid] for tid in submitted["task_ids"]]
            time.sleep(0.5)


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
