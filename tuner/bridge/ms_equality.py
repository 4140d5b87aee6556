"""MetaSchedule's module equality modes: when two IRModules count as one workload.

The same three modes as upstream's ``ModuleEquality`` (src/s_tir/meta_schedule/module_equality.cc),
computed with TVM's own structural hash and equality and its anchor-block analysis:

- ``structural``: structural hash and equality of the whole module;
- ``ignore-tensor``: the same, skipping the contents of constant tensors, so modules that differ
  only in their weights share records;
- ``anchor-block``: structural hash and equality (tensor contents skipped) of the module's anchor
  block only (``tvm.s_tir.analysis.find_anchor_sblock``: its reduction block, the one with the most
  flops if several), falling back to ``ignore-tensor`` on a module without one; modules that differ
  only outside that block (e.g. their epilogue) share records.

A hash is upstream's (a 64-bit unsigned integer), so a workload's stored hash matches the one
``MemoryDatabase(module_equality=...)`` gives it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ModuleEquality(StrEnum):
    STRUCTURAL = "structural"
    IGNORE_TENSOR = "ignore-tensor"
    ANCHOR_BLOCK = "anchor-block"

    @classmethod
    def parse(cls, name: str) -> ModuleEquality:
        """The mode called ``name``; a clear ValueError for any other name."""
        try:
            return cls(name)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in cls)
            raise ValueError(f"unknown module_equality {name!r}: expected one of {choices}") from None

    def hash_module(self, mod: Any) -> int:
        import tvm_ffi

        if self is ModuleEquality.STRUCTURAL:
            return int(tvm_ffi.structural_hash(mod))
        if self is ModuleEquality.ANCHOR_BLOCK and (anchor := _anchor_block(mod)) is not None:
            return int(tvm_ffi.structural_hash(anchor, skip_tensor_content=True))
        return int(tvm_ffi.structural_hash(mod, skip_tensor_content=True))

    def modules_equal(self, lhs: Any, rhs: Any) -> bool:
        import tvm_ffi

        if self is ModuleEquality.STRUCTURAL:
            return bool(tvm_ffi.structural_equal(lhs, rhs))
        if self is ModuleEquality.ANCHOR_BLOCK:
            lhs_anchor, rhs_anchor = _anchor_block(lhs), _anchor_block(rhs)
            if lhs_anchor is not None and rhs_anchor is not None:
                return bool(tvm_ffi.structural_equal(lhs_anchor, rhs_anchor, skip_tensor_content=True))
        return bool(tvm_ffi.structural_equal(lhs, rhs, skip_tensor_content=True))


def _anchor_block(mod: Any) -> Any:
    from tvm.s_tir.analysis import find_anchor_sblock

    return find_anchor_sblock(mod)
