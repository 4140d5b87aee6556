"""Operator workloads (conv2d incl. depthwise, dense, batch_matmul): validation, canonical JSON and keys.

Every kind of workload (these built-in operators, operators written as tensor expressions, memory-bound
CPE kernels, ...) shares the JSON round-trip: :func:`workload_from_json` reads the ``op`` and lets the
kind that owns it (tuner.task_kind) build the workload.

A workload is one operator instance: op, shapes and dtype. Its canonical JSON (sorted keys, no
spaces) is what the tuning log stores, and its key is a readable, stable string that names it in
URLs and lookups. Layouts follow TVM's topi defaults: conv2d NCHW data with OIHW weights, dense
``data[M,K] x weight[N,K]^T``, batch_matmul ``A[B,M,K] x B[B,N,K]^T``.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, fields, replace
from enum import Enum
from typing import Any, ClassVar

from tuner.errors import InvalidWorkloadError
from tuner.task_kind import kind_of, kind_of_op

DTYPE_BYTES = {"float32": 4, "float64": 8}

# Bounds that keep a workload tunable and every figure of it inside a 64-bit column: the largest
# extent of any shape field (16 Mi: far beyond any layer of a real model) and the largest FLOP count
# of one operator instance (1e15: a quarter hour at a core group's peak).
MAX_EXTENT = 1 << 24
MAX_FLOPS = 10**15


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidWorkloadError(f"{name} must be an integer, got {value!r}")
    if value <= 0:
        raise InvalidWorkloadError(f"{name} must be positive, got {value}")
    if value > MAX_EXTENT:
        raise InvalidWorkloadError(f"{name}={value} exceeds the maximum extent {MAX_EXTENT}")
    return value


def _check_dtype(dtype: Any) -> None:
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise InvalidWorkloadError(f"unsupported dtype {dtype!r}; expected one of {sorted(DTYPE_BYTES)}")


# Element-wise work fused into the kernel that changes what it reads or moves (tuner/space/epilogue.py):
# "residual_add" adds a second operand of the output's shape, fetched by DMA tile by tile (a ResNet
# shortcut); "residual_multiply" multiplies by one (a backward pass's derivative: relu's mask, tanh's
# 1 - y^2). It is part of the workload (a distinct key and tuning log entry); "none" keeps the keys
# and JSON of before.
EPILOGUES = ("none", "residual_add", "residual_multiply")


def check_epilogue(epilogue: Any) -> None:
    if epilogue not in EPILOGUES:
        raise InvalidWorkloadError(f"unsupported epilogue {epilogue!r}; expected one of {list(EPILOGUES)}")


def with_epilogue(workload: Workload, epilogue: str) -> Workload:
    """``workload`` with another epilogue (see EPILOGUES); TypeError for a kind that takes none."""
    if not any(f.name == "epilogue" for f in fields(workload)):
        raise TypeError(f"{workload.op} workloads take no epilogue")
    return replace(workload, epilogue=epilogue)  # type: ignore[call-arg]


def _check_flops(workload: Workload) -> None:
    if workload.flops > MAX_FLOPS:
        raise InvalidWorkloadError(f"{workload.op} workload has {workload.flops:.3e} FLOPs, above the maximum "
                                   f"{MAX_FLOPS:.0e} of one operator instance")


@dataclass(frozen=True)
class Workload:
    """Base of every workload; subclasses are frozen dataclasses with integer shape fields."""

    op: ClassVar[str] = ""

    @property
    def dtype(self) -> str:
        """The element type; every subclass declares it as a field (with a default, so it comes last)."""
        raise NotImplementedError

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def flops(self) -> int:
        """Floating-point operations (a multiply-add counts as two)."""
        raise NotImplementedError

    @property
    def bytes_moved(self) -> int:
        """Bytes of the operator's distinct operands and results, each moved once: what a memory-bound
        task's GB/s divides by its time (the GEMM-like kinds are rated in GFLOPS instead)."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        out = {"op": self.op, **asdict(self)}
        if out.get("epilogue") == "none":  # the form every workload had before epilogues existed
            del out["epilogue"]
        return out

    @property
    def label(self) -> str:
        """A short human name for tables and the dashboard (op, shapes, dtype): the key unless a kind
        whose key is not readable has a shorter one."""
        return self.key

    def canonical_json(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @property
    def key(self) -> str:
        """Readable and unique: every field is in it, in a fixed order."""
        parts = [f"{f.name}{getattr(self, f.name)}" for f in fields(self) if f.name not in ("dtype", "epilogue")]
        ep = getattr(self, "epilogue", "none")
        return f"{self.op}-{'-'.join(parts)}-{self.dtype}" + ("" if ep == "none" else f"-ep_{ep}")

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class Conv2d(Workload):
    """2-D convolution, NCHW data and OIHW (K, C/groups, R, S) weights: batch n, c input channels of
    h x w, k output channels, an r x s kernel."""

    op: ClassVar[str] = "conv2d"
    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    dil_h: int = 1
    dil_w: int = 1
    groups: int = 1
    dtype: str = "float32"
    epilogue: str = "none"  # see EPILOGUES

    def __post_init__(self) -> None:
        check_epilogue(self.epilogue)
        for name in ("n", "c", "h", "w", "k", "r", "s", "stride_h", "stride_w", "dil_h", "dil_w", "groups"):
            _positive(name, getattr(self, name))
        for name in ("pad_h", "pad_w"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EXTENT:
                raise InvalidWorkloadError(f"{name} must be a non-negative integer up to {MAX_EXTENT}, got {value!r}")
        _check_dtype(self.dtype)
        if self.c % self.groups or self.k % self.groups:
            raise InvalidWorkloadError(
                f"groups={self.groups} must divide both input channels c={self.c} and output channels k={self.k}"
            )
        if self.span_h > self.h + 2 * self.pad_h or self.span_w > self.w + 2 * self.pad_w:
            raise InvalidWorkloadError(
                f"dilated kernel {self.span_h}x{self.span_w} is larger than the padded input "
                f"{self.h + 2 * self.pad_h}x{self.w + 2 * self.pad_w}"
            )
        _check_flops(self)

    @property
    def span_h(self) -> int:
        return (self.r - 1) * self.dil_h + 1

    @property
    def span_w(self) -> int:
        return (self.s - 1) * self.dil_w + 1

    @property
    def oh(self) -> int:
        return (self.h + 2 * self.pad_h - self.span_h) // self.stride_h + 1

    @property
    def ow(self) -> int:
        return (self.w + 2 * self.pad_w - self.span_w) // self.stride_w + 1

    @property
    def is_depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.c

    @property
    def flops(self) -> int:
        return 2 * self.n * self.k * self.oh * self.ow * (self.c // self.groups) * self.r * self.s


class _Gemm(Workload):
    """A dense or batched GEMM: every field but its dtype and epilogue is an extent of its loops."""

    epilogue: str  # a field of each subclass (see EPILOGUES)

    def __post_init__(self) -> None:
        """A GEMM's checks, in this order: its epilogue, each extent, its dtype, its FLOPs."""
        check_epilogue(self.epilogue)
        for name in self._extents():
            _positive(name, getattr(self, name))
        _check_dtype(self.dtype)
        _check_flops(self)

    def _extents(self) -> list[str]:
        return [f.name for f in fields(self) if f.name not in ("dtype", "epilogue")]

    @property
    def flops(self) -> int:
        return 2 * math.prod(getattr(self, name) for name in self._extents())


@dataclass(frozen=True)
class Dense(_Gemm):
    """out[M,N] = data[M,K] x weight[N,K]^T (TVM's dense; matmul with a transposed weight)."""

    op: ClassVar[str] = "dense"
    m: int
    n: int
    k: int
    dtype: str = "float32"
    epilogue: str = "none"  # see EPILOGUES


@dataclass(frozen=True)
class BatchMatmul(_Gemm):
    """out[B,M,N] = a[B,M,K] x b[B,N,K]^T (TVM's batch_matmul with transpose_b): b independent GEMMs of
    one shape, as attention's per-head products are."""

    op: ClassVar[str] = "batch_matmul"
    b: int
    m: int
    n: int
    k: int
    dtype: str = "float32"
    epilogue: str = "none"  # see EPILOGUES


WORKLOAD_TYPES: dict[str, type[Workload]] = {cls.op: cls for cls in (Conv2d, Dense, BatchMatmul)}
# Friendly spellings accepted on input; the canonical form always uses the names above.
_ALIASES = {"matmul": "dense", "depthwise_conv2d": "conv2d", "bmm": "batch_matmul"}


def _pairs(spec: dict[str, Any]) -> dict[str, Any]:
    """Accept TVM-style stride/padding/dilation given as an int or an (h, w) pair."""
    out = dict(spec)
    for short, (hk, wk) in {"stride": ("stride_h", "stride_w"), "padding": ("pad_h", "pad_w"),
                            "dilation": ("dil_h", "dil_w")}.items():
        if short in out:
            value = out.pop(short)
            if isinstance(value, (list, tuple)):
                if len(value) != 2:
                    raise InvalidWorkloadError(f"{short} must be an int or a pair, got {value!r}")
                out[hk], out[wk] = value
            else:
                out[hk] = out[wk] = value
    return out


def workload_from_json(spec: dict[str, Any] | str) -> Workload:
    """Build and validate a workload from its JSON form (a dict or a JSON string): the kind that owns
    its ``op`` (tuner.task_kind) builds it."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise InvalidWorkloadError(f"workload is not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise InvalidWorkloadError(f"a workload must be a JSON object, got {type(spec).__name__}")
    spec = dict(spec)
    op = spec.pop("op", None)
    if not isinstance(op, str):
        raise InvalidWorkloadError(f"op must be a string naming an operator such as {sorted(WORKLOAD_TYPES)}, "
                                   f"got {op!r}")
    op = _ALIASES.get(op, op)
    return kind_of_op(op).from_json(op, spec)


def builtin_from_json(op: str, spec: dict[str, Any]) -> Workload:
    """The built-in operator ``op`` (a key of WORKLOAD_TYPES) from its fields (``op`` removed)."""
    cls = WORKLOAD_TYPES[op]
    if cls is Conv2d:
        spec = _pairs(spec)
    names = {f.name for f in fields(cls)}
    if any(not isinstance(name, str) for name in spec):
        raise InvalidWorkloadError("workload field names must be strings")
    unknown = set(spec) - names
    if unknown:
        raise InvalidWorkloadError(f"unknown fields for {op}: {sorted(unknown)}")
    missing = {f.name for f in fields(cls) if f.default is MISSING and f.name not in spec}
    if missing:
        raise InvalidWorkloadError(f"missing fields for {op}: {sorted(missing)}")
    try:
        return cls(**spec)
    except TypeError as exc:
        raise InvalidWorkloadError(str(exc)) from None


class Rate(str, Enum):
    """What a task's speed is reported in: a GEMM-like task computes, a memory-bound one moves."""

    GFLOPS = "GFLOPS"
    GBPS = "GB/s"


def rate_of(workload: Workload) -> Rate:
    return Rate.GBPS if kind_of(workload).memory_bound(workload) else Rate.GFLOPS


def rate(workload: Workload, seconds: float | None) -> float | None:
    """The workload's speed at ``seconds`` per call in its ``rate_of`` unit (None without a time)."""
    if not seconds or not math.isfinite(seconds) or seconds <= 0:
        return None
    try:
        per_call = workload.bytes_moved if rate_of(workload) == Rate.GBPS else workload.flops
    except NotImplementedError:  # a kind (a test's) that does not count it
        return None
    return per_call / seconds / 1e9
