"""The published novel networks of examples/novel/ (LLTM, subLSTM, MI-LSTM, SCRNN, involution, capsules
with dynamic routing, ShiftNet, MixConv): each expression operator computes what its torch twin
computes, and its derived gradient equals the twin's torch autograd and central finite differences (what
``swtune check-grad`` checks numerically, on small sizes, without the emulator); each ``model()`` runs
forward and backward in torch and ends in a 10-class classifier. Their training on the emulator against
torch is the benchmark's (the operators alone: ``swtune check-grad ... --torch ...``)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm")

from tuner.codegen.grad_check import autograd_errors, derived_gradients, fd_errors  # noqa: E402
from tuner.expr.workload import load_function, tensors_from_op  # noqa: E402

NOVEL = Path(__file__).resolve().parents[2] / "examples" / "novel"
NETWORKS = ["lltm", "sublstm", "mi_lstm", "scrnn", "involution", "capsnet", "shiftnet", "mixconv"]

# (file, operator, small arguments): every expression operator of every network
OPERATORS = [
    ("lltm", "lltm_cell", {"batch": 3, "hidden": 5}),
    ("lltm", "lltm_hidden", {"batch": 3, "hidden": 5}),
    ("sublstm", "sublstm_cell", {"batch": 3, "hidden": 5}),
    ("sublstm", "sublstm_hidden", {"batch": 3, "hidden": 5}),
    ("mi_lstm", "mi_gates", {"batch": 3, "width": 8}),
    ("mi_lstm", "lstm_cell", {"batch": 3, "hidden": 5}),
    ("mi_lstm", "lstm_hidden", {"batch": 3, "hidden": 5}),
    ("scrnn", "scrnn_context", {"batch": 3, "context": 4, "alpha": 0.9}),
    ("scrnn", "scrnn_hidden", {"batch": 3, "context": 4, "hidden": 5}),
    ("involution", "involution", {"n": 2, "c": 8, "h": 5, "w": 5, "groups": 2, "k": 3}),
    ("capsnet", "squash", {"batch": 2, "caps": 4, "dim": 3}),
    ("capsnet", "capsule_predict", {"batch": 2, "lower": 4, "upper": 3, "din": 3, "dout": 4}),
    ("capsnet", "dynamic_routing", {"batch": 2, "lower": 4, "upper": 3, "dout": 4, "iterations": 3}),
    ("shiftnet", "shift_conv", {"n": 2, "c": 18, "h": 4, "w": 4, "k_out": 4, "k": 3}),
    ("mixconv", "mixconv_group", {"n": 2, "group": 3, "h": 5, "w": 5, "k": 3}),
    ("mixconv", "mixconv_group", {"n": 2, "group": 3, "h": 5, "w": 5, "k": 5}),
]
SLOW = {"dynamic_routing"}  # 16 stages, 24 gradient operators built for llvm: 1.6-3 s


def _case(net: str, op: str, args: dict[str, Any]) -> Any:
    marks = [pytest.mark.slow] if op in SLOW else []
    return pytest.param(net, op, args, id=f"{net}-{op}-" + "-".join(f"{k}{v}" for k, v in args.items()), marks=marks)


def _operator(net: str, op: str, args: dict[str, Any]) -> tuple[list[Any], Any]:
    tensors, _ = tensors_from_op(f"{NOVEL / net}.py:{op}", dict(args))
    return tensors, functools.partial(load_function(f"{NOVEL / net}.py:{op}_torch"), **args)


def _forward_float64(tensors: list[Any], inputs: list[np.ndarray]) -> np.ndarray:
    import tvm
    from tvm import te

    from tuner.expr.autodiff import with_dtype

    t64 = with_dtype(tensors, "float64")
    exe = tvm.compile(tvm.IRModule({"main": te.create_prim_func(t64).with_attr("global_symbol", "main")}),
                      target="llvm")
    out = tvm.runtime.tensor(np.zeros([int(s) for s in t64[-1].shape]))
    exe["main"](*[tvm.runtime.tensor(x) for x in inputs], out)
    return out.numpy()


@pytest.mark.parametrize("net,op,args", [_case(*c) for c in OPERATORS])
def test_each_operator_computes_its_twin_and_its_derived_gradient_is_torch_autograd(net, op, args):
    """check-grad's numerical checks (inputs in [0.5, 1.5]), then the forward and the gradient at inputs
    of both signs, where elu's max/min (LLTM) switch branch."""
    tensors, twin = _operator(net, op, args)
    assert max(autograd_errors(tensors, twin).values()) <= 1e-10
    assert max(fd_errors(tensors).values()) <= 1e-6
    rng = np.random.default_rng(1)
    inputs = [rng.uniform(-1.5, 1.5, [int(s) for s in t.shape]) for t in tensors[:-1]]
    head = rng.standard_normal([int(s) for s in tensors[-1].shape])
    xs = [torch.tensor(x, requires_grad=True) for x in inputs]
    out = twin(*xs)
    assert np.allclose(_forward_float64(tensors, inputs), out.detach().numpy(), rtol=1e-10, atol=1e-12)
    (out * torch.tensor(head)).sum().backward()
    for x, g in zip(xs, derived_gradients(tensors, inputs, head).values()):
        assert np.allclose(g, x.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("net", NETWORKS)
def test_each_model_runs_forward_and_backward_in_torch_to_ten_classes(net):
    module, (x,) = load_function(f"{NOVEL / net}.py:model")(batch=4)
    out = module(x)
    assert out.shape == (4, 10) and torch.isfinite(out).all()
    torch.nn.functional.cross_entropy(out, torch.arange(4)).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in module.parameters())
