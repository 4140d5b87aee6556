"""What a fit needs of a set of measurements: predicted times as a function of a profile's values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np


class TimeModel(Protocol):
    """Measured times and their prediction under any profile values, record by record."""

    @property
    def name(self) -> str:
        """Where the records come from (shown in the fit's metadata)."""
        ...

    @property
    def free(self) -> tuple[str, ...]:
        """The profile parameters these records can speak to (the rest stay at the base profile's values)."""
        ...

    @property
    def measured(self) -> np.ndarray:
        """Measured seconds, one per record."""
        ...

    def predict(self, values: Mapping[str, float]) -> np.ndarray:
        """Predicted seconds of every record with the profile's parameters at ``values`` (all of them)."""
        ...

    def subset(self, indices: Sequence[int] | np.ndarray) -> TimeModel:
        """The same model over some records (bootstrap resamples, cross-validation folds)."""
        ...
