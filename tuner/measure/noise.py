"""Measurement noise of the simulator: the default figures and their multiplicative lognormal factors.

A measurement of a config is one launch of its kernel, timed ``repeats`` times. Its noise has two levels:

- ``DEFAULT_NOISE`` = 0.053, the relative standard deviation of a kernel's time **between launches**.
  From swDNN's run.log (the conv-fidelity survey §1.3, read): one configuration (B=128, Ni=192, No=128,
  Ro=Co=8, one core group) launched 13 times ran at 297-355 GFLOPS, each run timing 100 calls. The
  expected range of 13 independent normal draws is d2(13) = 3.336 standard deviations, so on the log scale
  sigma = ln(355/297) / 3.336 = 0.0535; a lognormal of that sigma has a relative std-dev of 0.0535, which
  rounds to 0.053. Each run averaged 100 calls, so this is the launch-to-launch spread (buffer placement,
  the DRAM-layout effect of FACTS §2.2, the machine's other jobs), not the call-to-call one; a tuner that
  launches each config once sees exactly this spread. (Until Dec 2026 the default was 0.02, the spread
  below, for every repeat alike: repeats then averaged it away, which flattered every search.)
- ``REPEAT_NOISE`` = 0.02, the spread of repeats **within one launch**. From the raw swCandle
  STREAM-over-DMA outputs (FACTS §2.1; each kernel timed 10 times in one run on 64 CPEs): the average of
  the 10 repeats sits 0.3-2.4% above the best one, and max/min reaches 1.01-1.09 on the 10-40 ms kernels.

``noise`` anywhere in swtune (``Simulator(noise=)``, ``--noise``) is the launch-to-launch figure; the
repeats of one launch vary by ``min(noise, REPEAT_NOISE)`` around that launch's factor, and ``noise = 0``
is noise-free. Lognormal because run times are positive and skewed (interference only ever adds time);
every factor has mean 1, so the noise-free model time is the expected measurement. Import these constants
rather than repeating the numbers.
"""

from __future__ import annotations

import numpy as np

DEFAULT_NOISE = 0.053
REPEAT_NOISE = 0.02


def _lognormal(rng: np.random.Generator, relative_std: float, n: int) -> np.ndarray:
    """``n`` factors with mean 1 and relative std-dev ``relative_std``."""
    sigma = np.sqrt(np.log1p(relative_std * relative_std))
    return np.exp(sigma * rng.standard_normal(n) - 0.5 * sigma * sigma)


def noise_factors(rng: np.random.Generator, noise: float, repeats: int) -> np.ndarray:
    """The factors of one measurement's ``repeats`` timed repeats: one launch factor (relative std-dev
    ``noise``) times each repeat's own (``min(noise, REPEAT_NOISE)``); all ones for ``noise`` = 0."""
    if noise <= 0:
        return np.ones(repeats)
    return _lognormal(rng, noise, 1) * _lognormal(rng, min(noise, REPEAT_NOISE), repeats)


def measurement_factors(rng: np.random.Generator, noise: float, n: int) -> np.ndarray:
    """One factor for each of ``n`` separate measurements of one repeat (each its own launch)."""
    if noise <= 0:
        return np.ones(n)
    return _lognormal(rng, noise, n) * _lognormal(rng, min(noise, REPEAT_NOISE), n)
