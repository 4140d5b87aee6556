"""The torch module a training step is exported from: the model with its loss, its batch norms' running
statistics as explicit inputs and outputs, and its dropouts' masks as inputs.

torch.export of a model in training mode drops dropout (the graph TVM imports is the identity) and
turns batch-norm running statistics into constants whose update is discarded. So before export,
on a copy of the model:
- each ``BatchNorm`` that tracks running statistics becomes :class:`_BatchNormWithStats`: the same
  parameters (same names), normalising by the batch statistics and returning the updated running
  mean and (unbiased) variance with torch's momentum rule;
- each ``Dropout`` with ``p > 0`` becomes :class:`_MaskedDropout`: its input times a mask the caller
  passes (0 or ``1 / (1 - p)`` per element; the compiled program draws it, tuner.aot.training_program).

The wrapped module takes ``(*inputs, target, *masks, *running_stats)`` and returns ``(loss,
*new_running_stats)`` (``loss`` alone without batch norm).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Loss(StrEnum):
    CROSS_ENTROPY = "cross-entropy"  # mean over the batch of -sum(target * log_softmax(output))
    MSE = "mse"  # mean squared error over every element


@dataclass(frozen=True)
class Norm:
    name: str  # the module's path in the model
    channels: int


@dataclass(frozen=True)
class Dropout:
    name: str
    p: float
    shape: tuple[int, ...]  # of its input (and mask), at the step's shapes


@dataclass(frozen=True)
class Prepared:
    module: Any  # the wrapped torch module
    norms: list[Norm]
    dropouts: list[Dropout]


def _modules(model: Any) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    import torch

    norms = [(n, m) for n, m in model.named_modules()
             if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    drops = [(n, m) for n, m in model.named_modules()
             if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0]
    return norms, drops


def _replace(model: Any, name: str, new: Any) -> None:
    parent = model.get_submodule(name.rpartition(".")[0]) if "." in name else model
    setattr(parent, name.rpartition(".")[2], new)


def loss_value(out: Any, target: Any, loss: Loss) -> Any:
    import torch

    if loss == Loss.CROSS_ENTROPY:
        return -(target * torch.log_softmax(out, -1)).sum() / out.shape[0]
    return ((out - target) ** 2).mean()


def _dropout_shapes(model: Any, inputs: Any) -> dict[str, tuple[int, ...]]:
    """Each dropout's input shape, from a forward of a copy of ``model`` (a train-mode forward changes
    batch-norm statistics)."""
    import torch

    probe = copy.deepcopy(model)
    shapes: dict[str, tuple[int, ...]] = {}
    for name, m in _modules(probe)[1]:
        m.register_forward_hook(lambda mod, args, out, name=name: shapes.__setitem__(name, tuple(args[0].shape)))
    with torch.no_grad():
        probe(*inputs)
    return shapes


def prepare(model: Any, inputs: Any, loss: Loss) -> Prepared:
    """The wrapped module of a copy of ``model`` (the model itself is untouched) at ``inputs``' shapes."""
    import torch

    shapes = _dropout_shapes(model, inputs)
    model = copy.deepcopy(model)
    norms, drops = _modules(model)
    for name, bn in norms:
        if bn.momentum is None:
            raise ValueError(f"{name}: batch norm with momentum=None (a cumulative average) is not supported")
        _replace(model, name, _BatchNormWithStats(bn))
    for name, _ in drops:
        _replace(model, name, _MaskedDropout())
    stats_modules = [model.get_submodule(n) for n, _ in norms]
    drop_modules = [model.get_submodule(n) for n, _ in drops]

    class WithLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args: Any) -> Any:
            n_norm, n_drop = len(stats_modules), len(drop_modules)
            rest = list(args[:len(args) - n_drop - 2 * n_norm])
            masks = args[len(rest):len(rest) + n_drop]
            stats = args[len(rest) + n_drop:]
            *inputs, target = rest
            for m, mask in zip(drop_modules, masks):
                m.mask = mask
            for i, m in enumerate(stats_modules):
                m.running = (stats[2 * i], stats[2 * i + 1])
            value = loss_value(self.model(*inputs), target, loss)
            if not stats_modules:
                return value
            return (value, *[s for m in stats_modules for s in m.updated])

    return Prepared(WithLoss(), [Norm(n, int(bn.num_features)) for n, bn in norms],
                    [Dropout(n, float(d.p), shapes[n]) for n, d in drops])


def _batch_norm_class() -> Any:
    import torch

    class BatchNormWithStats(torch.nn.Module):
        """Batch statistics, with the running statistics in and out as tensors (see module doc)."""

        def __init__(self, bn: Any) -> None:
            super().__init__()
            self.weight, self.bias = bn.weight, bn.bias  # the same Parameters: same names, same values
            self.eps, self.momentum = float(bn.eps), float(bn.momentum)
            self.running: tuple[Any, Any] = (bn.running_mean, bn.running_var)
            self.updated: tuple[Any, Any] = self.running

        def forward(self, x: Any) -> Any:
            dims = [0, *range(2, x.dim())]
            view = [1, x.shape[1]] + [1] * (x.dim() - 2)
            mean = x.mean(dims)
            var = ((x - mean.reshape(view)) ** 2).mean(dims)
            y = (x - mean.reshape(view)) / torch.sqrt(var.reshape(view) + self.eps)
            if self.weight is not None:
                y = y * self.weight.reshape(view) + self.bias.reshape(view)
            n = x.numel() // x.shape[1]
            m = self.momentum
            self.updated = (self.running[0] * (1 - m) + mean * m,
                            self.running[1] * (1 - m) + var * (m * n / max(n - 1, 1)))
            return y

    return BatchNormWithStats


def _dropout_class() -> Any:
    import torch

    class MaskedDropout(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mask: Any = None

        def forward(self, x: Any) -> Any:
            return x * self.mask

    return MaskedDropout


def _BatchNormWithStats(bn: Any) -> Any:  # noqa: N802 -- stands for the class, built with torch imported
    return _batch_norm_class()(bn)


def _MaskedDropout() -> Any:  # noqa: N802
    return _dropout_class()()
