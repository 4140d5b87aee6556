"""Faults over real HTTP, kept as tests: a worker stopped with SIGSTOP (and continued after its
leases were reclaimed), the API server killed with SIGKILL and restarted, and (PostgreSQL) every
database connection of the server dropped mid-run. A SIGKILLed worker is covered by
tests/e2e/test_service_e2e.py.

A database outage is tested two ways. Always: the server's backends are terminated
(pg_terminate_backend), which the server sees as a restart (every pooled connection dies). And where
the run owns the machine's PostgreSQL (`SWTUNE_TEST_PG_RESTART=1`, which `.ci/run` sets when it runs
as root with `pg_ctlcluster`): the cluster itself is restarted mid-run, so for a few seconds no
connection can be made at all.

After each fault: every task finishes with its whole budget, no job is lost, no measurement is
stored twice, and the lookup answers the minimum of the measurements table.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from processes import stop
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

from db import tokens as tokens_db
from db.engine import Database
from db.orm import JobRow, MeasurementRow, WorkloadRow
from service.client import ServiceClient
from service.embedded import spawn_server

REPO = Path(__file__).resolve().parents[2]
TRIALS = 10
LEASE_SECONDS = 2.0
WORKLOADS = [{"op": "dense", "m": 16, "n": 64, "k": 128}, {"op": "dense", "m": 32, "n": 64, "k": 64}]


def _env(url: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "SWTUNE_DATABASE_URL": url, "SWTUNE_AUTH_ENABLED": "true", "SWTUNE_LEASE_SECONDS": str(LEASE_SECONDS),
            "SWTUNE_QUEUE_DEPTH": "4", "SWTUNE_DRIVER_INTERVAL_SECONDS": "0.1", "SWTUNE_DEFAULT_STRATEGY": "random"}


def _restart_server(url: str, base: str) -> subprocess.Popen[bytes]:
    """The server again, on the same port (the workers keep their URL)."""
    port = base.rsplit(":", 1)[1]
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory", "--host",
                             "127.0.0.1", "--port", port, "--log-level", "warning"], cwd=REPO, env=_env(url))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/ready", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("restarted server did not become ready")


def _worker(base: str, url: str, token_file: Path, name: str, latency: float) -> subprocess.Popen[bytes]:
    # the token comes from a file: nothing secret in argv
    return subprocess.Popen([sys.executable, "-m", "cli", "worker", "--server", base, "--target", "sw26010",
                             "--backend", "simulator", "--token-file", str(token_file), "--jobs-per-lease", "2",
                             "--wait", "1", "--name", name, "--latency", str(latency), "--log-level", "ERROR"],
                            cwd=REPO, env=_env(url))


def _held(db: Database, worker: str) -> set[int]:
    with db.session() as s:
        return set(s.scalars(select(JobRow.id).where(JobRow.worker == worker, JobRow.state == "leased")).all())


def _wait(cond: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _run(url: str, tmp_path: Path, fault: str) -> None:
    db = Database(url)
    with db.session() as s:
        submit_token = tokens_db.create_token(s, "submit", "faults")[1]
        token_file = tmp_path / "worker.token"
        token_file.write_text(tokens_db.create_token(s, "worker", "fault-workers")[1] + "\n")
    server, base = spawn_server(_env(url), REPO)
    workers: dict[str, subprocess.Popen[bytes]] = {}
    try:
        # w0 is slow, so whenever the fault strikes it is holding leases
        workers["f-w0"] = _worker(base, url, token_file, "f-w0", latency=0.4)
        workers["f-w1"] = _worker(base, url, token_file, "f-w1", latency=0.02)
        client = ServiceClient(base, submit_token, backoff=0.1, max_backoff=1.0, retries=30)
        submitted = client.submit(WORKLOADS, "sw26010", TRIALS)

        def progress() -> int:
            return sum(t["trials_done"] for t in client.tasks(batch=submitted["batch"]))

        _wait(lambda: progress() >= 4 and bool(_held(db, "f-w0")), 60, "progress with leases held by f-w0")
        if fault == "sigstop":
            held = _held(db, "f-w0")
            workers["f-w0"].send_signal(signal.SIGSTOP)
            # its leases expire and are measured by the other worker ...
            _wait(lambda: not (held & _held(db, "f-w0")), 30, "the stopped worker's leases to be reclaimed")
            time.sleep(LEASE_SECONDS)
            workers["f-w0"].send_signal(signal.SIGCONT)  # ... and its late posts are refused, not stored twice
        elif fault == "server_kill":
            server.send_signal(signal.SIGKILL)
            server.wait(10)
            time.sleep(1.0)  # workers see refused connections and retry
            server = _restart_server(url, base)
        elif fault == "db_drop":
            app_name = make_url(url).query.get("application_name")
            admin = create_engine(make_url(url).set(query={}))
            for _ in range(2):
                with admin.begin() as conn:
                    dropped = conn.execute(text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                                "WHERE application_name = :a AND pid <> pg_backend_pid()"),
                                           {"a": app_name}).scalar()
                assert dropped, "no server connection was dropped: the fault proved nothing"
                time.sleep(1.0)
            admin.dispose()

        elif fault == "db_restart":
            _restart_postgres()

        _wait(lambda: all(t["state"] == "done" for t in client.tasks(batch=submitted["batch"])), 150,
              "every task to finish")
        tasks = client.tasks(batch=submitted["batch"])
        for t in tasks:
            assert t["trials_done"] == TRIALS and t["pending"] == t["leased"] == 0, t
        with db.session() as s:
            n_jobs = s.scalar(select(func.count()).select_from(JobRow))
            n_done = s.scalar(select(func.count()).select_from(JobRow).where(JobRow.state == "done"))
            n_failed = s.scalar(select(func.count()).select_from(JobRow).where(JobRow.state == "failed"))
            n_meas = s.scalar(select(func.count()).select_from(MeasurementRow))
            distinct = s.scalar(select(func.count()).select_from(
                select(MeasurementRow.workload_id, MeasurementRow.target_id, MeasurementRow.config_hash)
                .distinct().subquery()))
            best_in_table = {}
            for t in tasks:
                best_in_table[t["workload_key"]] = s.execute(
                    select(MeasurementRow.mean_time, MeasurementRow.config_hash)
                    .join(WorkloadRow, WorkloadRow.id == MeasurementRow.workload_id)
                    .where(WorkloadRow.key == t["workload_key"], MeasurementRow.status == "ok")
                    .order_by(MeasurementRow.mean_time, MeasurementRow.id).limit(1)).first()
        # nothing lost (every job done and measured once), nothing twice
        assert n_jobs == n_done + n_failed == len(WORKLOADS) * TRIALS
        assert n_meas == distinct == n_done
        for key, row in best_in_table.items():
            found = client.best(key, "sw26010")
            assert found is not None and (found["mean_time"], found["config_hash"]) == tuple(row)
    finally:
        for proc in workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
        stop(server)
        db.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["sigstop", "server_kill"])
def test_faults_lose_nothing_and_count_nothing_twice(backend_url: str, tmp_path: Path, fault: str) -> None:
    _run(backend_url, tmp_path, fault)


@pytest.mark.slow
def test_dropped_database_connections_lose_nothing(backend_kind: str, backend_url: str, tmp_path: Path) -> None:
    if backend_kind != "postgresql":
        pytest.skip("connections to drop exist on PostgreSQL only (SQLite is a file)")
    url = make_url(backend_url).update_query_dict(
        {"application_name": f"swtune_fault_{uuid.uuid4().hex[:8]}"}).render_as_string(hide_password=False)
    _run(url, tmp_path, "db_drop")


def _restart_postgres() -> None:
    """Restart the local PostgreSQL cluster (stop + start) and wait until it accepts connections."""
    version = sorted(os.listdir("/etc/postgresql"))[0]
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
                   check=True, timeout=120, capture_output=True)
    _wait(lambda: subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"]).returncode == 0, 60,
          "PostgreSQL to accept connections again")


@pytest.mark.owns_machine  # every other test's PostgreSQL connections drop too: .ci/run runs it alone
def test_a_database_restart_loses_nothing(backend_kind: str, backend_url: str, tmp_path: Path) -> None:
    if backend_kind != "postgresql":
        pytest.skip("a database server to restart exists on PostgreSQL only (SQLite is a file)")
    if os.environ.get("SWTUNE_TEST_PG_RESTART") != "1" or shutil.which("pg_ctlcluster") is None:
        pytest.skip("restarting PostgreSQL needs SWTUNE_TEST_PG_RESTART=1 and pg_ctlcluster (set by .ci/run as root)")
    _run(backend_url, tmp_path, "db_restart")
