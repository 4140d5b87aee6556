"""A legalized TIR PrimFunc (any Relax operator after ``LegalizeOps``) -> one plain C function.

This is the generic path of the AOT compiler: an operator that is not a tuned kernel is lowered by
TVM's own legalization to a PrimFunc (destination-passing: inputs, then outputs), the front of TVM's
lowering makes its blocks opaque loops (tuner.ir.tir.lower with buffer compaction), and this
printer writes those loops as serial C for the MPE. No operator has hand-written C here: coverage is
whatever TVM legalizes, and an expression this printer cannot print is an AotError naming it.

Storage convention: every tensor the host program keeps (parameters of the function) lives in a
buffer of the model's C type (float/double); a PrimFunc parameter of another dtype (bool masks of
``isnan``/``where``, int indices) is stored converted to that type and read back with a cast, which
is exact for bool and for integers below 2**24 (float32). Scratch buffers the PrimFunc allocates
(e.g. the row sums of a layer_norm) have their own dtype and are ``static`` arrays of the function.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import isnan, prod
from typing import Any

from tuner.ir.cprint.dtypes import ctype_of, dtype_of
from tuner.ir.cprint.expr import BINARY, ExprPrinter
from tuner.ir.cprint.functions import is_math, math_call, op_name
from tuner.ir.cprint.lines import for_line
from tuner.ir.graph import AotError
from tuner.ir.tir import kind

# C helpers the printed functions use (emitted once per host file)
PRELUDE = """/* helpers of the generic (legalized TIR) operators */
static inline long sw_floordiv(long a, long b) {
  long q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline long sw_floormod(long a, long b) { long m = a % b; return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m; }
#define SWG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SWG_MAX(a, b) ((a) > (b) ? (a) : (b))
"""

# the other TIR calls with a C form: operator -> its text ({0}, {1}...: the arguments)
_CALLS = {"isnan": "isnan({0})", "isinf": "isinf({0})", "isfinite": "isfinite({0})",
          "if_then_else": "({0} ? {1} : {2})", "likely": "{0}", "bitwise_and": "({0} & {1})",
          "bitwise_or": "({0} | {1})", "bitwise_not": "(~{0})"}
# expressions that are one scalar instruction each (Work.arith)
_ARITH = (*BINARY, "Min", "Max", "Select", "Not", "FloorDiv", "FloorMod")


@dataclass
class Work:
    """What a PrimFunc does, counted over its loop nests (stores times enclosing trip counts)."""

    stores: int = 0  # elements written
    loads: int = 0  # elements read
    arith: int = 0  # add/mul/compare/select... (one scalar instruction each)
    transcendental: int = 0  # exp/erf/tanh/sqrt/div-like calls (many cycles each)


@dataclass
class CFunction:
    """A printed PrimFunc: ``name(p0, p1, ...)`` takes one pointer per parameter, in order."""

    name: str
    code: str
    param_dtypes: list[str]
    param_shapes: list[tuple[int, ...]]
    work: Work
    ldm_decls: list[str]  # file-scope scratch of a CPE body (``ldm_prefix``): ``__thread_local T name[n];``
    scratch_bytes: int  # bytes of the function's scratch buffers
    vector_loops: int = 0  # loops printed with SIMD vectors (``lanes`` > 1: tuner.ir.cprint.legalized_simd)


class LegalizedPrinter(ExprPrinter):
    """The scalar printer of a legalized PrimFunc and the expression dialect it prints in."""

    minmax = "SWG_"
    cast_type = staticmethod(ctype_of)

    def __init__(self, func: Any, name: str, store_type: str, ldm_prefix: str | None = None) -> None:
        self.func = func
        self.name = name
        self.ldm_prefix = ldm_prefix  # scratch in LDM at file scope (a CPE body) instead of static
        self.ldm_decls: list[str] = []
        self.scratch_bytes = 0
        self.store = store_type  # C type of the host program's tensors
        self.vars: dict[Any, str] = {}
        self.bufs: dict[Any, tuple[str, list[int], str]] = {}  # buffer var -> (C name, shape, dtype)
        self.lines: list[str] = []
        self.statics: list[str] = []
        self.work = Work()
        self.trips = [1]  # product of the enclosing loops' extents
        self.vector_loops = 0

    def count(self, e: Any) -> None:
        """Add one evaluation of expression ``e`` per current trip to the work counters."""
        n = self.trips[-1]
        k = kind(e)
        if k == "TensorLoad":
            self.work.loads += n
            return  # index arithmetic is address generation, not counted
        if k in _ARITH:
            if k != "Div":
                self.work.arith += n
            elif dtype_of(e).startswith("float"):
                self.work.transcendental += n
        elif k == "Call":
            if is_math(op_name(e)):
                self.work.transcendental += n
            else:
                self.work.arith += n
            for a in e.args:
                self.count(a)
            return
        for attr in ("a", "b", "value", "condition", "true_value", "false_value"):
            sub = getattr(e, attr, None)
            if sub is not None and hasattr(sub, "ty"):
                self.count(sub)

    # ---- names --------------------------------------------------------------------------------
    def var(self, v: Any) -> str:
        if v not in self.vars:
            raise AotError(f"{self.name}: variable {v.name} is used before it is defined")
        return self.vars[v]

    def bind(self, v: Any) -> str:
        self.vars[v] = f"v{len(self.vars)}"
        return self.vars[v]

    def buffer(self, b: Any) -> tuple[str, list[int], str]:
        if b in self.bufs:
            return self.bufs[b]
        raise AotError(f"{self.name}: buffer {b.name} is neither a parameter nor allocated")

    @staticmethod
    def shape(b: Any, what: str) -> list[int]:
        try:
            return [int(d) for d in b.shape]
        except (TypeError, ValueError):
            raise AotError(f"{what}: buffer {b.name} has a dynamic shape {list(b.shape)}") from None

    # ---- expressions --------------------------------------------------------------------------
    def index(self, b: Any, indices: list[Any]) -> str:
        cname, shape, _ = self.buffer(b)
        if len(indices) != len(shape):
            raise AotError(f"{self.name}: {len(indices)} indices into {b.name}{shape}")
        flat, stride = [], 1
        for d in range(len(shape) - 1, -1, -1):
            i = self.expr(indices[d])
            flat.append(i if stride == 1 else f"{i} * {stride}L")
            stride *= shape[d]
        return f"{cname}[{' + '.join(reversed(flat)) or '0'}]"

    def leaf(self, e: Any) -> str:
        k = kind(e)
        if k == "Var":
            return self.var(e)
        if k == "IntImm":
            return ("1" if int(e.value) else "0") if dtype_of(e) == "bool" else f"{int(e.value)}L"
        v = float(e.value)
        if isnan(v):
            return "NAN"
        if v in (float("inf"), float("-inf")):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        return repr(v) + ("f" if dtype_of(e) == "float32" else "")

    def floor_div(self, e: Any) -> str:
        k, dt = kind(e), dtype_of(e)
        if dt.startswith("float"):
            f = "floorf" if dt == "float32" else "floor"
            q = f"{f}({self.expr(e.a)} / {self.expr(e.b)})"
            return q if k == "FloorDiv" else f"({self.expr(e.a)} - {q} * {self.expr(e.b)})"
        return f"sw_{k.lower()}({self.expr(e.a)}, {self.expr(e.b)})"

    def load(self, e: Any) -> str:
        ref = self.index(e.source, list(e.indices))
        _, _, bdt = self.buffer(e.source)
        if self.is_param(e.source) and bdt not in ("float32", "float64"):
            return f"(({ctype_of(bdt)}){ref})"
        return ref

    def unsupported(self, e: Any) -> Exception:
        k = kind(e)
        if k == "Let":
            return AotError(f"{self.name}: Let expressions are not supported by the MPE printer")
        return AotError(f"{self.name}: cannot print TIR expression {k} ({e})")

    def is_param(self, b: Any) -> bool:
        """Whether ``b`` is a parameter: a tensor the host program keeps in the model's C type."""
        return any(b.same_as(p) for p in self.func.params)

    def call(self, e: Any) -> str:
        op = op_name(e)
        args = [self.expr(a) for a in e.args]
        if is_math(op):
            return math_call(op, args, dtype_of(e))
        if op in _CALLS:
            return _CALLS[op].format(*args)
        raise AotError(f"{self.name}: TIR intrinsic {op} has no C form in the MPE printer")

    # ---- statements ---------------------------------------------------------------------------
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def stmt(self, s: Any, depth: int) -> None:
        k = kind(s)
        if k == "SeqStmt":
            for x in s.seq:
                self.stmt(x, depth)
        elif k == "For":
            v = self.bind(s.loop_var)
            lo, ext = self.expr(s.min), self.expr(s.extent)
            step = getattr(s, "step", None)
            inc = f"{v}++" if step is None or (kind(step) == "IntImm" and int(step.value) == 1) \
                else f"{v} += {self.expr(step)}"
            self.emit(depth, for_line("long", v, None if lo == "0L" else lo, ext, inc))
            trip = int(s.extent.value) if kind(s.extent) == "IntImm" else 1
            self.trips.append(self.trips[-1] * trip)
            self.stmt(s.body, depth + 1)
            self.trips.pop()
            self.emit(depth, "}")
        elif k == "BufferStore":
            self.emit(depth, f"{self.index(s.buffer, list(s.indices))} = {self.expr(s.value)};")
            self.work.stores += self.trips[-1]
            self.count(s.value)
        elif k == "IfThenElse":
            self.emit(depth, f"if ({self.expr(s.condition)}) {{")
            self.stmt(s.then_case, depth + 1)
            if s.else_case is not None:
                self.emit(depth, "} else {")
                self.stmt(s.else_case, depth + 1)
            self.emit(depth, "}")
        elif k == "AllocBuffer":
            self.scratch(s.buffer)
        elif k == "DeclBuffer":
            raise AotError(f"{self.name}: DeclBuffer {s.buffer.name} (an aliasing view) is not supported")
        elif k in ("LetStmt", "Bind"):
            # a Bind is a let without a body: the variable holds for the rest of the enclosing scope
            val = self.expr(s.value)
            v = self.bind(s.var)
            inner = depth + 1 if k == "LetStmt" else depth
            if k == "LetStmt":
                self.emit(depth, "{")
            self.emit(inner, f"const {ctype_of(dtype_of(s.var))} {v} = {val};")
            if k == "LetStmt":
                self.stmt(s.body, inner)
                self.emit(depth, "}")
        elif k == "AttrStmt":
            self.stmt(s.body, depth)
        elif k == "Evaluate":
            if kind(s.value) not in ("IntImm",):
                self.emit(depth, f"(void){self.expr(s.value)};")
        elif k == "AssertStmt":
            pass  # shapes are static and checked by the reader
        else:
            raise AotError(f"{self.name}: cannot print TIR statement {k}")

    def scratch(self, b: Any) -> None:
        """Declare scratch buffer ``b``: static in the function, or in LDM at file scope."""
        shape = self.shape(b, self.name)
        cname = f"s{len(self.bufs)}" if self.ldm_prefix is None else f"{self.ldm_prefix}_s{len(self.bufs)}"
        self.bufs[b] = (cname, shape, str(b.dtype))
        n = max(1, prod(shape))
        self.scratch_bytes += n * (8 if ctype_of(str(b.dtype)) in ("double", "long") else 4)
        if self.ldm_prefix is not None:  # one copy per CPE, in its LDM
            self.ldm_decls.append(f"__thread_local {ctype_of(str(b.dtype))} {cname}[{n}];")
        else:  # static: an activation-sized scratch does not belong on the MPE stack
            self.statics.append(f"  static {ctype_of(str(b.dtype))} {cname}[{n}];  /* {b.name} */")

    def function(self) -> CFunction:
        params, dtypes, shapes = [], [], []
        for i, p in enumerate(self.func.params):
            if not hasattr(p, "shape"):
                raise AotError(f"{self.name}: parameter {p} is not a buffer")
            shape = self.shape(p, self.name)
            cname = f"p{i}"
            self.bufs[p] = (cname, shape, str(p.dtype))
            params.append(f"{self.store} *restrict {cname}")
            dtypes.append(str(p.dtype))
            shapes.append(tuple(shape))
        self.stmt(self.func.body, 1)
        self.finish()
        head = f"static void {self.name}({', '.join(params)}) {{"
        code = "\n".join([head, *self.statics, *self.lines, "}"])
        return CFunction(self.name, code, dtypes, shapes, self.work, self.ldm_decls, self.scratch_bytes,
                         self.vector_loops)

    def finish(self) -> None:
        """After the body is printed (a subclass's hook)."""


def lower_for_mpe(prim_func: Any) -> Any:
    """The front of TVM's lowering with compacted scratch buffers (tuner.ir.tir.lower)."""
    import tvm
    from tvm.s_tir import transform as T

    from tuner.ir.tir import lower

    mod = tvm.IRModule({"main": prim_func})
    return T.StmtSimplify()(tvm.IRModule({"main": lower(mod, compact=True)}))["main"]
