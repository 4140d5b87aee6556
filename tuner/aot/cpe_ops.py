"""Memory-bound operators run on the CPEs in a compiled program: which cut and configuration each
generic node runs at, its slave C, and which nodes leave the MPE.

The cuts and their analysis are the CPE kernel model's (tuner.space.cpe: cuts, plan, schedule). The
configuration (cut, block size, double-buffered gets, active CPEs, SIMD lanes) is the tuning log's for
the node's CPE kernel task (tuner.space.cpe.task) when the lookup has one, else the configuration of
least simulated time of the vectorised analysis, counted on its own legalized body. With
``CpeMode.FASTER`` every node with a kernel goes to the CPEs tentatively and tuner.aot.placement keeps
the placement of least simulated time over the program (a run of CPE steps shares one spawn). Layout copies (pads,
unpitching, transposes) get kernels of their own (tuner.aot.cpe_layout), and so do region copies
(concat, split, strided_slice, tile: tuner.aot.cpe_region), NCHW resizes (image.resize2d:
tuner.aot.cpe_resize) and gathers of table rows (take along axis 0: tuner.aot.cpe_gather); of a node's
implementations offload keeps the fastest. A weight a kernel's calls each packed is packed once first
(tuner.aot.cpe_packs).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from enum import Enum

import numpy as np

from tuner.aot.cpe_gather import GatherOp, plan_gather
from tuner.aot.cpe_layout import PadOp, RowCopyOp, TransposeOp, plan_pad, plan_rowcopy, plan_transpose
from tuner.aot.cpe_region import InterleaveOp, RegionOp, plan_copy
from tuner.aot.cpe_resize import ResizeOp, plan_resize
from tuner.aot.lookup import Lookup
from tuner.ir.graph import Graph, Node
from tuner.space.cpe.cuts import plans_for, same_meaning
from tuner.space.cpe.plan import CpeOp, KernelPlan, ParamSlice
from tuner.space.cpe.schedule import Space
from tuner.space.cpe.task import has_kernel_task, kernel_workload, tuned_op
from tuner.targets import Target

log = logging.getLogger("tuner.aot")


class CpeMode(str, Enum):
    """Which memory-bound operators become CPE kernels."""

    FASTER = "faster"  # where the program's simulated time is least (tuner.aot.placement)
    ALL = "all"  # every one that slices (tests: exercise the kernels on small tensors)
    NONE = "none"  # none: everything generic stays plain C on the MPE


def _best(space: Space) -> int:
    return space.best()


# which configuration of a kernel's space is run when no tuned one is given (tests replace it)
choose: Callable[[Space], int] = _best


def plan_node(n: Node, target: Target, dtype: str, plans: list[KernelPlan] | None = None
              ) -> tuple[KernelPlan, CpeOp] | None:
    """The node's plan and its kernel at the configuration ``choose`` picks, or None (it stays on the
    MPE): the fastest plan (of ``plans``, default all of the node's) whose slicing keeps its meaning."""
    for plan in plans if plans is not None else plans_for(n, target, dtype):
        op = plan.best(target, choose)
        if op is None:
            continue
        if same_meaning(n, plan, op, dtype):
            return plan, op
        log.info("%s (%s): slicing along axis %d changes its result", n.source, n.relax_op, op.axis)
    return None


def _c_literal(v: float, ty: str) -> str:
    return f"({v!r}{'f' if ty == 'float' else ''})" if np.isfinite(v) else "0"


def slave_text(op: CpeOp | PadOp | RowCopyOp | TransposeOp | RegionOp | InterleaveOp | ResizeOp | GatherOp,
               ty: str) -> str:
    """The CPE kernel in the form of a generated slave file (merged by tuner.aot.kernels): what its
    configuration says (block size, ``active`` CPEs taking blocks round-robin, and with ``db`` two
    copies of each sliced input, the next block's gets issued before this block is computed; reply
    counters: 0 the whole operands, 1 and 2 the two input copies, 3 the puts)."""
    if isinstance(op, (PadOp, RowCopyOp, TransposeOp, RegionOp, InterleaveOp, ResizeOp, GatherOp)):
        return op.slave_text(ty)
    copies = 2 if op.db else 1
    how = ("from the tuning log" if op.tuned else
           f"chosen among {op.valid} valid configurations of {op.configs} by tuner.space.cpe.schedule")
    lines = [f"/* schedule: blocks of {op.block}, gets {'double' if op.db else 'single'}-buffered, {op.active} active "
             f"CPEs, simd {op.lanes} ({how}) */", f"#define SWTUNE_T {ty}"]
    # a vector body (tuner.ir.cprint.legalized_simd) reads its operands with aligned vector loads: every LDM copy
    # starts on a 64-B boundary (a copy's length rounded up to whole 64 B)
    align = " __attribute__((aligned(64)))" if op.lanes > 1 else ""
    for k, p in enumerate(op.params):
        n = max(1, p.elems)
        if op.lanes > 1:
            per = 64 // (8 if ty == "double" else 4)  # elements per 64 B
            n = -(-n // per) * per
        if p.sliced and k < op.n_inputs:
            lines.append(f"__thread_local {ty} P{k}_ldm[{copies}][{n}]{align};")
        else:
            lines.append(f"__thread_local {ty} P{k}_ldm[{n}]{align};")
    lines.append("__thread_local volatile SW_REPLY_T g_reply[4];")
    lines += op.body.ldm_decls
    # the body, and a fused kernel's member bodies (tuner.space.cpe.fused), named after the kernel
    body = re.sub(r"\bbody(_m\d+)?\(", rf"{op.name}_body\1(", op.body.code)
    lines.append(body)
    item = f"sizeof({ty})"

    def off(p: ParamSlice, lead: str, j: str) -> str:
        if not p.per_lead:  # broadcast along the leading axes: the block of index j for every one
            return f"({j} * {op.block}L) * {p.inner}L"
        if not p.along:  # broadcast along the axis: the leading index's elements for every block
            return f"{lead} * {p.inner}L"
        return f"({lead} * {p.ext}L + {j} * {op.block}L) * {p.inner}L"

    def gets(blk: str, buf: str) -> list[str]:
        """Issue the sliced inputs' gets of block ``blk`` into copy ``buf``."""
        out = [f"    {{ const long gl = ({blk}) / {op.nj}L, gj = ({blk}) % {op.nj}L;"]
        for k, p in enumerate(op.params[:op.n_inputs]):
            if not p.sliced:
                continue
            if k == 0 and op.window is not None:
                win, rows = op.window, p.elems // p.inner
                fill = _c_literal(op.fill, ty)
                out += [f"      const long r0 = gj * {op.block * win.stride}L - {win.pad}L;",
                        "      const long lo = r0 < 0 ? 0 : r0;",
                        f"      const long hi = r0 + {rows}L > {win.ext}L ? {win.ext}L : r0 + {rows}L;",
                        f"      {ty} *const dst = P0_ldm[({buf})];",
                        f"      for (long q = 0; q < (lo - r0) * {p.inner}L; q++) dst[q] = {fill};",
                        f"      for (long q = (hi - r0) * {p.inner}L; q < {rows * p.inner}L; q++) dst[q] = {fill};",
                        f"      if (hi > lo) {{ SW_GET(_arg->p[0] + (gl * {win.ext}L + lo) * {p.inner}L, "
                        f"dst + (lo - r0) * {p.inner}L, (hi - lo) * {p.inner}L * {item}, 0, 0, &g_reply[1 + ({buf})]); "
                        f"n_get[({buf})]++; }}"]
            else:
                out.append(f"      SW_GET(_arg->p[{k}] + {off(p, 'gl', 'gj')}, P{k}_ldm[({buf})], {p.elems} * {item}, "
                           f"0, 0, &g_reply[1 + ({buf})]); n_get[({buf})]++;")
        return out + ["    }"]

    ldm_args = ", ".join(f"P{k}_ldm[cur]" if p.sliced and k < op.n_inputs else f"P{k}_ldm"
                         for k, p in enumerate(op.params))
    lines += ["void swtune_kernel(swtune_args *_arg) {",
              "  int n_whole = 0, n_put = 0, n_get[2] = {0, 0}, cur = 0;",
              f"  if (_MYID >= {op.active}) return;  /* CPEs beyond the active ones take no blocks */",
              "  g_reply[0] = 0; g_reply[1] = 0; g_reply[2] = 0; g_reply[3] = 0;"]
    for k, p in enumerate(op.params[:op.n_inputs]):
        if not p.sliced:
            lines.append(f"  SW_GET(_arg->p[{k}], P{k}_ldm, {p.elems} * {item}, 0, 0, &g_reply[0]); n_whole++;")
    lines.append("  SW_WAIT(&g_reply[0], n_whole);")
    if op.db:
        lines += [f"  if (_MYID < {op.blocks}L) {{", *gets("_MYID", "0"), "  }"]
    lines += [f"  for (long blk = _MYID; blk < {op.blocks}L; blk += {op.active}L) {{",
              f"    const long lead = blk / {op.nj}L, j = blk % {op.nj}L;"]
    if op.db:
        lines += ["    SW_WAIT(&g_reply[1 + cur], n_get[cur]);",
                  f"    if (blk + {op.active}L < {op.blocks}L) {{  /* the next block's gets, into the other copy */",
                  *["  " + ln for ln in gets(f"blk + {op.active}L", "cur ^ 1")], "    }"]
    else:
        lines += gets("blk", "0") + ["    SW_WAIT(&g_reply[1], n_get[0]);"]
    lines.append(f"    {op.name}_body({ldm_args});")
    for k, p in enumerate(op.params[op.n_inputs:], start=op.n_inputs):
        lines.append(f"    SW_PUT(P{k}_ldm, _arg->p[{k}] + {off(p, 'lead', 'j')}, {p.elems} * {item}, 0, 0, "
                     "&g_reply[3]); n_put++;")
    lines += ["    SW_WAIT(&g_reply[3], n_put);"]
    if op.db:
        lines.append("    cur ^= 1;")
    lines += ["  }", "}", "#undef SWTUNE_T"]
    return "\n".join(lines) + "\n"


def kernel_for(n: Node, target: Target, dtype: str, lookup: Lookup | None = None) -> CpeOp | None:
    """The node's CPE kernel: at the tuning log's config for its workload (tuner.space.cpe.task) when
    ``lookup`` has one that applies, else at the configuration ``choose`` picks; None: it stays on
    the MPE."""
    plans = plans_for(n, target, dtype)
    if not plans:
        return None
    wl = kernel_workload(n, dtype) if has_kernel_task(n) else None
    config = lookup(wl) if wl is not None and lookup is not None else None
    if config is not None:
        op = tuned_op(n, plans, target, dtype, config)
        if op is not None:
            op.workload = wl
            return op
        log.warning("%s (%s): the tuned config %s of %s does not apply here; the untuned choice runs",
                    n.source, n.relax_op, config, wl.key if wl is not None else "")
    elif wl is not None and lookup is not None:
        log.warning("untuned CPE kernel %s (%s, binding %s) on %s: the analysis' choice", wl.key, n.relax_op,
                    n.source, target.name)
    got = plan_node(n, target, dtype, plans)
    if got is None:
        return None
    got[1].workload = wl
    return got[1]


def kernel_key(n: Node) -> str:
    """Nodes with one key share their CPE plans and kernel: the same PrimFunc, with constants in the same
    places (it may read a constant in one place and an activation in another)."""
    return n.attrs["function"] + ":" + "".join("c" if t.kind == "const" else "t" for t in n.inputs)


def offload(graph: Graph, target: Target, mode: CpeMode = CpeMode.FASTER, lookup: Lookup | None = None) -> int:
    """Turn generic nodes into ``cpe`` nodes as ``mode`` says (kernels at their tuned configs where
    ``lookup`` has them); returns how many."""
    if mode == CpeMode.NONE:
        return 0
    from tuner.aot.cpe_packs import share_packs
    from tuner.aot.timing import mpe_seconds

    share_packs(graph)  # a weight packed again for each call of its kernel: packed once, then placed

    item = np.dtype(graph.dtype).itemsize
    cache: dict[str, CpeOp | None] = {}
    pads: dict[tuple[tuple[int, ...], int, int], PadOp | None] = {}
    count = 0
    for n in graph.nodes:
        if n.op in ("unpitch", "transpose", "pack_b"):  # layout copies: kernels of their own (tuner.aot.cpe_layout)
            a = n.attrs
            alt = mpe_seconds(n, graph, target, item)
            # a pack is a transpose of its operand seen with each axis split into (tiles, tile)
            rc = (plan_rowcopy(a["rows"], a["cols"], a["pitch"], target, item) if n.op == "unpitch"
                  else plan_transpose(a.get("shape", n.inputs[0].shape), a["axes"], target, item))
            if rc is not None:  # tentatively: tuner.aot.placement decides with its neighbours (FASTER)
                n.attrs.update(cpe=rc, mpe_alt_s=alt, mpe_op=n.op)
                n.op = "cpe"
                count += 1
            continue
        if n.op != "tir":
            continue
        key = kernel_key(n)
        if key not in cache:
            try:
                cache[key] = kernel_for(n, target, graph.dtype, lookup)
            except Exception as exc:  # noqa: BLE001 - a failed plan keeps the operator on the MPE
                log.info("%s (%s): no CPE kernel (%s: %s)", n.source, n.relax_op, type(exc).__name__, exc)
                cache[key] = None
        op: CpeOp | PadOp | RegionOp | InterleaveOp | ResizeOp | GatherOp | None = cache[key]
        if "resize" in n.attrs:  # an NCHW resize: its row-block kernel, when faster than the sliced one
            rz = plan_resize(n.attrs["resize"], n.inputs[0].shape, n.output.shape, target, item)
            if rz is not None and (op is None or rz.seconds < op.seconds):
                op = rz
        if "gather" in n.attrs:  # a take of table rows (an embedding): one DMA get per row
            ga = plan_gather(n.attrs["gather"], n.inputs[0].shape, n.inputs[1].shape, target, item)
            if ga is not None and (op is None or ga.seconds < op.seconds):
                op = ga
        if "region" in n.attrs:  # a region copy (concat, split, ...): the copy kernel, when faster than the sliced one
            rg = plan_copy(n.attrs["region"], [t.shape for t in n.inputs], [t.shape for t in n.outputs], target, item)
            if rg is not None and (op is None or rg.seconds < op.seconds):
                op = rg
        if "pad_h" in n.attrs:  # a conv input's padding: on the MPE it would be row copies
            n.op = "pad_nchw"
            alt = mpe_seconds(n, graph, target, item)
            n.op = "tir"
            pkey = (n.inputs[0].shape, n.attrs["pad_h"], n.attrs["pad_w"])
            if pkey not in pads and len(n.inputs) == 1:
                pads[pkey] = plan_pad(n.inputs[0].shape, n.attrs["pad_h"], n.attrs["pad_w"], target, item)
            pad = pads.get(pkey)  # the row-block padding kernel, when faster than the legalized nn.pad sliced
            if pad is not None and (op is None or pad.seconds < op.seconds):
                op = pad
        else:
            alt = mpe_seconds(n, graph, target, item)
        # tentatively on the CPEs: with mode FASTER, tuner.aot.placement then keeps the placement of
        # least time over the whole program (a run of CPE steps shares one spawn: tuner.aot.launch_groups)
        if op is None:
            if "pad_h" in n.attrs and mode != CpeMode.ALL:
                n.op = "pad_nchw"  # the MPE's row-copy form of a conv input's padding
            continue
        n.attrs.update(cpe=op, mpe_alt_s=alt, mpe_op="pad_nchw" if "pad_h" in n.attrs else "tir")
        n.op = "cpe"
        count += 1
    return count
