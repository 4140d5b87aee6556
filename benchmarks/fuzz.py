"""Schemathesis against a live server: no 5xx, and no response that contradicts the OpenAPI schema.

    python benchmarks/fuzz.py                       # SQLite, then PostgreSQL if SWTUNE_DATABASE_URL is set
    python benchmarks/fuzz.py --max-time 50 --backends sqlite      # about what the test suite runs

A fresh database (a SQLite file, or a fresh schema of the PostgreSQL at SWTUNE_DATABASE_URL) gets
the migrations, an admin token and a little data (a task with jobs, one measurement) so id-taking
routes and the lookup have something to find; a uvicorn server (service.embedded.spawn_server) runs
on it; `st run` fuzzes every operation of the service's API with the admin token and a fixed seed
(examples, coverage, fuzzing and stateful phases, the last following the schema's links; positive
and negative data).

Counted from schemathesis' NDJSON report: ``cases`` (requests sent), ``server_errors`` (failed
``not_a_server_error``), ``schema_violations`` (failed status code, content type, header or body
conformance), ``other_failures`` (the remaining checks, e.g. a schema-violating request accepted).
Last line: one JSON object.

Every operation is fuzzed, the dashboard's read-only views included. Checks that are off:
- "unsupported method" and "Allow header": they judge HTTP methods the schema does not declare
  (Starlette's 405 lists the methods of the first matching route only);
- "ignored auth": it probes only operations whose schema declares a security requirement, and this
  schema declares none (the bearer token is checked by a FastAPI dependency, service/auth.py), so the
  check would pass without looking. Authentication is checked instead by
  tests/service_tests/test_api_auth_every_route.py: it walks every route of the app, not only the ones
  a fuzz run reaches, and asserts 401 without a token and with a wrong one, except a listed set of
  routes that are public on purpose.

Imported by schemathesis itself as its hooks module (SCHEMATHESIS_HOOKS=fuzz): it registers the
serializer of the import route's JSON-lines body.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_CHECKS = ("status_code_conformance", "content_type_conformance", "response_headers_conformance",
                 "response_schema_conformance")
EXCLUDED_CHECKS = ("unsupported_method", "allow_header_conformance", "positive_data_acceptance", "ignored_auth")
PHASES = "examples,coverage,fuzzing,stateful"

try:  # the hooks part: only when schemathesis imports this module
    import schemathesis

    @schemathesis.serializer("application/x-ndjson")
    def _ndjson(_ctx: Any, value: Any) -> dict[str, Any]:
        if isinstance(value, bytes):
            return {"data": value}
        if isinstance(value, str):
            return {"data": value.encode()}
        return {"data": (json.dumps(value) + "\n").encode()}
except ImportError:  # pragma: no cover - the benchmark itself only shells out to `st`
    pass


@contextlib.contextmanager
def fresh_database(kind: str, directory: Path) -> Iterator[str]:
    """A migrated empty database of ``kind`` (a fresh schema on PostgreSQL, dropped afterwards)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from db import migrate
    from db.engine import normalize_url

    if kind == "sqlite":
        url = f"sqlite:///{directory / 'fuzz.db'}"
        migrate.upgrade(url)
        yield url
        return
    base = normalize_url(os.environ["SWTUNE_DATABASE_URL"])
    schema = f"swt_fuzz_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False)
    try:
        migrate.upgrade(url)
        yield url
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def seed(url: str) -> str:
    """An admin token, a task with queued jobs and one stored measurement; returns the token."""
    from db import jobs as jobs_db
    from db import results as results_db
    from db import tasks as tasks_db
    from db import tokens as tokens_db
    from db.domain import ResultIn
    from db.engine import Database
    from tuner.space.factory import space_for
    from tuner.workloads import workload_from_json

    db = Database(url)
    wl = workload_from_json({"op": "dense", "m": 16, "n": 64, "k": 128})
    space = space_for(wl, "sw26010")
    configs = [space.decode(row) for row in space.sample(8, rng=0)]
    with db.session() as s:
        token = tokens_db.create_token(s, "admin", "fuzz")[1]
        task = tasks_db.create_tasks(s, [wl], "sw26010", 8, "random")[0]
        spec = next(t for t in tasks_db.active_tasks(s) if t.id == task.id)
        jobs_db.enqueue(s, task.id, spec.workload_id, spec.target_id, configs, max_attempts=3)
    with db.session() as s:
        got = jobs_db.lease(s, target="sw26010", worker="seed", max_jobs=1, lease_seconds=60, backend="simulator")
        results_db.post_results(s, lease_token=got.token, worker="seed", results=[
            ResultIn(job_id=got.jobs[0].id, status="ok", times=(1e-3, 1.1e-3), source="simulator")])
    db.dispose()
    return token


def summarise(report: Path) -> dict[str, Any]:
    cases: set[str] = set()
    failed: dict[str, set[str]] = {}
    operations: set[str] = set()
    errors = 0
    with report.open() as f:
        for line in f:
            event = json.loads(line)
            if "NonFatalError" in event:
                errors += 1
            finished = event.get("ScenarioFinished")
            if not finished:
                continue
            recorder = finished["recorder"]
            if recorder.get("cases") and recorder["label"].split(" ", 1)[0].isupper():  # "GET /path", not
                operations.add(recorder["label"])                                        # "Stateful tests"
            for case_id in recorder.get("interactions", {}):
                cases.add(case_id)
            for case_id, checks in recorder.get("checks", {}).items():
                for check in checks:
                    if check["status"] == "failure":
                        failed.setdefault(check["name"], set()).add(case_id)
    schema = set().union(*(failed.get(name, set()) for name in SCHEMA_CHECKS))
    other = set().union(*(ids for name, ids in failed.items()
                          if name not in SCHEMA_CHECKS and name != "not_a_server_error"))
    return {"cases": len(cases), "server_errors": len(failed.get("not_a_server_error", ())),
            "schema_violations": len(schema), "other_failures": len(other), "errors": errors,
            "operations": sorted(operations), "failed_checks": {k: len(v) for k, v in sorted(failed.items())}}


def fuzz(kind: str, **options: Any) -> dict[str, Any]:
    """One schemathesis run against a fresh server on a fresh ``kind`` database; the summary dict."""
    with tempfile.TemporaryDirectory(prefix="swtune-fuzz-") as tmp, fresh_database(kind, Path(tmp)) as url:
        return {**fuzz_url(url, **options), "backend": kind}


def fuzz_url(url: str, *, seed_value: int = 1, max_examples: int = 50, max_time: float = 90.0, workers: int = 1,
             out: Path | None = None) -> dict[str, Any]:
    """Seed the migrated database at ``url``, serve it, run `st run` on it; the summary dict."""
    import subprocess

    from service.embedded import spawn_server

    with tempfile.TemporaryDirectory(prefix="swtune-fuzz-") as tmp:
        token = seed(url)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SWTUNE_DATABASE_URL": url, "SWTUNE_AUTH_ENABLED": "true",
               "SWTUNE_DRIVER_ENABLED": "false", "SWTUNE_RATE_LIMIT_PER_SECOND": "0",
               # a generated wait_seconds must not outlast the request timeout below
               "SWTUNE_LONG_POLL_MAX_SECONDS": "0.5"}
        proc, base = spawn_server(env, ROOT, "--no-access-log")
        report = Path(tmp) / "events.ndjson"
        config = Path(tmp) / "schemathesis.toml"
        # An oversized invalid body is refused with 413 before it is read: a rejection like 422.
        config.write_text('[checks.negative_data_rejection]\nexpected-statuses = ["400", "401", "403", "404", '
                          '"405", "406", "409", "413", "415", "422", "428", "429", "5xx"]\n')
        st = Path(sys.executable).with_name("st")
        cmd = [str(st), "--config-file", str(config), "run", f"{base}/openapi.json",
               "-H", f"Authorization: Bearer {token}",
               "--checks", "all", "--exclude-checks", ",".join(EXCLUDED_CHECKS),
               "--seed", str(seed_value), "-n", str(max_examples), "--phases", PHASES,
               "--max-time", str(int(max_time)), "-w", str(workers), "--generation-database", "none",
               "--report", "ndjson", "--report-ndjson-path", str(report), "--no-color", "--request-timeout", "20"]
        st_env = {**os.environ, "SCHEMATHESIS_HOOKS": "fuzz",
                  "PYTHONPATH": os.pathsep.join([str(ROOT / "benchmarks"), str(ROOT)])}
        started = time.monotonic()
        try:
            done = subprocess.run(cmd, env=st_env, cwd=tmp, capture_output=True, text=True, check=False,
                                  timeout=max_time + 120)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        summary = summarise(report) if report.exists() else {"cases": 0, "server_errors": -1,
                                                              "schema_violations": -1, "errors": -1}
        summary.update(seed=seed_value, seconds=round(time.monotonic() - started, 1), st_exit_code=done.returncode)
        if out is not None:
            out.write_text(done.stdout + done.stderr)
        if any(summary.get(k) for k in ("server_errors", "schema_violations", "errors", "other_failures")):
            summary["st_output_tail"] = (done.stdout + done.stderr)[-6000:]
        return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="sqlite,postgresql" if os.environ.get("SWTUNE_DATABASE_URL") else "sqlite")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-examples", type=int, default=400, help="cases per operation and phase")
    ap.add_argument("--max-time", type=float, default=300.0, help="seconds per backend")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    runs = []
    for kind in args.backends.split(","):
        summary = fuzz(kind, seed_value=args.seed, max_examples=args.max_examples, max_time=args.max_time,
                       workers=args.workers)
        print(json.dumps({k: v for k, v in summary.items() if k != "st_output_tail"}), flush=True)
        if "st_output_tail" in summary:
            print(summary["st_output_tail"], file=sys.stderr)
        runs.append(summary)
    print(json.dumps({"cases": sum(r["cases"] for r in runs),
                      "server_errors": sum(r["server_errors"] for r in runs),
                      "schema_violations": sum(r["schema_violations"] for r in runs),
                      "other_failures": sum(r.get("other_failures", 0) for r in runs),
                      "backends": [r["backend"] for r in runs], "seed": args.seed,
                      "operations": len(runs[0].get("operations", [])) if runs else 0,
                      "seconds": round(sum(r["seconds"] for r in runs), 1)}))


if __name__ == "__main__":
    main()
