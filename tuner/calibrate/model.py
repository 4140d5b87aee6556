"""What a fit needs of a set of measurements: predicted times as a function of a profile's values.

Records time some code on some chip. The profile's parameters are costs of the chip as the simulator's
kernels meet it (tuner/profile.py); a replay of *another* code (swDNN's hand-written kernel) also has costs
of that code alone -- how its own register tiles start and drain, whether its own transfers overlap its
compute. Those are the model's :class:`CodeTerm` s: fitted beside the profile's parameters (they explain
part of the measured times), reported with the fit, and never applied to the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tuner.profile import ParameterSpec


@dataclass(frozen=True)
class CodeTerm:
    """A cost of the measured code itself: its meaning and bounds (``spec``) and the fit's first start."""

    spec: ParameterSpec
    prior: float

    @property
    def name(self) -> str:
        return self.spec.name


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
    def code_terms(self) -> tuple[CodeTerm, ...]:
        """Costs of the measured code alone (module docstring); empty for records of the simulator's kernels."""
        ...

    @property
    def measured(self) -> np.ndarray:
        """Measured seconds, one per record."""
        ...

    def predict(self, values: Mapping[str, float]) -> np.ndarray:
        """Predicted seconds of every record with the profile's parameters and the code terms at ``values``."""
        ...

    def subset(self, indices: Sequence[int] | np.ndarray) -> TimeModel:
        """The same model over some records (bootstrap resamples, cross-validation folds)."""
        ...
