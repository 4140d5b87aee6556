"""Norm rewrites: group_norm, instance_norm and long variances as steps that each fit a CPE's LDM.

TVM legalizes a group norm as one PrimFunc with the per-channel gamma/beta inside a group's reduction,
which does not slice into CPE blocks. Over the trailing axes of channels-first data it becomes a
normalisation of the [N * G, 1, C/G * rest] view (a block holds a group), then the per-channel scale and
shift as two broadcast steps; a group that does not fit the target's LDM twice (in and out) is normalised
in two passes (rows' moments pooled per group by Chan et al.'s formula, then ``x * a + b`` row by row).
A variance over trailing axes too long for a block (ONNX GroupNormalization's [N, G, C/G * H * W]) is
pooled the same way. The LDM figure is the target's (``group_bytes``); read with no target, nothing is
split.
"""

from __future__ import annotations

import math
from functools import partial
from math import prod
from typing import TYPE_CHECKING, Any

import numpy as np

from tuner.ir.graph import Tensor
from tuner.ir.passes.emit import legalized, scale_shift, step
from tuner.ir.passes.lowering_pass import LegalizedCall, LoweringPass, Value

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader
    from tuner.targets import Target

# LDM a normalisation's CPE kernel keeps for its scalars, beside the data it holds
SCALARS_BYTES = 1024


def group_bytes(target: Target | None) -> float:
    """The LDM a CPE block may fill with a group's data: the target's budget less its scalars (on SW26010,
    56 KB - 1 KB); unbounded with no target (a rebuilt operator, read as it is)."""
    return math.inf if target is None else target.ldm_budget_bytes - SCALARS_BYTES


def group_norm(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """group_norm and instance_norm (groups = channels) over the trailing axes of channels-first data,
    as steps that each slice into CPE blocks: a normalisation of the [N * G, 1, C/G * rest] view (over
    each group's contiguous elements; blocks along the groups), viewed back, then the per-channel
    scale and shift as two broadcast operators (blocks along the channels); a group too large for LDM
    in two passes (``_in_two_passes``). Any other layout is legalized as it is (a generic step)."""
    from tvm import relax

    x, gamma, beta = (r.tensor(a, name) for a in call.args[:3])
    at = call.attrs
    rank = len(x.shape)
    groups = int(at.num_groups) if op == "nn.group_norm" else (x.shape[1] if rank > 1 else 0)
    # TVM's torch import gives instance_norm axes [0, 2, 3]: the same reduction when the batch is 1
    axes = {int(a) % rank for a in at.axes} - ({0} if x.shape[0] == 1 else set())
    if rank < 3 or int(at.channel_axis) % rank != 1 or axes != set(range(2, rank)) or not groups \
            or x.shape[1] % groups:
        return legalized(r, [x, gamma, beta], lambda vs: relax.Call(call.op, vs, call.attrs), name, op,
                         expression=False)
    n, c = x.shape[0], x.shape[1]
    per_group = c // groups * prod(x.shape[2:])
    eps = float(at.epsilon)
    if 2 * per_group * np.dtype(x.dtype).itemsize > group_bytes(r.target):
        return _in_two_passes(r, x, gamma if bool(at.scale) else None, beta if bool(at.center) else None,
                              groups, eps, name, op)
    # each group one channel of its own: [N * G, 1, C/G * rest], normalised by a one-channel
    # instance_norm (unit scale, zero shift of one element each): a CPE block holds its group and
    # nothing else
    grouped = r.view(x, (n * groups, 1, per_group), name + ".groups")
    one = r.const(np.ones(1, dtype=x.dtype), name + ".one")
    zero = r.const(np.zeros(1, dtype=x.dtype), name + ".zero")
    normed = legalized(r, [grouped, one, zero],
                       lambda vs: relax.op.nn.instance_norm(vs[0], vs[1], vs[2], 1, [2], eps),
                       name, op, expression=False)
    y = r.view(normed, x.shape, name + ".normed")
    channel = (c,) + (1,) * (rank - 2)  # gamma/beta broadcast along the channel axis
    return scale_shift(r, y, r.view(gamma, channel, name + ".gamma") if bool(at.scale) else None,
                       r.view(beta, channel, name + ".beta") if bool(at.center) else None, name, op)


def _in_two_passes(r: RelaxReader, x: Tensor, gamma: Tensor | None, beta: Tensor | None, groups: int,
                   eps: float, name: str, op: str) -> Tensor:
    """A group too large to hold in LDM, in two passes over ``x`` that each slice into CPE blocks.

    Pass one: each row's mean and variance, a row being a channel's elements or an equal part of them
    that fits LDM. Between the passes, on [N, G, rows of a group] values (small): the group's mean and
    variance by Chan et al.'s pairwise combination (the rows' variances plus the spread of their means:
    no E[x^2] - E[x]^2 cancellation), then each channel's coefficients ``a = gamma / sqrt(var + eps)``
    and ``b = beta - mean * a``. Pass two: ``x * a + b`` row by row."""
    from tvm import relax

    add = partial(step, r, name=name, op=op)
    n, c = x.shape[0], x.shape[1]
    spatial = prod(x.shape[2:])
    itemsize = np.dtype(x.dtype).itemsize
    row = _row_length(spatial, itemsize, group_bytes(r.target))
    per_channel = spatial // row
    rows = r.view(x, (n * c * per_channel, row), name + ".rows")
    group_mean, group_var = _pooled_moments(r, rows, n * groups, name, op)
    group_mean, group_var = (r.view(t, (n, groups, 1), name + ".moment") for t in (group_mean, group_var))
    eps_t = r.const(np.array(eps, dtype=x.dtype), name + ".eps")
    rstd = add([add([group_var, eps_t], lambda vs: relax.op.add(vs[0], vs[1]))],
               lambda vs: relax.op.rsqrt(vs[0]))
    channels = (groups, c // groups)
    gamma = r.view(gamma, channels, name + ".gamma") if gamma is not None else \
        r.const(np.ones(channels, dtype=x.dtype), name + ".gamma")
    beta = r.view(beta, channels, name + ".beta") if beta is not None else \
        r.const(np.zeros(channels, dtype=x.dtype), name + ".beta")
    scale = add([rstd, gamma], lambda vs: relax.op.multiply(vs[0], vs[1]))  # [N, G, C/G]
    shift = add([beta, add([group_mean, scale], lambda vs: relax.op.multiply(vs[0], vs[1]))],
                lambda vs: relax.op.subtract(vs[0], vs[1]))
    if per_channel > 1:  # one coefficient per row: each channel's repeated over its rows
        scale, shift = (add([r.view(t, (n * c, 1), name + ".coef")],
                            lambda vs: relax.op.broadcast_to(vs[0], (n * c, per_channel)))
                        for t in (scale, shift))
    y = scale_shift(r, rows, r.view(scale, (rows.shape[0], 1), name + ".scale"),
                    r.view(shift, (rows.shape[0], 1), name + ".shift"), name, op)
    return r.view(y, x.shape, name + ".normed")


def _row_length(size: int, itemsize: int, budget: float) -> int:
    """The longest row a CPE block reduces whole that divides ``size``: a variance's kernel holds its
    row three times in LDM (the row, its centred squares and its output)."""
    return max(d for d in range(1, size + 1) if size % d == 0 and 3 * d * itemsize <= budget)


def _pooled_moments(r: RelaxReader, rows: Tensor, groups: int, name: str, op: str) -> tuple[Tensor, Tensor]:
    """Mean and variance ([groups, 1]) of each of ``groups`` runs of consecutive rows of ``rows``
    [R, L]: each row's mean and variance (a CPE block holds a row), then pooled per group by Chan et
    al.'s formula, ``var = mean_k(v_k + (m_k - M)^2)`` (no E[x^2] - E[x]^2 cancellation), on
    [groups, R / groups] values."""
    from tvm import relax

    add = partial(step, r, name=name, op=op)
    per_group = (groups, rows.shape[0] // groups)
    mean = add([rows], lambda vs: relax.op.mean(vs[0], [1], keepdims=True))
    var = add([rows], lambda vs: relax.op.variance(vs[0], [1], keepdims=True))
    row_mean, row_var = r.view(mean, per_group, name + ".row_mean"), r.view(var, per_group, name + ".row_var")
    group_mean = add([row_mean], lambda vs: relax.op.mean(vs[0], [1], keepdims=True))
    spread = add([row_mean, group_mean], lambda vs: relax.op.subtract(vs[0], vs[1]))
    spread = add([spread, spread], lambda vs: relax.op.multiply(vs[0], vs[1]))
    group_var = add([add([row_var, spread], lambda vs: relax.op.add(vs[0], vs[1]))],
                    lambda vs: relax.op.mean(vs[0], [1], keepdims=True))
    return group_mean, group_var


def long_variance(r: RelaxReader, c: LegalizedCall) -> Value | None:
    """A variance over trailing axes too long for a CPE block to hold (an ONNX GroupNormalization's
    [N, G, C/G * H * W]) as rows that fit, pooled (``_pooled_moments``); None for any other operator."""
    if c.relax_op != "variance" or len(c.args) != 1 or len(c.outs) != 1 or c.call is None \
            or len(c.call.args) != 1:
        return None
    x, out = c.args[0], c.outs[0][0]
    rank = len(x.shape)
    axis = c.call.attrs.axis
    axes = sorted({int(a) % rank for a in axis}) if axis is not None else list(range(rank))
    reduced = prod(x.shape[axes[0]:]) if axes else 1
    itemsize = np.dtype(x.dtype).itemsize
    budget = group_bytes(r.target)
    if not axes or axes != list(range(axes[0], rank)) or 3 * reduced * itemsize <= budget:
        return None
    kept = prod(x.shape[:axes[0]])
    row = _row_length(reduced, itemsize, budget)
    rows = r.view(x, (kept * reduced // row, row), c.name + ".rows")
    _, var = _pooled_moments(r, rows, kept, c.name, c.relax_op)
    return r.view(var, out, c.name + ".var")


PASS = LoweringPass("norm_rewrites", rules={"nn.group_norm": group_norm, "nn.instance_norm": group_norm},
                    legalized=long_variance)
