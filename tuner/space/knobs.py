"""Knobs: one named, finite, ordered list of choices each; a config is one choice per knob."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


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
