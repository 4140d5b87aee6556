"""HTTP client of the swtune API (httpx only: usable on a Sunway login node without the server stack).

Transport errors and retryable statuses (429, 502, 503, 504) are retried with exponential backoff
and jitter; every write the client retries is idempotent on the server (a result posted twice is
stored once), so a retry after a lost response is safe.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote

import httpx

RETRY_STATUSES = frozenset({429, 502, 503, 504})
# A submission is validated whole on the server (every workload's space is built: 13 s for a CNN
# training step's 112 tasks on a loaded 2-core machine) and cannot be retried safely, so it gets a
# longer timeout than the client's default rather than failing on a slow, correct answer.
SUBMIT_TIMEOUT_S = 300.0


class ServiceError(Exception):
    """An HTTP error answer of the service, with its status code and message."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


class LeaseLostError(ServiceError):
    """409: the lease no longer holds the job(s); drop the work, it is someone else's now."""


class ForbiddenError(ServiceError):
    """403: the token's role may not do this, or the job belongs to another worker."""


class NotFoundError(ServiceError):
    """404."""


_ERRORS = {409: LeaseLostError, 403: ForbiddenError, 404: NotFoundError}


class ServiceClient:
    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0, retries: int = 8,
                 backoff: float = 0.25, max_backoff: float = 20.0, http: httpx.Client | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = http or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout)
        self.http.headers.update(headers)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -----------------------------------------------------------------------------
    def request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None,
                content: bytes | None = None, timeout: float | None = None, retry: bool = True,
                headers: dict[str, str] | None = None) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self.http.request(method, path, json=json, params=params, content=content,
                                             timeout=timeout or self.timeout, headers=headers)
            except httpx.TransportError:
                if not retry or attempt >= self.retries:
                    raise
            else:
                if response.status_code < 400:
                    return response
                if response.status_code not in RETRY_STATUSES or not retry or attempt >= self.retries:
                    raise _error(response)
            delay = min(self.max_backoff, self.backoff * 2 ** attempt) * (0.5 + random.random() / 2)
            time.sleep(delay)
            attempt += 1

    # --- tasks --------------------------------------------------------------------------------
    def submit(self, workloads: list[dict[str, Any]], target: str, trials: int, *, strategy: str | None = None,
               labels: list[str] | None = None, seed: int = 0) -> dict[str, Any]:
        body = {"workloads": workloads, "target": target, "trials": trials, "strategy": strategy,
                "labels": labels, "seed": seed}
        # not retried: a submit whose answer was lost would create the tasks twice
        return self.request("POST", "/api/v1/tasks", json=body, retry=False,
                            timeout=max(self.timeout, SUBMIT_TIMEOUT_S)).json()

    def task(self, task_id: int) -> dict[str, Any]:
        return self.request("GET", f"/api/v1/tasks/{task_id}").json()

    def tasks(self, *, state: str | None = None, batch: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        params = {k: v for k, v in {"state": state, "batch": batch, "limit": limit}.items() if v is not None}
        return self.request("GET", "/api/v1/tasks", params=params).json()

    def cancel(self, task_id: int) -> dict[str, Any]:
        return self.request("POST", f"/api/v1/tasks/{task_id}/cancel").json()

    # --- model submissions --------------------------------------------------------------------
    def submit_model(self, model: str, layers: list[dict[str, Any]], target: str, budget: int, *,
                     per_round: int = 16, early_stop: int | None = None, strategy: str | None = None,
                     seed: int = 0) -> dict[str, Any]:
        """One submission for a whole model: ``layers`` are {"name", "workload", "calls"}, ``budget``
        the one trial budget the driver spreads over them. Returns the submission (its ``id``, its
        tasks, and ``warnings``, e.g. a budget too small for every task)."""
        body = {"model": model, "layers": layers, "target": target, "budget": budget, "per_round": per_round,
                "early_stop": early_stop, "strategy": strategy, "seed": seed}
        # not retried: a submit whose answer was lost would create the submission twice
        return self.request("POST", "/api/v1/submissions", json=body, retry=False,
                            timeout=max(self.timeout, SUBMIT_TIMEOUT_S)).json()

    def submission(self, submission_id: str) -> dict[str, Any]:
        """A submission's report: per-layer table with call counts, end-to-end estimate, speedup."""
        return self.request("GET", f"/api/v1/submissions/{submission_id}").json()

    def submissions(self, *, limit: int = 100) -> list[dict[str, Any]]:
        return self.request("GET", "/api/v1/submissions", params={"limit": limit}).json()

    # --- workers ------------------------------------------------------------------------------
    def lease(self, worker: str, target: str, max_jobs: int = 8, wait_seconds: float = 0.0,
              backend: str = "") -> dict[str, Any]:
        body = {"worker": worker, "target": target, "max_jobs": max_jobs, "wait_seconds": wait_seconds,
                "backend": backend}
        return self.request("POST", "/api/v1/jobs/lease", json=body, timeout=self.timeout + wait_seconds).json()

    def heartbeat(self, lease_token: str, worker: str) -> dict[str, Any]:
        return self.request("POST", "/api/v1/jobs/heartbeat",
                            json={"lease_token": lease_token, "worker": worker}).json()

    def release(self, lease_token: str, worker: str, job_ids: list[int] | None = None) -> list[int]:
        body = {"lease_token": lease_token, "worker": worker, "job_ids": job_ids}
        return self.request("POST", "/api/v1/jobs/release", json=body).json()["released"]

    def post_result(self, job_id: int, lease_token: str, worker: str, result: dict[str, Any]) -> dict[str, Any]:
        body = {**result, "lease_token": lease_token, "worker": worker}
        return self.request("POST", f"/api/v1/jobs/{job_id}/result", json=body).json()

    def post_results(self, lease_token: str, worker: str, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        body = {"lease_token": lease_token, "worker": worker, "results": results}
        return self.request("POST", "/api/v1/jobs/results", json=body).json()["results"]

    # --- lookup and records -------------------------------------------------------------------
    def best(self, workload_key: str, target: str) -> dict[str, Any] | None:
        """The best config, or None when nothing is tuned for this workload and target."""
        try:
            return self.request("GET", "/api/v1/schedules/best",
                                params={"workload_key": workload_key, "target": target}).json()
        except NotFoundError:
            return None

    def best_batch(self, workload_keys: list[str], target: str) -> dict[str, Any]:
        return self.request("POST", "/api/v1/schedules/best/batch",
                            json={"workload_keys": workload_keys, "target": target}).json()

    def export_records(self, *, target: str | None = None, workload_key: str | None = None) -> Iterator[str]:
        params = {k: v for k, v in {"target": target, "workload_key": workload_key}.items() if v}
        with self.http.stream("GET", "/api/v1/records/export", params=params) as response:
            if response.status_code >= 400:
                response.read()
                raise _error(response)
            yield from (line + "\n" for line in response.iter_lines() if line)

    def import_records(self, lines: Iterable[str]) -> dict[str, Any]:
        data = "".join(line if line.endswith("\n") else line + "\n" for line in lines).encode()
        return self.request("POST", "/api/v1/records/import", content=data,
                            headers={"Content-Type": "application/x-ndjson"}).json()

    # --- simulator profiles --------------------------------------------------------------------
    def get_profile(self, target: str) -> dict[str, Any]:
        """The target's active simulator profile (``active``, its document; ``active_version``) and the
        stored versions (``versions``)."""
        return self.request("GET", f"/api/v1/profiles/{quote(target, safe='')}").json()

    def post_profile(self, document: dict[str, Any], *, activate: bool = True) -> dict[str, Any]:
        """Store a profile document (admin token) as its target's next version; returns ``version``,
        ``active`` and the stored ``profile``. Not retried: a lost answer would store it twice."""
        return self.request("POST", "/api/v1/profiles", json=document, params={"activate": activate},
                            retry=False).json()

    def activate_profile(self, target: str, version: int) -> dict[str, Any]:
        """Make a stored version (0: the built-in profile) the one simulator workers measure with (admin)."""
        return self.request("POST", f"/api/v1/profiles/{quote(target, safe='')}/{int(version)}/activate").json()

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/health", retry=False).json()


def _error(response: httpx.Response) -> ServiceError:
    try:
        detail = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    if isinstance(detail, list):  # a 422: one {loc, msg, type} per problem
        detail = "; ".join(f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}"
                           if isinstance(d, dict) else str(d) for d in detail)
    return _ERRORS.get(response.status_code, ServiceError)(response.status_code, str(detail))
