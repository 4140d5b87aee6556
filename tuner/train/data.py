"""A training run's batches: from an ``.npz`` file (arrays ``x`` and ``y``) or a seeded synthetic set.

``y`` holds class labels (integers) for cross-entropy, turned into one-hot rows (the step's target is
a probability per class), or targets of the model's output shape for MSE. The batches are written
as the training program's ``data.bin``: each batch's inputs then its target, in the model's type.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner.ir.training import Loss


class DataError(ValueError):
    """Data that does not fit the model (shapes, labels, sizes)."""


@dataclass(frozen=True)
class Batches:
    x: np.ndarray  # [batches, batch, *input]
    target: np.ndarray  # [batches, batch, *output]

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def tofile(self, path: Path, dtype: str) -> None:
        """``data.bin``: batch after batch, inputs then target."""
        flat = [np.concatenate([x.ravel(), t.ravel()]) for x, t in zip(self.x, self.target)]
        np.concatenate(flat).astype(dtype).tofile(path)


def _targets(y: np.ndarray, loss: Loss, out_shape: tuple[int, ...], what: str) -> np.ndarray:
    if loss == Loss.CROSS_ENTROPY:
        classes = out_shape[-1]
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
            raise DataError(f"{what}: cross-entropy needs y as integer class labels [N], not {y.dtype} {list(y.shape)}")
        if y.size and (y.min() < 0 or y.max() >= classes):
            raise DataError(f"{what}: labels must lie in [0, {classes}) (the model has {classes} outputs); "
                            f"found {int(y.min())}..{int(y.max())}")
        return np.eye(classes)[y]
    if tuple(y.shape[1:]) != out_shape[1:]:
        raise DataError(f"{what}: MSE targets must be [N, {', '.join(map(str, out_shape[1:]))}] like the model's "
                        f"output; y is {list(y.shape)}")
    return y.astype(np.float64)


def batches(x: np.ndarray, y: np.ndarray, batch: int, in_shape: tuple[int, ...], out_shape: tuple[int, ...],
            loss: Loss, what: str = "data") -> Batches:
    """Whole batches of ``(x, y)`` for a model taking ``in_shape`` and returning ``out_shape`` (batch
    dimension first); a remainder smaller than a batch is dropped, as torch's ``drop_last``."""
    if tuple(x.shape[1:]) != in_shape[1:]:
        raise DataError(f"{what}: x must be [N, {', '.join(map(str, in_shape[1:]))}] for this model; "
                        f"it is {list(x.shape)}")
    if len(x) != len(y):
        raise DataError(f"{what}: x has {len(x)} samples and y {len(y)}")
    n = len(x) // batch
    if n == 0:
        raise DataError(f"{what}: {len(x)} samples do not make one batch of {batch}")
    if not np.all(np.isfinite(x)):
        raise DataError(f"{what}: x holds NaN or infinite values")
    target = _targets(np.asarray(y), loss, out_shape, what)
    return Batches(x[:n * batch].reshape(n, batch, *in_shape[1:]),
                   target[:n * batch].reshape(n, batch, *out_shape[1:]))


def from_npz(path: Path, batch: int, in_shape: tuple[int, ...], out_shape: tuple[int, ...], loss: Loss) -> Batches:
    try:
        with np.load(path) as f:
            if "x" not in f or "y" not in f:
                raise DataError(f"{path}: expected arrays 'x' and 'y'; it has {sorted(f.files)}")
            x, y = f["x"], f["y"]
    except (OSError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{path}: not a readable .npz file ({exc})") from None
    return batches(x, y, batch, in_shape, out_shape, loss, str(path))


def synthetic(seed: int, count: int, batch: int, in_shape: tuple[int, ...], out_shape: tuple[int, ...],
              loss: Loss) -> Batches:
    """``count`` batches of normal inputs and uniform labels (or normal MSE targets), from ``seed``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count * batch, *in_shape[1:]))
    y = (rng.integers(0, out_shape[-1], count * batch) if loss == Loss.CROSS_ENTROPY
         else rng.standard_normal((count * batch, *out_shape[1:])))
    return batches(x, y, batch, in_shape, out_shape, loss, f"synthetic set (seed {seed})")
