"""The benchmark objective: simulator time, optional hidden model mismatch, measurement noise, a trial log.

Every search method (ours, random, the peers) measures through one ``Objective`` so they are judged alike:

- ``true(rows)``: noise-free seconds, the figure a run is scored on (``inf`` for invalid configs).
  Variant ``plain`` is the simulator; ``perturbed`` multiplies it by a hidden, fixed factor per config in
  [0.8, 1.25] (log-uniform) drawn from a hash of the *combination* of a few knobs (``HIDDEN_KNOBS``). The
  features expose those knobs one by one, never their combination, so the cost model must learn the
  interaction from measurements: a stand-in for the real machine disagreeing with the analysis.
- ``measure(rows)``: what a tuner sees, as the simulator backend reports it: ``true`` times the mean of
  ``REPEATS`` lognormal factors of relative std ``NOISE`` (the simulator's own default and noise law,
  ``tuner.measure.noise``), drawn per (seed, config).

``TrialLog`` is the tuning log of one run: a repeated config is answered from it and an invalid one is
refused, both without costing a trial. The incumbent is the config with the best *measured* time, and the
curve records its *true* time, so noise that fools a method into keeping a worse config costs it.
"""

from __future__ import annotations

import math
from enum import Enum

import numpy as np

from tuner.measure.noise import DEFAULT_NOISE, noise_factors
from tuner.measure.simulator import Simulator, simulate
from tuner.space.space import ScheduleSpace

NOISE: float = DEFAULT_NOISE
REPEATS: int = Simulator().repeats
HIDDEN_KNOBS = ("unroll", "tile_order", "inner", "db_a")
FACTOR_RANGE = (0.8, 1.25)
_SALT = 0x5157_7E11


class Variant(str, Enum):
    PLAIN = "plain"
    PERTURBED = "perturbed"


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: uniform 64-bit hash of uint64 keys (vectorised)."""
    with np.errstate(over="ignore"):
        h = h.astype(np.uint64)
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def _uniform(keys: np.ndarray) -> np.ndarray:
    return (_mix(keys) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def mismatch_factor(space: ScheduleSpace, rows: np.ndarray) -> np.ndarray:
    """The hidden per-config factor of the perturbed variant (depends only on ``HIDDEN_KNOBS``)."""
    rows = np.atleast_2d(rows)
    key = np.full(len(rows), _SALT, dtype=np.uint64)
    for name in HIDDEN_KNOBS:
        if name in space.knob_index:
            j = space.knob_index[name]
            key = _mix(key ^ rows[:, j].astype(np.uint64))
    lo, hi = FACTOR_RANGE
    return lo * (hi / lo) ** _uniform(key)


class Objective:
    def __init__(self, space: ScheduleSpace, variant: Variant | str = Variant.PLAIN, noise: float = NOISE,
                 seed: int = 0) -> None:
        self.space = space
        self.variant = Variant(variant)
        self.noise = noise
        self.seed = seed

    def true(self, rows: np.ndarray) -> np.ndarray:
        rows = np.atleast_2d(rows)
        seconds = simulate(self.space, rows)
        if self.variant is Variant.PERTURBED:
            seconds = seconds * mismatch_factor(self.space, rows)
        return seconds

    def measure(self, rows: np.ndarray) -> np.ndarray:
        return self.measure_and_true(rows)[0]

    def measure_and_true(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(measured, true) seconds per row."""
        rows = np.atleast_2d(rows)
        seconds = self.true(rows)
        if self.noise <= 0:
            return seconds, seconds
        key = np.full(len(rows), self.seed * 1_000_003 + 17, dtype=np.uint64)
        for j in range(rows.shape[1]):
            key = _mix(key ^ rows[:, j].astype(np.uint64))
        factor = np.array([noise_factors(np.random.default_rng(int(k)), self.noise, REPEATS).mean() for k in key])
        return seconds * factor, seconds


class TrialLog:
    """Counted trials of one run: cache of measured configs, the incumbent, the best-so-far curve."""

    def __init__(self, objective: Objective, cap: int, goal: float = 0.0) -> None:
        self.objective = objective
        self.cap = cap
        self.goal = goal  # true seconds at which the run may stop
        self.cache: dict[bytes, float] = {}
        self.curve: list[float] = []  # true seconds of the incumbent after each counted trial
        self.repeats = 0
        self.invalid = 0
        self._best_measured = math.inf
        self._best_true = math.inf
        self.best_true_seen = math.inf  # the truly best config measured (to refresh the reference)
        self.best_true_row: np.ndarray | None = None

    @property
    def done(self) -> bool:
        return len(self.curve) >= self.cap or (bool(self.curve) and self.curve[-1] <= self.goal)

    def evaluate(self, rows: np.ndarray) -> np.ndarray:
        """Measured seconds per row (inf for invalid), counting a trial for each new valid config."""
        rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
        out = np.empty(len(rows))
        todo: list[int] = []
        keys = [r.tobytes() for r in rows]
        for i, key in enumerate(keys):
            if key in self.cache:
                out[i] = self.cache[key]
                self.repeats += 1
            else:
                todo.append(i)
        if todo:
            sub = rows[todo]
            measured, true = self.objective.measure_and_true(sub)
            for i, m, t in zip(todo, measured, true):
                key = keys[i]
                if key in self.cache:  # the same new config twice in one batch
                    out[i] = self.cache[key]
                    self.repeats += 1
                    continue
                self.cache[key] = float(m)
                out[i] = m
                if not math.isfinite(m):
                    self.invalid += 1
                    continue
                if t < self.best_true_seen:
                    self.best_true_seen, self.best_true_row = float(t), rows[i].copy()
                if self.done:
                    continue  # past the cap: measured but not counted
                if m < self._best_measured:
                    self._best_measured, self._best_true = float(m), float(t)
                self.curve.append(self._best_true)
        return out
