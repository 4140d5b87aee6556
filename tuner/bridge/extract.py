"""Task extraction: a PyTorch module or an ONNX file -> swtune workloads with their weights.

The model is imported into TVM Relax (torch.export -> ``from_exported_program``, or
``relax.frontend.onnx.from_onnx``) and every operator call of the main function is read back:
conv2d (NCHW/OIHW, any stride, padding, dilation, groups), matmul/linear (2-D -> dense, 3-D ->
batch_matmul) become workloads; identical workloads are merged and counted (their weight). An
operator no built-in reader takes (conv1d, conv3d, a 4-D matmul, an einsum...) is legalized to its
PrimFunc and, when that is one GEMM-like stage -- a reduction over a product of two or more inputs,
with at least one spatial axis --, becomes an expression operator (tuner/expr, ``ExprWorkload``), so a
model's novel operators are tuned instead of falling back.

Memory-bound operators are expression tasks too (``Routing.MEMORY_BOUND``): an operator whose
legalized PrimFunc is one compute block the expression path takes -- element-wise unary or binary
(broadcast operands included), a single-input reduction (sum, max, max pooling without padding), a
layout copy (transpose) -- is a task in the form the AOT compiler builds the model: read by its reader
(tuner.aot.relax_reader), epilogues fused into their producer (those are no task of their own),
constants folded. Multi-block PrimFuncs (softmax, layer_norm, mean, padded pools, gelu, ...) are not
expressions: those the compiler runs block by block on the CPEs are CPE kernel tasks
(tuner.cpe, ``CpeKernelWorkload``); the rest stay listed in ``untuned`` with their count: nothing is
dropped silently.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from tuner.errors import InvalidWorkloadError
from tuner.expr.workload import ExprWorkload
from tuner.models.zoo import Layer
from tuner.task_kind import kind_of
from tuner.workloads import BatchMatmul, Conv2d, Dense, Workload

# Relax ops that are bookkeeping, not computation worth listing as "untuned".
_FREE_OPS = {"relax.reshape", "relax.permute_dims", "relax.flatten", "relax.squeeze", "relax.expand_dims"}


@dataclass
class ExtractedModel:
    layers: list[Layer]
    untuned: dict[str, int] = field(default_factory=dict)  # op name -> occurrences

    @property
    def workloads(self) -> list[Workload]:
        return [layer.workload for layer in self.layers]


def _shape(expr: Any) -> tuple[list[int], str]:
    info = expr.ty  # the struct info of a Relax expression (R.Tensor(shape, dtype))
    return [int(d) for d in info.shape], str(info.dtype)


def _conv(call: Any) -> Conv2d:
    attrs = call.attrs
    if str(attrs.data_layout) != "NCHW" or str(attrs.kernel_layout) != "OIHW":
        raise InvalidWorkloadError(f"conv2d layout {attrs.data_layout}/{attrs.kernel_layout} is not NCHW/OIHW")
    (n, c, h, w), dtype = _shape(call.args[0])
    (k, _, r, s), _ = _shape(call.args[1])
    top, left, bottom, right = (int(p) for p in attrs.padding)
    if top != bottom or left != right:
        raise InvalidWorkloadError(f"asymmetric conv2d padding {(top, left, bottom, right)} is not supported")
    sh, sw = (int(v) for v in attrs.strides)
    dh, dw = (int(v) for v in attrs.dilation)
    return Conv2d(n, c, h, w, k, r, s, stride_h=sh, stride_w=sw, pad_h=top, pad_w=left, dil_h=dh, dil_w=dw,
                  groups=int(attrs.groups), dtype=dtype)


def _matmul(call: Any) -> Dense | BatchMatmul:
    a, dtype = _shape(call.args[0])
    b, _ = _shape(call.args[1])
    if len(a) == 2 and len(b) == 2:
        return Dense(a[0], b[1], a[1], dtype)  # weights are constants: transposed to [N, K] at compile time
    if len(a) == 3 and len(b) == 3 and a[0] == b[0]:
        return BatchMatmul(a[0], a[1], b[2], a[2], dtype)
    if len(a) == 3 and len(b) == 2:
        return Dense(a[0] * a[1], b[1], a[2], dtype)  # a linear layer over a sequence
    raise InvalidWorkloadError(f"matmul of shapes {a} x {b} is not a dense or batch_matmul workload")


_READERS = {"relax.nn.conv2d": _conv, "relax.matmul": _matmul}


class Routing(str, Enum):
    """Which single-stage PrimFuncs become expression operators (each level takes the ones before)."""

    GEMM_LIKE = "gemm_like"  # a reduction over a product of two or more inputs (conv1d, einsum, ...)
    REDUCTIONS = "reductions"  # and single-input reductions (sum, max, max pooling without padding)
    MEMORY_BOUND = "memory_bound"  # and element-wise operators (unary, broadcast binary, copies)


def memory_bound(wl: Workload) -> bool:
    """Whether a task moves more than it computes (an element-wise or single-input expression
    operator, a memory-bound CPE kernel): its kind says."""
    return kind_of(wl).memory_bound(wl)


# A memory-bound task adds this share of the per-task trials to a model's one budget (at least
# MEMORY_BOUND_MIN_TRIALS): its space is one operand group and no reduction chunking, and its time
# share is small; on a [1, 64, 56, 56] relu, add, 2x2 max pool and spatial sum, 16 trials came within
# 0-30% of 64 trials (a sum reached its best at 16), where GEMM-like tasks keep improving.
MEMORY_BOUND_TRIAL_SHARE = 0.25
MEMORY_BOUND_MIN_TRIALS = 8


def trial_budget(layers: Sequence[Layer], trials: int) -> int:
    """A model's one trial budget: ``trials`` per GEMM-like task, a share of it per memory-bound task."""
    small = max(MEMORY_BOUND_MIN_TRIALS, round(trials * MEMORY_BOUND_TRIAL_SHARE))
    return sum(min(trials, small) if memory_bound(layer.workload) else trials for layer in layers)


def _expression(func: Any, name: str, routing: Routing) -> ExprWorkload:
    """The legalized PrimFunc of an operator no reader takes, as an expression operator; raises
    InvalidWorkloadError with the reason it is not one (several stages, element-wise, ...)."""
    wl = ExprWorkload.from_script(canonical_script(_inline_copies(func)), re.sub(r"\d+$", "", name) or name)
    if not wl.expr.spatial:
        raise InvalidWorkloadError("a reduction to a scalar has no axis to spread over the CPEs")
    if wl.expr.gemm_like:
        return wl
    if routing is Routing.GEMM_LIKE:
        raise InvalidWorkloadError("not GEMM-like (memory-bound: Routing.MEMORY_BOUND tunes it)")
    if not wl.expr.reduce and routing is not Routing.MEMORY_BOUND:
        raise InvalidWorkloadError("element-wise (Routing.MEMORY_BOUND tunes it)")
    if any(not acc.shape for acc in wl.expr.inputs):
        # a 0-d operand (an ONNX scalar constant) has no tile box: left to the generic lowering
        raise InvalidWorkloadError("a 0-d operand")
    return wl


def canonical_script(func: Any) -> str:
    """The PrimFunc's TVMScript with its parameters renamed ``p0, p1, ...`` by position: a legalized
    PrimFunc names its inputs after the Relax bindings that feed it (``lv8``), so the same operator
    would get another workload key in every model, or from ONNX rather than torch. The renamed text
    must parse back to a structurally equal function, else the original text is kept."""
    import tvm_ffi

    from tuner.expr.parse import prim_func_from_script, script_text

    text = script_text(func)
    names = [str(p.name) for p in func.params]
    if len(set(names)) != len(names) or not all(re.fullmatch(r"[A-Za-z_]\w*", n) for n in names):
        return text
    parts = re.split(r'("[^"]*")', text)  # string literals (block names, annotations) stay as they are
    for k in range(0, len(parts), 2):
        for i, n in enumerate(names):  # through placeholders: a name may be another's new name
            parts[k] = re.sub(rf"\b{re.escape(n)}\b", f"__swtune_p{i}__", parts[k])
        parts[k] = re.sub(r"__swtune_p(\d+)__", r"p\1", parts[k])
    renamed = "".join(parts)
    try:
        back = prim_func_from_script(renamed)
    except InvalidWorkloadError:
        return text
    return script_text(back) if tvm_ffi.structural_equal(back, prim_func_from_script(text)) else text


def transpose_expression(shape: tuple[int, ...], axes: tuple[int, ...], dtype: str) -> ExprWorkload:
    """A layout copy ``out[i...] = x[permuted i...]`` as an expression operator (TVM's topi.transpose)."""
    from tvm import te, topi

    from tuner.expr.parse import prim_func_from_tensors

    x = te.placeholder(shape, dtype, name="x")
    return ExprWorkload.from_script(canonical_script(prim_func_from_tensors([x, topi.transpose(x, list(axes))])),
                                    "transpose")


def _inline_copies(func: Any) -> Any:
    """The PrimFunc with its pure copy stages (a pad stage of padding 0, a transpose: ``out[..] =
    in[..]``) inlined into their consumer, so the compute reads the inputs themselves. A stage that
    computes (a zero padding's if_then_else) stays, and the function is then refused as two stages."""
    import tvm

    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    blocks: list[Any] = []

    def walk(stmt: Any) -> None:
        kind = type(stmt).__name__
        if kind == "SBlockRealize":
            walk(stmt.block)
        elif kind == "SBlock":
            if stmt.iter_vars:
                blocks.append(stmt)
            walk(stmt.body)
        elif hasattr(stmt, "seq"):
            for x in stmt.seq:
                walk(x)
        elif hasattr(stmt, "body"):
            walk(stmt.body)

    walk(func.body)
    for block in blocks[:-1]:
        body = block.body
        if type(body).__name__ == "BufferStore" and type(body.value).__name__ in ("TensorLoad", "BufferLoad"):
            try:
                sch.compute_inline(sch.get_sblock(str(block.name_hint)))
            except Exception:  # noqa: BLE001 -- TVM refuses some inlines (e.g. a reduction reads it): keep the stage
                continue
    return sch.mod["main"]


class _Legalized:
    """The module's PrimFuncs by the name of the binding that calls them (legalized once, on demand)."""

    def __init__(self, mod: Any) -> None:
        self.mod = mod
        self._funcs: dict[str, tuple[Any, str]] | None = None

    def func(self, var_name: str) -> tuple[Any, str] | None:
        """(PrimFunc, its name) of the binding ``var_name``, or None when it calls no PrimFunc."""
        if self._funcs is None:
            from tvm import relax

            legal = relax.transform.LegalizeOps()(self.mod)
            funcs: dict[str, tuple[Any, str]] = {}
            for block in legal["main"].body.blocks:
                for binding in block.bindings:
                    call = binding.value
                    if isinstance(call, relax.Call) and getattr(call.op, "name", "") == "relax.call_tir":
                        funcs[str(binding.var.name)] = (legal[call.args[0]], str(call.args[0].name_hint))
            self._funcs = funcs
        return self._funcs.get(var_name)


def extract_relax(mod: Any, reductions: bool = False, fused: bool = True) -> ExtractedModel:
    """Workloads of a Relax IRModule's main function (before legalization); ``fused``: in the form
    the compiler builds them (an epilogue that is part of the workload gives a task of its own, an
    element-wise operator fused into its producer none). Memory-bound expression tasks come from the
    compiled graph; ``reductions``: when the compiler cannot read the model, single-input reductions
    are still taken from the Relax calls, like the GEMM-like operators."""
    from tvm import relax

    from tuner.aot.cpe_task import has_kernel_task

    legal = _Legalized(mod)
    graph = _compiled_graph(mod, fused)
    # memory-bound operators as the compiler builds them: binding name -> their expression or CPE kernel tasks
    routed: dict[str, list[Workload]] = {}
    for n in graph.nodes if graph is not None else []:
        w = n.attrs.get("expr_workload")
        if w is not None and memory_bound(w):
            routed.setdefault(n.source, []).append(w)
        elif has_kernel_task(n):
            kernel = _cpe_kernel(n, graph)
            if kernel is not None:
                routed.setdefault(n.source, []).append(kernel)
    counts: Counter[str] = Counter()
    by_key: dict[str, Workload] = {}
    names: dict[str, str] = {}
    untuned: Counter[str] = Counter()

    def add(workload: Workload) -> None:
        counts[workload.key] += 1
        if workload.key not in by_key:
            by_key[workload.key] = workload
            names[workload.key] = f"{getattr(workload, 'name', workload.op)}_{len(by_key) - 1}"

    routing = Routing.REDUCTIONS if reductions else Routing.GEMM_LIKE
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            call = binding.value
            if not isinstance(call, relax.Call) or not hasattr(call.op, "name"):
                continue
            op, var = str(call.op.name), str(binding.var.name)
            reader = _READERS.get(op)
            workload: Workload | None = None
            why = ""
            if reader is not None:
                try:
                    workload = reader(call)
                except InvalidWorkloadError as exc:
                    why = f" ({exc})"
            if workload is None and var in routed:
                for w in routed.pop(var):
                    add(w)
                continue
            if op in _FREE_OPS:
                continue
            if workload is None:
                found = legal.func(var)
                try:
                    if found is None:
                        raise InvalidWorkloadError("no PrimFunc")
                    workload = _expression(found[0], found[1], routing)
                except InvalidWorkloadError:
                    untuned[op.removeprefix("relax.") + why] += 1
                    continue
            add(workload)
    for extra in routed.values():  # the compiler's own steps under a binding (a matmul's transposed b)
        for w in extra:
            add(w)
    layers = [Layer(names[k], by_key[k], counts[k]) for k in by_key]
    if fused and graph is not None:
        layers = _fused_forms(graph, layers)
    return ExtractedModel(layers, dict(untuned))


def _cpe_kernel(n: Any, graph: Any) -> Workload | None:
    """The CPE kernel task of a multi-block generic node (tuner.aot.cpe_task), when it cuts into
    blocks on some target whose meaning holds (its plans are checked again by the space)."""
    from tuner.aot.cpe_task import kernel_workload, workload_plans
    from tuner.errors import SwtuneError

    try:
        wl = kernel_workload(n, graph.dtype)
        return wl if wl is not None and workload_plans(wl, "sw26010") else None
    except (SwtuneError, ValueError, TypeError):  # no task: the operator stays on the compile-time path
        return None


def _compiled_graph(mod: Any, fused: bool) -> Any:
    """The graph the ahead-of-time compiler builds (epilogues fused when ``fused``), or None when it
    cannot read the model (its built-in and GEMM-like tasks are still listed)."""
    from tuner.aot.fusion import fuse_epilogues
    from tuner.aot.graph import AotError
    from tuner.aot.relax_reader import read_relax
    from tuner.codegen.tir import ctype

    try:
        graph = read_relax(mod)
        if fused:
            fuse_epilogues(graph, ctype(graph.dtype))
    except AotError:
        return None
    return graph


def _fused_forms(graph: Any, layers: list[Layer]) -> list[Layer]:
    """Split each layer by the form the ahead-of-time compiler builds it in: where an epilogue that is
    part of the workload (a residual add, tuner/space/epilogue.py) fuses into some of its calls, those
    calls are a task of their own under the fused workload's key, so `compile` finds them tuned."""
    built: Counter[str] = Counter()
    fused: dict[str, list[Workload]] = {}
    for n in graph.nodes:
        if n.op == "kernel":
            w = n.attrs["workload"]
            built[w.key] += 1
            if getattr(w, "epilogue", "none") != "none":
                fused.setdefault(replace(w, epilogue="none").key, []).append(w)
    out: list[Layer] = []
    for layer in layers:
        forms = fused.get(layer.workload.key, [])
        plain = layer.weight - len(forms)
        if not forms or plain < 0:
            out.append(layer)
            continue
        if plain:
            out.append(Layer(layer.name, layer.workload, plain))
        for w in {f.key: f for f in forms}.values():
            out.append(Layer(f"{layer.name}_{getattr(w, 'epilogue', '')}", w, built[w.key]))
    return out


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"importing models needs {module}: pip install 'swtune[models]'") from None


def torch_to_relax(module: Any, example_inputs: Sequence[Any]) -> Any:
    torch = _require("torch")
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad():
        exported = torch.export.export(module.eval(), tuple(example_inputs))
    return from_exported_program(exported, keep_params_as_input=False)


def extract_torch(module: Any, example_inputs: Sequence[Any]) -> ExtractedModel:
    """Tasks of a PyTorch module for the given example inputs (their shapes fix the workloads)."""
    return extract_relax(torch_to_relax(module, example_inputs))


def onnx_to_relax(path: str | Path, shapes: dict[str, list[int]] | None = None) -> Any:
    onnx = _require("onnx")
    from tvm.relax.frontend.onnx import from_onnx

    model = onnx.load(str(path))
    return from_onnx(model, shape_dict=shapes, keep_params_in_input=False)


def extract_onnx(path: str | Path, shapes: dict[str, list[int]] | None = None) -> ExtractedModel:
    """Tasks of an ONNX model file (input shapes from the file unless given)."""
    return extract_relax(onnx_to_relax(path, shapes))


def load_relax(spec: str, batch: int = 1, width: float = 1.0, image: int = 224) -> Any:
    """The Relax module of a model named on the command line: a zoo model (tuner.models.torch_models,
    random weights) or a path to an .onnx file."""
    if spec.endswith(".onnx"):
        if not Path(spec).exists():
            raise FileNotFoundError(f"no ONNX file at {spec}")
        return onnx_to_relax(spec)
    from tuner.models.torch_models import TORCH_MODELS, build

    _require("torch")
    if spec not in TORCH_MODELS:
        raise ValueError(f"unknown model {spec!r}: expected one of {sorted(TORCH_MODELS)} or a path to an .onnx file")
    module, inputs = build(spec, batch=batch, width=width, image=image)
    return torch_to_relax(module, inputs)


def extract_model(spec: str, batch: int = 1, width: float = 1.0, image: int = 224) -> ExtractedModel:
    """Tasks of a model named on the command line (see ``load_relax``)."""
    return extract_relax(load_relax(spec, batch, width, image))
