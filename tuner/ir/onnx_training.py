"""One training step of an ONNX model: its initializers are the parameters, its batch norms frozen.

An ONNX file holds an inference graph: a batch norm there has fixed statistics (an exporter in eval
mode folds it into the convolution before it), and no dropout. TVM's importer reads it with the
initializers as function inputs (``keep_params_in_input``); the loss is appended in Relax with torch's
arithmetic (tuner.ir.train_modules.loss_value) and any batch norm left is decomposed with its moving
statistics; the rest of the step -- gradients, optimizer, one function -- is the torch model's
(tuner.ir.training.differentiate_and_update). The batch size is the file's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tuner.ir.graph import AotError
from tuner.ir.optimizers import Optimizer
from tuner.ir.train_modules import Loss
from tuner.ir.training import TrainingStep, binding_phases, differentiate_and_update


def _loss(bb: Any, out: Any, target: Any, loss: Loss) -> Any:
    """The loss of ``out`` against ``target`` in Relax: cross-entropy with a probability target,
    ``-sum(target * log_softmax(out)) / batch``, or the mean squared error."""
    from tvm import relax

    if loss == Loss.CROSS_ENTROPY:
        logp = bb.emit(relax.op.nn.log_softmax(out, axis=-1))
        total = bb.emit(relax.op.sum(relax.op.multiply(target, logp)))
        batch = relax.const(float(int(out.ty.shape[0])), str(out.ty.dtype))
        return bb.emit(relax.op.negative(relax.op.divide(total, batch)))
    diff = bb.emit(relax.op.subtract(out, target))
    return bb.emit(relax.op.mean(relax.op.multiply(diff, diff)))


def onnx_forward(path: str | Path) -> tuple[Any, list[tuple[str, np.ndarray]]]:
    """The model's Relax module, ``main(*inputs, *params)``, and its parameters (initializers)."""
    import onnx
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - protobuf raises many kinds
        raise AotError(f"{path} is not an ONNX model: {exc}") from None
    mod = from_onnx(model, keep_params_in_input=True)
    fn = mod["main"]
    n_in = int(fn.attrs["num_input"])
    values = [np.array(v.numpy()) for v in fn.attrs["params"]] if "params" in fn.attrs else []
    names = [str(p.name) for p in fn.params[n_in:]]
    if not values or len(values) != len(names):
        raise AotError(f"{path}: no initializers to train (its weights must be ONNX initializers)")
    # a batch norm's statistics (inputs 3 and 4 of BatchNormalization) are frozen: constants, not parameters
    frozen = {name for node in model.graph.node if node.op_type == "BatchNormalization" for name in node.input[3:5]}
    if frozen & set(names):
        mod = relax.transform.BindParams("main", {n: v for n, v in zip(names, values) if n in frozen})(mod)
    return mod, [(n, v) for n, v in zip(names, values) if n not in frozen]


def onnx_training_step(path: str | Path, loss: Loss, optimizer: Optimizer, data_parallel: bool = False
                       ) -> TrainingStep:
    """The training step of the ONNX model at ``path`` (its initializers the initial weights)."""
    import tvm
    from tvm import relax

    from tuner.ir.gradients import register

    register()
    mod, params = onnx_forward(path)
    fn = mod["main"]
    n_in = int(fn.attrs["num_input"])
    out_ty = fn.ret_ty if hasattr(fn, "ret_ty") else fn.body.ty
    if not isinstance(out_ty, relax.TensorType) or out_ty.shape is None:
        raise AotError(f"{path}: the model must have one tensor output to train")
    out_shape = tuple(int(d) for d in out_ty.shape)
    dtype = str(out_ty.dtype)
    if loss == Loss.CROSS_ENTROPY and len(out_shape) != 2:
        raise AotError(f"cross-entropy needs [batch, classes] logits; {path} outputs {list(out_shape)}")
    if any(v.dtype != np.dtype(dtype) for _, v in params):
        raise AotError(f"every parameter must be {dtype}, the output's type")

    # main(*inputs, target, *params) -> loss, calling the imported forward (private: inlined)
    bb = relax.BlockBuilder(tvm.IRModule({gv: f for gv, f in mod.functions_items()
                                          if not isinstance(f, relax.Function)}))
    forward = bb.add_func(fn.without_attr("params").without_attr("global_symbol").without_attr("num_input"),
                          "forward")
    data = [relax.Var(p.name, p.ty) for p in fn.params[:n_in]]
    target = relax.Var("target", relax.TensorType(out_shape, dtype))
    weights = [relax.Var(p.name, p.ty) for p in fn.params[n_in:]]
    with bb.function("main", [*data, target, *weights]):
        with bb.dataflow():
            out = bb.emit(relax.Call(forward, [*data, *weights]))
            value = bb.emit_output(_loss(bb, out, target, loss))
        bb.emit_func_output(value)
    forward_mod = relax.transform.InlinePrivateFunctions()(bb.get())
    forward_mod = relax.transform.DecomposeOpsForInference("main")(forward_mod)  # frozen batch norms
    step, state = differentiate_and_update(forward_mod, n_in + 1, 0, params, optimizer, dtype, data_parallel)
    shapes = [(p.name, tuple(int(d) for d in p.ty.shape)) for p in fn.params[:n_in]] + [("target", out_shape)]
    return TrainingStep(step, shapes, [], params, state, [], loss, optimizer, dtype, binding_phases(step))
