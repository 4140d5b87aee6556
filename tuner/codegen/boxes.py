"""DMA boxes of copy nests found in the lowered TIR, and the C that moves them (athread_get/put).

A copy nest is a chain of loops over one store ``ldm[ax..] = global[base + ax..]`` (a get) or
``global[..] = ldm[..]`` (a put). Per global dimension it has a base (C expression of the outer loop
variables), a full LDM extent and the tensor extent; the run-time length is the base clipped to the
tensor. Trailing dimensions the box covers completely merge into one contiguous block, the next one
out is strided (stride = gap bytes, bsize = block bytes), the ones further out loop (the same rule as
tuner/space/analysis.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuner.ir.cprint.expr import cexpr
from tuner.ir.tir import const_int, free_vars, kind
from tuner.space.choices import Dma

LDM_SCOPE = "local.ldm"


@dataclass
class CopyNest:
    role: str  # a | b | c
    direction: str  # get | put
    ldm: Any  # LDM buffer var
    mem: Any  # global buffer var
    loops: list  # For nodes of the nest, outermost first
    mem_indices: list  # index expressions into the global buffer

    def dims(self) -> list[tuple[Any, str | None, int]]:
        """Per global dim: (index expr, loop var name or None, full extent)."""
        ext = {lp.loop_var.name: const_int(lp.extent) for lp in self.loops}
        out = []
        for idx in self.mem_indices:
            names = [n for n in free_vars(idx) if n in ext]
            if len(names) > 1:
                raise NotImplementedError(f"copy index {idx} mixes loop variables {names}")
            out.append((idx, names[0] if names else None, ext[names[0]] if names else 1))
        return out


def match_copy(stmt: Any, roles: dict[str, str]) -> CopyNest | None:
    """Recognise a copy nest (loops over one store between an LDM buffer and a global one)."""
    loops = []
    node = stmt
    while kind(node) == "For":
        loops.append(node)
        node = node.body
    if kind(node) == "IfThenElse" and node.else_case is None:
        node = node.then_case
    if kind(node) != "BufferStore" or kind(node.value) != "TensorLoad":
        return None
    dst, src = node.buffer, node.value.source
    if dst.scope() == LDM_SCOPE and src.scope() != LDM_SCOPE:
        return CopyNest(roles[dst.name], "get", dst, src, loops, list(node.value.indices))
    if src.scope() == LDM_SCOPE and dst.scope() != LDM_SCOPE:
        return CopyNest(roles[src.name], "put", src, dst, loops, list(node.indices))
    return None


@dataclass
class BoxC:
    """The C text pieces of one box: bases, lengths, block split, pitches."""

    prefix: str
    bases: list[str]
    full: list[int]  # LDM extents (padded last dim for put_lines outputs)
    extents: list[int]  # tensor extents for merging (unpadded)
    pitches: list[int]  # memory pitch (elements) of each dim
    first_block_dim: int  # k: dims k.. form the contiguous block
    ds: int
    padded_last: int | None = None  # put_lines: memory row pitch when the box covers whole rows
    packed: bool = False  # the tensor is stored tile after tile (pack knob): one request per box

    def setup(self, slot: str) -> list[str]:
        p = self.prefix
        lines = []
        for d, base in enumerate(self.bases):
            lim = self.extents[d]
            if d == len(self.bases) - 1 and self.padded_last is not None:
                lines.append(f"{p}_o[{slot}][{d}] = {base};")
                lines.append(f"{p}_n[{slot}][{d}] = {self.padded_last};")
                continue
            # TVM's region of a ragged tile on a flipped axis can start below 0: the box is clipped at
            # both ends of the tensor (the LDM index subtracts the clipped origin, so it stays right)
            o = f"{p}_o[{slot}][{d}]"
            lines.append(f"{{ const long _b = {base}; {o} = SW_MAX(_b, 0L); "
                         f"{p}_n[{slot}][{d}] = SW_MIN({self.full[d]} - ({o} - _b), {lim} - {o}); }}")
        nd = len(self.bases)
        for d in range(nd - 1, -1, -1):
            nxt = "1" if d == nd - 1 else f"{p}_p[{slot}][{d + 1}] * {p}_n[{slot}][{d + 1}]"
            lines.append(f"{p}_p[{slot}][{d}] = {nxt};")
        nonempty = " && ".join(f"{p}_n[{slot}][{d}] > 0" for d in range(nd))
        lines.append(f"{p}_ok[{slot}] = {nonempty};")
        return lines

    def requests(self, slot: str, mode: str, action: Callable[[str, str, str, str, str], list[str]]) -> list[str]:
        """Loops over the box's requests; ``action(mem_off, ldm_off, len, bsize, gap)`` issues one.

        A counter ``_rq`` numbers the requests of the box (round-robin sharing reads it)."""
        p, k, nd, ds = self.prefix, self.first_block_dim, len(self.bases), self.ds
        n = lambda d: f"{p}_n[{slot}][{d}]"  # noqa: E731
        o = lambda d: f"{p}_o[{slot}][{d}]"  # noqa: E731
        if self.packed:
            return self._packed_request(o, action)
        blk = " * ".join(n(d) for d in range(k, nd))
        lines = ["{", f"  long _blk = {blk}; long _lo = 0; int _rq = 0;"]
        loop_dims = list(range(0, k - 1)) if mode == Dma.STRIDED.label else list(range(0, k))
        ind = "  "
        for d in loop_dims:
            lines.append(f"{ind}for (int _i{d} = 0; _i{d} < {n(d)}; _i{d}++) {{")
            ind += "  "
        terms = []
        for d in range(nd):
            idx = f"({o(d)} + _i{d})" if d in loop_dims else o(d)
            terms.append(f"{idx} * {self.pitches[d]}L")
        mem_off = " + ".join(terms)
        if mode == Dma.STRIDED.label and k >= 1:
            s = k - 1
            length = f"{n(s)} * _blk * {ds}"
            bsize = f"_blk * {ds}"
            gap = f"({self.pitches[s]}L - _blk) * {ds}"
            step = f"{n(s)} * _blk"
        else:
            length, bsize, gap, step = f"_blk * {ds}", "0", "0", "_blk"
        lines += [ind + x for x in action(mem_off, "_lo", length, bsize, gap)]
        lines.append(f"{ind}_lo += {step}; _rq++;")
        for _ in loop_dims:
            ind = ind[:-2]
            lines.append(ind + "}")
        lines.append("}")
        return lines


    def _packed_request(self, o: Callable[[int], str],
                        action: Callable[[str, str, str, str, str], list[str]]) -> list[str]:
        """One contiguous request of the whole box from a tile-after-tile copy of the tensor
        (host.py packs it; only whole tiles pack, so the box is never clipped)."""
        box = 1
        for f in self.full:
            box *= f
        tiles = [e // f for e, f in zip(self.extents, self.full)]
        terms, stride = [], 1
        for d in range(len(self.bases) - 1, -1, -1):
            terms.append(f"({o(d)} / {self.full[d]}) * {stride * box}L")
            stride *= tiles[d]
        mem_off = " + ".join(reversed(terms))
        return ["{", "  long _lo = 0; int _rq = 0;",
                *["  " + x for x in action(mem_off, "_lo", f"{box * self.ds}", "0", "0")],
                f"  _lo += {box}; _rq++;", "}"]


def box_c(nest: CopyNest, env: dict[str, str], ds: int, prefix: str,
          put_lines: bool = False, line_elems: int = 0, packed: bool = False) -> BoxC:
    """C pieces of a copy nest's box; ``env`` renames loop variables (e.g. next chunk for prefetch)."""
    dims = nest.dims()
    sub = dict(env)
    for _, name, _ in dims:
        if name:
            sub[name] = "0"
    bases = [cexpr(idx, sub) for idx, _, _ in dims]
    full = [e for _, _, e in dims]
    extents = [const_int(s) for s in nest.mem.shape]
    padded = None
    pitch_ext = list(extents)
    if put_lines:
        wpad = -(-extents[-1] // line_elems) * line_elems
        pitch_ext[-1] = wpad
        if full[-1] >= extents[-1]:
            padded = wpad
            full[-1] = wpad
    pitches = []
    acc = 1
    for e in reversed(pitch_ext):
        pitches.append(acc)
        acc *= e
    pitches.reverse()
    k = len(dims) - 1
    while k >= 1 and full[k] >= extents[k]:
        k -= 1
    return BoxC(prefix, bases, full, extents, pitches, k, ds, padded, packed)
