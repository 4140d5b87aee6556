"""Stopping the server and worker processes a test started, however the test ended."""

from __future__ import annotations

import signal
import subprocess


def stop(proc: subprocess.Popen[bytes], seconds: float = 20) -> None:
    """Ask ``proc`` to stop (SIGTERM, which the server and workers handle cleanly), then kill it if it
    has not exited within ``seconds``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
