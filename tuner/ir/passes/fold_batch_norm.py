"""Batch-norm folding: an inference batch norm is one per-channel scale and shift, computed at compile time.

With constant statistics, ``gamma * (x - mean) / sqrt(var + eps) + beta`` is ``x * scale + shift``, per
channel, ``scale = gamma / sqrt(var + eps)`` and ``shift = beta - mean * scale`` folded here in float64 and
stored in the model's dtype. The multiply and the add are two broadcast steps (tuner.ir.passes.emit):
tuner.aot.fusion fuses them into the kernel that made ``x`` as its epilogue where their vectors fit its
LDM, else they run on the CPEs as any broadcast operator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tuner.ir.graph import AotError
from tuner.ir.passes.emit import scale_shift
from tuner.ir.passes.lowering_pass import LoweringPass, Value

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader


def scale_and_shift(gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray, var: np.ndarray, epsilon: float,
                    scale: bool = True, center: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The per-channel (scale, shift), in float64, of a batch norm in inference form (``scale``/``center``
    False: gamma/beta not applied)."""
    gamma, beta, mean, var = (np.asarray(t, dtype=np.float64) for t in (gamma, beta, mean, var))
    if not scale:
        gamma = np.ones_like(gamma)
    if not center:
        beta = np.zeros_like(beta)
    s = gamma / np.sqrt(var + epsilon)
    return s, beta - mean * s


def batch_norm(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """``nn.batch_norm`` with constant statistics: (y, moving_mean, moving_var), y = x * scale + shift."""
    x = r.tensor(call.args[0], name)
    stats = [r.tensor(e, name) for e in call.args[1:5]]
    if any(t.kind != "const" for t in stats):
        raise AotError(f"{name} (nn.batch_norm): gamma/beta/mean/var must be constants (inference form)")
    a = call.attrs
    gamma, beta, mean, var = (np.asarray(t.data) for t in stats)
    scale, shift = scale_and_shift(gamma, beta, mean, var, float(a.epsilon), bool(a.scale), bool(a.center))
    axis = int(a.axis) % len(x.shape)
    channel = (len(scale),) + (1,) * (len(x.shape) - 1 - axis)
    out = scale_shift(r, x, r.const(scale.astype(r.dtype).reshape(channel), name + ".scale"),
                      r.const(shift.astype(r.dtype).reshape(channel), name + ".shift"), name, op)
    return (out, stats[2], stats[3])  # Relax returns (y, moving_mean, moving_var)


PASS = LoweringPass("fold_batch_norm", rules={"nn.batch_norm": batch_norm})
