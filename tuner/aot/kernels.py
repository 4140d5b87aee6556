"""The slave kernels of a model: config lookup (or fallback: tuner.aot.untuned), generation, one slave file.

Each distinct (workload, config) is generated once by tuner.codegen.sources.generate, the same
kernel a tuning measurement builds, and called once per occurrence; a generic operator that
extraction tunes as a GEMM-like expression operator (a derived gradient, a user's operator, a fused
form) becomes such a kernel tuned or not, as a built-in conv does; a memory-bound one (element-wise,
a single-input reduction, a transpose) only when it is tuned and its tuned kernel's simulated time
beats its untuned lowering's (the rule-picked CPE blocks of tuner.aot.cpe_ops / cpe_layout, or the
MPE), which the compiler passes in as ``untuned_seconds``.
The generated slave files are merged into one: each kernel function gets its own name, and the
``__thread_local`` buffers of every kernel become members of one LDM union, because the kernels
run one after another and on the real CPE all ``__thread_local`` data of the linked program must
fit in LDM together.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from tuner.aot.fusion import apply_epilogue, channel_axis, unfuse
from tuner.aot.launch_groups import phase_seconds
from tuner.aot.lookup import Lookup
from tuner.aot.mpe import MpeReason
from tuner.aot.untuned import (
    TUNED,
    Fallback,
    Records,
    analysis_choice,
    choose_config,
    default_config,
    kept_unless_slower,
)
from tuner.ir.graph import AotError, Graph, Node, Note, Tensor, Where, slave_symbol
from tuner.space.chip import one_cg_part
from tuner.space.space import Config
from tuner.targets import Target, get_target
from tuner.task_kind import kind_of
from tuner.workloads import Workload

log = logging.getLogger("tuner.aot")


class Untuned(NamedTuple):
    """How a generic node runs untuned: its simulated seconds (a CPE kernel's with its own spawn and
    join), and whether that is on the CPEs."""

    seconds: float
    on_cpe: bool

    def in_a_run(self, target: Target) -> float:
        """Its seconds as one step of a run of CPE steps: a CPE kernel shares the run's spawn
        (tuner.aot.placement groups such runs); the MPE's C pays no spawn."""
        return self.seconds + (phase_seconds(target) if self.on_cpe else 0.0)


UntunedSeconds = Callable[[Node], Untuned]  # a generic node as it runs untuned

_DECL = re.compile(r"^__thread_local\s+((?:volatile\s+)?(?:SW_REPLY_T|float|double|long|int))\s+(.*);\s*$")
_NAME = re.compile(r"\s*([A-Za-z_]\w*)")  # the identifier a declarator starts with
_KERNEL_SIG = "void swtune_kernel(swtune_args *_arg) {"


@dataclass(frozen=True)
class TilePack:
    """An operand stored tile after tile for a kernel with the pack knob: a tensor of shape ``ext``
    (row-major) cut into whole tiles of shape ``full``, tiles in row-major order, each tile row-major."""

    ext: tuple[int, ...]
    full: tuple[int, ...]

    @property
    def order(self) -> np.ndarray:
        """Where each element (row-major) of the tensor goes in the packed copy."""
        return _tile_order(list(self.ext), list(self.full))

    def as_transpose(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(shape, axes) of the same permutation as a transpose: each axis split into (tiles, tile),
        then every tiles axis before every tile axis (so a CPE transpose kernel can pack)."""
        shape = tuple(d for e, f in zip(self.ext, self.full) for d in (e // f, f))
        rank = len(self.ext)
        return shape, tuple(range(0, 2 * rank, 2)) + tuple(range(1, 2 * rank, 2))


@dataclass
class Kernel:
    """One generated slave kernel: ``name`` is its function in slave.c."""

    index: int
    workload: Workload
    config: Config
    status: str  # "tuned" | "fallback: <why>"
    slave: str  # the generated slave file
    c_rows: int  # output rows and row length of the kernel's c buffer, and its row pitch
    c_cols: int
    c_pitch: int
    calls: int = 0
    epilogue: Any = None  # tuner.aot.fusion.Epilogue applied to each output tile, or None
    # with the pack knob: input position -> the tile-after-tile copy of that operand the kernel reads
    # (a built-in's b; an expression's b operands)
    packs: dict[int, TilePack] = field(default_factory=dict)
    roles: tuple[str, ...] = ("a", "b")  # the kernel's input operands (swtune_args members), in order

    @property
    def name(self) -> str:
        return slave_symbol(self.index)

    @property
    def tuned(self) -> bool:
        return self.status == "tuned"


def _generate(workload: Workload, target: Target, config: Config, index: int, status: str,
              epilogue: Any = None) -> Kernel:
    from tuner.codegen.host import c_pitch, pack_tiles, packed_roles, shapes
    from tuner.codegen.sources import generate
    from tuner.ir.cprint.dtypes import ctype

    if target.cgs > 1:
        # A kernel split over core groups: every CG runs the one-CG schedule on its share, so the plan's
        # buffers (c's pitch, packed operands) are that schedule's; its C is not printed yet (compile
        # refuses the target), so only the program's plan and timing are built.
        src = generate(workload, get_target(target.base_name), one_cg_part(config))
    else:
        src = generate(workload, target, config)
    s = src.scheduled
    c = shapes(s)["c"]
    rows = 1
    for d in c[:-1]:
        rows *= d
    slave = src.files["slave.c"] if target.cgs == 1 else ""
    if epilogue is not None and slave:
        slave = apply_epilogue(slave, epilogue, ctype(getattr(workload, "dtype", "float32")), tuple(c),
                               c_pitch(s), channel_axis(workload) if epilogue.vectors else -1)
    # the permutation of each packed operand: the same as the measured host's pack (tuner.codegen.host)
    packs = {s.roles.index(r): TilePack(*(tuple(v) for v in pack_tiles(s, r))) for r in packed_roles(s)}
    return Kernel(index, workload, config, status, slave, rows, c[-1], c_pitch(s), epilogue=epilogue,
                  packs=packs, roles=tuple(s.roles))


def _tile_order(ext: list[int], full: list[int]) -> np.ndarray:
    """The position of each element (row-major) of a tensor of shape ``ext`` in its copy stored tile
    after tile, tiles of shape ``full`` (whole tiles only: a permutation)."""
    r = np.arange(int(np.prod(ext)), dtype=np.int64)
    tile = np.zeros_like(r)
    off = np.zeros_like(r)
    t_stride = f_stride = 1
    for e, f in zip(reversed(ext), reversed(full)):
        i = r % e
        r = r // e
        tile += (i // f) * t_stride
        off += (i % f) * f_stride
        t_stride *= e // f
        f_stride *= f
    return tile * int(np.prod(full)) + off


def _compose_transpose(steps: list[Any], graph: Graph, b: Tensor, shape: tuple[int, ...],
                       axes: tuple[int, ...]) -> tuple[Tensor, tuple[int, ...], tuple[int, ...]]:
    """A pack of the output of a runtime transpose that nothing else reads (a dense kernel's
    weight^T in training) as one permutation of the transpose's input: (input, shape, axes). The
    transpose leaves ``steps`` (one copy per step instead of two)."""
    p = next((s for s in reversed(steps) if isinstance(s, Node) and s.output is b.root), None)
    if p is None or p.op != "transpose" or b.shape != b.root.shape or len(shape) != 2 * len(b.shape) \
            or any(t.root is b.root for t in graph.outputs) \
            or sum(t.root is b.root for n in graph.nodes for t in n.inputs) != 1:
        return b, shape, axes
    t_axes = p.attrs["axes"]
    x = p.inputs[0]
    # split axis 2j + e of the transpose's output is split axis 2 * t_axes[j] + e of its input
    x_shape = [0] * len(shape)
    for j, a in enumerate(t_axes):
        x_shape[2 * a], x_shape[2 * a + 1] = shape[2 * j], shape[2 * j + 1]
    steps[steps.index(p)] = Note(p.source, p.relax_op, Where.REMOVED,
                                 "transpose composed into the pack that follows")
    return x, tuple(x_shape), tuple(2 * t_axes[q // 2] + q % 2 for q in axes)


def _packed_b(graph: Graph, step: Node, k: Kernel, cache: dict[tuple[int, int], Any],
              steps: list[Any]) -> list[Any]:
    """Give a kernel with the pack knob its packed operands: a constant is packed now (once per
    kernel and tensor); any other (a weight that training updates) gets a ``pack_b`` step before each
    call, as the measured host does (on the MPE; tuner.aot.cpe_ops.offload may put it on the CPEs as
    the transpose ``TilePack.as_transpose`` gives)."""
    pre: list[Any] = []
    for i, pack in sorted(k.packs.items()):
        b = step.inputs[i]
        if b.root.kind == "const" and b.root.data is not None and b.root.size == b.size:
            key = (b.root.id, k.index)
            if key not in cache:
                flat = np.empty(b.size, dtype=b.root.data.dtype)
                flat[pack.order] = b.root.data.reshape(-1)
                cache[key] = graph.new_const(flat, f"{b.name}.packed{k.index}")
            step.inputs[i] = cache[key]
            continue
        src, shape, axes = _compose_transpose(steps, graph, b, *pack.as_transpose())
        if [a for a in axes if shape[a] > 1] == sorted(a for a in axes if shape[a] > 1):
            step.inputs[i] = src  # the permutation moves nothing: the kernel reads src as it is
            continue
        packed = graph.new_temp((b.size,), f"{b.name}.packed{k.index}")
        step.inputs[i] = packed
        pre.append(Node("pack_b", [src], packed, {"shape": shape, "axes": axes}, step.relax_op, step.source))
    return pre


def _workloads(graph: Graph) -> list[Workload]:
    """Every GEMM-like workload the compile may run: the kernels', the expression operators' and the
    plain forms of the fused ones (the near records of one another)."""
    out: list[Workload] = []
    for n in graph.nodes:
        if n.op == "kernel":
            out.append(n.attrs["workload"])
        elif "expr_workload" in n.attrs:
            out.append(n.attrs["expr_workload"])
            if "unfused" in n.attrs:
                out.append(n.attrs["unfused"].workload)
    return out


def resolve_kernels(graph: Graph, target: Target, lookup: Lookup | None,
                    untuned_seconds: UntunedSeconds | None = None, untuned_to_cpe: bool = True) -> list[Kernel]:
    """Give every kernel node its Kernel (generating each distinct one once); a generic node with an
    ``expr_workload`` becomes one as ``_expression_kernel`` decides (tuned or not, when GEMM-like;
    ``untuned_to_cpe``: an untuned memory-bound one whose lowering is the MPE's may take the CPEs).

    A kernel whose output rows are padded to whole DMA lines (``put_lines``) writes a pitched scratch
    tensor; an ``unpitch`` MPE node then copies the rows into the dense output."""
    records = Records(lookup, _workloads(graph))
    by_key: dict[tuple[str, str, str], Kernel] = {}
    chosen: dict[str, tuple[Config, str]] = {}
    packed: dict[tuple[int, int], Any] = {}
    steps: list[Any] = []
    warned: set[str] = set()
    restored: set[int] = set()  # the notes of consumers that a fused expression gave back (unfuse)
    queue = list(graph.steps)
    while queue:
        step = queue.pop(0)
        if isinstance(step, Note) and id(step) in restored:
            continue
        if isinstance(step, Node) and step.op in ("tir", "transpose") and "expr_workload" in step.attrs:
            _expression_kernel(step, target, records, by_key, untuned_seconds, warned, untuned_to_cpe)
            if step.op != "kernel" and "unfused" in step.attrs:  # the plain form has the record: run it
                restored.add(id(step.attrs["unfused"].note))
                queue.insert(0, unfuse(step))  # the consumer runs next, as a step of its own
                _expression_kernel(step, target, records, by_key, untuned_seconds, warned, untuned_to_cpe)
        if not isinstance(step, Node) or step.op != "kernel":
            steps.append(step)
            continue
        w: Workload = step.attrs["workload"]
        choice = step.attrs.pop("choice", None)  # an expression's, decided by _expression_kernel
        if w.key not in chosen:
            chosen[w.key] = choice or choose_config(w, target, records)
        config, status = chosen[w.key]
        ep = step.attrs.get("epilogue")
        ep_key = ep.key if ep is not None else ""
        key = (w.key, repr(sorted(config.items())), ep_key)
        if key not in by_key:
            try:
                by_key[key] = _generate(w, target, config, len(by_key), status, ep)
            except NotImplementedError as exc:
                if status != TUNED:
                    raise AotError(f"{step.source}: cannot generate the default schedule of {w.key}: {exc}") from None
                log.warning("tuned config of workload %s cannot be generated (%s): falling back to a near record "
                            "or the OpenACC-like default schedule", w.key, exc)
                config, status = chosen[w.key] = default_config(w, target, records, Fallback.CODEGEN)
                key = (w.key, repr(sorted(config.items())), ep_key)
                if key not in by_key:
                    by_key[key] = _generate(w, target, config, len(by_key), status, ep)
        k = by_key[key]
        k.calls += 1
        step.attrs["kernel"] = k
        if k.packs:
            steps += _packed_b(graph, step, k, packed, steps)
        if k.c_pitch == k.c_cols:
            steps.append(step)
            continue
        final = step.output
        raw = graph.new_temp((k.c_rows, k.c_pitch), final.name + ".pitched")
        step.output = raw
        steps.append(step)
        steps.append(Node("unpitch", [raw], final, {"rows": k.c_rows, "cols": k.c_cols, "pitch": k.c_pitch},
                          step.relax_op, step.source))
    graph.steps = steps
    return sorted(by_key.values(), key=lambda k: k.index)


def _expression_kernel(step: Node, target: Target, records: Records,
                       by_key: dict[tuple[str, str, str], Kernel], untuned_seconds: UntunedSeconds | None,
                       warned: set[str], untuned_to_cpe: bool = True) -> None:
    """Make a generic operator that task extraction tunes as an expression (tuner.bridge.extract) a
    kernel node, or leave it generic (with the reason in ``mpe_reason`` when no schedule can be generated).

    A GEMM-like one becomes a kernel whether tuned or not: its record, else a near record or the
    kind's baseline (tuner.aot.untuned), as a built-in conv does; only when no schedule of its space can
    be generated does it keep the generic lowering. A fused form without a record of its own whose plain
    form has one is left to the caller, which undoes the fusion and runs the plain form's record.
    A memory-bound operator becomes its tuned kernel only when that simulates faster than its untuned
    lowering (the rule-picked CPE blocks of tuner.aot.cpe_ops, or the MPE); untuned, it keeps that lowering."""
    from tuner.space.factory import space_for

    w: Workload = step.attrs["expr_workload"]
    config = records(w)
    memory_bound = kind_of(w).memory_bound(w)
    if config is None and "unfused" in step.attrs and records(step.attrs["unfused"].workload) is not None:
        log.info("fused form %s (binding %s) is not tuned, its plain form is: the epilogue runs as a step of its "
                 "own", w.key, step.source)
        return
    if config is None and memory_bound:
        lowering = untuned_seconds(step) if untuned_seconds is not None and untuned_to_cpe else None
        if lowering is None or lowering.on_cpe:
            return  # untuned: its rule-picked CPE blocks (tuner.aot.cpe_ops), or the MPE when asked to stay there
        # else its untuned lowering is the MPE's: the expression kernel at the analysis' choice where faster
    ep = step.attrs.get("epilogue")
    untuned: Untuned | None = None
    try:
        space = space_for(w, target)
        if config is not None and (why := kind_of(w).why_not_applied(space, config)) is not None:
            if memory_bound:
                raise ValueError(why)
            log.warning("tuned config of expression operator %s (binding %s) on %s is not valid here (%s)", w.key,
                        step.source, target.name, why)
            choice = default_config(w, target, records, Fallback.INVALID)
        elif config is None:
            if w.key not in warned:
                warned.add(w.key)
                how = "the analysis' choice" if memory_bound else "a near record or the OpenACC-like default schedule"
                log.warning("untuned expression operator %s (%s, binding %s) on %s: %s on the CPEs", w.key,
                            step.relax_op, step.source, target.name, how)
            choice = analysis_choice(w, target, records) if memory_bound else default_config(w, target, records)
        elif memory_bound:  # its own comparison below: with its untuned lowering
            choice = (config, TUNED)
        else:
            choice = kept_unless_slower(w, target, space, config, records)
        key = (w.key, repr(sorted(choice[0].items())), ep.key if ep is not None else "")
        try:
            kernel = by_key.get(key) or _generate(w, target, choice[0], len(by_key), choice[1], ep)
        except NotImplementedError as exc:
            if choice[1] != TUNED:
                raise
            log.warning("tuned config of expression operator %s cannot be generated (%s)", w.key, exc)
            choice = default_config(w, target, records, Fallback.CODEGEN)
            key = (w.key, repr(sorted(choice[0].items())), ep.key if ep is not None else "")
            kernel = by_key.get(key) or _generate(w, target, choice[0], len(by_key), choice[1], ep)
        if memory_bound and untuned_seconds is not None:
            from tuner.aot.timing import kernel_seconds

            times, prepass = kernel_seconds(space, [choice[0]])
            tuned_s = float(times[0] + prepass[0])
            if kernel.c_pitch != kernel.c_cols:  # and the copy that strips its line padding
                raw = Tensor(-1, (kernel.c_rows, kernel.c_pitch), step.output.dtype, "temp", "probe")
                tuned_s += untuned_seconds(Node("unpitch", [raw], step.output, {
                    "rows": kernel.c_rows, "cols": kernel.c_cols, "pitch": kernel.c_pitch})).seconds
            untuned = untuned_seconds(step)
            if untuned.in_a_run(target) <= Untuned(tuned_s, True).in_a_run(target):  # like with like
                log.info("expression operator %s (binding %s): its untuned lowering (%.3g s) is not slower than "
                         "the tuned kernel (%.3g s); kept", w.key, step.source, untuned.seconds, tuned_s)
                return
        by_key[key] = kernel
    except (ValueError, KeyError, NotImplementedError, RuntimeError) as exc:
        log.warning("expression operator %s (binding %s) on %s has no CPE schedule (%s): generic lowering", w.key,
                    step.source, target.name, exc)
        step.attrs["mpe_reason"] = f"{MpeReason.NO_SCHEDULE.value} ({exc})"
        return
    step.op = "kernel"
    kept: dict[str, Any] = {a: step.attrs[a] for a in ("epilogue", "fused") if a in step.attrs}
    if untuned is not None:
        kept.update(untuned_s=untuned.seconds, untuned_on_cpe=untuned.on_cpe)
    step.attrs = {"workload": w, "choice": choice, **kept}


def _namespaced(k: Kernel, helper: str) -> tuple[str, str]:
    head = f"/* kernel {k.index}: {k.workload.key} ({k.status}; called {k.calls}x)\n * config: {k.config} */"
    return _namespace(k.index, k.name, k.slave, head, k.workload.key, helper)


def _namespace(index: int, name: str, slave: str, head: str, what: str, helper: str) -> tuple[str, str]:
    """(struct of the kernel's LDM buffers, kernel code reading them through the union)."""
    fields: list[str] = []
    names: list[str] = []
    body: list[str] = []
    text = slave.replace(helper, "")  # the register-communication helpers are emitted once
    for line in text.splitlines():
        if line.startswith("#include"):
            continue
        if line.startswith("__thread_local"):
            m = _DECL.match(line)
            if m is None:
                raise AotError(f"kernel {what}: unexpected LDM declaration {line!r}")
            fields.append(f"  {m.group(1)} {m.group(2)};")
            names += [_NAME.match(d).group(1) for d in m.group(2).split(",")]  # type: ignore[union-attr]
            continue
        body.append(line)
    code = "\n".join(body)
    if code.count(_KERNEL_SIG) != 1:
        raise AotError(f"kernel {what}: the generated slave function was not found")
    code = code.replace(_KERNEL_SIG, f"void {name}(swtune_args *_arg) {{")
    struct = f"struct {name}_ldm {{\n" + "\n".join(fields) + "\n};"
    defines = "\n".join(f"#define {n} (swtune_ldm.k{index}.{n})" for n in names)
    undefs = "\n".join(f"#undef {n}" for n in names)
    return struct, f"{head}\n{defines}\n{code.strip()}\n{undefs}\n"


def slave_file(kernels: list[Kernel], cpe_ops: list[Any] | None = None, ty: str = "float",
               groups: list[Any] | None = None) -> str:
    """All kernels (tuned GEMM-like ones, then the memory-bound operators' CPE kernels of
    tuner.aot.cpe_ops) in one slave file, their LDM buffers overlaid in one union; then the functions
    of the launch groups (tuner.aot.launch_groups) that run several of them in one spawn."""
    from tuner.aot.cpe_ops import slave_text
    from tuner.aot.launch_groups import slave_wrappers
    from tuner.codegen.printer import SLAVE_INCLUDES, SW_RLC_HELPER
    from tuner.ir.cprint.legalized import PRELUDE

    structs: list[str] = []
    codes: list[str] = []
    members: list[str] = []
    for k in kernels:
        s, c = _namespaced(k, SW_RLC_HELPER)
        structs.append(s)
        codes.append(c)
        members.append(f"  struct {k.name}_ldm k{k.index};")
    for op in cpe_ops or []:
        head = (f"/* kernel {op.index}: memory-bound operator on the CPEs, {op.blocks} blocks of {op.block} "
                f"along axis {op.axis}, {op.ldm_bytes} B of LDM */")
        s, c = _namespace(op.index, op.name, slave_text(op, ty), head, op.name, SW_RLC_HELPER)
        structs.append(s)
        codes.append(c)
        members.append(f"  struct {op.name}_ldm k{op.index};")
    union = "\n".join(members)
    return "\n".join([
        "/* swtune AOT: the slave (CPE) kernels of the model. Kernels run one at a time, so their LDM",
        " * buffers share one union: the static LDM use is that of the largest kernel. */",
        *SLAVE_INCLUDES,
        "",
        *structs,
        "union swtune_ldm_u {",
        union or "  char none;",
        "};",
        "__thread_local union swtune_ldm_u swtune_ldm __attribute__((aligned(64)));",
        SW_RLC_HELPER,
        *(["#include <math.h>", PRELUDE] if cpe_ops or any(k.epilogue is not None for k in kernels) else []),
        *codes,
        *slave_wrappers(groups or []),
    ])


def kernel_header(ctype: str, kernels: list[Kernel] | None = None) -> str:
    """The argument struct shared by the host and every slave kernel (as in tuner.codegen.host): a,
    b, c, then the further operand roles of the expression kernels (a1, b1, ...: tuner.codegen.te_ops)."""
    extra = sorted({r for k in kernels or [] for r in k.roles} - {"a", "b"})
    more = "".join(f" {ctype} *{r};" for r in extra)
    return (f"/* swtune AOT kernel interface */\n#ifndef SWTUNE_KERNEL_H\n#define SWTUNE_KERNEL_H\n"
            f"/* a, b, c: a GEMM-like kernel's operands; p: a memory-bound operator's (inputs, outputs);\n"
            f" * then an expression kernel's further operands */\n"
            f"typedef struct {{ {ctype} *a, *b, *c; {ctype} *p[16];{more} }} swtune_args;\n#endif\n")
