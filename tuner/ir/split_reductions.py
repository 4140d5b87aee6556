"""Reductions the CPEs can run: trailing axes first, leading axes moved last.

A batch-norm's statistics (``mean`` over N, H, W of an NCHW tensor) and the adjoint of a per-channel
broadcast (``collapse_sum_to`` to [1, C, 1, 1]) reduce over the batch axis and the spatial axes at
once. The CPE cutter (tuner.space.cpe.cuts) cuts an operator into blocks along one output axis with
each block's input one contiguous range, which such a reduction does not have: the channel j of every
sample is a separate range. Reducing the trailing axes first ([N, C, H, W] -> [N, C, 1, 1], a
reduction over trailing axes the cutter slices along C) leaves a tensor of N * C elements for the
second reduction, over leading axes only, like a bias's gradient ([B, T, F] -> [F]): that becomes a
transpose (a CPE layout kernel) and a reduction over trailing axes, however small, so every step of a
batch norm's arithmetic has a CPE form and tuner.aot.placement can keep the chain in one launch
(left as it is, it would run on the MPE and split the launch group around it).

Exact in real arithmetic (a mean of means of equal-sized groups is the mean); in floating point only
the order of the additions changes. Applied by tuner.ir.relax_reader.read_relax, so every reader of a
module (compiler, task extraction, CPE kernel rebuild) sees the same operators.
"""

from __future__ import annotations

from typing import Any

_REDUCTIONS = ("relax.sum", "relax.mean")


def _trailing(axes: list[int], src: tuple[int, ...]) -> list[int]:
    """The reduced axes that end the tensor, unit axes between them and the end skipped."""
    out = []
    for a in range(len(src) - 1, -1, -1):
        if a in axes:
            out.append(a)
        elif src[a] != 1:
            break
    return sorted(out)


def _collapsed_axes(src: tuple[int, ...], dst: tuple[int, ...]) -> list[int]:
    """The axes of ``src`` that ``collapse_sum_to`` sums over to reach ``dst`` (numpy broadcasting)."""
    lead = len(src) - len(dst)
    return [a for a in range(len(src)) if a < lead or (dst[a - lead] == 1 and src[a] != 1)]


def split_leading_reductions(mod: Any) -> Any:
    """``mod`` with every sum/mean/collapse_sum_to that reduces more than trailing axes rewritten as a
    keepdims reduction of the trailing axes (if any), then a transpose moving the other reduced axes
    last and their reduction, reshaped to the original result."""
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
            moved = [a for a in axes if src[a] != 1]  # unit axes reduce nothing
            tail = _trailing(moved, src)
            if not moved or len(tail) == len(moved):
                return call  # nothing to reduce, or trailing axes only: the cutter slices it as it is
            if tail:  # the trailing axes first, keepdims: [N, C, H, W] -> [N, C, 1, 1]
                x = self.builder_.emit(op(x, axis=tail, keepdims=True))
                moved = [a for a in moved if a not in tail]
            # then the leading ones (a bias gradient; a batch statistic's N): moved last, reduced as trailing
            kept = [a for a in range(rank) if a not in moved]
            last = self.builder_.emit(relax.op.permute_dims(x, kept + moved))
            reduced = self.builder_.emit(op(last, axis=list(range(len(kept), rank)), keepdims=False))
            return relax.op.reshape(reduced, call.ty.shape)

    out = mod.clone()  # the caller's module stays as it was
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            out[gv] = Splitter().visit_expr(func)
    return out
