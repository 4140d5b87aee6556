"""Fit a profile's parameters to a :class:`~tuner.calibrate.model.TimeModel`, with intervals and a
cross-validated error.

The objective is the sum of squared log errors log(predicted / measured): timings spread multiplicatively
and a relative error weighs a 1 ms and a 1 s kernel alike. Parameters are fitted inside their physical
bounds (``ParameterSpec.low/high``) by a bounded trust-region least squares (scipy) from several starts.

- **Intervals**: a nonparametric bootstrap over records (resample with replacement, refit from the fit);
  each fitted parameter's interval is a central percentile range of its draws, at ``1 - (1 - level) / k``
  for k fitted parameters (Bonferroni), so that all k intervals hold together with probability ``level``:
  a profile is used as a whole, and six separate 95% intervals would all hold only about 74% of the time.
  The draws are kept in the profile's fit metadata so a prediction can carry the interval they give
  (tuner/calibrate/intervals.py).
- **Cross-validation**: k shuffled folds; each fold's records are predicted by a fit on the others. The
  held-out absolute log errors are what the fit is judged by (``cv_median_abs_log_err``,
  ``cv_max_abs_log_err``).
- The FACTS figures (tuner/calibrate/pins.py) are checked under the fitted profile and the result kept in
  its fit metadata (``pins``); with ``constraints`` they are held during the fit instead.
- Parameters the records cannot move (``TimeModel.free`` and a sensitivity check) keep the base profile's
  value and have no interval; the fit metadata lists them.
- A model's code terms (tuner/calibrate/model.py: costs of the measured code, not of the chip) are fitted,
  bootstrapped and cross-validated with the profile's parameters; they go to the fit metadata
  (``code_terms``: value, interval, meaning, source), never into the profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy.optimize import least_squares

from tuner.calibrate import pins
from tuner.calibrate.model import TimeModel
from tuner.errors import SwtuneError
from tuner.profile import SPEC_BY_NAME, ParameterSpec, Profile

MAX_DRAWS_KEPT = 64  # bootstrap draws stored with the profile (for prediction intervals)
SENSITIVITY = 1e-4  # a parameter that moves no prediction by this relative amount is not fitted


class CalibrationError(SwtuneError, ValueError):
    """Records a fit cannot use: too few, non-positive times, or none that the free parameters move."""


@dataclass(frozen=True)
class Calibration:
    """A fitted profile and how well it predicts records it was and was not fitted on."""

    profile: Profile
    fitted: tuple[str, ...]
    records: int
    rms_log_err: float
    median_abs_log_err: float
    max_abs_log_err: float
    cv_folds: int
    cv_median_abs_log_err: float
    cv_max_abs_log_err: float
    cv_rms_log_err: float
    code_terms: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # model.py CodeTerm fits

    @property
    def values(self) -> dict[str, float]:
        """Every fitted value: the profile's parameters and the code terms (what the model predicted with)."""
        return {**self.profile.values, **{name: float(t["value"]) for name, t in self.code_terms.items()}}

    def summary(self) -> dict[str, Any]:
        """The figures, rounded for reports (the profile holds the same, unrounded)."""
        keys = ("records", "rms_log_err", "median_abs_log_err", "max_abs_log_err", "cv_folds",
                "cv_median_abs_log_err", "cv_max_abs_log_err", "cv_rms_log_err")
        return {k: (round(v, 4) if isinstance(v, float) else v) for k in keys for v in [getattr(self, k)]}


class _Scaled:
    """The fitted parameters as a unit cube (bounds differ by orders of magnitude)."""

    def __init__(self, names: Sequence[str], specs: Mapping[str, ParameterSpec]) -> None:
        self.names = tuple(names)
        self.low = np.array([specs[n].low for n in names])
        self.span = np.array([specs[n].high - specs[n].low for n in names])

    def values(self, u: np.ndarray, base: Mapping[str, float]) -> dict[str, float]:
        out = dict(base)
        out.update(zip(self.names, (float(x) for x in self.low + np.clip(u, 0, 1) * self.span), strict=True))
        return out

    def unit(self, values: Mapping[str, float]) -> np.ndarray:
        return np.clip((np.array([values[n] for n in self.names]) - self.low) / self.span, 0, 1)


class Constraint(Protocol):
    """A figure every fit must keep (tuner/calibrate/pins.py): 0 when it holds, a positive residual else."""

    def residual(self, values: Mapping[str, float]) -> float: ...


def _log_errors(model: TimeModel, values: Mapping[str, float]) -> np.ndarray:
    return np.log(model.predict(values) / model.measured)


def _residuals(model: TimeModel, values: Mapping[str, float], constraints: Sequence[Constraint]) -> np.ndarray:
    if not constraints:
        return _log_errors(model, values)
    return np.concatenate([_log_errors(model, values), [c.residual(values) for c in constraints]])


def _specs(model: TimeModel) -> dict[str, ParameterSpec]:
    """Bounds and meanings of everything a fit of ``model`` may move: the profile's and the code's."""
    return {**SPEC_BY_NAME, **{t.name: t.spec for t in model.code_terms}}


def sensitive(model: TimeModel, base: Mapping[str, float]) -> tuple[str, ...]:
    """The parameters of ``model.free`` and the model's code terms that move some prediction when set to
    either bound (``base`` holds a value for each)."""
    ref = model.predict(base)
    specs = _specs(model)
    out = []
    for name in (*model.free, *(t.name for t in model.code_terms)):
        spec = specs[name]
        for v in (spec.low, spec.high):
            if np.max(np.abs(model.predict({**base, name: v}) / ref - 1)) > SENSITIVITY:
                out.append(name)
                break
    return tuple(out)


def fit_values(model: TimeModel, base: Mapping[str, float], names: Sequence[str], *,
               multistart: bool = True, constraints: Sequence[Constraint] = ()) -> dict[str, float]:
    """The values of ``names`` (others at ``base``) that minimise the squared log errors: from ``base`` and,
    with ``multistart``, from the middle of the bounds too (the better of the two)."""
    scaled = _Scaled(names, _specs(model))
    initial = [scaled.unit(base), *([np.full(len(names), 0.5)] if multistart else [])]
    best: Any = None
    for u0 in initial:
        res = least_squares(lambda u: _residuals(model, scaled.values(u, base), constraints), u0, bounds=(0.0, 1.0),
                            x_scale=1.0, diff_step=1e-3)
        if best is None or res.cost < best.cost:
            best = res
    return scaled.values(best.x, base)


def _folds(n: int, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    return [np.sort(f) for f in np.array_split(rng.permutation(n), k)]


def calibrate(model: TimeModel, base: Profile, *, bootstrap: int = 200, folds: int = 5, level: float = 0.95,
              seed: int = 0, constraints: Sequence[Constraint] = ()) -> Calibration:
    """Fit ``base``'s parameters to ``model``'s records (module docstring); ``base`` gives the target, the
    values of parameters the records cannot move, and the first start. ``constraints`` hold in every
    refit (bootstrap and cross-validation alike)."""
    measured = model.measured
    n = len(measured)
    if n < max(2 * folds, 4):
        raise CalibrationError(f"{n} records are too few to fit and cross-validate ({2 * folds} at least)")
    if not np.all(np.isfinite(measured)) or np.any(measured <= 0):
        raise CalibrationError("measured times must be finite and positive")
    values0 = {**base.values, **{t.name: t.prior for t in model.code_terms}}
    names = sensitive(model, values0)
    if not names:
        raise CalibrationError(f"no profile parameter moves the predicted times of {model.name}")
    rng = np.random.default_rng(seed)
    values = fit_values(model, values0, names, constraints=constraints)
    errors = _log_errors(model, values)

    draws = []
    for _ in range(bootstrap):
        pick = rng.integers(0, n, n)
        draws.append(fit_values(model.subset(pick), values, names, multistart=False,  # starts at the fit
                                constraints=constraints))
    alpha = (1 - level) / (2 * len(names))  # Bonferroni: the intervals hold jointly at ``level``
    intervals: dict[str, tuple[float, float]] = {}
    for name in names:
        col = np.array([d[name] for d in draws]) if draws else np.array([values[name]])
        lo, hi = np.quantile(col, [alpha, 1 - alpha])
        intervals[name] = (float(min(lo, values[name])), float(max(hi, values[name])))

    held_out = np.empty(n)
    for fold in _folds(n, folds, rng):
        train = np.setdiff1d(np.arange(n), fold)
        fold_values = fit_values(model.subset(train), values0, names, constraints=constraints)
        held_out[fold] = _log_errors(model.subset(fold), fold_values)

    abs_cv = np.abs(held_out)
    code = {t.name: {"value": values[t.name], "interval": list(intervals[t.name]) if t.name in intervals else None,
                     "unit": t.spec.unit, "meaning": t.spec.meaning, "source": t.spec.source}
            for t in model.code_terms}
    fitted = [k for k in names if k in SPEC_BY_NAME]  # profile parameters; the code terms are reported apart
    fit_meta: dict[str, Any] = {
        "source": model.name, "records": n, "fitted": fitted,
        "fixed": [p for p in base.values if p not in names], "code_terms": code, "objective": "squared log error",
        "rms_log_err": float(np.sqrt(np.mean(errors ** 2))), "max_abs_log_err": float(np.max(np.abs(errors))),
        "cv_folds": folds, "cv_median_abs_log_err": float(np.median(abs_cv)),
        "cv_max_abs_log_err": float(np.max(abs_cv)), "bootstrap": bootstrap, "level": level, "seed": seed,
        "draws": [{k: d[k] for k in fitted} for d in draws[:MAX_DRAWS_KEPT]],
    }
    chosen = {k: values[k] for k in fitted}
    profile_intervals = {k: intervals[k] for k in fitted}
    profile = base.with_values(chosen, intervals=profile_intervals, fit=fit_meta)
    fit_meta["pins"] = pins.check(profile)  # the FACTS figures under the fitted profile (kept or broken)
    profile = base.with_values(chosen, intervals=profile_intervals, fit=fit_meta)
    return Calibration(profile, tuple(fitted), n, fit_meta["rms_log_err"], float(np.median(np.abs(errors))),
                       fit_meta["max_abs_log_err"], folds, fit_meta["cv_median_abs_log_err"],
                       fit_meta["cv_max_abs_log_err"], float(np.sqrt(np.mean(held_out ** 2))), code)
