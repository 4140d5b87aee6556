"""The commands that talk to a running server: ``tasks list|show|cancel``, ``best``, ``submit``.

Each takes ``--server`` (default ``$SWTUNE_SERVER`` or http://127.0.0.1:8000) and the bearer token
in ``$SWTUNE_TOKEN``, and prints rich tables, or the API's JSON with ``--json``. Errors are raised,
not printed: ``cli.errors`` turns HTTP answers, transport failures and refused input into one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from cli.errors import CommandError
from cli.output import RATE, console, gflops, ms, print_json, sub_app, task_rate, task_state, warn, workload_name
from swtune.tuning import DEFAULT_MODEL_TRIALS

if TYPE_CHECKING:
    from service.client import ServiceClient

DEFAULT_SERVER = "http://127.0.0.1:8000"

Server = Annotated[str, typer.Option("--server", envvar="SWTUNE_SERVER", help="URL of the swtune service")]
Token = Annotated[str | None, typer.Option("--token", envvar="SWTUNE_TOKEN", show_default=False,
                                             help="bearer token (default: $SWTUNE_TOKEN)")]
JsonOut = Annotated[bool, typer.Option("--json", help="print the API's JSON answer instead of a table")]


def connect(server: str, token: str | None) -> ServiceClient:
    """A client for one command: few retries, since a person is waiting and a server that is down
    should say so within seconds."""
    from service.client import ServiceClient

    return ServiceClient(server, token, timeout=30.0, retries=2, backoff=0.2)


# --- tasks ------------------------------------------------------------------------------------
def tasks_list(server: Server = DEFAULT_SERVER, token: Token = None, json_out: JsonOut = False,
               state: Annotated[str | None, typer.Option(help="active, done or cancelled")] = None,
               batch: Annotated[str | None,
                                typer.Option("--submission", help="only the tasks of this submission")] = None,
               limit: Annotated[int, typer.Option(min=1, max=1000, help="at most this many tasks")] = 100) -> None:
    """List tuning tasks with their progress, best time and GFLOPS.

    A task that ended without any successful measurement shows as `done, untuned` (or `cancelled,
    untuned`): its workload stays untuned. Workloads are shown by a short name (operator, shapes,
    dtype); `--json` has their keys and full specs."""
    with connect(server, token) as api:
        tasks = api.tasks(state=state, batch=batch, limit=limit)
    if json_out:
        return print_json(tasks)
    table = Table(title=f"tuning tasks on {server}")
    for col in ("id", "label", "workload", "target", "state", "trials", "failed", "best ms", RATE):
        table.add_column(col, justify="right" if col in ("id", "trials", "failed", "best ms", RATE) else "left")
    for t in tasks:
        table.add_row(str(t["id"]), t["label"] or "-", workload_name(t), t["target"], task_state(t),
                      f"{t['trials_done']}/{t['trial_budget']}", str(t["failed"]), ms(t["best_time"]),
                      task_rate(t))
    console.print(table)


def tasks_show(task_id: Annotated[int, typer.Argument(help="task id")], server: Server = DEFAULT_SERVER,
               token: Token = None, json_out: JsonOut = False) -> None:
    """One task: progress, best config, and what each worker measured (`--json`: also the workload's
    full spec, e.g. a CPE kernel's TVMScript)."""
    with connect(server, token) as api:
        task = api.task(task_id)
        trials = api.request("GET", f"/api/v1/tasks/{task_id}/trials").json()
    if json_out:
        return print_json({**task, "trials": trials["trials"], "workers": trials["workers"]})
    failed = sum(1 for t in trials["trials"] if t["status"] != "ok")
    console.print(f"[bold]task {task['id']}[/] {task['label'] or ''} \\[{task_state(task)}]  {workload_name(task)} "
                  f"on {task['target']}, strategy {task['strategy']}, submission {task['batch']}", highlight=False)
    console.print(f"workload key {task['workload_key']}", highlight=False)
    if task.get("untuned_reason"):
        console.print(f"[yellow]{task['untuned_reason']}[/]: its workload runs untuned", highlight=False)
    console.print(f"trials {task['trials_done']}/{task['trial_budget']} ({failed} failed, {task['pending']} pending, "
                  f"{task['leased']} leased); best {ms(task['best_time'])} ms, "
                  f"{task_rate(task)}{'' if task.get('best_gbps') else ' GFLOPS'}")
    if task["best_config"]:
        console.print("best config: " + json.dumps(task["best_config"]))
    table = Table(title="measurements per worker")
    for col in ("worker", "trials", "ok", "failed", "best ms", "GFLOPS"):
        table.add_column(col, justify="left" if col == "worker" else "right")
    for w in trials["workers"]:
        table.add_row(w["worker"] or "-", str(w["trials"]), str(w["ok"]), str(w["failed"]), ms(w["best_time"]),
                      gflops(w["best_gflops"]))
    console.print(table)


def tasks_cancel(task_id: Annotated[int, typer.Argument(help="task id")], server: Server = DEFAULT_SERVER,
                 token: Token = None, json_out: JsonOut = False) -> None:
    """Cancel a task: its pending jobs are dropped (results of leased ones are still kept)."""
    with connect(server, token) as api:
        task = api.cancel(task_id)
    if json_out:
        return print_json(task)
    console.print(f"task {task['id']} {task['state']} after {task['trials_done']}/{task['trial_budget']} trials")


def build_tasks_app() -> typer.Typer:
    """``swtune tasks``: a new sub-app on each call."""
    return sub_app("Tuning tasks on a server: list, show, cancel.",
                   [("list", tasks_list), ("show", tasks_show), ("cancel", tasks_cancel)])


# --- best -------------------------------------------------------------------------------------
def workload_key(spec: str) -> str:
    """A workload key from a JSON spec (checked here), or the argument itself when it is a key."""
    from tuner.workloads import workload_from_json

    return workload_from_json(spec).key if spec.lstrip().startswith("{") else spec.strip()


def best(workload: Annotated[str, typer.Argument(help="workload JSON, e.g. '{\"op\": \"dense\", \"m\": 1, "
                                                      "\"n\": 4096, \"k\": 9216}', or a workload key")],
         target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")],
         server: Server = DEFAULT_SERVER, token: Token = None, json_out: JsonOut = False) -> None:
    """The best tuned schedule of a workload on a target (what a compiler gets)."""
    key = workload_key(workload)
    with connect(server, token) as api:
        found = api.request("GET", "/api/v1/schedules/best", params={"workload_key": key, "target": target}).json()
    if json_out:
        return print_json(found)
    console.print(f"[bold]{found['workload_key']}[/] on {found['target']}: {ms(found['mean_time'])} ms, "
                  f"{gflops(found['gflops'])} GFLOPS ({len(found['times'])} runs, {found['source']}, "
                  f"worker {found['worker'] or '-'}, config {found['config_hash']})")
    table = Table(show_header=True)
    table.add_column("knob")
    table.add_column("value")
    for k, v in found["config"].items():
        table.add_row(k, json.dumps(v) if isinstance(v, (dict, list)) else str(v))
    console.print(table)


# --- submit -----------------------------------------------------------------------------------
def _workloads_from_file(path: Path) -> tuple[list[dict[str, Any]], list[str] | None]:
    """A JSON file: a list of workload specs, or {"workloads": [...], "labels": [...]}."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path} is not JSON: {exc}") from None
    if isinstance(data, dict) and "workloads" in data:
        return list(data["workloads"]), data.get("labels")
    if isinstance(data, list):
        return data, None
    raise CommandError(f"{path}: expected a list of workloads or an object with 'workloads'")


def collect_workloads(workload: list[str], file: Path | None, model: str | None, batch_size: int,
                      labels: list[str]) -> tuple[list[Any], list[str] | None]:
    """The workload specs and labels of a submission from exactly one source, each spec checked here
    (a typo should not cost a round trip)."""
    from tuner.workloads import workload_from_json

    if sum(bool(x) for x in (workload, file, model)) != 1:
        raise CommandError("give exactly one of --workload (repeatable), --file or --model")
    specs: list[Any]  # workload specs: JSON objects, or the strings the user typed that are not JSON
    names: list[str] | None
    if model:
        from tuner.bridge.extract import extract_model

        extracted = extract_model(model, batch=batch_size)
        specs = [layer.workload.to_json() for layer in extracted.layers]
        names = [layer.name for layer in extracted.layers]
    elif file:
        specs, names = _workloads_from_file(file)
    else:
        specs, names = [json.loads(w) if w.lstrip().startswith("{") else w for w in workload], None
    for i, spec in enumerate(specs):
        try:
            workload_from_json(spec)
        except ValueError as exc:
            raise CommandError(f"workload {i}: {exc}") from None
    if labels:
        if len(labels) != len(specs):
            raise CommandError(f"got {len(labels)} --label for {len(specs)} workloads")
        names = labels
    return specs, names


def submit(target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")],
           workload: Annotated[list[str] | None, typer.Option("--workload", "-w",
                                                                 help="workload JSON (repeatable)")] = None,
           file: Annotated[Path | None, typer.Option(help="JSON file: a list of workloads, or "
                                                             "{\"workloads\": [...], \"labels\": [...]}")] = None,
           model: Annotated[str | None, typer.Option(
               help="alexnet, resnet18 or an .onnx file: its tasks (extracted through TVM Relax, needs swtune[models])"
           )] = None,
           model_batch: Annotated[int, typer.Option("--batch-size", help="--model: the model's batch size")] = 1,
           label: Annotated[list[str] | None, typer.Option(help="one per workload (repeatable)")] = None,
           trials: Annotated[int | None, typer.Option(
               min=1, show_default=False, help="trials per task: per workload (default 200); with --model, per "
                                               "GEMM-like task, a quarter of it (at least 8) per memory-bound task, "
                                               "as tune-model (default 64)")] = None,
           budget: Annotated[int | None, typer.Option(
               min=1, help="--model: the trial budget of the whole model, spread over its tasks (instead of "
                           "--trials)")] = None,
           strategy: Annotated[str | None, typer.Option(help="search strategy (default: the server's)")] = None,
           seed: Annotated[int, typer.Option(min=0)] = 0,
           server: Server = DEFAULT_SERVER, token: Token = None, json_out: JsonOut = False) -> None:
    """Submit tuning tasks (one per workload) to a server; a `--model` is one submission with one budget.

    `--trials` means trials per task everywhere. A model's one budget is `--budget`, or `--trials` per
    task as `swtune tune-model` counts it; a budget too small to give every task its baseline and a
    few trials is warned about (such tasks may end untuned)."""
    if trials is not None and budget is not None:
        raise CommandError("give --trials (per task) or --budget (the whole model's), not both")
    if model and not (workload or file or label):
        return _submit_model(model, model_batch, target, trials, budget, strategy, seed, server, token, json_out)
    if budget is not None:
        raise CommandError("--budget is the budget of a whole model (--model); give tasks of workloads --trials each")
    specs, names = collect_workloads(workload or [], file, model, model_batch, label or [])
    with connect(server, token) as api:
        created = api.submit(specs, target, trials or 200, strategy=strategy, labels=names, seed=seed)
    if json_out:
        return print_json(created)
    table = Table(title=f"submitted {len(created['task_ids'])} tasks (submission {created['batch']}, "
                        f"strategy {created['strategy']})")
    for col in ("task", "label", "workload"):
        table.add_column(col, justify="right" if col == "task" else "left")
    for i, (tid, key) in enumerate(zip(created["task_ids"], created["workload_keys"])):
        table.add_row(str(tid), names[i] if names else "-", key)
    console.print(table)
    console.print(f"follow: swtune tasks list --submission {created['batch']}   or   "
                  f"{server.rstrip('/')}/ui/#/submission/{created['batch']}")


def _submit_model(model: str, batch_size: int, target: str, trials: int | None, budget: int | None,
                  strategy: str | None, seed: int, server: str, token: str | None, json_out: bool) -> None:
    """A model as one submission: its distinct workloads with their call counts, one budget spread
    over them by the server's gradient task scheduler."""
    from tuner.bridge.extract import extract_model, trial_budget

    extracted = extract_model(model, batch=batch_size)
    layers = [{"name": layer.name, "workload": layer.workload.to_json(), "calls": layer.weight}
              for layer in extracted.layers]
    whole = budget if budget is not None else trial_budget(extracted.layers, trials or DEFAULT_MODEL_TRIALS)
    with connect(server, token) as api:
        created = api.submit_model(Path(model).stem[:128] or model[:128], layers, target, whole, strategy=strategy,
                                   seed=seed)
    warn(created.get("warnings", []))
    if json_out:
        return print_json(created)
    table = Table(title=f"submitted {created['model']}: {len(created['tasks'])} tasks, one budget of "
                        f"{created['trial_budget']} trials (submission {created['id']}, "
                        f"strategy {created['strategy']})")
    for col in ("task", "layers", "calls", "workload"):
        table.add_column(col, justify="right" if col in ("task", "calls") else "left")
    for t in created["tasks"]:
        table.add_row(str(t["task_id"]), ", ".join(t["layer_names"]), str(t["call_count"]), t["workload_key"])
    console.print(table)
    console.print(f"follow: swtune tasks list --submission {created['id']}   or   "
                  f"{server.rstrip('/')}/ui/#/submission/{created['id']}")
