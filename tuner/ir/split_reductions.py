"""Reductions the CPEs can run: trailing axes first, leading axes moved last.

A batch-norm's statistics (``mean`` over N, H, W of an NCHW tensor) and the adjoint of a per-channel
broadcast (``collapse_sum_to`` to [1, C, 1, 1]) reduce over the batch axis and the spatial axes at
once. The CPE cutter (tuner.space.cpe.cuts) cuts an operator into blocks along one output axis with
each block's input one contiguous range, which such a reduction does not have: the channel j of every
sample is a separate range. Reducing the trailing axes first ([N, C, H, W] -> [N, C, 1, 1], a
reduction over trailing axes the cutter slices along C) leaves a tensor of N * C elements for the
second reduction: the memory-bound pass runs on the CPEs and the MPE sums a few numbers. A reduction
over leading axes only (a bias's gradient, [B, T, F] -> [F]) becomes a transpose (a CPE layout kernel)
and a reduction over trailing axes.

Exact in real arithmetic (a mean of means of equal-sized groups is the mean); in floating point only
the order of the additions changes. Applied by tuner.ir.relax_reader.read_relax, so every reader of a
module (compiler, task extraction, CPE kernel rebuild) sees the same operators.
"""

from __future__ import annotations

import math
from typing import Any

_REDUCTIONS = ("relax.sum", "relax.mean")
# a reduction over leading axes only is transposed first from this many elements on; below it the MPE
# sums them sooner than a CPE kernel starts (a spawn is ~30 us: tuner.targets)
MOVE_LEADING_FROM = 4096


def _trailing(axes: list[int], rank: int) -> list[int]:
    """The reduced axes that are a suffix of the tensor's axes (the run ending at the last one)."""
    out = []
    for a in range(rank - 1, -1, -1):
        if a not in axes:
            break
        out.append(a)
    return sorted(out)


def _collapsed_axes(src: tuple[int, ...], dst: tuple[int, ...]) -> list[int]:
    """The axes of ``src`` that ``collapse_sum_to`` sums over to reach ``dst`` (numpy broadcasting)."""
    lead = len(src) - len(dst)
    return [a for a in range(len(src)) if a < lead or (dst[a - lead] == 1 and src[a] != 1)]


def split_leading_reductions(mod: Any) -> Any:
    """``mod`` with every sum/mean/collapse_sum_to that reduces trailing axes and others besides
    rewritten as a keepdims reduction of the trailing axes followed by the original reduction."""
    from tvm import relax

    @relax.expr_functor.mutator
    class Splitter(relax.PyExprMutator):
        def visit_call_(self, call: Any) -> Any:
            call = super().visit_call_(call)
            name = getattr(call.op, "name", "")
            if name not in (*_REDUCTIONS, "relax.collapse_sum_to"):
                return call
            x = call.args[0]
            shape = getattr(x.ty, "shape", None)
            if shape is None or not all(hasattr(d, "value") for d in shape):
                return call
            src = tuple(int(d) for d in shape)
            rank = len(src)
            if name == "relax.collapse_sum_to":
                dst_shape = call.args[1]
                if not all(hasattr(d, "value") for d in getattr(dst_shape, "values", [None])):
                    return call
                axes = _collapsed_axes(src, tuple(int(d) for d in dst_shape.values))
            else:
                if call.attrs.axis is None:
                    axes = list(range(rank))
                else:
                    axes = sorted({int(a) % rank for a in call.attrs.axis})
            op = relax.op.mean if name == "relax.mean" else relax.op.sum
            tail = _trailing(axes, rank)
            if not tail and axes and math.prod(src) >= MOVE_LEADING_FROM:
                # leading axes only (a bias gradient): move them last, then reduce trailing axes
                kept = [a for a in range(rank) if a not in axes]
                moved = self.builder_.emit(relax.op.permute_dims(x, kept + axes))
                reduced = self.builder_.emit(op(moved, axis=list(range(len(kept), rank)), keepdims=False))
                return relax.op.reshape(reduced, call.ty.shape)
            if not tail or len(tail) == len(axes) or all(src[a] == 1 for a in tail):
                return call
            inner = self.builder_.emit(op(x, axis=tail, keepdims=True))
            if name == "relax.collapse_sum_to":
                return relax.op.collapse_sum_to(inner, call.args[1])
            return op(inner, axis=axes, keepdims=bool(call.attrs.keepdims))

    out = mod.clone()  # the caller's module stays as it was
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            out[gv] = Splitter().visit_expr(func)
    return out
