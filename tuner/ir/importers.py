"""Models into Relax: a torch module (through torch.export) or an ONNX file, with TVM's frontends.

torch and onnx are optional (``pip install 'swtune[models]'``): a missing one is a clear ValueError.

An ONNX file's shape arithmetic is folded to constants (onnxslim's constant folding) before TVM imports
it: torch's exporter writes ``x.shape[0]`` as Shape -> Gather, and TVM 0.27's importer fails on a
Gather of a ``shape_of`` ("shape_of expects a tensor input"), e.g. on a zero state expanded to the batch
(an unrolled LSTM). Only folding runs: onnxslim's fusions (conv+bn, gelu, ...) would change which Relax
operators the model has, so they are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"importing models needs {module}: pip install 'swtune[models]'") from None


def torch_to_relax(module: Any, example_inputs: Sequence[Any]) -> Any:
    torch = require("torch")
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad():
        exported = torch.export.export(module.eval(), tuple(example_inputs))
    return from_exported_program(exported, keep_params_as_input=False)


def onnx_to_relax(path: str | Path, shapes: dict[str, list[int]] | None = None) -> Any:
    onnx = require("onnx")
    from tvm.relax.frontend.onnx import from_onnx

    model = _fold_shape_arithmetic(onnx.load(str(path)), shapes)
    return from_onnx(model, shape_dict=shapes, keep_params_in_input=False)


_ONLY_FOLDING = ["graph_fusion", "subexpression_elimination", "weight_tying"]


def _fold_shape_arithmetic(model: Any, shapes: dict[str, list[int]] | None) -> Any:
    """The model with every subgraph computable from constants and static shapes folded to constants."""
    onnxslim = require("onnxslim")
    given = [f"{name}:{','.join(map(str, dims))}" for name, dims in (shapes or {}).items()]
    return onnxslim.slim(model, skip_optimizations=_ONLY_FOLDING, input_shapes=given or None)
