"""Optimizer updates written as Relax operators, with torch.optim's arithmetic.

A training step's update is part of the one compiled step function (tuner.ir.training), so every
optimizer is a handful of element-wise operators per parameter that the compiler runs on the CPEs
like any other. Each optimizer names the state it keeps per parameter (and per step), all float
tensors: the compiled program has one element type, so Adam's step count is kept as the running
powers ``beta1**t`` and ``beta2**t`` instead of an integer.

Semantics follow torch.optim with its defaults (no weight decay, no dampening, no Nesterov, no AMSGrad):
- SGD: ``p -= lr * g``;
- momentum: ``b = mu * b + g; p -= lr * b`` (torch starts ``b`` at ``g``; ``b = 0`` before the first
  step gives the same);
- Adam: ``m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v) /
  sqrt(1 - b2^t) + eps)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

UPDATE_PREFIX = "update"  # the name of every binding the update emits


class OptimizerKind(StrEnum):
    """The optimizers an update is written for (their arithmetic: the module docstring)."""

    SGD = "sgd"
    MOMENTUM = "momentum"
    ADAM = "adam"


@dataclass(frozen=True)
class Optimizer:
    """An optimizer and its hyper-parameters (torch.optim's defaults where not given)."""

    kind: OptimizerKind
    lr: float
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if not (np.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"the learning rate must be a positive number, not {self.lr}")

    def state(self, params: list[tuple[str, np.ndarray]]) -> list[tuple[str, np.ndarray]]:
        """The optimizer state before the first step: (name, initial value) in the step's order."""
        if self.kind == OptimizerKind.SGD:
            return []
        if self.kind == OptimizerKind.MOMENTUM:
            return [(f"{n}_momentum", np.zeros_like(p)) for n, p in params]
        dtype = params[0][1].dtype if params else np.float32
        return ([(f"{n}_adam_m", np.zeros_like(p)) for n, p in params]
                + [(f"{n}_adam_v", np.zeros_like(p)) for n, p in params]
                + [("adam_beta1_power", np.ones((), dtype)), ("adam_beta2_power", np.ones((), dtype))])

    def emit(self, bb: Any, params: list[Any], grads: list[Any], state: list[Any],
             dtype: str) -> tuple[list[Any], list[Any]]:
        """Emit the update into ``bb``'s current dataflow block: (new params, new state), in the
        orders of ``params`` and ``self.state``."""
        from tvm import relax

        op = relax.op

        def emit(expr: Any) -> Any:  # named so the report can tell the update's steps (tuner.ir.training)
            return bb.emit(expr, name_hint=UPDATE_PREFIX)

        def c(x: float) -> Any:
            return relax.const(x, dtype)

        # one operator per binding, each named with the prefix (nested calls would be bound as ``lv``)
        def scaled(x: Any, factor: float) -> Any:
            return emit(op.multiply(x, c(factor)))

        if self.kind == OptimizerKind.SGD:
            return [emit(op.subtract(p, scaled(g, self.lr))) for p, g in zip(params, grads)], []
        if self.kind == OptimizerKind.MOMENTUM:  # one parameter's operators together: they fuse into
            new_p, bufs = [], []  # one CPE kernel (tuner.aot.cpe_fusion)
            for p, g, b in zip(params, grads, state):
                bufs.append(emit(op.add(scaled(b, self.momentum), g)))
                new_p.append(emit(op.subtract(p, scaled(bufs[-1], self.lr))))
            return new_p, bufs
        n = len(params)
        ms, vs, b1t, b2t = state[:n], state[n:2 * n], state[2 * n], state[2 * n + 1]
        b1t, b2t = scaled(b1t, self.beta1), scaled(b2t, self.beta2)
        step_size = emit(op.divide(c(self.lr), emit(op.subtract(c(1.0), b1t))))
        root_correction = emit(op.sqrt(emit(op.subtract(c(1.0), b2t))))
        new_p, new_m, new_v = [], [], []
        for p, g, m, v in zip(params, grads, ms, vs):
            m = emit(op.add(scaled(m, self.beta1), scaled(g, 1 - self.beta1)))
            v = emit(op.add(scaled(v, self.beta2), scaled(emit(op.multiply(g, g)), 1 - self.beta2)))
            denom = emit(op.add(emit(op.divide(emit(op.sqrt(v)), root_correction)), c(self.eps)))
            new_p.append(emit(op.subtract(p, emit(op.multiply(emit(op.divide(m, denom)), step_size)))))
            new_m.append(m)
            new_v.append(v)
        return new_p, [*new_m, *new_v, b1t, b2t]

    def torch(self, parameters: Any) -> Any:
        """The torch.optim optimizer with the same arithmetic (the reference the tests compare against)."""
        import torch

        if self.kind == OptimizerKind.SGD:
            return torch.optim.SGD(parameters, lr=self.lr)
        if self.kind == OptimizerKind.MOMENTUM:
            return torch.optim.SGD(parameters, lr=self.lr, momentum=self.momentum)
        return torch.optim.Adam(parameters, lr=self.lr, betas=(self.beta1, self.beta2), eps=self.eps)
