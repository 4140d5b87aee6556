"""The gather form of one stage's adjoint: each input's gradient as terms over that input's points.

For a stage ``out[head] = reduce over k of value`` and one group of loads ``X[J(i, k)]`` in its body,
``dX[a] = sum over (i, k) with J(i, k) = a of dOut[head] * d value / d X[J]``. Each index dimension of X
is solved for one axis (its pivot); the other axes become reduction axes; a pivot's coefficient splits
the gradient by residue so that no term falls on an inserted zero (tuner/expr/autodiff.py explains the
whole method). Here: the stage read from te (``stage_of``, with ``v // m`` axes split), index-only stages
(``index_map``), affine indices, and the terms (``gather_terms``). Imports tvm inside functions only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from tuner.expr.derivative import (
    NotDifferentiableError,
    dtype_of,
    is_load,
    kind,
    load_parts,
    nodes,
    rebuild,
    show,
    show_indices,
)

POSITIONS_ATTR = "swtune_positions"  # marks a stage holding the row-major positions of a reduction's points


def row_major(index: Any, extents: Any) -> Any:
    """The row-major position of ``index`` in a box of ``extents`` (ints, or TIR expressions)."""
    flat = 0
    for i, ext in zip(index, extents):
        flat = flat * ext + i
    return flat


def _is_positions(tensor: Any) -> bool:
    attrs = getattr(tensor.op, "attrs", None)
    return attrs is not None and POSITIONS_ATTR in attrs


@dataclass
class Stage:
    """One te.compute in reduce form: out[head] = reducer over reduce axes of value."""

    tensor: Any
    extents: dict[Any, int]  # every axis variable (spatial and reduction) -> extent
    head: list[Any]  # the output index as a function of the axes (the spatial axes, or their splits)
    value: Any
    reducer: str  # "none", "sum", "max" or "min"


def stage_of(tensor: Any) -> Stage:
    from tvm import ir, sym, te

    op = tensor.op
    if not isinstance(op, te.ComputeOp) or len(op.body) != 1:
        raise NotDifferentiableError(f"{op.name} must be a te.compute with one output")
    body = op.body[0]
    spatial = [iv.var for iv in op.axis]
    extents = {iv.var: int(iv.dom.extent) for iv in op.axis}
    if kind(body) == "Reduce":
        if not (kind(body.condition) == "IntImm" and int(body.condition.value) == 1):
            raise NotDifferentiableError(f"{op.name}: a reduction with where= is not differentiated "
                                         "(write if_then_else inside the sum instead)")
        reducer = {"Add": "sum", "Max": "max", "Min": "min"}.get(kind(body.combiner.result[0]))
        if reducer is None or len(body.source) != 1:
            raise NotDifferentiableError(f"{op.name}: only sum, max and min reductions are differentiated")
        extents.update({iv.var: int(iv.dom.extent) for iv in body.axis})
        value = body.source[0]
    else:
        reducer, value = "none", body
    # indices simplified under the axes' bounds first: a conv of one group indexes k // K, always 0
    analyzer = sym.Analyzer()
    for var, ext in extents.items():
        analyzer.bind(var, ir.Range(0, ext))
    value = rebuild(value, {}, lambda t, idx: t(*[analyzer.simplify(i) for i in idx]))
    stage = Stage(tensor, extents, head=spatial, value=value, reducer=reducer)  # out[i, j, ..]
    return _split_div_mod(stage)


def _split_div_mod(stage: Stage) -> Stage:
    """Axes used as ``v // m`` or ``v % m`` are split into ``m * v_hi + v_lo`` (both then affine)."""
    from tvm import ir, sym, tirx

    divisors: dict[Any, int] = {}
    for e in nodes(stage.value):
        if kind(e) in ("FloorDiv", "FloorMod") and kind(e.a) == "Var" and kind(e.b) == "IntImm":
            m = int(e.b.value)
            if divisors.setdefault(e.a, m) != m:
                raise NotDifferentiableError(f"axis {e.a.name} is divided by both {divisors[e.a]} and {m}")
    if not divisors:
        return stage
    mapping: dict[Any, Any] = {}
    extents = dict(stage.extents)
    analyzer = sym.Analyzer()
    for v, m in divisors.items():
        if extents[v] % m:
            raise NotDifferentiableError(f"axis {v.name} (extent {extents[v]}) is divided by {m}, which does not "
                                         "divide its extent")
        hi, lo = tirx.Var(f"{v.name}_hi", "int32"), tirx.Var(f"{v.name}_lo", "int32")
        extents[hi], extents[lo] = extents.pop(v) // m, m
        mapping[v] = hi * m + lo
    for var, ext in extents.items():
        analyzer.bind(var, ir.Range(0, ext))

    def simplify(e: Any) -> Any:
        return analyzer.simplify(e)

    def load(tensor: Any, idx: list[Any]) -> Any:
        return tensor(*[simplify(i) for i in idx])

    value = rebuild(stage.value, mapping, load)
    head = [simplify(rebuild(h, mapping, load)) for h in stage.head]
    return Stage(stage.tensor, extents, head, value, stage.reducer)


def index_map(tensor: Any) -> tuple[Any, list[Any], Any] | None:
    """(source tensor, index of it in the stage's axes, guard or None) when ``tensor`` is an index-only
    stage: a copy, transpose or zero padding of one tensor."""
    from tvm import te

    op = tensor.op
    if not isinstance(op, te.ComputeOp) or len(op.body) != 1 or kind(op.body[0]) == "Reduce":
        return None
    body, guard = op.body[0], None
    if kind(body) == "Call" and str(body.op.name) == "prim.if_then_else":
        guard, kept, other = body.args
        body = kept
        if not (kind(other) in ("FloatImm", "IntImm") and float(other.value) == 0.0):
            return None
    elif kind(body) == "Select":
        if not (kind(body.false_value) in ("FloatImm", "IntImm") and float(body.false_value.value) == 0.0):
            return None
        guard, body = body.condition, body.true_value
    if not is_load(body):
        return None
    source, index = load_parts(body)
    return source, index, guard


@dataclass(frozen=True)
class Affine:
    coefs: dict[Any, int]
    offset: int


def affine(expr: Any, variables: list[Any], what: str) -> Affine:
    from tvm import sym

    coefs = sym.detect_linear_equation(expr, variables)
    if len(coefs) != len(variables) + 1 or any(kind(c) != "IntImm" for c in coefs):
        raise NotDifferentiableError(f"the index {show(expr)} of {what} is not an integer affine function of "
                                     "the axes")
    values = [int(c.value) for c in coefs]
    return Affine({v: c for v, c in zip(variables, values[:-1]) if c}, values[-1])


Linear = tuple[tuple[int, ...], ...]  # per dimension of an index, the coefficient of each variable


def linear_part(index: list[Any], variables: list[Any]) -> Linear | None:
    """The coefficients of ``variables`` in each dimension of ``index``, constant offsets dropped; None
    when a dimension is not an integer affine function of them. Two loads of one tensor whose linear
    parts are equal read one box shifted (a stencil's taps); unequal, their union is no affine box."""
    from tvm import sym

    parts = []
    for i in index:
        coefs = sym.detect_linear_equation(i, variables)
        if len(coefs) != len(variables) + 1 or any(kind(c) != "IntImm" for c in coefs):
            return None
        parts.append(tuple(int(c.value) for c in coefs[:-1]))
    return tuple(parts)


@dataclass
class Term:
    """One contribution to an input's gradient, re-indexed: value over (q axes, reduce axes)."""

    step: tuple[int, ...]
    first: tuple[int, ...]
    residue: tuple[int, ...]
    count: tuple[int, ...]
    q: list[Any]  # one output variable per dimension of the target
    reduce: list[tuple[Any, int]]  # (variable, extent)
    value: Any  # reads the original tensors at in-range-or-not indices (padding decided later)
    radix: tuple[tuple[int, ...], ...] = ()  # per target dimension, the sizes it is viewed as (mixed radix)


def _mixed_radix(dims: list[Affine], shape: list[int], extents: dict[Any, int], shared: bool = False) -> tuple[
        list[Affine], list[int], tuple[tuple[int, ...], ...]]:
    """A dimension indexed as ``ext(v) * u + v`` over exactly its size (a grouped conv's channel
    ``g * C_g + c``, a patch embedding's ``3 * y + r``) is a bijection: view it as the dimensions (u, v),
    each solved directly, instead of splitting by residue. With ``shared``, its axes may also index other
    dimensions (a grouped shift's channel ``(u*K + v)*C_g + q`` whose group (u, v) also shifts the rows
    and columns): the triangular solve then substitutes them there. (dims, shape, the sizes of each
    original dimension)."""
    out_dims: list[Affine] = []
    out_shape: list[int] = []
    radix: list[tuple[int, ...]] = []
    for d, (dim, size) in enumerate(zip(dims, shape)):
        ordered = sorted(dim.coefs.items(), key=lambda vc: vc[1])
        mixed = len(ordered) > 1 and dim.offset == 0 and ordered[0][1] == 1 and (shared or all(
            not any(v in other.coefs for e, other in enumerate(dims) if e != d) for v, _ in ordered))
        coef = 1
        for v, c in ordered:
            mixed = mixed and c == coef
            coef *= extents[v]
        if not (mixed and coef == size):
            out_dims.append(dim)
            out_shape.append(size)
            radix.append((size,))
            continue
        for v, _ in reversed(ordered):  # the outermost (largest coefficient) first, as the memory layout
            out_dims.append(Affine({v: 1}, 0))
            out_shape.append(extents[v])
        radix.append(tuple(extents[v] for v, _ in reversed(ordered)))
    return out_dims, out_shape, tuple(radix)


def gather_terms(stage: Stage, index: list[Any], grad: Any, target: Any, head: Any) -> list[Term]:
    """The terms of ``d target[index] += head[stage.head] * grad`` in gather form over target's points."""
    from tvm import ir, sym, tirx

    axes = list(stage.extents)
    name = str(target.op.name)
    affines = [affine(i, axes, name) for i in index]
    target_shape = [int(s) for s in target.shape]
    # axes that are a whole dimension of the output's index: out of range, they read the head's zero
    # padding (a split axis, one of m * v_hi + v_lo, is not)
    head_dims = [affine(h, axes, "the output") for h in stage.head]
    head_axes = {v for h in head_dims for v, c in h.coefs.items() if len(h.coefs) == 1 and c == 1 and h.offset == 0}
    # a mixed-radix dimension whose axes also index others (a grouped shift's channel) is viewed as its
    # parts only where the triangular solve then takes every part: each part's axis becomes a pivot
    # substituted into the other dimensions, instead of a reduction axis under a guard
    dims, shape, radix = _mixed_radix(affines, target_shape, stage.extents, shared=True)
    solved = _pivot_order(dims, stage.extents, head_axes)
    if solved is None:
        dims, shape, radix = _mixed_radix(affines, target_shape, stage.extents)
        solved = _pivot_order(dims, stage.extents, head_axes)
    if solved is None:
        raise NotDifferentiableError(f"every axis in the index {show_indices(index)} of {name} also indexes "
                                     "another dimension: its gradient needs a scatter form, which is not supported")
    pivots, order = solved
    # the modulus each non-pivot axis is split by: the residue that solves every pivot's equation exactly
    modulus: dict[Any, int] = {}
    for dim, pivot in zip(dims, pivots):
        if pivot is None:
            continue
        m = abs(dim.coefs[pivot])
        for u, c in dim.coefs.items():
            if u != pivot:
                need = m // math.gcd(abs(c), m)
                modulus[u] = math.lcm(modulus.get(u, 1), need)
    split = [u for u, m in modulus.items() if m > 1]
    steps = [abs(dim.coefs[p]) if p is not None else 1 for dim, p in zip(dims, pivots)]
    residues = [range(s) if p is not None else range(dim.offset, dim.offset + 1)
                for s, p, dim in zip(steps, pivots, dims)]
    terms: list[Term] = []
    for rho in itertools.product(*residues):
        for t in itertools.product(*(range(modulus[u]) for u in split)):
            shift = dict(zip(split, t))
            term = _one_term(stage, dims, pivots, order, steps, rho, shift, modulus, shape, grad, head,
                             head_axes)
            if term is not None:
                term.radix = radix
                terms.append(term)
    # simplify indices and guards under the term's bounds
    for term in terms:
        analyzer = sym.Analyzer()
        for v, c in zip(term.q, term.count):
            analyzer.bind(v, ir.Range(0, c))
        for v, e in term.reduce:
            analyzer.bind(v, ir.Range(0, e))

        def load(tensor: Any, idx: list[Any], analyzer: Any = analyzer) -> Any:
            idx = [analyzer.simplify(i) for i in idx]
            if _is_positions(tensor) and all(kind(i) == "IntImm" for i in idx):
                # one fixed point of a reduction: its position is a constant, not an operand
                flat = row_major([int(i.value) for i in idx], [int(e) for e in tensor.shape])
                return tirx.FloatImm(str(tensor.dtype), float(flat))
            return tensor(*idx)

        def simplify_guards(e: Any, analyzer: Any = analyzer) -> Any:
            if kind(e) == "Select":
                cond = analyzer.simplify(e.condition)
                if kind(cond) == "IntImm":
                    return simplify_guards(e.true_value if int(cond.value) else e.false_value)
                return tirx.Select(cond, simplify_guards(e.true_value), simplify_guards(e.false_value))
            if kind(e) in ("Add", "Sub", "Mul", "Div"):
                return getattr(tirx, kind(e))(simplify_guards(e.a), simplify_guards(e.b))
            return e

        term.value = simplify_guards(rebuild(term.value, {}, load))
    return terms


def _pivot_order(dims: list[Affine], extents: dict[Any, int], head_axes: set[Any]) -> tuple[
        list[Any | None], list[int]] | None:
    """(the pivot of each dimension, the order the dimensions are solved in), or None when the index
    map is not triangular over distinct pivots. A pivot alone among the dimensions (the usual case: an
    output axis, or a reduction axis of one dimension) is solved directly; an axis that also indexes
    other dimensions (a shift's group (u, v): channel part u, row i + u) is a pivot solved first and
    substituted into the dimensions that read it, each of which must then have a pivot of coefficient
    +-1, so the substitution keeps its equation exact with no residue split. A dimension of several
    axes: the whole output dimension first (the head's padding bounds it), then the largest coefficient
    (the other axes split by it shrink to a point: v_hi of a split axis), then the largest extent."""

    def best(d: int, candidates: list[Any]) -> Any:
        return max(candidates, key=lambda v: (v in head_axes, abs(dims[d].coefs[v]), extents[v]))

    pivots: list[Any | None] = [None] * len(dims)
    # pivots in no other dimension at all: solved last, whatever the others are
    last = [d for d, dim in enumerate(dims) if any(
        all(v not in other.coefs for e, other in enumerate(dims) if e != d) for v in dim.coefs)]
    for d in last:
        pivots[d] = best(d, [v for v in dims[d].coefs if all(v not in o.coefs for e, o in enumerate(dims) if e != d)])
    remaining = [d for d, dim in enumerate(dims) if dim.coefs and d not in last]
    peeled: list[int] = []  # the dimension solved last first
    while remaining:
        for d in remaining:
            candidates = [v for v in dims[d].coefs if v not in pivots
                          and all(v not in dims[e].coefs for e in remaining if e != d)]
            if candidates:
                pivots[d] = best(d, candidates)
                peeled.append(d)
                remaining.remove(d)
                break
        else:
            return None
    for dim, pivot in zip(dims, pivots):
        substituted = [u for u in dim.coefs if u != pivot and u in pivots]
        if substituted and abs(dim.coefs[pivot]) != 1:
            return None
    constants = [d for d, dim in enumerate(dims) if not dim.coefs]
    return pivots, constants + peeled[::-1] + last


def _one_term(stage: Stage, dims: list[Affine], pivots: list[Any | None], order: list[int], steps: list[int],
              rho: tuple[int, ...], shift: dict[Any, int], modulus: dict[Any, int], shape: list[int], grad: Any,
              head: Any, head_axes: set[Any]) -> Term | None:
    """The term of one residue combination, or None when it is empty or never solves the index. The
    dimensions are solved in ``order`` (:func:`_pivot_order`): a pivot that also indexes a later
    dimension is substituted there by its solution."""
    from tvm import tirx

    # the equation of each pivot dimension must be solvable for these residues
    for dim, pivot, m, r in zip(dims, pivots, steps, rho):
        if pivot is not None:
            rest = sum(c * shift.get(u, 0) for u, c in dim.coefs.items() if u != pivot)
            if (r - dim.offset - rest) % m:
                return None
    reduce: list[tuple[Any, int]] = []
    mapping: dict[Any, Any] = {}
    renamed: dict[Any, Any] = {}  # forward axis -> its reduction variable in the adjoint
    for v, ext in stage.extents.items():
        if v in pivots:
            continue
        m = modulus.get(v, 1)
        t = shift.get(v, 0)
        points = -(-(ext - t) // m)
        if points <= 0:
            return None
        new = tirx.Var(f"{v.name}_r" if m > 1 else str(v.name), "int32")
        if points == 1:  # a single point: no reduction axis
            new = tirx.IntImm("int32", 0)
        else:
            reduce.append((new, points))
        renamed[v] = new
        mapping[v] = new * m + t if m > 1 else new
    q = [tirx.Var(str(p.name) if p is not None else f"i{d}", "int32") for d, p in enumerate(pivots)]
    first: list[int] = [0] * len(dims)
    count: list[int] = [0] * len(dims)
    guards: list[tuple[Any, int]] = []
    for d in order:
        dim, pivot, m, r = dims[d], pivots[d], steps[d], rho[d]
        points = -(-(shape[d] - r) // m) if pivot is not None else (1 if 0 <= r < shape[d] else 0)
        lo, hi = 0, points
        if pivot is not None:
            sign = 1 if dim.coefs[pivot] > 0 else -1
            rest_const = sum(cu * shift.get(u, 0) for u, cu in dim.coefs.items() if u != pivot)
            base = (r - dim.offset - rest_const) // m  # exact: checked above
            # axes split down to one point are constants of the residue (already in base)
            others = [(u, cu) for u, cu in dim.coefs.items()
                      if u != pivot and u not in pivots and kind(renamed[u]) == "Var"]
            # pivots solved before, read here (m is 1: _pivot_order)
            substituted = [(u, cu) for u, cu in dim.coefs.items() if u != pivot and u in pivots]
            ext = stage.extents[pivot]
            if not others and not substituted and pivot not in head_axes:
                # tighten: the pivot sign * (q + first + base) must lie in [0, ext); a pivot of the head's
                # index is kept in range by the head's zero padding instead, so that the taps of a
                # stencil share one domain and make one operator
                if sign > 0:
                    lo, hi = max(lo, -base), min(hi, ext - base)
                else:
                    lo, hi = max(lo, -base - ext + 1), min(hi, -base + 1)
            solved = q[d] + lo + base
            for u, cu in others:
                solved = solved - (cu * modulus.get(u, 1) // m) * renamed[u]
            for u, cu in substituted:
                solved = solved - cu * mapping[u]
            mapping[pivot] = solved if sign > 0 else tirx.IntImm("int32", 0) - solved
            if (others or substituted) and pivot not in head_axes:
                guards.append((mapping[pivot], ext))
        if hi - lo <= 0:
            return None
        first[d] = lo
        count[d] = hi - lo

    def load(tensor: Any, idx: list[Any]) -> Any:
        return tensor(*idx)

    value = rebuild(grad, mapping, load)
    head_load = head(*[rebuild(h, mapping, load) for h in stage.head])
    value = head_load * value
    for solved, ext in guards:
        zero = tirx.FloatImm(dtype_of(value), 0.0)
        value = tirx.Select(tirx.And(solved >= 0, solved < ext), value, zero)
    return Term(tuple(steps), tuple(first), tuple(rho), tuple(count), q, reduce, value)
