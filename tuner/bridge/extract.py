"""Task extraction: a PyTorch module or an ONNX file -> swtune workloads with their weights.

The model is imported into TVM Relax (torch.export -> ``from_exported_program``, or
``relax.frontend.onnx.from_onnx``) and every operator call of the main function is read back:
conv2d (NCHW/OIHW, any stride, padding, dilation, groups), matmul/linear (2-D -> dense, 3-D ->
batch_matmul) become workloads; identical workloads are merged and counted (their weight). Every
other operator is listed in ``untuned`` with its count: nothing is dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.errors import InvalidWorkloadError
from tuner.models.zoo import Layer
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


def extract_relax(mod: Any) -> ExtractedModel:
    """Workloads of a Relax IRModule's main function (before legalization)."""
    from tvm import relax

    counts: Counter[str] = Counter()
    by_key: dict[str, Workload] = {}
    names: dict[str, str] = {}
    untuned: Counter[str] = Counter()
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            call = binding.value
            if not isinstance(call, relax.Call) or not hasattr(call.op, "name"):
                continue
            op = str(call.op.name)
            reader = _READERS.get(op)
            if reader is None:
                if op not in _FREE_OPS:
                    untuned[op.removeprefix("relax.")] += 1
                continue
            try:
                workload = reader(call)
            except InvalidWorkloadError as exc:
                untuned[f"{op.removeprefix('relax.')} ({exc})"] += 1
                continue
            counts[workload.key] += 1
            if workload.key not in by_key:
                by_key[workload.key] = workload
                names[workload.key] = f"{workload.op}_{len(by_key) - 1}"
    layers = [Layer(names[k], by_key[k], counts[k]) for k in by_key]
    return ExtractedModel(layers, dict(untuned))


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
