"""Compile-time schedule lookups over HTTP, with a local cache file and a timeout.

A compiler asks for the best config of each workload on a target. Answers (including "not tuned")
are cached in a JSON file so a rebuild works offline and fast; when the service is slow or down the
cache answers, and a workload with no answer at all is reported untuned, never an exception. The service
serves a hardware-timed config whenever a Sunway node timed the workload; ``source_of`` says which.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from service.client import ServiceClient, ServiceError
from tuner.workloads import Workload

log = logging.getLogger(__name__)


class ScheduleLookup:
    def __init__(self, server: str, target: str, cache_file: str | Path | None = None, timeout: float = 5.0,
                 token: str | None = None, http: httpx.Client | None = None) -> None:
        self.server, self.target, self.timeout, self.token, self.http = server, target, timeout, token, http
        self.cache_file = Path(cache_file) if cache_file else None
        self._cache: dict[str, Any] = self._load()
        # What timed each config the service served in this run: {"source", "profile_version"} per key
        # (the cache file keeps configs only, so answers read from it have no entry).
        self.served: dict[str, dict[str, Any]] = {}

    # -- cache file --------------------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        if self.cache_file is None or not self.cache_file.exists():
            return {}
        try:
            data = json.loads(self.cache_file.read_text())
            return data.get(self.target, {}) if isinstance(data, dict) else {}
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("ignoring unreadable schedule cache %s: %s", self.cache_file, exc)
            return {}

    def _save(self) -> None:
        if self.cache_file is None:
            return
        data: dict[str, Any] = {}
        if self.cache_file.exists():
            try:
                data = json.loads(self.cache_file.read_text())
            except (OSError, json.JSONDecodeError):
                data = {}
        data[self.target] = self._cache
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        # write-then-rename: a crash never leaves a half-written cache
        fd, tmp = tempfile.mkstemp(dir=self.cache_file.parent, prefix=".swtune-cache-")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, self.cache_file)

    # -- lookups -----------------------------------------------------------------------------
    def prefetch(self, workloads: Iterable[Workload]) -> None:
        """One batch request for every workload not in the cache yet."""
        missing = [w.key for w in workloads if w.key not in self._cache]
        if not missing:
            return
        try:
            client = ServiceClient(self.server, self.token, timeout=self.timeout, retries=1, http=self.http)
            found = client.best_batch(missing, self.target).get("found", {})
        except (ServiceError, httpx.HTTPError) as exc:
            if isinstance(exc, ServiceError) and 400 <= exc.status < 500:
                raise  # a wrong token or request: the caller's to fix, not an outage
            log.warning("schedule service %s unavailable (%s): using the cache only", self.server, exc)
            return
        for key in missing:
            record = found.get(key)
            self._cache[key] = record.get("config") if record else None
            if record:
                self.served[key] = {"source": record.get("source"), "profile_version": record.get("profile_version")}
        self._save()
        sources = [v["source"] for v in self.served.values()]
        if sources:
            log.info("schedules served: %d timed on hardware, %d simulated or emulated",
                     sources.count("hardware"), len(sources) - sources.count("hardware"))

    def best(self, workload: Workload) -> dict[str, Any] | None:
        """The best config of ``workload`` on this target, or None when it is not tuned."""
        if workload.key not in self._cache:
            self.prefetch([workload])
        return self._cache.get(workload.key)

    def source_of(self, workload: Workload) -> dict[str, Any] | None:
        """What timed the config served for ``workload``: {"source": "hardware" | "simulator" | ...,
        "profile_version": the simulator profile or None}; None when it came from the cache file or is untuned."""
        return self.served.get(workload.key)

    __call__ = best
