"""Measurement noise of the simulator: the default figure and its multiplicative lognormal factors.

``DEFAULT_NOISE`` = 0.02: the relative standard deviation of one timed repeat of a kernel on a core
group. Reasoning, from the raw swCandle STREAM-over-DMA outputs (FACTS §2.1; each kernel timed 10
times on 64 CPEs): the average of the 10 repeats sits 0.3-2.4% above the best one, and max/min
reaches 1.01-1.09 on the 10-40 ms kernels. A 2% relative std-dev covers that run-to-run spread. The
larger DRAM-layout effect of FACTS §2.2 (+-20% between address layouts) is systematic for a given
buffer placement, not run-to-run, so it is not part of this figure.

Lognormal because run times are positive and skewed (interference only ever adds time); the factor
has mean 1, so the noise-free model time is the expected measurement. ``swtune demo``, ``swtune tune``
and the benchmarks default to this constant; import it rather than repeating the number.
"""

from __future__ import annotations

import numpy as np

DEFAULT_NOISE = 0.02


def noise_factors(rng: np.random.Generator, noise: float, repeats: int) -> np.ndarray:
    """``repeats`` multiplicative factors with relative std-dev ``noise`` (mean 1; all ones for 0)."""
    if noise <= 0:
        return np.ones(repeats)
    sigma = np.sqrt(np.log1p(noise * noise))  # lognormal with std-dev/mean = noise
    return np.exp(sigma * rng.standard_normal(repeats) - 0.5 * sigma * sigma)
