"""Ahead-of-time compilation of a whole model to a Sunway athread program (the swTVM workflow).

A Relax module (or a torch module / ONNX file, imported through tuner.bridge.extract) is read in
order (relax_reader -> graph): conv2d / dense / batch_matmul become the tuned slave kernels of
tuner.codegen (kernels: config lookup with a logged fallback, one merged slave file), the other
operators plain C on the MPE (mpe), intermediates share a few buffers (memory), constants go to
weights.bin (weights), and host (host.c, model.h) plus makefile (sw5cc / swgcc / emu) finish the
output. ``compile_model`` (compiler) ties it together; tvm and torch are imported lazily.
"""

from __future__ import annotations

from typing import Any

from tuner.aot.graph import AotError

__all__ = ["AotError", "AotResult", "apply_best", "compile_model", "current_lookup"]


def __getattr__(name: str) -> Any:  # lazy: importing tuner.aot must stay cheap
    if name in ("compile_model", "AotResult", "OpRow", "to_relax"):
        from tuner.aot import compiler

        return getattr(compiler, name)
    if name in ("apply_best", "current_lookup"):
        from tuner.aot import context

        return getattr(context, name)
    raise AttributeError(name)
