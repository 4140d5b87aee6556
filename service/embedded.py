"""Run the API server inside the current process (a uvicorn thread on a free loopback port)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn


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
                raise RuntimeError("the embedded API server did not start")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
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
