"""A live swtune service for end-to-end tests: a uvicorn server process on a free loopback port and
simulator worker processes, with tokens, stopped (SIGTERM, then SIGKILL) however the test ends."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from processes import stop

from db import tokens as tokens_db
from db.engine import Database
from service.embedded import spawn_server

REPO = Path(__file__).resolve().parents[2]


def service_env(url: str, lease_seconds: float = 5.0) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "SWTUNE_DATABASE_URL": url, "SWTUNE_AUTH_ENABLED": "true", "SWTUNE_LEASE_SECONDS": str(lease_seconds),
            "SWTUNE_QUEUE_DEPTH": "8", "SWTUNE_DRIVER_INTERVAL_SECONDS": "0.1"}


@dataclass
class LiveService:
    base: str
    submit_token: str
    db: Database


@contextmanager
def live_service(url: str, workers: int = 2, target: str = "sw26010") -> Iterator[LiveService]:
    """A server on the tuning log ``url`` with ``workers`` simulator workers."""
    db = Database(url)
    with db.session() as s:
        submit_token = tokens_db.create_token(s, "submit", "e2e")[1]
        worker_token = tokens_db.create_token(s, "worker", "e2e-workers")[1]
    server, base = spawn_server(service_env(url), REPO)
    # the token travels in the environment, never in argv (where `ps` shows it)
    procs = [subprocess.Popen([sys.executable, "-m", "cli", "worker", "--server", base, "--target", target,
                               "--backend", "simulator", "--jobs-per-lease", "4", "--wait", "2",
                               "--name", f"e2e-w{i}", "--log-level", "WARNING"],
                              cwd=REPO, env={**service_env(url), "SWTUNE_TOKEN": worker_token})
             for i in range(workers)]
    try:
        yield LiveService(base, submit_token, db)
    finally:
        for proc in procs:
            stop(proc)
        stop(server)
        db.dispose()
