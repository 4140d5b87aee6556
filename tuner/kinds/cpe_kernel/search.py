"""Search over a memory-bound CPE kernel's space: an XGBoost residual model over the analysis' estimate.

The space is small (hundreds to a few thousand valid configs), so every valid config is scored each
round; no evolution is needed. The model's prior is the analysis' own estimated time (the table of
tuner.space.cpe.space: the DMA model and the body's counts at block sizes between legalized ones predicted
linearly); the boosters learn the measurements' residual over it, so what a real machine does
differently (a DMA engine that prefers other block sizes, a body slower than its counts) moves the
ranking as measurements come in. On the simulator the prior is the simulator's own formula up to
noise and the block-size interpolation, so there the first proposals are already near the best:
this strategy is honest about what it knows, not a black box. An ``epsilon`` share of each round
explores at random.

The kind (tuner.kinds.cpe_kernel) gives a CPE kernel task this strategy when "model" is asked for.
"""

from __future__ import annotations

import numpy as np

from cost_model import XGBoostCostModel
from tuner.search.base import SearchStrategy
from tuner.space.cpe.space import PRIOR_COLUMN, CpeKernelSpace

NAME = "cpe_model"


class CpeKernelSearch(SearchStrategy):
    name = NAME

    def __init__(self, space: CpeKernelSpace, seed: int = 0, epsilon: float = 0.1, min_retrain: int = 4) -> None:
        super().__init__(space, seed)  # type: ignore[arg-type]
        self.epsilon = epsilon
        self.min_retrain = min_retrain
        self.model = XGBoostCostModel(objective="rank", seed=seed, prior_column=PRIOR_COLUMN)
        self._trained_on = 0
        self._rows = space.valid_rows
        self._features = space.features(self._rows) if len(self._rows) else np.empty((0, 0), dtype=np.float32)

    def _observe(self) -> None:
        n = self.n_measured
        if n - self._trained_on < self.min_retrain:
            return
        space: CpeKernelSpace = self.space  # type: ignore[assignment]
        x = space.features(np.stack(self.measured_index))
        self.model.update(x, np.asarray(self.measured_time))
        self._trained_on = n

    def _propose(self, n: int) -> list[np.ndarray]:
        if not len(self._rows):
            return []
        order = np.argsort(-self.model.predict(self._features), kind="stable")
        explore = int(round(self.epsilon * n)) if self.n_measured else 0
        picked = self._fresh(self._rows[order], n - explore)
        shuffled = self._rows[self.rng.permutation(len(self._rows))]  # drawn every round: one random stream
        if n > len(picked):  # exploration: random configs not picked above
            keys = {self._key(r) for r in picked}
            rest = shuffled[[self._key(r) not in keys for r in shuffled]]
            picked += self._fresh(rest, n - len(picked))
        return picked
