"""Knobs: one named, finite, ordered list of choices each; a config is one choice per knob.

``KnobSpace`` is the product of a space's knobs: what every schedule space (tuner.space.ScheduleSpace,
tuner.space.cpe.space.CpeKernelSpace) shares -- names, size, the integer encoding and random neighbour moves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from tuner.errors import InvalidConfigError


@dataclass(frozen=True)
class Knob:
    """A schedule decision.

    ``choices`` are the JSON values a config holds; ``codes`` are the numbers the vectorized analysis
    reads (the choice itself for numeric knobs, the index for categorical ones). ``ordered`` knobs
    (tile sizes, unroll) move to adjacent choices in local search; categorical ones jump anywhere.
    """

    name: str
    choices: tuple[Any, ...]
    ordered: bool = True
    doc: str = ""
    category_codes: tuple[int, ...] | None = None  # codes of a restricted categorical knob (original indices)
    default: Any = None  # a knob added after configs were stored: what a config without it means

    def __post_init__(self) -> None:
        if not self.choices:
            raise ValueError(f"knob {self.name} has no choices")
        if len(set(map(repr, self.choices))) != len(self.choices):
            raise ValueError(f"knob {self.name} has duplicate choices")

    def __len__(self) -> int:
        return len(self.choices)

    @property
    def codes(self) -> np.ndarray:
        if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in self.choices):
            return np.asarray(self.choices, dtype=np.float64)
        if self.category_codes is not None:
            return np.asarray(self.category_codes, dtype=np.float64)
        return np.arange(len(self.choices), dtype=np.float64)

    def index(self, value: Any) -> int:
        for i, choice in enumerate(self.choices):
            if choice == value:
                return i
        raise ValueError(f"{value!r} is not a choice of knob {self.name}: {list(self.choices)}")


class KnobSpace:
    """The knob product of a schedule space; a subclass calls ``_set_knobs`` and provides ``workload``
    and ``analyze(index)`` (a result with a boolean ``valid`` array)."""

    workload: Any
    knobs: tuple[Knob, ...]

    def _set_knobs(self, knobs: Sequence[Knob]) -> None:
        self.knobs = tuple(knobs)
        self.knob_index = {k.name: i for i, k in enumerate(self.knobs)}
        self.codes = [k.codes for k in self.knobs]
        self.sizes = np.array([len(k) for k in self.knobs], dtype=np.int64)
        self.ordered = np.array([k.ordered for k in self.knobs], dtype=bool)

    def analyze(self, index: np.ndarray) -> Any:
        raise NotImplementedError

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)

    @cached_property
    def size(self) -> int:
        """Number of knob combinations (valid or not)."""
        return math.prod(int(s) for s in self.sizes)

    def encode(self, config: dict[str, Any]) -> np.ndarray:
        """Choice indices of a config; a knob it lacks takes the knob's default, if it has one."""
        unknown = set(config) - set(self.knob_index)
        defaults = {k.name: k.default for k in self.knobs if k.default is not None and k.name not in config}
        config = {**config, **defaults}
        missing = set(self.knob_index) - set(config)
        if unknown or missing:
            raise InvalidConfigError(
                f"config does not match the {self.workload.op} space: "
                f"unknown knobs {sorted(unknown)}, missing knobs {sorted(missing)}"
            )
        try:
            return np.array([k.index(config[k.name]) for k in self.knobs], dtype=np.int64)
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from None

    def decode(self, vector: np.ndarray) -> dict[str, Any]:
        vector = np.asarray(vector, dtype=np.int64)
        if vector.shape != (len(self.knobs),) or (vector < 0).any() or (vector >= self.sizes).any():
            raise InvalidConfigError(f"index vector {vector.tolist()} is outside the space")
        return {k.name: k.choices[int(i)] for k, i in zip(self.knobs, vector)}

    def normalized(self, index: np.ndarray) -> np.ndarray:
        """Index matrix scaled to [0, 1] per knob (a workload-independent view for the cost model)."""
        return np.atleast_2d(index) / np.maximum(self.sizes - 1, 1)

    def neighbours(self, index: np.ndarray, rng: np.random.Generator, n_moves: int = 1) -> np.ndarray:
        """One random move per row: ordered knobs step +-1 (sometimes +-2), categorical ones jump.

        Rows whose move lands on an invalid config keep their original values.
        """
        index = np.atleast_2d(index)
        out = index.copy()
        rows = np.arange(len(index))
        movable = np.flatnonzero(self.sizes > 1)
        if not len(movable):
            return out
        for _ in range(n_moves):
            cols = rng.choice(movable, size=len(index))
            step = rng.choice([-2, -1, 1, 2], size=len(index), p=[0.15, 0.35, 0.35, 0.15])
            ordered_val = np.clip(out[rows, cols] + step, 0, self.sizes[cols] - 1)
            jump = (out[rows, cols] + rng.integers(1, np.maximum(self.sizes[cols], 2))) % self.sizes[cols]
            out[rows, cols] = np.where(self.ordered[cols], ordered_val, jump)
        ok = self.analyze(out).valid
        return np.where(ok[:, None], out, index)
