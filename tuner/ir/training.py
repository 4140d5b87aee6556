"""One training step of a torch model as one Relax function: forward, loss, backward, optimizer update.

``training_step(model, inputs, loss, optimizer)`` exports the model with its loss appended (in torch, so
the loss is exactly torch's), decomposes batch norm into batch statistics, differentiates it with Relax's
``Gradient`` pass (with the gradients swtune registers, tuner.ir.gradients; a convolution's gradients
are the operators derived from its expression, tuner.ir.expr_gradients), appends the optimizer's
update (tuner.ir.optimizers) and inlines everything into one function, the step the AOT compiler reads
like any model:

    main(*inputs, target, *params, *state) -> (loss, *params', *state')

The target of cross-entropy is a probability per class (a one-hot row for a label), so the compiled
program has one element type. The step's parameters come first in the state the program carries from
step to step; the optimizer's state follows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from tuner.ir.graph import ALLREDUCE_MEAN, AotError
from tuner.ir.optimizers import UPDATE_PREFIX, Optimizer
from tuner.ir.train_modules import Dropout, Loss, prepare


class Phase(StrEnum):
    """The part of the step a binding belongs to, in the order they run: the forward pass with the loss,
    the backward pass, the optimizer's update (tuner.ir.optimizers)."""

    FORWARD = "forward"
    BACKWARD = "backward"
    UPDATE = "update"


@dataclass(frozen=True)
class TrainingStep:
    """The step function and what the program carries: batch inputs, parameters, optimizer state."""

    module: Any  # tvm.IRModule whose main is the step
    inputs: list[tuple[str, tuple[int, ...]]]  # the model's inputs, then the loss target
    dropouts: list[Dropout]  # a mask input each, after the target (drawn by the program)
    params: list[tuple[str, np.ndarray]]  # torch names (``layer.0.weight``), initial values
    state: list[tuple[str, np.ndarray]]  # the optimizer's, initial values
    buffers: list[tuple[str, np.ndarray]]  # batch-norm running statistics (``bn.running_mean``, ...)
    loss: Loss
    optimizer: Optimizer
    dtype: str
    phases: dict[str, Phase]  # binding name -> the part of the step it belongs to

    @property
    def carried(self) -> list[tuple[str, np.ndarray]]:
        """What one step hands the next: the parameters, the optimizer state, the running statistics."""
        return [*self.params, *self.state, *self.buffers]


def target_shape(model: Any, inputs: Sequence[Any], loss: Loss) -> tuple[int, ...]:
    """The loss target's shape: the model's output's (a clear error when the loss cannot apply)."""
    import copy

    import torch

    with torch.no_grad():
        out = copy.deepcopy(model)(*inputs)  # a copy: a train-mode forward updates batch-norm statistics
    if not isinstance(out, torch.Tensor):
        raise AotError(f"the model returns {type(out).__name__}, not one tensor: a loss needs one output")
    if loss == Loss.CROSS_ENTROPY and out.dim() != 2:
        raise AotError(f"cross-entropy needs the model to output [batch, classes]; it outputs {list(out.shape)}")
    return tuple(out.shape)


def _tuple_return(mod: Any) -> Any:
    """``mod`` whose main returns a tuple literal of output variables (``Gradient``'s ``target_index``
    needs one; the torch importer binds the tuple to one variable and returns that)."""
    from tvm import relax

    fn = mod["main"]
    if len(fn.body.blocks) != 1:
        raise AotError("the exported step has several binding blocks; one dataflow block was expected")
    bindings, outs = [], []
    for b in fn.body.blocks[0].bindings:
        if b.var.same_as(fn.body.body) and isinstance(b.value, relax.Tuple):
            for i, field in enumerate(b.value.fields):
                out = relax.Var(f"{b.var.name}_{i}", field.ty)
                bindings.append(relax.VarBinding(out, field))
                outs.append(out)
        else:
            bindings.append(b)
    if not outs:
        raise AotError("the exported step does not return a tuple (loss, running statistics...)")
    body = relax.SeqExpr([relax.DataflowBlock(bindings)], relax.Tuple(outs))
    out_mod = mod.clone()
    out_mod["main"] = relax.Function(fn.params, body, relax.TupleType([o.ty for o in outs]), True, fn.attrs)
    return relax.transform.Normalize()(out_mod)


def training_step(model: Any, inputs: Sequence[Any], loss: Loss, optimizer: Optimizer,
                  data_parallel: bool = False) -> TrainingStep:
    """The training step of ``model`` (a torch module, its current weights the initial ones) at the
    shapes of ``inputs``. ``data_parallel``: ``inputs`` are one rank's slice of the global batch, and
    the gradients (and the loss reported) are averaged over the ranks before the update (an
    ``ALLREDUCE_MEAN`` call each: MPI_Allreduce in the compiled program; batch statistics stay per
    rank, as torch's DistributedDataParallel without SyncBatchNorm)."""
    import torch
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from tuner.ir.expr_layer import converters
    from tuner.ir.gradients import register

    register()
    dtype = str(inputs[0].dtype).removeprefix("torch.")
    tdtype = inputs[0].dtype
    target = torch.zeros(target_shape(model, inputs, loss), dtype=tdtype)
    prepared = prepare(model, inputs, loss)
    masks = [torch.ones(d.shape, dtype=tdtype) for d in prepared.dropouts]
    norms = {n: model.get_submodule(n.name) for n in prepared.norms}
    buffers = [(f"{n.name}.{what}", np.array(getattr(bn, what).detach().numpy(), dtype=dtype))
               for n, bn in norms.items() for what in ("running_mean", "running_var")]
    stats = [torch.from_numpy(v) for _, v in buffers]
    exported = torch.export.export(prepared.module.train(), (*inputs, target, *masks, *stats))
    mod = from_exported_program(exported, keep_params_as_input=True, unwrap_unit_return_tuple=True,
                                custom_convert_map=converters())  # expression layers: tuner.ir.expr_layer
    fn = mod["main"]
    n_in = int(fn.attrs["num_input"])
    n_data = n_in - len(stats)  # the model's inputs, the target and the masks
    values = [np.array(v.numpy()) for v in fn.attrs["params"]] if "params" in fn.attrs else []
    names = [n.removeprefix("model.") for n in exported.graph_signature.parameters]
    if len(names) != len(values) or len(fn.params) != n_in + len(values):
        raise AotError(f"the exported model has {len(fn.params) - n_in} weight inputs for {len(names)} "
                       "parameters: buffers other than batch-norm statistics are not supported")
    if any(v.dtype != np.dtype(dtype) for v in values):
        raise AotError(f"every parameter must be {dtype}, the inputs' type")
    params = list(zip(names, values))
    if stats:
        mod = _tuple_return(mod)
    mod = relax.transform.DecomposeOpsForTraining("main")(mod)  # any batch norm left: batch statistics
    step, state = differentiate_and_update(mod, n_data, len(stats), params, optimizer, dtype, data_parallel)
    shapes = [(p.name, tuple(int(d) for d in p.ty.shape)) for p in fn.params[:n_data - len(masks)]]
    return TrainingStep(step, shapes, prepared.dropouts, params, state, buffers, loss, optimizer, dtype,
                        binding_phases(step))


def differentiate_and_update(mod: Any, n_data: int, n_stats: int, params: list[tuple[str, np.ndarray]],
                             optimizer: Optimizer, dtype: str, data_parallel: bool = False
                             ) -> tuple[Any, list[tuple[str, np.ndarray]]]:
    """The step module and the optimizer's initial state, from a forward ``mod`` whose main is
    ``main(*data, *stats, *params) -> loss`` (``(loss, *stats')`` with ``n_stats`` running statistics):
    ``Gradient`` with respect to the parameters, then one function ``main(*data, *params, *state,
    *stats) -> (loss, *params', *state', *stats')`` with the optimizer's update inlined."""
    import tvm
    from tvm import relax

    from tuner.ir.expr_gradients import derived_conv2d_gradient, strip_with_grad
    from tuner.ir.names import unique_binding_names

    fn = mod["main"]
    n_in = n_data + n_stats
    state = optimizer.state(params)
    with derived_conv2d_gradient():  # conv gradients as derived expression operators: tuning tasks
        mod = relax.transform.Gradient("main", require_grads=list(fn.params[n_in:]), target_index=0)(mod)
    mod = strip_with_grad(mod)  # an expression layer's forward: the plain call_tir
    adjoint = mod["main_adjoint"].without_attr("params").without_attr("global_symbol")

    # the step's builder starts from the PrimFuncs the gradients call (derived operators)
    bb = relax.BlockBuilder(tvm.IRModule({gv: f for gv, f in mod.functions_items()
                                          if not isinstance(f, relax.Function)}))
    adjoint_var = bb.add_func(adjoint, "adjoint")  # private: inlined below
    data = [relax.Var(p.name, p.ty) for p in fn.params[:n_data]]
    stat_vars = [relax.Var(p.name, p.ty) for p in fn.params[n_data:n_in]]
    param_vars = [relax.Var(p.name, p.ty) for p in fn.params[n_in:]]
    state_vars = [relax.Var(f"s_{name.replace('.', '_')}", relax.TensorType(v.shape, dtype)) for name, v in state]
    with bb.function("main", [*data, *param_vars, *state_vars, *stat_vars]):
        with bb.dataflow():
            result = bb.emit(relax.Call(adjoint_var, [*data, *stat_vars, *param_vars]))
            forward = bb.emit(relax.TupleGetItem(result, 0))
            loss_value = bb.emit(relax.TupleGetItem(forward, 0)) if n_stats else forward
            new_stats = [bb.emit(relax.TupleGetItem(forward, 1 + i)) for i in range(n_stats)]
            grads_tuple = bb.emit(relax.TupleGetItem(result, 1))
            grads = [bb.emit(relax.TupleGetItem(grads_tuple, i)) for i in range(len(params))]
            if data_parallel:
                grads = [bb.emit(relax.call_dps_packed(ALLREDUCE_MEAN, relax.Tuple([g]), p.ty))
                         for g, p in zip(grads, param_vars)]
                loss_value = bb.emit(relax.call_dps_packed(ALLREDUCE_MEAN, relax.Tuple([loss_value]),
                                                           relax.TensorType((), dtype)))
            new_params, new_state = optimizer.emit(bb, param_vars, grads, state_vars, dtype)
            out = bb.emit_output(relax.Tuple([loss_value, *new_params, *new_state, *new_stats]))
        bb.emit_func_output(out)
    step = relax.transform.InlinePrivateFunctions()(bb.get())
    # the gradients' arithmetic on constants (a power's exponent - 1) computed once here, not every step
    step = relax.transform.FoldConstant()(step)
    # what the backward recomputes of the forward (an expression operator's stages, a transposed
    # weight) is computed once: the backward reads the forward's value
    step = relax.transform.EliminateCommonSubexpr()(step)
    step = relax.transform.DeadCodeElimination(["main"])(step)
    return unique_binding_names(step), state


def binding_phases(step: Any) -> dict[str, Phase]:
    """Each binding's phase, in program order: the forward runs until the first adjoint (``Gradient``
    names every adjoint ``<var>_adjoint`` and seeds the loss's first); the update from the optimizer's
    first binding (named with its prefix; the operands it normalises out are named ``lv``) to the end."""
    out: dict[str, Phase] = {}
    phase = Phase.FORWARD
    for block in step["main"].body.blocks:
        for b in block.bindings:
            name = b.var.name
            if phase == Phase.FORWARD and name.endswith("_adjoint"):
                phase = Phase.BACKWARD
            if name.startswith(UPDATE_PREFIX):
                phase = Phase.UPDATE
            out[name] = phase
    return out
