"""``service.embedded.embedded_service``: API, driver and simulator workers up together, and all of
them down on exit, also when the body raises."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from service.embedded import embedded_service

DENSE = {"op": "dense", "m": 16, "n": 64, "k": 128}


def _down(url: str) -> bool:
    try:
        httpx.get(url + "/health", timeout=2)
    except httpx.TransportError:
        return True
    return False


@pytest.mark.slow
@pytest.mark.parametrize("target", ["sw26010", "sw26010-4cg"])  # one core group, and kernels split over 4
def test_a_task_is_tuned_by_the_embedded_driver_and_workers(tmp_path: Path, target: str) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    with embedded_service(url, workers=1, target=target) as service, service.client() as client:
        created = client.submit([DENSE], target, 4, strategy="random")
        deadline = time.monotonic() + 120
        while client.task(created["task_ids"][0])["state"] == "active":
            assert time.monotonic() < deadline, "the embedded workers measured nothing"
            time.sleep(0.2)
        task = client.task(created["task_ids"][0])
        assert task["state"] == "done" and task["trials_done"] == 4 and task["best_time"] > 0
        best = client.best("dense-m16-n64-k128-float32", target)
        assert best is not None and ("cgs" in best["config"]) == (target != "sw26010")
        workers, url = service.workers, service.url
        assert len(workers) == 1 and workers[0].poll() is None
    assert all(p.poll() is not None for p in workers)  # stopped, not left running
    assert _down(url)


def test_everything_stops_when_the_body_raises(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="from the body"):
        with embedded_service(f"sqlite:///{tmp_path / 'log.db'}", workers=2) as service:
            workers, url = service.workers, service.url
            assert httpx.get(url + "/health", timeout=5).status_code == 200
            raise KeyError("from the body")
    assert len(workers) == 2 and all(p.poll() is not None for p in workers)
    assert _down(url)


def test_workers_on_a_service_with_auth_need_a_token(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="worker_token"):
        with embedded_service(f"sqlite:///{tmp_path / 'log.db'}", workers=1, auth_enabled=True):
            pass
    assert not (tmp_path / "log.db").exists()  # refused before anything was created
