"""The same training steps in torch: the reference a compiled training program is checked against.

The model (a copy) trains in torch with torch.optim, on the same batches; each dropout multiplies its
input by the mask the compiled program draws at that step (tuner.aot.training_program.dropout_mask),
so both sides drop the same elements; batch norm is torch's own, running statistics included.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from tuner.aot.training_program import dropout_mask
from tuner.ir.optimizers import Optimizer
from tuner.ir.train_modules import Loss, loss_value
from tuner.train.data import Batches


@dataclass
class Reference:
    losses: list[float]
    params: dict[str, np.ndarray]
    buffers: dict[str, np.ndarray]  # batch-norm running statistics
    optimizer: Any  # the torch.optim optimizer after the steps (its state)
    model: Any


def torch_steps(model: Any, batches: Batches, optimizer: Optimizer, loss: Loss, steps: int,
                dropout_seed: int = 0, first: int = 0, frozen: bool = False) -> Reference:
    """``steps`` steps of a copy of ``model`` (train mode), step ``s`` on batch ``s mod len(batches)``.
    ``frozen``: in eval mode instead (batch norms on their running statistics, no dropout): what an ONNX
    model trains as (tuner.ir.onnx_training)."""
    import torch

    model = copy.deepcopy(model)
    model = model.eval() if frozen else model.train()
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    drops = [(n, m) for n, m in model.named_modules()
             if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0]
    current = {"step": first}

    def masked(index: int, p: float) -> Any:
        def hook(module: Any, args: Any, out: Any) -> Any:
            x = args[0]
            mask = dropout_mask(dropout_seed, current["step"], index, tuple(x.shape), p, dtype)
            return x * torch.from_numpy(mask)
        return hook

    for k, (_, m) in enumerate(drops):
        m.register_forward_hook(masked(k, float(m.p)))
    params = dict(model.named_parameters())
    topt = optimizer.torch(params.values())
    losses = []
    for s in range(first, first + steps):
        current["step"] = s
        x = torch.from_numpy(batches.x[s % len(batches)].astype(dtype))
        t = torch.from_numpy(batches.target[s % len(batches)].astype(dtype))
        topt.zero_grad()
        value = loss_value(model(x), t, loss)
        value.backward()
        topt.step()
        losses.append(float(value.item()))
    buffers = {n: b.detach().numpy().copy() for n, b in model.named_buffers() if "running_" in n}
    return Reference(losses, {n: p.detach().numpy().copy() for n, p in params.items()}, buffers, topt, model)


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """max|a - b| / max|b| (the parameters' measure: a bias near zero is judged against its tensor)."""
    return float(np.abs(a - b).max() / max(float(np.abs(b).max()), 1e-6))


def float64_floor(model: Any, batches: Batches, optimizer: Optimizer, loss: Loss, steps: int,
                  dropout_seed: int = 0) -> float:
    """How far torch's own float32 steps end from the same steps in float64 (max over parameters and
    running statistics of :func:`relative_error`): the least error a float32 comparison can resolve.

    Usually ~1e-5. Training can, however, amplify rounding: once parameters differ by ~1e-5, a
    max-pool window whose two largest inputs are that close picks the other one, or a ReLU input that
    close to zero changes sign, and that one gradient entry changes by O(1). ResNet-18 at width 1/8
    on 32x32 images, batch 8, SGD at lr 0.05 ends 0.57 off float64 after 5 steps (session 14). A
    program compared with torch on such a run cannot be judged to 1e-4 by anyone; this figure says
    when that is the case.
    """
    low = torch_steps(model, batches, optimizer, loss, steps, dropout_seed)
    high = torch_steps(copy.deepcopy(model).double(), batches, optimizer, loss, steps, dropout_seed)
    expected = {**high.params, **high.buffers}
    got = {**low.params, **low.buffers}
    return max(relative_error(got[n], v) for n, v in expected.items())
