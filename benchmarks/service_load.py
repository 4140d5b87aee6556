"""Service load figures on PostgreSQL: lookup latency, result ingestion, and worker loss.

    SWTUNE_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test python benchmarks/service_load.py

Everything runs on 127.0.0.1 in a fresh schema of that database (dropped at the end). Phases, each
with a hard deadline:
  1. lookup:  GET /api/v1/schedules/best at a fixed 500 requests/s for 30 s (open loop, so a slow
     answer cannot slow the offered load down); client-side latency percentiles.
  2. ingest:  16 concurrent workers lease 32 jobs and post their 32 results, for 15 s; results
     stored per second.
  3. loss:    16 real worker processes (simulator backend) measure 1200 jobs; half of them are
     killed with SIGKILL mid-run; the rest finish. Lost jobs (not done, or done without a
     measurement) and duplicate measurements are counted.
Last line: one JSON object (lookup_p99_ms, results_per_s, lost_jobs, duplicate_measurements, ...).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

import _common  # noqa: F401  (sets the import path)
import httpx
import numpy as np
from _common import ROOT, emit
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

from db import jobs as jobs_db
from db import migrate
from db import tasks as tasks_db
from db import tokens as tokens_db
from db.engine import Database, normalize_url
from db.orm import JobRow, MeasurementRow
from db.refs import insert_ignore, target_id, workload_id
from service.embedded import spawn_server
from tuner.space.factory import space_for
from tuner.space.space import config_hash
from tuner.workloads import Dense

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
TARGET = "sw26010"


# --- setup ------------------------------------------------------------------------------------
def fresh_schema(base: str) -> tuple[str, str]:
    schema = f"swtune_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    return schema, url.render_as_string(hide_password=False)


def drop_schema(base: str, schema: str) -> None:
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    admin.dispose()


def seed_lookups(db: Database, n_workloads: int, per_workload: int) -> list[str]:
    """Measurements for ``n_workloads`` dense workloads, so lookups have real rows to rank."""
    rng = np.random.default_rng(0)
    keys = []
    with db.session() as s:
        tid = target_id(s, TARGET)
        for i in range(n_workloads):
            wl = Dense(1, 256 * (1 + i % 8), 512 * (1 + i // 8), "float32")
            keys.append(wl.key)
            wid = workload_id(s, wl)
            space = space_for(wl, TARGET)
            rows = []
            for row in space.sample(per_workload, rng):
                cfg = space.decode(row)
                t = float(rng.uniform(1e-4, 1e-2))
                rows.append(dict(workload_id=wid, target_id=tid, config_hash=config_hash(cfg), config=cfg,
                                 times=[t], mean_time=t, status="ok", error="", worker="seed", source="simulator",
                                 details={}))
            s.execute(insert_ignore(s, MeasurementRow).values(rows))
    return keys


def enqueue_jobs(db: Database, n: int, seed: int) -> int:
    """A task with ``n`` pending jobs of valid configs (as the driver would queue them)."""
    wl = Dense(1, 4096, 4096 + 64 * seed, "float32")
    space = space_for(wl, TARGET)
    configs = [space.decode(r) for r in space.sample(n, np.random.default_rng(seed))]
    with db.session() as s:
        task = tasks_db.create_tasks(s, [wl], TARGET, n, "random")[0]
        spec = next(t for t in tasks_db.active_tasks(s) if t.id == task.id)
        queued = jobs_db.enqueue(s, task.id, spec.workload_id, spec.target_id, configs, max_attempts=5)
    return len(queued)


def start_server(url: str, lease_seconds: float) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWTUNE_DATABASE_URL": url, "SWTUNE_AUTH_ENABLED": "true",
           "SWTUNE_DRIVER_ENABLED": "false", "SWTUNE_LEASE_SECONDS": str(lease_seconds)}
    return spawn_server(env, ROOT, "--no-access-log")


# --- phase 1: lookups -------------------------------------------------------------------------
# The load comes from client processes with one thread and one keep-alive connection each, speaking
# minimal HTTP/1.1 over a raw socket: on a 2-core machine an httpx client spends more CPU per request
# than the server does, and the load generator must not be what is measured. (httpx's async pool
# also degrades badly with thousands of queued requests.)
class _RawHttp:
    """GET over one keep-alive connection; returns (status, body)."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.addr = (host, port)
        self.head = f"Host: {host}:{port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
        self.sock: socket.socket | None = None
        self.buf = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.addr, timeout=5.0)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        return sock

    def get(self, target: str) -> tuple[int, bytes]:
        if self.sock is None:
            self.sock = self._connect()
        try:
            self.sock.sendall(f"GET {target} HTTP/1.1\r\n".encode() + self.head)
            while b"\r\n\r\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                self.buf += chunk
            header, _, rest = self.buf.partition(b"\r\n\r\n")
            status = int(header[9:12])
            length = 0
            for line in header.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                rest += chunk
            body, self.buf = rest[:length], rest[length:]
            return status, body
        except (OSError, ValueError):
            self.sock.close()
            self.sock = None
            raise


def _lookup_client(base: str, token: str, keys: list[str], rate: float, seconds: float, deadline_s: float,
                   threads: int, seed: int) -> tuple[list[float], int, float]:
    import threading
    from urllib.parse import urlencode, urlsplit

    host, port = urlsplit(base).hostname or "127.0.0.1", urlsplit(base).port or 80
    targets = [f"/api/v1/schedules/best?{urlencode({'workload_key': k, 'target': TARGET})}" for k in keys]
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    t0 = time.perf_counter() + 0.5
    end = time.perf_counter() + deadline_s

    def run(k: int) -> None:
        rng = random.Random(seed * 100 + k)
        conn = _RawHttp(host, port, token)
        mine, errs = [], 0
        i = k
        while i < rate * seconds and time.perf_counter() < end:
            at = t0 + i / rate  # open loop: request i is due at t0 + i/rate, whatever came before
            delay = at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            start = time.perf_counter()
            try:
                ok = conn.get(rng.choice(targets))[0] == 200
            except (OSError, ValueError):
                ok = False
            if ok:
                mine.append(time.perf_counter() - start)
            else:
                errs += 1
            i += threads
        with lock:
            latencies.extend(mine)
            errors[0] += errs

    pool = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return latencies, errors[0], time.perf_counter() - t0


def lookup_phase(base: str, token: str, keys: list[str], rate: float, seconds: float, deadline_s: float,
                 processes: int = 2, threads: int = 8) -> dict[str, Any]:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with ctx.Pool(processes) as pool:
        parts = pool.starmap(_lookup_client, [(base, token, keys, rate / processes, seconds, deadline_s, threads, p)
                                              for p in range(processes)])
    lat = sorted(x for part in parts for x in part[0])
    errors = sum(part[1] for part in parts)
    elapsed = max(part[2] for part in parts)
    q = statistics.quantiles(lat, n=1000) if len(lat) > 10 else [float("nan")] * 999
    return {"lookup_requests": len(lat) + errors, "lookup_errors": errors,
            "lookup_rate_achieved": round((len(lat) + errors) / elapsed, 1),
            "lookup_p50_ms": round(q[499] * 1e3, 3), "lookup_p99_ms": round(q[989] * 1e3, 3),
            "lookup_max_ms": round(lat[-1] * 1e3, 3) if lat else None}


# --- phase 2: ingestion -----------------------------------------------------------------------
def ingest_phase(base: str, token: str, workers: int, batch: int, seconds: float, deadline_s: float
                 ) -> dict[str, Any]:
    """``workers`` threads, each a worker with its own connection: lease a batch, post its results."""
    import threading

    stored = [0]
    posts = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + min(seconds, deadline_s)

    def worker(i: int) -> None:
        name = f"ingest-{i}"
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30.0) as c:
            while time.monotonic() < stop_at:
                lease = c.post("/api/v1/jobs/lease", json={"worker": name, "target": TARGET, "max_jobs": batch}).json()
                if not lease["jobs"]:
                    return
                results = [{"job_id": j["id"], "status": "ok", "times": [1e-3, 1.01e-3], "source": "simulator"}
                           for j in lease["jobs"]]
                r = c.post("/api/v1/jobs/results", json={"lease_token": lease["lease_token"], "worker": name,
                                                          "results": results})
                n = sum(1 for o in r.json()["results"] if o["outcome"] == "stored")
                with lock:
                    posts[0] += 1
                    stored[0] += n

    t0 = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(deadline_s + 30)
    elapsed = time.perf_counter() - t0
    return {"results_per_s": round(stored[0] / elapsed, 1), "results_stored": stored[0], "result_posts": posts[0],
            "ingest_seconds": round(elapsed, 2)}


# --- phase 3: killing workers -----------------------------------------------------------------
def loss_phase(db: Database, base: str, token: str, n_jobs: int, n_workers: int, deadline: float) -> dict[str, Any]:
    with db.session() as s:
        before_jobs = set(s.scalars(select(JobRow.id)).all())
    enqueue_jobs(db, n_jobs, seed=99)
    with db.session() as s:
        phase_jobs = [j for j in s.scalars(select(JobRow.id)).all() if j not in before_jobs]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWTUNE_TOKEN": token}  # never in argv (`ps`)
    cmd = [sys.executable, "-m", "cli", "worker", "--server", base, "--target", TARGET, "--backend", "simulator",
           "--jobs-per-lease", "8", "--wait", "1", "--latency", "0.02", "--log-level", "ERROR"]
    procs = [subprocess.Popen(cmd + ["--name", f"loss-{i}"], cwd=ROOT, env=env) for i in range(n_workers)]

    def done_count() -> int:
        with db.session() as s:
            return s.scalar(select(func.count()).select_from(JobRow).where(JobRow.id.in_(phase_jobs),
                                                                           JobRow.state == "done")) or 0

    killed = 0
    try:
        while time.monotonic() < deadline and done_count() < n_jobs // 3:
            time.sleep(0.2)
        for p in procs[: n_workers // 2]:
            p.send_signal(signal.SIGKILL)
            killed += 1
        while time.monotonic() < deadline and done_count() < n_jobs:
            time.sleep(0.25)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
    with db.session() as s:
        not_done = s.scalar(select(func.count()).select_from(JobRow).where(JobRow.id.in_(phase_jobs),
                                                                           JobRow.state != "done")) or 0
        done_ids = s.scalars(select(JobRow.id).where(JobRow.id.in_(phase_jobs), JobRow.state == "done")).all()
        with_meas = s.scalar(select(func.count(func.distinct(MeasurementRow.job_id)))
                             .where(MeasurementRow.job_id.in_(done_ids))) or 0
        n_meas = s.scalar(select(func.count()).select_from(MeasurementRow)) or 0
        distinct = s.scalar(select(func.count()).select_from(
            select(MeasurementRow.workload_id, MeasurementRow.target_id, MeasurementRow.config_hash)
            .distinct().subquery())) or 0
        retried = s.scalar(select(func.count()).select_from(JobRow).where(JobRow.id.in_(phase_jobs),
                                                                          JobRow.attempts > 1)) or 0
    return {"lost_jobs": not_done + (len(done_ids) - with_meas), "duplicate_measurements": n_meas - distinct,
            "loss_jobs": n_jobs, "workers_killed": killed, "jobs_retried_after_kill": retried}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=500.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--ingest-seconds", type=float, default=15.0)
    p.add_argument("--ingest-workers", type=int, default=16)
    p.add_argument("--loss-jobs", type=int, default=1200)
    p.add_argument("--loss-workers", type=int, default=16)
    p.add_argument("--keep", action="store_true", help="keep the benchmark schema")
    a = p.parse_args()

    base = normalize_url(os.environ.get("SWTUNE_DATABASE_URL") or DEFAULT_URL)
    if not base.startswith("postgresql"):
        sys.exit("service_load.py measures the PostgreSQL deployment: set SWTUNE_DATABASE_URL=postgresql://...")
    schema, url = fresh_schema(base)
    figures: dict[str, Any] = {"database": "postgresql", "schema": schema}
    server = None
    try:
        migrate.upgrade(url)
        db = Database(url)
        with db.session() as s:
            read_token = tokens_db.create_token(s, "read", "bench")[1]
            worker_token = tokens_db.create_token(s, "worker", "bench")[1]
        keys = seed_lookups(db, 40, 50)
        ingest_jobs = int(a.ingest_seconds * 2000)  # more than can be ingested: the phase ends on time
        enqueue_jobs(db, ingest_jobs, seed=1)
        server, base_url = start_server(url, lease_seconds=3.0)
        print(f"server {base_url}, schema {schema}: 40 workloads x 50 measurements, {ingest_jobs} jobs queued")

        figures.update(lookup_phase(base_url, read_token, keys, a.rate, a.seconds, deadline_s=a.seconds + 15))
        print(f"lookup: {figures['lookup_requests']} requests at {figures['lookup_rate_achieved']}/s, "
              f"p50 {figures['lookup_p50_ms']} ms, p99 {figures['lookup_p99_ms']} ms, "
              f"errors {figures['lookup_errors']}")

        figures.update(ingest_phase(base_url, worker_token, a.ingest_workers, 32, a.ingest_seconds,
                                    deadline_s=a.ingest_seconds + 15))
        print(f"ingest: {figures['results_stored']} results in {figures['ingest_seconds']} s = "
              f"{figures['results_per_s']}/s from {a.ingest_workers} workers")

        with db.session() as s:  # the loss phase starts from an empty queue
            s.execute(JobRow.__table__.delete().where(JobRow.state == "pending"))
        figures.update(loss_phase(db, base_url, worker_token, a.loss_jobs, a.loss_workers,
                                  deadline=time.monotonic() + 120))
        print(f"loss: {figures['workers_killed']} of {a.loss_workers} workers killed, "
              f"{figures['jobs_retried_after_kill']} jobs retried, lost {figures['lost_jobs']}, "
              f"duplicates {figures['duplicate_measurements']}")
        db.dispose()
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
        if not a.keep:
            drop_schema(base, schema)
    emit(figures)


if __name__ == "__main__":
    main()
