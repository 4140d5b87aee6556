"""An element-wise legalized PrimFunc as scalar statements on one value: an epilogue to fuse."""

from __future__ import annotations

from math import prod
from typing import Any

from tuner.ir.cprint.legalized import LegalizedPrinter, Work, lower_for_mpe
from tuner.ir.graph import AotError
from tuner.ir.tir import kind


class ScalarPrinter(LegalizedPrinter):
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

    def load(self, e: Any) -> str:
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

    def nest(self, s: Any) -> None:
        trips = 1
        while kind(s) == "For":
            trips *= int(s.extent.value) if kind(s.extent) == "IntImm" else 0
            s = s.body
        if kind(s) != "BufferStore":
            raise AotError(f"{self.name}: not a perfect element-wise loop nest ({kind(s)})")
        # element-wise: the nest visits every element of the stored buffer once and every load
        # reads at the store's own indices (extent-1 loops are gone after simplification)
        if trips != prod(self.shape(s.buffer, self.name)):
            raise AotError(f"{self.name}: the loop nest does not cover {s.buffer.name} once")
        self.loop_vars = list(s.indices)
        value = self.expr(s.value)
        self.count(s.value)
        name = f"{self.prefix}{len(self.stmts)}"
        self.stmts.append(f"const {self.store} {name} = {value};")
        self.names[s.buffer] = name

    def scalar(self) -> tuple[list[str], str]:
        params = list(self.func.params)
        if len(params) != 2 + len(self.scalars) or self.operand in self.scalars:
            raise AotError(f"{self.name}: an epilogue has one tensor input (and 0-d constants) and one output")
        self.names[params[self.operand]] = self.input_name
        body = self.func.body
        items = body.seq if kind(body) == "SeqStmt" else [body]
        for item in items:
            if kind(item) in ("AllocBuffer", "DeclBuffer"):
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
        p = ScalarPrinter(lower_for_mpe(prim_func), name, store_type, input_name, prefix, operand, scalars)
        stmts, result = p.scalar()
    except AotError:
        return None
    return stmts, result, p.work
