"""The ask/tell interface of search strategies, and random search (by name: tuner.search.registry).

A strategy proposes configs of one space (``ask``) and learns from their measurements (``tell``).
It never proposes a config it has already seen measured or still has in flight, so a driver can
ask again while earlier proposals are being measured, and a restarted driver resumes by telling a
fresh strategy every stored measurement and marking queued jobs with ``mark_in_flight``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from tuner.measure.base import MeasureResult
from tuner.space.space import Config, ScheduleSpace


class SearchStrategy(ABC):
    """Base class: bookkeeping of measured and in-flight configs, best so far."""

    name = "base"

    def __init__(self, space: ScheduleSpace, seed: int = 0) -> None:
        self.space = space
        self.rng = np.random.default_rng(seed)
        self._seen: set[bytes] = set()  # measured or in flight, as index-vector bytes
        self._in_flight: set[bytes] = set()
        self.measured_index: list[np.ndarray] = []
        self.measured_time: list[float] = []  # seconds, inf for failed configs
        self.best_time = np.inf
        self.best_config: Config | None = None
        self._start: list[Config] = []  # queued by queue_start, handed out first by ask_next

    @staticmethod
    def _key(row: np.ndarray) -> bytes:
        return np.asarray(row, dtype=np.int64).tobytes()

    def is_new(self, row: np.ndarray) -> bool:
        return self._key(row) not in self._seen

    def _fresh(self, rows: np.ndarray, limit: int) -> list[np.ndarray]:
        """Up to ``limit`` rows that are neither measured, in flight nor repeated in ``rows``."""
        picked: list[np.ndarray] = []
        keys: set[bytes] = set()
        for row in rows:
            key = self._key(row)
            if key in self._seen or key in keys:
                continue
            keys.add(key)
            picked.append(row)
            if len(picked) == limit:
                break
        return picked

    def ask(self, n: int) -> list[Config]:
        """Propose up to ``n`` new valid configs (fewer only when the space is exhausted)."""
        rows = self._propose(n)
        for row in rows:
            key = self._key(row)
            self._seen.add(key)
            self._in_flight.add(key)
        return [self.space.decode(r) for r in rows]

    def mark_in_flight(self, configs: Sequence[Config]) -> None:
        """Configs queued elsewhere (e.g. before a restart): never propose them again."""
        for config in configs:
            key = self._key(self.space.encode(config))
            self._seen.add(key)
            self._in_flight.add(key)

    def queue_baseline(self) -> list[Config]:
        """The kind's baseline config (tuner.baseline) to measure ahead of the first proposals, marked
        in flight: the best a task reports is then never slower than the baseline it is compared
        against. [] when the space has no valid baseline or it is measured or queued already (e.g.
        before a driver restart)."""
        from tuner.baseline import baseline_config

        try:
            config = baseline_config(self.space)
        except RuntimeError:  # no valid baseline schedule: nothing to compare against
            return []
        if not self.is_new(self.space.encode(config)):
            return []
        self.mark_in_flight([config])
        return [config]

    def queue_seeds(self, configs: Sequence[Config]) -> list[Config]:
        """Of ``configs`` (e.g. records of another space: tuner.space.chip.chip_seeds), those that are
        valid new points of this space, marked in flight to be measured ahead of the first proposals."""
        out: list[Config] = []
        for config in configs:
            try:
                row = self.space.encode(config)
            except ValueError:
                continue
            if self.is_new(row) and bool(self.space.analyze(row[None, :]).valid[0]):
                decoded = self.space.decode(row)
                self.mark_in_flight([decoded])
                out.append(decoded)
        return out

    def queue_start(self, seeds: Sequence[Config] = ()) -> Config | None:
        """Queue what a task measures ahead of the strategy's first proposals, within its trials and in
        this order: the baseline (queue_baseline), then the valid new ``seeds`` (queue_seeds); ``ask_next``
        hands them out first. The one home of that order, for in-process tuning (tuner.tune) and the
        service's driver. Returns the baseline config queued, or None (no valid baseline, or known already)."""
        baseline = self.queue_baseline()
        self._start += baseline + self.queue_seeds(seeds)
        return baseline[0] if baseline else None

    def ask_next(self, n: int) -> list[Config]:
        """Up to ``n`` configs to measure next: what ``queue_start`` queued and is not handed out yet,
        then the strategy's proposals (``ask``)."""
        n = max(n, 0)
        first, self._start = self._start[:n], self._start[n:]
        return first + (self.ask(n - len(first)) if n > len(first) else [])

    def hand_back(self, configs: Sequence[Config]) -> None:
        """Configs ``ask_next`` handed out that were not queued after all (the task's room shrank meanwhile):
        they stay in flight and ``ask_next`` hands them out first next time, so none is lost."""
        self._start = list(configs) + self._start

    def tell(self, configs: Sequence[Config], results: Sequence[MeasureResult]) -> None:
        """Record measurements; failed configs count as infinitely slow."""
        for config, result in zip(configs, results, strict=True):
            row = self.space.encode(config)
            key = self._key(row)
            if key in self._in_flight:
                self._in_flight.discard(key)
            elif key in self._seen:
                continue  # a duplicate report: count each config once
            self._seen.add(key)
            self.measured_index.append(row)
            self.measured_time.append(result.mean_time)
            if result.mean_time < self.best_time:
                self.best_time, self.best_config = result.mean_time, dict(config)
        self._observe()

    @property
    def n_measured(self) -> int:
        return len(self.measured_time)

    @abstractmethod
    def _propose(self, n: int) -> list[np.ndarray]:
        """Index rows of new configs."""

    def _observe(self) -> None:  # noqa: B027 (an optional hook, not an abstract method)
        """Hook: learn from the measurements told so far."""


class RandomSearch(SearchStrategy):
    """Uniform sampling of valid configs (the baseline every tuner is compared against)."""

    name = "random"

    def _propose(self, n: int) -> list[np.ndarray]:
        picked: list[np.ndarray] = []
        for _ in range(20):
            candidates = self.space.sample(max(2 * n, 64), self.rng)
            if len(candidates) == 0:
                break
            for row in self._fresh(candidates, n - len(picked)):
                self._seen.add(self._key(row))  # keep later rounds from re-picking it
                picked.append(row)
            if len(picked) >= n:
                break
        for row in picked:
            self._seen.discard(self._key(row))  # ask() re-adds them as in flight
        return picked

