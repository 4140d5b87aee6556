"""The service on this machine: the API in this process (a uvicorn thread on a free loopback port),
its tuning driver, and simulator worker processes -- started together, stopped together.

``embedded_service(db_url, workers=N)`` is what ``swtune demo``, ``swtune tune-model`` (without
``--server``) and the tests run; ``spawn_server`` starts the API as a child process instead, for the
tests that kill and restart it. Its workers are ``swtune worker`` processes like any other: each lease
hands them the target's active simulator profile of the log at ``db_url``, which they measure with.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

REPO = Path(__file__).resolve().parents[1]

# an embedded service serves one user on loopback: short leases (a stopped worker's jobs come back
# soon), a shallow queue (the search sees results sooner), a fast driver, no lookup cache
EMBEDDED_SETTINGS: dict[str, Any] = dict(auth_enabled=False, lease_seconds=30, queue_depth=16,
                                         driver_interval_seconds=0.2, lookup_cache_seconds=0)


class EmbeddedServer:
    """``with EmbeddedServer(app) as server: server.url`` -- started on enter, stopped on exit."""

    def __init__(self, app: Any, host: str = "127.0.0.1", log_level: str = "warning") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))  # port 0: the OS picks a free port; the bound socket is handed over
        self.host, self.port = self.sock.getsockname()[:2]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="swtune-api", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> EmbeddedServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the embedded API server did not start")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        if self.thread.ident is not None:  # started
            self.thread.join(timeout)
        self.sock.close()

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def spawn_server(env: dict[str, str], cwd: str | Path, *extra_args: str, ready_timeout: float = 30.0
                 ) -> tuple[subprocess.Popen[bytes], str]:
    """Start `uvicorn service.app:create_app` as a child process on a free loopback port; wait until
    /ready answers. Returns (process, base URL). ``env`` carries the SWTUNE_ settings."""
    import httpx

    # uvicorn's --fd treats the socket as AF_UNIX and so never sets TCP_NODELAY (40 ms stalls from
    # Nagle + delayed ACK): ask the kernel for a free port and let uvicorn bind it instead.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory",
                             "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", *extra_args],
                            cwd=str(cwd), env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/ready", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not become ready")


def start_workers(url: str, n: int, target: str, *, batch: int | None = None, token: str | None = None,
                  extra: Sequence[str] = ()) -> list[subprocess.Popen[bytes]]:
    """``n`` simulator worker processes leasing from ``url``, ``batch`` jobs a lease (default: the
    backend's chunk). The token travels in the environment, never in argv, where ``ps`` shows it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    if token:
        env["SWTUNE_TOKEN"] = token
    cmd = [sys.executable, "-m", "cli", "worker", "--server", url, "--target", target, "--backend", "simulator",
           "--wait", "5", "--log-level", "WARNING", *(["--jobs-per-lease", str(batch)] if batch else []), *extra]
    return [subprocess.Popen(cmd, env=env, cwd=str(REPO)) for _ in range(n)]


def stop_workers(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 15.0) -> None:
    """SIGTERM (a worker hands its leases back and exits), then SIGKILL whatever is still running."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@dataclass
class EmbeddedService:
    """What ``embedded_service`` yields: the API's URL, its app and database, the worker processes."""

    url: str
    app: Any
    database: Any  # db.engine.Database
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def client(self, token: str | None = None) -> Any:
        """A ``service.client.ServiceClient`` of this service (close it, or use it in ``with``)."""
        from service.client import ServiceClient

        return ServiceClient(self.url, token)


@contextlib.contextmanager
def embedded_service(db_url: str, *, workers: int = 0, target: str = "sw26010", migrate: bool = True,
                     worker_token: str | None = None, jobs_per_lease: int = 8, worker_args: Sequence[str] = (),
                     **settings: Any) -> Iterator[EmbeddedService]:
    """The API and its driver on a free loopback port over the tuning log at ``db_url`` (migrated
    first unless ``migrate=False``), and ``workers`` simulator worker processes for ``target``.

    ``settings`` override ``EMBEDDED_SETTINGS`` (e.g. ``auth_enabled=True, driver_enabled=False``).
    With auth on, workers need ``worker_token``. On exit, also on an exception, the workers stop
    first (they hand their leases back through the API), then the API and its driver, then the
    database engine. ``jobs_per_lease`` is 8 by default, half a task's queue (``queue_depth``), so
    two workers share even a single task."""
    from db import migrate as migrations
    from db.engine import Database
    from service.app import create_app
    from service.settings import Settings

    options = {**EMBEDDED_SETTINGS, **settings}
    if workers and options["auth_enabled"] and not worker_token:
        raise ValueError("embedded_service: workers on a service with auth need a worker_token")
    if migrate:
        migrations.upgrade(db_url)
    database = Database(db_url)
    with contextlib.ExitStack() as stack:
        stack.callback(database.dispose)
        app = create_app(Settings(database_url=db_url, **options), db=database)
        server = stack.enter_context(EmbeddedServer(app))
        service = EmbeddedService(server.url, app, database)
        stack.callback(stop_workers, service.workers)  # the list is filled below: stopped before the API
        service.workers += start_workers(server.url, workers, target, batch=jobs_per_lease, token=worker_token,
                                         extra=worker_args)
        yield service
