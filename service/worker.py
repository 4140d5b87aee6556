"""The worker agent: lease jobs over HTTP, measure them, heartbeat, post results, and on SIGTERM
post what is measured, hand the rest back and exit.

It talks to the service through ``service.client`` only (httpx): no db, fastapi, sqlalchemy or
xgboost is imported here, so it runs on a Sunway login node or a bare container. The backend comes
from ``tuner.backends.registry``: ``simulator`` (the calibrated model, source "simulator"),
``emulator`` (generated athread C built with gcc and run on the x86 athread emulator, checked against
numpy, source "emulator") and ``sunway`` (codegen + sw5cc/swgcc + bsub, source "hardware"; see
tuner.backends.sunway). A simulator worker measures with the simulator profile its lease carries (the
target's active one), so its results name that version. The worker uses the MeasureBackend protocol
only: it preflights the backend before leasing, leases one ``chunk`` of jobs by default, measures a
chunk per call, and when the backend raises InfrastructureError (this machine cannot measure) posts
what was measured, hands the other jobs back unblamed and exits with code 2.

    swtune worker --server http://127.0.0.1:8000 --target sw26010 --backend simulator
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import httpx

from service.client import ForbiddenError, LeaseLostError, ServiceClient, ServiceError
from tuner.backends.registry import BackendName, BackendOptions, backend_for
from tuner.errors import UnknownTargetError
from tuner.measure.base import InfrastructureError, MeasureBackend, MeasureResult
from tuner.measure.noise import DEFAULT_NOISE
from tuner.profile import Profile, ProfileError
from tuner.targets import get_target
from tuner.workloads import Workload, workload_from_json

log = logging.getLogger("swtune.worker")


def default_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


def _result_json(job_id: int, m: MeasureResult) -> dict[str, Any]:
    details = json.loads(json.dumps(m.details, default=float))  # numpy scalars -> plain JSON
    return {"job_id": job_id, "status": m.status, "times": list(m.times), "error": m.error,
            "source": m.source, "details": details}


class _Heartbeat(threading.Thread):
    """Extends the lease every ``interval`` seconds while a batch is being measured."""

    def __init__(self, client: ServiceClient, token: str, worker: str, interval: float) -> None:
        super().__init__(name="swtune-heartbeat", daemon=True)
        self.client, self.token, self.worker, self.interval = client, token, worker, interval
        self.lost = threading.Event()
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.interval):
            try:
                self.client.heartbeat(self.token, self.worker)
            except (LeaseLostError, ForbiddenError) as exc:
                if self._done.is_set():
                    return  # raced the final post: the jobs are done, not lost
                log.warning("lease lost while measuring: %s", exc)
                self.lost.set()
                return
            except (ServiceError, httpx.HTTPError) as exc:
                log.warning("heartbeat failed (will retry): %s", exc)

    def stop(self) -> None:
        self._done.set()


class Worker:
    """Leases jobs of ``target`` for ``backend`` (registered under ``backend_name``, which the service
    checks the results' source against); ``batch`` jobs per lease, by default the backend's chunk."""

    def __init__(self, client: ServiceClient, target: str, backend: MeasureBackend, *, name: str | None = None,
                 backend_name: str = BackendName.SIMULATOR, batch: int | None = None, wait_seconds: float = 10.0,
                 max_jobs: int | None = None, idle_exit: float | None = None, latency: float = 0.0,
                 options: BackendOptions | None = None) -> None:
        if backend.chunk < 1 or (batch is not None and batch < 1):
            raise ValueError(f"jobs per lease and the backend's chunk must be positive, got {batch}, {backend.chunk}")
        self.client = client
        self.target = target
        self.backend = backend
        self.backend_name = backend_name
        self.name = name or default_name()
        self.batch = batch if batch is not None else backend.chunk
        self.wait_seconds = wait_seconds
        self.max_jobs = max_jobs
        self.idle_exit = idle_exit
        self.latency = latency  # extra seconds per config: lets tests stop a worker mid-measurement
        # With the options ``backend`` was built from, a simulator worker rebuilds it with the profile each
        # lease names (one backend per profile version, kept: a version's document never changes).
        self.options = options
        self._profiled: dict[int, MeasureBackend] = {}
        # workloads rebuilt from their JSON, by key: an expression workload parses and analyses its
        # TVMScript, and the same workload comes back in every lease of its task
        self._workloads: dict[str, Workload] = {}
        self.stopping = threading.Event()
        self.fatal: str | None = None
        self.counts = {"leased": 0, "posted": 0, "released": 0, "refused": 0}

    def _workload(self, job: dict[str, Any]) -> Workload:
        """The job's workload, built from its JSON once per key (the service's key of that JSON)."""
        key = job["workload_key"]
        if key not in self._workloads:
            if len(self._workloads) >= 256:  # a long-lived worker sees many tasks: keep the recent ones
                del self._workloads[next(iter(self._workloads))]
            self._workloads[key] = workload_from_json(job["workload"])
        return self._workloads[key]

    def stop(self, *_: Any) -> None:
        self.stopping.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)

    def run(self) -> int:
        """Lease and measure until stopped; 0 on a clean stop, 2 when the backend cannot measure,
        3 when the service refuses the token."""
        idle_since = time.monotonic()
        log.info("worker %s: %s backend, target %s", self.name, self.backend_name, self.target)
        while not self.stopping.is_set() and self.fatal is None:
            try:
                lease = self.client.lease(self.name, self.target, self.batch, self.wait_seconds, self.backend_name)
            except ServiceError as exc:
                if exc.status in (401, 403):
                    log.error("the service refuses this worker: %s", exc)
                    return 3
                log.warning("lease failed: %s", exc)
                self.stopping.wait(1.0)
                continue
            except httpx.HTTPError as exc:  # the client already retried with backoff
                log.warning("service unreachable: %s", exc)
                self.stopping.wait(1.0)
                continue
            if not lease["jobs"]:
                if self.idle_exit is not None and time.monotonic() - idle_since > self.idle_exit:
                    log.info("idle for %.0f s: exiting", self.idle_exit)
                    break
                continue
            idle_since = time.monotonic()
            self.counts["leased"] += len(lease["jobs"])
            self._process(lease)
            if self.max_jobs is not None and self.counts["posted"] >= self.max_jobs:
                break
        if self.fatal is not None:
            log.error("%s", self.fatal)
            return 2
        return 0

    def _backend_for(self, lease: dict[str, Any]) -> MeasureBackend | None:
        """The backend to measure this lease's jobs with: the simulator with the target's active profile
        when the lease carries one; None (measure nothing, hand the jobs back, stop) when that profile
        cannot be read here -- a result must never name a profile it was not measured with."""
        document = lease.get("profile")
        if document is None or self.options is None or self.backend_name != BackendName.SIMULATOR:
            return self.backend
        try:
            profile = Profile.from_json(document)
        except (ProfileError, UnknownTargetError) as exc:
            self.fatal = f"the service's simulator profile cannot be read by this worker (upgrade it?): {exc}"
            return None
        if get_target(profile.target).base_name != get_target(self.target).base_name:
            self.fatal = f"the service sent a profile of {profile.target} for a lease of {self.target}"
            return None
        if profile.version not in self._profiled:
            log.info("measuring with simulator profile version %s of %s", profile.version, profile.target)
            self._profiled[profile.version] = backend_for(self.backend_name, self.target,
                                                          replace(self.options, profile=profile))
        return self._profiled[profile.version]

    def _process(self, lease: dict[str, Any]) -> None:
        token = lease["lease_token"]
        pending = {j["id"]: j for j in lease["jobs"]}
        backend = self._backend_for(lease)
        if backend is None:
            self._hand_back(token, pending)
            return
        beat = _Heartbeat(self.client, token, self.name, max(0.5, float(lease["lease_seconds"]) / 3))
        beat.start()
        results: list[dict[str, Any]] = []
        try:
            by_workload: dict[str, list[dict[str, Any]]] = {}
            for job in lease["jobs"]:
                by_workload.setdefault(job["workload_key"], []).append(job)
            chunk = self.backend.chunk
            for jobs in by_workload.values():
                workload = self._workload(jobs[0])
                for start in range(0, len(jobs), chunk):
                    if self.stopping.is_set() or beat.lost.is_set() or self.fatal:
                        break
                    part = jobs[start:start + chunk]
                    if self.latency:
                        time.sleep(self.latency * len(part))
                    # Results come in config order; jobs without one (the backend stopped) stay pending.
                    for job, m in zip(part, self._measure(backend, workload, part)):
                        results.append(_result_json(job["id"], m))
                        pending.pop(job["id"], None)
        finally:
            beat.stop()
            # A heartbeat still in flight would otherwise race the post below and report a lost lease.
            beat.join(timeout=self.client.timeout)
        if results and not beat.lost.is_set():
            self._post(token, results)
        if pending and not beat.lost.is_set():
            self._hand_back(token, pending)

    def _hand_back(self, token: str, pending: dict[int, Any]) -> None:
        try:
            released = self.client.release(token, self.name, list(pending))
            self.counts["released"] += len(released)
        except (ServiceError, httpx.HTTPError) as exc:
            log.warning("could not hand back %d jobs (their lease will expire): %s", len(pending), exc)

    def _measure(self, backend: MeasureBackend, workload: Any, jobs: Sequence[dict[str, Any]]) -> list[MeasureResult]:
        """The results of the jobs' configs, in order. When this machine cannot measure, only those the
        backend completed: the rest are handed back, since no config is to blame, and the worker stops."""
        configs = [j["config"] for j in jobs]
        try:
            measured = backend.measure(workload, self.target, configs)
        except InfrastructureError as exc:
            self.fatal = f"backend {self.backend_name} cannot measure here: {exc}"
            return list(exc.completed)
        except Exception as exc:  # noqa: BLE001 - a backend crash is ours, not the config's: hand back
            log.exception("backend crashed on %s", workload)
            self.fatal = f"backend {self.backend_name} crashed: {exc}"
            return []
        if len(measured) != len(configs):
            self.fatal = f"backend {self.backend_name} returned {len(measured)} results for {len(configs)} configs"
            return []
        return measured

    def _post(self, token: str, results: list[dict[str, Any]]) -> None:
        try:
            outcomes = self.client.post_results(token, self.name, results)
        except (ServiceError, httpx.HTTPError) as exc:
            log.warning("posting %d results failed (their jobs will be retried): %s", len(results), exc)
            return
        for o in outcomes:
            if o["outcome"] in ("stored", "duplicate"):
                self.counts["posted"] += 1
            else:
                self.counts["refused"] += 1
                log.warning("result of job %s refused: %s", o["job_id"], o["outcome"])


def run_worker(server: str, target: str, backend: str = BackendName.SIMULATOR, *, token: str | None = None,
               batch: int | None = None,
               name: str | None = None, wait_seconds: float = 10.0, max_jobs: int | None = None,
               idle_exit: float | None = None, latency: float = 0.0, noise: float = DEFAULT_NOISE, seed: int = 0,
               compile_cmd: str = "", run_cmd: str = "", queue: str = "q_sw_expr", time_pattern: str = "",
               on_start: Callable[[Worker], None] | None = None) -> int:
    """What `swtune worker` runs; returns the exit code (2: the backend
    cannot measure on this machine, said before anything is leased)."""
    options = BackendOptions(noise=noise, seed=seed, compile_cmd=compile_cmd, run_cmd=run_cmd, queue=queue,
                             time_pattern=time_pattern)
    measure = backend_for(backend, target, options)
    try:
        measure.preflight()
    except InfrastructureError as exc:
        log.error("backend %s cannot measure on this machine: %s", backend, exc)
        return 2
    client = ServiceClient(server, token or os.environ.get("SWTUNE_TOKEN") or None)
    worker = Worker(client, target, measure, name=name, backend_name=backend, batch=batch,
                    wait_seconds=wait_seconds, max_jobs=max_jobs, idle_exit=idle_exit, latency=latency,
                    options=options)
    worker.install_signal_handlers()
    if on_start is not None:
        on_start(worker)
    try:
        return worker.run()
    finally:
        client.close()
        log.info("worker %s stopped: %s", worker.name, worker.counts)
