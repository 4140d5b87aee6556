"""Derived operators built from gather-form terms, and the program pieces around them.

Terms over the same points with reductions of the same extents merge into one ``te.compute``, where
every tensor they share is read at the same linear index (an input at two places of a product keeps
one operator per place): a :class:`GradientOperator`, one tuning task. Its operands are prepared by the
program first: the head padded with zeros, other operands padded with their edge values
(:class:`Padding`), an operand read at one fixed or strided index copied compact (:class:`Gather`);
each input's gradient is then assembled from its operators' points (``assemble``). Imports tvm inside
functions only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuner.expr.derivative import is_load, kind, load_parts, loads, nodes, rebuild, show, show_indices
from tuner.expr.gather_form import POSITIONS_ATTR, Stage, Term, affine, linear_part, row_major

PAD_ATTR = "swtune_pad"  # a padding stage's widths, (low, high) per dimension
INTERLEAVE_ATTR = "swtune_interleave"  # an assembly that interleaves its pieces: the steps per dimension
INTERLEAVE_SOURCES_ATTR = "swtune_interleave_sources"  # its pieces' names, by residue (row-major)
PAD_MODE_ATTR = "swtune_pad_mode"  # nn.pad's mode: "constant" (zeros) or "replicate" (the edge repeated)
RESHAPE_ATTR = "swtune_reshape"  # an assembly that only views its one piece as the target's shape


@dataclass(frozen=True)
class Padding:
    """How a gradient operator reads an operand: padded by ``low``/``high`` per dimension, with zeros
    (the head: outside the output there is no gradient) or by repeating the edge (other operands:
    finite values that the zero head then multiplies away)."""

    low: tuple[int, ...]
    high: tuple[int, ...]
    zeros: bool

    @property
    def needed(self) -> bool:
        return any(self.low) or any(self.high)


@dataclass(frozen=True)
class Gather:
    """An operand read at one fixed or strided index (a data gradient's weight taps ``W[f, c, 1, 1]``):
    the program copies those elements into a compact tensor first, so the operator's DMA reads whole
    rows instead of single elements. ``index`` per dimension of the operand: (position of the compact
    dimension or -1 for a constant, coefficient, offset)."""

    index: tuple[tuple[int, int, int], ...]
    shape: tuple[int, ...]

    @property
    def name_suffix(self) -> str:
        return "_c"


@dataclass
class GradientOperator:
    """One derived operator: a single ``te.compute`` computing the gradient of input ``wrt`` at the
    points ``step * (q + first) + residue`` of each dimension (step 1, first 0, residue 0: all of it)."""

    name: str
    wrt: str
    step: tuple[int, ...]
    first: tuple[int, ...]
    residue: tuple[int, ...]
    radix: tuple[tuple[int, ...], ...]  # per dimension of ``wrt``, the output dimensions it is viewed as
    tensors: list[Any]  # standalone: one placeholder per operand, then the output (the tuning task)
    # operand name -> how the program prepares it before this operator reads it: padded, or gathered compact
    operands: dict[str, Padding | Gather]
    formula: str  # the body as a user reads it
    # a second operand standing for the same program tensor -> that tensor's operand name: an operand read
    # at indices with different linear parts (x[i, j] * x[i, k]) is one placeholder per index class, so
    # that each read is an affine box; the program passes the same tensor to each
    aliases: dict[str, str] = field(default_factory=dict)

    def workload(self) -> Any:
        from tuner.expr.workload import ExprWorkload

        return ExprWorkload.from_tensors(self.tensors, name=self.name)

    @property
    def compares(self) -> bool:
        """Whether the body compares values for equality (an argmax, a gradient routed to one): checked
        on inputs where the equality holds somewhere (tuner.backends.emulator_backend.random_inputs)."""
        body = self.tensors[-1].op.body[0]
        return any(kind(e) == "EQ" for e in nodes(body.source[0] if kind(body) == "Reduce" else body))

    @property
    def macs(self) -> int:
        """Multiply-adds the operator's loops execute (output points times reduction points)."""
        out = self.tensors[-1]
        body = out.op.body[0]
        reduce = math.prod(int(r.dom.extent) for r in getattr(body, "axis", ()))
        return math.prod(int(s) for s in out.shape) * reduce


def merge_terms(terms: list[Term]) -> list[list[Term]]:
    """Terms over the same points with reductions of the same extents become one operator, unless they
    read a tensor at indices with different linear parts: the terms of an input that appears at two
    places in a product (``x[i, j] * W[j, k] * x[i, k]``: W read at ``[j, r]`` by one, ``[r, j]`` by the
    other) stay operators of their own, each with affine reads, and the assembly sums them. Taps of a
    stencil (the same linear part, other offsets) still merge into one."""
    groups: list[tuple[tuple[Any, ...], dict[Any, frozenset[Any]], list[Term]]] = []
    for t in terms:
        key = (t.step, t.first, t.residue, t.count, t.radix, tuple(e for _, e in t.reduce))
        reads = _term_reads(t)
        for group_key, group_reads, members in groups:
            if group_key == key and all(group_reads[op] == r for op, r in reads.items() if op in group_reads):
                members.append(t)
                for op, r in reads.items():
                    group_reads.setdefault(op, r)
                break
        else:
            groups.append((key, dict(reads), [t]))
    return [members for _, _, members in groups]


def _term_reads(term: Term) -> dict[Any, frozenset[Any]]:
    """Each tensor a term reads -> the linear parts of its indices in the term's axes (by position: q,
    then the reduction), or the index as text where it is not affine."""
    axes = [*term.q, *(v for v, _ in term.reduce)]
    reads: dict[Any, set[Any]] = {}
    for ld in loads(term.value):
        tensor, idx = load_parts(ld)
        part = linear_part(idx, axes)
        reads.setdefault(tensor.op, set()).add(part if part is not None else show_indices(idx))
    return {op: frozenset(r) for op, r in reads.items()}


def _ranges(expr: Any, bounds: dict[Any, int]) -> tuple[int, int]:
    """[min, max] of an affine integer expression over its variables' ranges [0, bound)."""
    aff = affine(expr, list(bounds), "an operand")
    lo = aff.offset + sum(c * (bounds[v] - 1) for v, c in aff.coefs.items() if c < 0)
    hi = aff.offset + sum(c * (bounds[v] - 1) for v, c in aff.coefs.items() if c > 0)
    return lo, hi


def build_operator(group: list[Term], name: str, wrt: Any, head: Any) -> tuple[GradientOperator, Any]:
    """(the standalone operator, a builder of the same compute over any operand tensors)."""
    from tvm import te

    first = group[0]
    bounds = {v: c for v, c in zip(first.q, first.count)}
    bounds.update({v: e for v, e in first.reduce})
    # align every term's variables with the first's
    values = []
    for t in group:
        mapping = {v: w for v, w in zip(t.q, first.q)}
        mapping.update({v: w for (v, _), (w, _) in zip(t.reduce, first.reduce)})
        values.append(rebuild(t.value, mapping, lambda tensor, idx: tensor(*idx)))
    pads: dict[Any, tuple[list[int], list[int]]] = {}
    tensors: dict[str, Any] = {}
    for value in values:
        for ld in loads(value):
            tensor, idx = load_parts(ld)
            tensors[str(tensor.op.name)] = tensor
            low, high = pads.setdefault(tensor, ([0] * len(idx), [0] * len(idx)))
            for d, i in enumerate(idx):
                lo, hi = _ranges(i, bounds)
                low[d] = max(low[d], -lo)
                high[d] = max(high[d], hi - (int(tensor.shape[d]) - 1))
    paddings: dict[str, Padding | Gather] = {
        str(t.op.name): Padding(tuple(lo), tuple(hi), zeros=t.same_as(head)) for t, (lo, hi) in pads.items()}
    gathered: dict[str, list[Any]] = {}  # operand -> the variables indexing its compact copy
    for tensor in pads:
        spec = _gather(tensor, values, bounds, paddings[str(tensor.op.name)], head)
        if spec is not None:
            paddings[str(tensor.op.name)], gathered[str(tensor.op.name)] = spec
    value = values[0]
    for v in values[1:]:
        value = value + v

    def build(operands: dict[str, Any], out_name: str) -> Any:
        def fcompute(*qs: Any) -> Any:
            raxes = [te.reduce_axis((0, e), name=str(v.name)) for v, e in first.reduce]
            mapping = {v: w for v, w in zip(first.q, qs)}
            mapping.update({v: r.var for (v, _), r in zip(first.reduce, raxes)})

            def load(tensor: Any, idx: list[Any]) -> Any:
                name = str(tensor.op.name)
                if name in gathered:
                    return operands[name](*[mapping[v] for v in gathered[name]])
                low = paddings[name].low  # type: ignore[union-attr]
                return operands[name](*[i + p if p else i for i, p in zip(idx, low)])

            body = rebuild(value, mapping, load)
            return te.sum(body, axis=raxes) if raxes else body

        return te.compute(first.count, fcompute, name=out_name)

    placeholders = {n: te.placeholder(_prepared_shape(t, paddings[n]), dtype=t.dtype,
                                      name=n + (paddings[n].name_suffix if n in gathered else ""))  # type: ignore
                    for n, t in tensors.items()}
    out = build(placeholders, name)
    op = GradientOperator(name=name, wrt=str(wrt.op.name), step=first.step, first=first.first,
                          residue=first.residue, radix=first.radix, tensors=[*placeholders.values(), out],
                          operands=paddings, formula=formula(out))
    return op, build


def _gather(tensor: Any, values: list[Any], bounds: dict[Any, int], pad: Padding | Gather,
            head: Any) -> tuple[Gather, list[Any]] | None:
    """A compact copy of an operand read at one index whose dimensions are constants or single
    axes with a stride (each axis once), when that index skips elements; None otherwise."""
    if tensor.same_as(head) or not isinstance(pad, Padding) or pad.needed:
        return None
    indices = {show_indices(load_parts(ld)[1]): load_parts(ld)[1] for v in values for ld in loads(v)
               if load_parts(ld)[0].same_as(tensor)}
    if len(indices) != 1:
        return None
    (idx,) = indices.values()
    variables: list[Any] = []
    spec = []
    sparse = False
    for i in idx:
        aff = affine(i, list(bounds), str(tensor.op.name))
        if len(aff.coefs) > 1:
            return None
        if not aff.coefs:
            spec.append((-1, 0, aff.offset))
            sparse = True
            continue
        ((v, c),) = aff.coefs.items()
        if any(v.same_as(w) for w in variables):
            return None
        spec.append((len(variables), c, aff.offset))
        variables.append(v)
        sparse = sparse or abs(c) != 1
    if not sparse:
        return None
    return Gather(tuple(spec), tuple(bounds[v] for v in variables)), variables


def _prepared_shape(tensor: Any, spec: Padding | Gather) -> tuple[int, ...]:
    if isinstance(spec, Gather):
        return spec.shape
    return tuple(int(s) + lo + hi for s, lo, hi in zip(tensor.shape, spec.low, spec.high))


def prepare(tensor: Any, spec: Padding | Gather) -> Any:
    """The program's copy of an operand as the operator reads it: padded, or gathered compact."""
    from tvm import te

    if isinstance(spec, Padding):
        return _padded(tensor, spec)
    return te.compute(spec.shape, lambda *j: tensor(*[c * j[p] + o if p >= 0 else o for p, c, o in spec.index]),
                      name=f"{tensor.op.name}{spec.name_suffix}")


def argmax_stage(tensor: Any, name: str) -> tuple[Any, Any]:
    """(argmax, positions): the program stage that finds, per point of a max/min reduction ``tensor``,
    the first reduction point (row-major over the reduction axes) whose body equals the result -- the
    forward's argmax, in the operator's dtype (exact below 2**24 points) -- and the small stage it
    reads the positions from (``positions[r...]`` = the row-major position of point r: a tensor, since
    an expression body reads tensors, not loop indices). Its gradient goes to that point only, so a tie
    is resolved as torch's max_pool2d and max(dim) resolve it (torch.amax would split it evenly)."""
    from tvm import te, tirx

    op = tensor.op
    body = op.body[0]
    extents = [int(r.dom.extent) for r in body.axis]
    dtype = str(tensor.dtype)
    none = float(math.prod(extents))  # past every point: no point equals

    def position(*r: Any) -> Any:
        return tirx.Cast(dtype, row_major(r, extents))

    positions = te.compute(extents, position, name=f"{name}_positions", attrs={POSITIONS_ATTR: 1})
    # a min whose identity is that finite value (te.min's, the dtype's largest, does not survive the
    # TVMScript round trip in float64)
    first = te.comm_reducer(lambda a, b: tirx.min(a, b), lambda t: tirx.FloatImm(t, none), name="first_point")

    def fcompute(*index: Any) -> Any:
        axes = [te.reduce_axis((0, e), name=str(r.var.name)) for r, e in zip(body.axis, extents)]
        mapping = {iv.var: i for iv, i in zip(op.axis, index)}
        mapping.update({r.var: a.var for r, a in zip(body.axis, axes)})
        value = rebuild(body.source[0], mapping, lambda t, idx: t(*idx))
        return first(tirx.Select(tirx.EQ(value, tensor(*index)), positions(*[a.var for a in axes]),
                                 tirx.FloatImm(dtype, none)), axis=axes)

    return te.compute(tensor.shape, fcompute, name=name), positions


def reduction_position(stage: Stage, positions: Any) -> Any:
    """``positions`` (of :func:`argmax_stage`) read at a point of ``stage``'s reduction, in the axes of
    the stage as differentiated (an axis split into ``v_hi``/``v_lo`` recombined)."""
    from tvm import tirx

    index = []
    for r in stage.tensor.op.body[0].axis:
        var = r.var
        if var in stage.extents:
            index.append(var)
            continue
        hi, lo = (next(v for v in stage.extents if str(v.name) == f"{var.name}{part}") for part in ("_hi", "_lo"))
        index.append(hi * tirx.IntImm("int32", stage.extents[lo]) + lo)
    return positions(*index)


def formula(out: Any) -> str:
    """A one-stage operator's body as a user reads it."""
    body = out.op.body[0]
    if kind(body) == "Reduce":
        axes = ", ".join(f"{iv.var.name} < {int(iv.dom.extent)}" for iv in body.axis)
        reducer = {"Add": "sum", "Max": "max", "Min": "min"}.get(kind(body.combiner.result[0]), "reduce")
        return f"{reducer}[{axes}] {show(body.source[0])}"
    return show(body)


def _padded(tensor: Any, pad: Padding) -> Any:
    """The program's padded copy of ``tensor`` (zeros, or the edge repeated)."""
    from tvm import te, tirx

    if not pad.needed:
        return tensor
    shape = [int(s) + lo + hi for s, lo, hi in zip(tensor.shape, pad.low, pad.high)]

    def fcompute(*idx: Any) -> Any:
        inner = [i - lo for i, lo in zip(idx, pad.low)]
        if not pad.zeros:
            return tensor(*[tirx.max(0, tirx.min(i, int(s) - 1)) for i, s in zip(inner, tensor.shape)])
        inside = tirx.all(*[tirx.And(i >= 0, i < int(s)) for i, s in zip(inner, tensor.shape)])
        clamped = [tirx.max(0, tirx.min(i, int(s) - 1)) for i, s in zip(inner, tensor.shape)]
        return tirx.if_then_else(inside, tensor(*clamped), tirx.const(0.0, tensor.dtype))

    # marked so the Relax program can emit it as nn.pad (tuner.ir.expr_gradients): an operator the CPE
    # cutter slices, where a call_tir of this body stays on the MPE
    attrs = {PAD_ATTR: [v for lo, hi in zip(pad.low, pad.high) for v in (lo, hi)],
             PAD_MODE_ATTR: "constant" if pad.zeros else "replicate"}
    return te.compute(shape, fcompute, name=f"{tensor.op.name}_pad", attrs=attrs)


# one part of a gradient in the program: (step, first, residue, radix, tensor) -- the tensor holds the
# gradient at the points step * (q + first) + residue of each dimension the target is viewed as (radix)


Piece = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[tuple[int, ...], ...], Any]


def passes_through(group: list[Term], head: Any, target: Any) -> bool:
    """The terms are exactly ``head[q]`` over the target's whole shape: its gradient is the head."""
    if len(group) != 1 or group[0].reduce or any(s != 1 for s in group[0].step) or any(group[0].first) \
            or any(group[0].residue) or list(group[0].count) != [int(s) for s in target.shape] \
            or list(head.shape) != list(target.shape):
        return False
    value = group[0].value
    if not is_load(value):
        return False
    tensor, idx = load_parts(value)
    return tensor.same_as(head) and all(i.same_as(q) for i, q in zip(idx, group[0].q))


def _virtual(a: list[Any], radix: tuple[tuple[int, ...], ...]) -> list[Any]:
    """The indices of the dimensions a piece views the target's as (mixed radix: a -> a // n, a % n)."""
    from tvm import tirx

    if not radix:
        return a
    out = []
    for index, sizes in zip(a, radix):
        inner = math.prod(sizes)
        for size in sizes:
            inner //= size
            out.append(index if len(sizes) == 1 else tirx.floormod(tirx.floordiv(index, inner), size))
    return out


def _whole(piece: Piece, shape: list[int]) -> bool:
    """Whether a piece holds the gradient at every point of a target of ``shape``, indexed as it."""
    step, first, residue, _, tensor = piece
    return all(s == 1 for s in step) and not any(first) and not any(residue) \
        and [int(s) for s in tensor.shape] == shape


def _whole_view(piece: Piece, shape: list[int]) -> bool:
    """Whether a piece holds the gradient at every point of a target of ``shape`` viewed in its mixed
    radix (each dimension as the sizes it is split into)."""
    step, first, residue, radix, tensor = piece
    return bool(radix) and all(s == 1 for s in step) and not any(first) and not any(residue) \
        and [math.prod(sizes) for sizes in radix] == shape \
        and [int(s) for s in tensor.shape] == [n for sizes in radix for n in sizes]


def assemble(target: Any, pieces: list[Piece], name: str) -> Any:
    """The program's gradient of ``target``: the sum of its pieces, each at its own points. A piece
    over the whole target (a consumer's gradient, one occurrence's term) is read as it is, without a
    guard: a sum of such pieces is an element-wise expression the CPEs run, where guarded and clamped
    reads make a body only the MPE runs."""
    from tvm import te

    shape = [int(s) for s in target.shape]
    dtype = str(target.dtype)
    if len(pieces) == 1 and _whole(pieces[0], shape):
        return pieces[0][4]
    if len(pieces) == 1 and _whole_view(pieces[0], shape):
        # the target viewed in mixed radix (a grouped shift's channel as its group and place): the
        # piece is the gradient in another shape, read in place (a Relax reshape: tuner.ir.expr_gradients)
        piece = pieces[0]
        return te.compute(shape, lambda *i: piece[4](*_virtual(list(i), piece[3])), name=name,
                          attrs={RESHAPE_ATTR: 1})

    attrs = _interleave_attrs(shape, pieces)

    def fcompute(*target_index: Any) -> Any:
        total = None
        for piece in pieces:
            value = piece[4](*target_index) if _whole(piece, shape) else _guarded(piece, list(target_index), dtype)
            total = value if total is None else total + value
        return total

    return te.compute(shape, fcompute, name=name, attrs=attrs)


def _guarded(piece: Piece, target_index: list[Any], dtype: str) -> Any:
    """A piece's value at a point of the target: its element where the point is one of the piece's,
    zero elsewhere."""
    from tvm import tirx

    step, first, residue, radix, tensor = piece
    a = _virtual(target_index, radix)
    conds, idx = [], []
    for d, (s, f, r) in enumerate(zip(step, first, residue)):
        q = tirx.floordiv(a[d] - r, s) - f if s != 1 else a[d] - r - f
        conds.append(tirx.And(q >= 0, q < int(tensor.shape[d])))
        if s != 1:
            conds.append(tirx.EQ(tirx.floormod(a[d] - r, s), 0))
        idx.append(q)
    safe = [tirx.max(0, tirx.min(i, int(n) - 1)) for i, n in zip(idx, tensor.shape)]
    return tirx.if_then_else(tirx.all(*conds), tensor(*safe), tirx.const(0.0, dtype))


def _interleave_attrs(shape: list[int], pieces: list[Piece]) -> dict[str, Any] | None:
    """The attrs marking an assembly that only interleaves its pieces (a strided conv's data gradient
    split by stride residue: piece r holds the points ``step * q + r``, the pieces tile the target
    exactly), so the Relax program can emit it as a concat and a transpose (tuner.ir.expr_gradients):
    operators the CPEs run. None for any other assembly."""
    steps = pieces[0][0]
    def plain_view(radix: tuple[tuple[int, ...], ...]) -> bool:  # the target viewed as itself
        return not radix or all(tuple(r) == (n,) for r, n in zip(radix, shape))

    if any(p[0] != steps or any(p[1]) or not plain_view(p[3]) for p in pieces) or len(pieces) != math.prod(steps):
        return None
    if any(n % st for n, st in zip(shape, steps)):
        return None
    part = [n // st for n, st in zip(shape, steps)]
    residues = sorted(p[2] for p in pieces)
    want = [tuple(r) for r in np.ndindex(*steps)]
    if residues != want or any([int(s) for s in p[4].shape] != part for p in pieces):
        return None
    names = [str(p[4].op.name) for p in sorted(pieces, key=lambda p: p[2])]
    if len(set(names)) != len(names):
        return None
    return {INTERLEAVE_ATTR: list(steps), INTERLEAVE_SOURCES_ATTR: names}
