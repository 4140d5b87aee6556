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

from tuner.ir.graph import AotError

_BIN = {"Add": "+", "Sub": "-", "Mul": "*", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "EQ": "==",
        "NE": "!=", "And": "&&", "Or": "||"}
# math intrinsics: TVM name -> C name (the float32 variant adds "f")
_MATH = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p",
         "sqrt": "sqrt", "tanh": "tanh", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
         "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh",
         "atanh": "atanh", "erf": "erf", "fabs": "fabs", "floor": "floor", "ceil": "ceil", "round": "rint",
         "nearbyint": "nearbyint", "trunc": "trunc", "pow": "pow", "atan2": "atan2", "fmod": "fmod",
         "expm1": "expm1", "hypot": "hypot", "copysign": "copysign"}

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


# integer and bool model inputs (token ids, masks): dtype -> the C type of an element of its input
# file; the program converts them to the model's type as it reads them (tuner.aot.host)
INPUT_FILE_TYPES = {"int64": "int64_t", "int32": "int32_t", "bool": "uint8_t"}


def ctype_of(dtype: str) -> str:
    if dtype in ("float32", "float64"):
        return "float" if dtype == "float32" else "double"
    if dtype == "bool":
        return "int"
    if dtype.startswith("int") or dtype.startswith("uint"):
        bits = int(dtype.removeprefix("u").removeprefix("int") or 32)
        return ("long" if bits > 32 else "int") if not dtype.startswith("u") else (
            "unsigned long" if bits > 32 else "unsigned int")
    raise AotError(f"dtype {dtype} has no C type in the generic operator path")


def _dtype(e: Any) -> str:
    """dtype of a TIR expression (its PrimType)."""
    ty = getattr(e, "ty", None)
    return str(ty) if ty is not None else str(getattr(e, "dtype", ""))


def _kind(node: Any) -> str:
    return type(node).__name__


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
    vector_loops: int = 0  # loops printed with SIMD vectors (``lanes`` > 1: tuner.ir.tir_simd)


class _Printer:
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

    def _count(self, e: Any) -> None:
        """Add one evaluation of expression ``e`` per current trip to the work counters."""
        n = self.trips[-1]
        k = _kind(e)
        if k == "TensorLoad":
            self.work.loads += n
            return  # index arithmetic is address generation, not counted
        if k in _BIN or k in ("Min", "Max", "Select", "Not", "FloorDiv", "FloorMod", "Mod"):
            self.work.arith += n
        elif k == "Div":
            self.work.transcendental += n if _dtype(e).startswith("float") else 0
        elif k == "Call":
            op = str(e.op.name).rsplit(".", 1)[-1]
            if op in _MATH or op in ("rsqrt", "sigmoid"):
                self.work.transcendental += n
            else:
                self.work.arith += n
            for a in e.args:
                self._count(a)
            return
        for attr in ("a", "b", "value", "condition", "true_value", "false_value"):
            sub = getattr(e, attr, None)
            if sub is not None and hasattr(sub, "ty"):
                self._count(sub)

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
    def _shape(b: Any, what: str) -> list[int]:
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

    def expr(self, e: Any) -> str:
        k = _kind(e)
        dt = _dtype(e)
        if k == "Var":
            return self.var(e)
        if k == "IntImm":
            if dt == "bool":
                return "1" if int(e.value) else "0"
            return f"{int(e.value)}L"
        if k == "FloatImm":
            v = float(e.value)
            if isnan(v):
                return "NAN"
            if v in (float("inf"), float("-inf")):
                return "INFINITY" if v > 0 else "(-INFINITY)"
            return repr(v) + ("f" if dt == "float32" else "")
        if k in _BIN:
            return f"({self.expr(e.a)} {_BIN[k]} {self.expr(e.b)})"
        if k in ("Div",):
            return f"({self.expr(e.a)} / {self.expr(e.b)})"
        if k in ("Mod",):
            return f"({self.expr(e.a)} % {self.expr(e.b)})"
        if k in ("FloorDiv", "FloorMod"):
            if dt.startswith("float"):
                f = "floorf" if dt == "float32" else "floor"
                q = f"{f}({self.expr(e.a)} / {self.expr(e.b)})"
                return q if k == "FloorDiv" else f"({self.expr(e.a)} - {q} * {self.expr(e.b)})"
            return f"sw_{k.lower()}({self.expr(e.a)}, {self.expr(e.b)})"
        if k in ("Min", "Max"):
            return f"SWG_{k.upper()}({self.expr(e.a)}, {self.expr(e.b)})"
        if k == "Not":
            return f"(!{self.expr(e.a)})"
        if k == "Cast":
            return f"(({ctype_of(dt)}){self.expr(e.value)})"
        if k == "Select":
            return f"({self.expr(e.condition)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"
        if k == "TensorLoad":
            ref = self.index(e.source, list(e.indices))
            _, _, bdt = self.buffer(e.source)
            if self._stored_as_model_type(e.source) and bdt not in ("float32", "float64"):
                return f"(({ctype_of(bdt)}){ref})"
            return ref
        if k == "Let":
            raise AotError(f"{self.name}: Let expressions are not supported by the MPE printer")
        if k == "Call":
            return self.call(e, dt)
        raise AotError(f"{self.name}: cannot print TIR expression {k} ({e})")

    def _stored_as_model_type(self, b: Any) -> bool:
        return any(b.same_as(p) for p in self.func.params)

    def call(self, e: Any, dt: str) -> str:
        op = str(e.op.name).removeprefix("tirx.").removeprefix("tir.").removeprefix("prim.")
        args = [self.expr(a) for a in e.args]
        suffix = "f" if dt == "float32" else ""
        if op in _MATH:
            return f"{_MATH[op]}{suffix}({', '.join(args)})"
        if op == "rsqrt":
            one = "1.0f" if dt == "float32" else "1.0"
            return f"({one} / sqrt{suffix}({args[0]}))"
        if op == "sigmoid":
            one = "1.0f" if dt == "float32" else "1.0"
            return f"({one} / ({one} + exp{suffix}(-({args[0]}))))"
        if op == "isnan":
            return f"isnan({args[0]})"
        if op == "isinf":
            return f"isinf({args[0]})"
        if op == "isfinite":
            return f"isfinite({args[0]})"
        if op in ("if_then_else",):
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if op in ("likely",):
            return args[0]
        if op == "bitwise_and":
            return f"({args[0]} & {args[1]})"
        if op == "bitwise_or":
            return f"({args[0]} | {args[1]})"
        if op == "bitwise_not":
            return f"(~{args[0]})"
        raise AotError(f"{self.name}: TIR intrinsic {op} has no C form in the MPE printer")

    # ---- statements ---------------------------------------------------------------------------
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def stmt(self, s: Any, depth: int) -> None:
        k = _kind(s)
        if k == "SeqStmt":
            for x in s.seq:
                self.stmt(x, depth)
        elif k == "For":
            v = self.bind(s.loop_var)
            lo, ext = self.expr(s.min), self.expr(s.extent)
            step = getattr(s, "step", None)
            inc = f"{v}++" if step is None or (_kind(step) == "IntImm" and int(step.value) == 1) \
                else f"{v} += {self.expr(step)}"
            self.emit(depth, f"for (long {v} = {lo}; {v} < {lo} + {ext}; {inc}) {{" if lo != "0L"
                      else f"for (long {v} = 0; {v} < {ext}; {inc}) {{")
            trip = int(s.extent.value) if _kind(s.extent) == "IntImm" else 1
            self.trips.append(self.trips[-1] * trip)
            self.stmt(s.body, depth + 1)
            self.trips.pop()
            self.emit(depth, "}")
        elif k == "BufferStore":
            self.emit(depth, f"{self.index(s.buffer, list(s.indices))} = {self.expr(s.value)};")
            self.work.stores += self.trips[-1]
            self._count(s.value)
        elif k == "IfThenElse":
            self.emit(depth, f"if ({self.expr(s.condition)}) {{")
            self.stmt(s.then_case, depth + 1)
            if s.else_case is not None:
                self.emit(depth, "} else {")
                self.stmt(s.else_case, depth + 1)
            self.emit(depth, "}")
        elif k == "AllocBuffer":
            b = s.buffer
            shape = self._shape(b, self.name)
            cname = f"s{len(self.bufs)}" if self.ldm_prefix is None else f"{self.ldm_prefix}_s{len(self.bufs)}"
            self.bufs[b] = (cname, shape, str(b.dtype))
            n = max(1, prod(shape))
            self.scratch_bytes += n * (8 if ctype_of(str(b.dtype)) in ("double", "long") else 4)
            if self.ldm_prefix is not None:  # one copy per CPE, in its LDM
                self.ldm_decls.append(f"__thread_local {ctype_of(str(b.dtype))} {cname}[{n}];")
            else:  # static: an activation-sized scratch does not belong on the MPE stack
                self.statics.append(f"  static {ctype_of(str(b.dtype))} {cname}[{n}];  /* {b.name} */")
        elif k == "DeclBuffer":
            raise AotError(f"{self.name}: DeclBuffer {s.buffer.name} (an aliasing view) is not supported")
        elif k == "LetStmt":
            val = self.expr(s.value)
            v = self.bind(s.var)
            self.emit(depth, "{")
            self.emit(depth + 1, f"const {ctype_of(_dtype(s.var))} {v} = {val};")
            self.stmt(s.body, depth + 1)
            self.emit(depth, "}")
        elif k == "Bind":  # a let without a body: the variable holds for the rest of the enclosing scope
            val = self.expr(s.value)
            v = self.bind(s.var)
            self.emit(depth, f"const {ctype_of(_dtype(s.var))} {v} = {val};")
        elif k == "AttrStmt":
            self.stmt(s.body, depth)
        elif k == "Evaluate":
            if _kind(s.value) not in ("IntImm",):
                self.emit(depth, f"(void){self.expr(s.value)};")
        elif k == "AssertStmt":
            pass  # shapes are static and checked by the reader
        else:
            raise AotError(f"{self.name}: cannot print TIR statement {k}")

    def function(self) -> CFunction:
        params, dtypes, shapes = [], [], []
        for i, p in enumerate(self.func.params):
            if not hasattr(p, "shape"):
                raise AotError(f"{self.name}: parameter {p} is not a buffer")
            shape = self._shape(p, self.name)
            cname = f"p{i}"
            self.bufs[p] = (cname, shape, str(p.dtype))
            params.append(f"{self.store} *restrict {cname}")
            dtypes.append(str(p.dtype))
            shapes.append(tuple(shape))
        self.stmt(self.func.body, 1)
        self._finish()
        head = f"static void {self.name}({', '.join(params)}) {{"
        code = "\n".join([head, *self.statics, *self.lines, "}"])
        return CFunction(self.name, code, dtypes, shapes, self.work, self.ldm_decls, self.scratch_bytes,
                         self.vector_loops)

    def _finish(self) -> None:
        """After the body is printed (a subclass's hook)."""


def lower_for_mpe(prim_func: Any) -> Any:
    """The front of TVM's lowering with compacted scratch buffers (tuner.ir.tir.lower)."""
    import tvm
    from tvm.s_tir import transform as T

    from tuner.ir.tir import lower

    mod = tvm.IRModule({"main": prim_func})
    return T.StmtSimplify()(tvm.IRModule({"main": lower(mod, compact=True)}))["main"]


class _ScalarPrinter(_Printer):
    """Prints an element-wise PrimFunc as scalar statements on one value ``v`` (a fused epilogue)."""

    def __init__(self, func: Any, name: str, store_type: str, input_name: str, prefix: str,
                 operand: int = 0, scalars: dict[int, float] | None = None) -> None:
        super().__init__(func, name, store_type)
        self.input_name, self.prefix = input_name, prefix
        self.operand = operand  # the parameter holding the element; the others are 0-d constants
        self.scalars = scalars or {}
        self.loop_vars: list[Any] = []
        self.names: dict[Any, str] = {}  # buffer -> the scalar holding its element
        self.stmts: list[str] = []

    def expr(self, e: Any) -> str:
        if _kind(e) == "TensorLoad":
            from tvm_ffi import structural_equal

            for i, value in self.scalars.items():  # a 0-d constant operand: its value as a literal
                if e.source.same_as(self.func.params[i]):
                    return repr(float(value)) + ("f" if self.store == "float" else "")
            if len(e.indices) != len(self.loop_vars) or not all(
                    structural_equal(i, v) for i, v in zip(e.indices, self.loop_vars)):
                raise AotError(f"{self.name}: not element-wise (load of {e.source.name} at other indices)")
            key = next((b for b in self.names if b.same_as(e.source)), None)
            if key is None:
                raise AotError(f"{self.name}: reads {e.source.name} before it is computed")
            return self.names[key]
        return super().expr(e)

    def nest(self, s: Any) -> None:
        trips = 1
        while _kind(s) == "For":
            trips *= int(s.extent.value) if _kind(s.extent) == "IntImm" else 0
            s = s.body
        if _kind(s) != "BufferStore":
            raise AotError(f"{self.name}: not a perfect element-wise loop nest ({_kind(s)})")
        # element-wise: the nest visits every element of the stored buffer once and every load
        # reads at the store's own indices (extent-1 loops are gone after simplification)
        if trips != prod(self._shape(s.buffer, self.name)):
            raise AotError(f"{self.name}: the loop nest does not cover {s.buffer.name} once")
        self.loop_vars = list(s.indices)
        value = self.expr(s.value)
        self._count(s.value)
        name = f"{self.prefix}{len(self.stmts)}"
        self.stmts.append(f"const {self.store} {name} = {value};")
        self.names[s.buffer] = name

    def scalar(self) -> tuple[list[str], str]:
        params = list(self.func.params)
        if len(params) != 2 + len(self.scalars) or self.operand in self.scalars:
            raise AotError(f"{self.name}: an epilogue has one tensor input (and 0-d constants) and one output")
        self.names[params[self.operand]] = self.input_name
        body = self.func.body
        items = body.seq if _kind(body) == "SeqStmt" else [body]
        for item in items:
            if _kind(item) in ("AllocBuffer", "DeclBuffer"):
                continue
            self.nest(item)
        out = next((b for b in self.names if b.same_as(params[-1])), None)
        if out is None:
            raise AotError(f"{self.name}: the output is never written")
        return self.stmts, self.names[out]


def scalar_epilogue(prim_func: Any, name: str, store_type: str, input_name: str = "v", prefix: str = "_e",
                    operand: int = 0, scalars: dict[int, float] | None = None) -> tuple[list[str], str, Work] | None:
    """(statements computing the result from ``input_name``, the result's name, work per element) of
    an element-wise PrimFunc of one tensor (parameter ``operand``; ``scalars``: the values of its 0-d
    constant parameters), or None when it is not one (then it cannot be fused)."""
    try:
        p = _ScalarPrinter(lower_for_mpe(prim_func), name, store_type, input_name, prefix, operand, scalars)
        stmts, result = p.scalar()
    except AotError:
        return None
    return stmts, result, p.work
