"""Expression operators inside Relax models train through their derived gradients
(tuner/ir/expr_gradients.py): ``relax.transform.Gradient`` calls the derived gradient program, and the
compiled adjoint matches torch autograd."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
torch = pytest.importorskip("torch")
from tvm import relax  # noqa: E402

from tuner.expr.autodiff import differentiate  # noqa: E402
from tuner.expr.parse import describe  # noqa: E402
from tuner.expr.workload import load_function  # noqa: E402
from tuner.ir.expr_gradients import emit_expression, strip_with_grad  # noqa: E402

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "ops"


def _adjoint(tensors, shapes, tail):
    """Gradient of sum(tail(op(*inputs))^2) for every input, compiled for llvm."""
    bb = relax.BlockBuilder()
    params = [relax.Var(f"x{i}", relax.TensorType(s, "float32")) for i, s in enumerate(shapes)]
    with bb.function("main", params):
        with bb.dataflow():
            y = bb.emit(tail(emit_expression(bb, tensors, params)))
            loss = bb.emit_output(bb.emit(relax.op.sum(relax.op.multiply(y, y))))
        bb.emit_func_output(loss)
    mod = relax.transform.Gradient("main", require_grads=params)(bb.get())
    return mod


def _run(mod, arrays):
    mod = relax.transform.LegalizeOps()(strip_with_grad(mod))
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    _, grads = vm["main_adjoint"](*[tvm.runtime.tensor(a) for a in arrays])
    return [g.numpy() for g in grads]


def _torch_grads(fn, arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    (fn(*ts) ** 2).sum().backward()
    return [t.grad.numpy() for t in ts]


def _close(got, want):
    for g, w in zip(got, want, strict=True):
        assert np.abs(g - w).max() <= 1e-5 * np.abs(w).max()


def test_a_gemm_expression_in_a_relax_function():
    tensors = load_function(f"{EXAMPLES}/linalg.py:weighted_gemm")(m=6, n=5, k=4)
    arrays = [np.random.default_rng(0).standard_normal(s).astype("float32") for s in [(6, 4), (4, 5), (4,)]]
    mod = _adjoint(tensors, [(6, 4), (4, 5), (4,)], relax.op.tanh)
    # each derived operator is a one-stage function of the backward graph: an expression task
    functions = {gv.name_hint: mod[gv] for gv in mod.get_global_vars()}
    for op in differentiate(tensors).operators:
        assert describe(functions[op.name]).name == op.name
    _close(_run(mod, arrays), _torch_grads(lambda a, b, w: torch.tanh((a * w) @ b), arrays))


def test_a_strided_padded_conv_expression_in_a_relax_function():
    args = {"c": 3, "h": 9, "w": 9, "k": 4, "stride": 2}
    tensors = load_function(f"{EXAMPLES}/nn.py:conv2d")(**args)
    shapes = [(1, 3, 9, 9), (4, 3, 3, 3)]
    arrays = [np.random.default_rng(1).standard_normal(s).astype("float32") for s in shapes]
    mod = _adjoint(tensors, shapes, relax.op.nn.relu)
    _close(_run(mod, arrays), _torch_grads(
        lambda x, w: torch.relu(torch.nn.functional.conv2d(x, w, stride=2, padding=1)), arrays))


def test_tvm_cannot_build_call_tir_with_grad_without_the_rewrite():
    tensors = load_function(f"{EXAMPLES}/linalg.py:weighted_gemm")(m=6, n=5, k=4)
    mod = relax.transform.LegalizeOps()(_adjoint(tensors, [(6, 4), (4, 5), (4,)], relax.op.tanh))
    with pytest.raises(Exception, match="call_tir_with_grad"):
        tvm.compile(mod, target="llvm")


def test_a_max_pool_expression_routes_its_gradient_through_the_argmax_in_relax():
    """The argmax and its positions (a stage with no inputs) are functions of the backward graph too;
    on windows of tied values the gradient goes to the first maximum, as torch's."""
    tensors = load_function(f"{EXAMPLES}/nn.py:max_pool2d")(n=1, c=2, h=8, w=8)
    shape = (1, 2, 8, 8)
    arrays = [np.random.default_rng(2).integers(1, 4, shape).astype("float32")]  # positive, many ties
    mod = _adjoint(tensors, [shape], lambda y: relax.op.multiply(y, y))
    functions = {gv.name_hint for gv in mod.get_global_vars()}
    assert "max_pool2d_argmax" in functions
    _close(_run(mod, arrays), _torch_grads(
        lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 1) ** 2, arrays))


@pytest.mark.slow
@pytest.mark.needs("gcc", "make")
def test_the_max_pool_expression_gradient_compiles_ahead_of_time_and_matches_torch(tmp_path):
    """The same backward graph (argmax, positions -- a function of no inputs --, the gradient operators)
    compiled for Sunway and run on the emulator: on tied inputs, exactly torch's gradient."""
    from emulator_helpers import run_model

    from tuner.aot import compile_model

    tensors = load_function(f"{EXAMPLES}/nn.py:max_pool2d")(n=1, c=2, h=8, w=8)
    shape = (1, 2, 8, 8)
    mod = strip_with_grad(_adjoint(tensors, [shape], lambda y: relax.op.multiply(y, y)))
    funcs = {gv: mod[gv] for gv in mod.get_global_vars() if gv.name_hint not in ("main", "main_adjoint")}
    funcs[tvm.ir.GlobalVar("main")] = mod["main_adjoint"]  # the program computes the loss and the gradient
    compile_model(tvm.IRModule(funcs), "sw26010", tmp_path, lambda w: None)
    x = np.random.default_rng(2).integers(1, 4, shape).astype("float32")  # many ties
    (want,) = _torch_grads(lambda t: torch.nn.functional.max_pool2d(t, 3, 2, 1) ** 2, [x])
    got = run_model(tmp_path, [x], "sw26010").output.ravel()
    assert np.array_equal(got[-want.size:], want.ravel())


def test_an_input_at_two_places_trains_through_expression_operators_only():
    """x^T W x in a Relax function: the forward's stage (x passed as two operands) and every stage of
    its backward -- one operator per place x appears, W's reading x twice, the sum of x's terms -- are
    expression operators (tasks the CPEs run, none an MPE fallback), and the gradient matches torch."""
    from tuner.ir.relax_ops import Routing, expression_workload

    tensors = load_function(f"{EXAMPLES}/repeated.py:quadratic_form")(m=6, n=5)
    shapes = [(6, 5), (5, 5)]
    arrays = [np.random.default_rng(3).uniform(-1, 1, s).astype("float32") for s in shapes]
    mod = _adjoint(tensors, shapes, relax.op.tanh)
    stripped = strip_with_grad(mod)
    stages = {gv.name_hint: stripped[gv] for gv in stripped.get_global_vars()
              if gv.name_hint.startswith("quadratic_form_")}
    assert sorted(stages) == ["quadratic_form_grad_W", "quadratic_form_grad_x_0", "quadratic_form_grad_x_1",
                              "quadratic_form_pass_grad_x", "quadratic_form_pass_quadratic_form"]
    for name, func in stages.items():
        expression_workload(func, name, Routing.MEMORY_BOUND)  # raises when it is no expression operator
    _close(_run(mod, arrays), _torch_grads(lambda x, w: torch.tanh(((x @ w) * x).sum(1)), arrays))
