"""Issue #46: a GEMM-like expression operator runs on the CPEs without tuning. A training step compiled
against an empty log runs its derived conv gradients as CPE kernels on their default schedule (and
matches torch on the emulator), each named by what it computes; an untuned operator takes a near
workload's record when the space accepts it and it simulates faster than the baseline."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from train_helpers import assert_two_steps_match_torch, emulate_beside_torch, sgd_step  # noqa: E402

from tuner.ir.optimizers import Optimizer, OptimizerKind  # noqa: E402
from tuner.ir.training import Loss, target_shape, training_step  # noqa: E402
from tuner.train import data as train_data  # noqa: E402
from tuner.train.program import compile_training  # noqa: E402


class _ConvNet(torch.nn.Module):
    """conv -> relu -> conv -> linear: the second conv has a derived data gradient, both a weight one."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.c2 = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 4 * 4, 3)

    def forward(self, x: Any) -> Any:
        return self.fc(self.c2(torch.relu(self.c1(x))).flatten(1))



@pytest.mark.slow
@pytest.mark.needs("gcc", "make")
def test_untuned_derived_gradients_run_on_the_cpes_and_match_torch(tmp_path: Path) -> None:
    torch.manual_seed(5)
    module, x = _ConvNet().train(), torch.randn(2, 2, 4, 4)
    step, reference, opt = sgd_step(module, x)
    program = compile_training(step, "sw26010", tmp_path, lambda w: None, "convnet")
    grads = [k for k in program.result.kernels if "_grad_" in k.workload.key]
    assert {k.workload.name.split("_grad_")[1] for k in grads} >= {"data", "weight"}
    assert all(k.status == "fallback: untuned" for k in grads)
    timing = program.timing
    assert not [s for s in timing.steps if s.where == "MPE" and "_grad_" in s.detail]
    # every operator named by what it computes, in the timing table and the compile report
    ops = {o.relax_op for o in timing.by_operator()} | {r.relax_op for r in program.result.rows}
    assert {"conv2d_grad_data", "conv2d_grad_weight"} <= ops and not [o for o in ops if o.startswith("call_tir")]
    assert timing.mpe_fraction <= 0.05
    summary = timing.summary()  # the report says how many steps run untuned, and their share of the step
    assert summary["untuned_steps"] >= len(grads) and 0 < summary["untuned_time_fraction"] <= 1
    assert_two_steps_match_torch(step, module, reference, x, opt, tmp_path)


def _matmul(rows: int) -> Any:
    from tvm import te

    from tuner.expr.workload import ExprWorkload

    a, b = te.placeholder((rows, 32), name="a"), te.placeholder((32, 48), name="b")
    k = te.reduce_axis((0, 32), name="k")
    c = te.compute((rows, 48), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    return ExprWorkload.from_tensors([a, b, c], "mm")


@pytest.mark.slow  # tvm's import and the baseline's enumeration
def test_an_untuned_operator_runs_a_near_workloads_record_when_it_is_faster() -> None:
    pytest.importorskip("tvm")
    from tuner.aot.timing import kernel_seconds
    from tuner.aot.untuned import Records, default_config
    from tuner.space.factory import space_for
    from tuner.targets import get_target

    tgt = get_target("sw26010")
    tuned, untuned = _matmul(64), _matmul(128)
    near_space, space = space_for(tuned, tgt), space_for(untuned, tgt)
    assert tuned.key != untuned.key
    sampled = [space.decode(r) for r in space.sample(16, rng=0)]
    both = [c for c in sampled if _valid(near_space, c)]  # valid at both shapes
    times, _ = kernel_seconds(space, both)
    record = both[int(np.argmin(times))]
    records = Records(lambda w: record if w.key == tuned.key else None, [tuned, untuned])
    config, status = default_config(untuned, tgt, records)
    assert status == f"fallback: near record of {tuned.key}" and config == record
    # without a near record: the kind's baseline
    assert default_config(untuned, tgt, Records(lambda w: None, [tuned, untuned]))[1] == "fallback: untuned"


def _valid(space: Any, config: dict[str, Any]) -> bool:
    from tuner.task_kind import check_failure

    return check_failure(space, config) is None


def test_a_called_primfunc_is_named_without_its_layers_shape_signature() -> None:
    from tuner.ir.names import operator_name

    assert operator_name("conv2d_2x4x4x4x4x4x3x3x1x1x1x1x1x1x1x1x1_grad_data") == "conv2d_grad_data"
    assert operator_name("conv2d_8x16x3x3_grad_weight_1") == "conv2d_grad_weight_1"
    assert operator_name("gated_dense_grad_x") == "gated_dense_grad_x"  # a user's operator keeps its name


@pytest.mark.slow
@pytest.mark.needs("gcc", "make")
def test_untuned_element_wise_expressions_with_several_operands_run_on_the_cpes_and_match_torch(
        tmp_path: Path) -> None:
    # LLTM's cell (examples/novel/lltm.py): element-wise expressions reading the gates at offsets, which
    # the rule-picked CPE blocks do not slice; untuned, they and their gradients took the MPE (62% of
    # the step); now their expression kernels at the analysis' choice
    from tuner.expr.workload import load_function

    lltm = Path(__file__).resolve().parents[2] / "examples" / "novel" / "lltm.py"
    module, inputs = load_function(f"{lltm}:model")(batch=4, features=8, hidden=16, steps=2, classes=3)
    reference = copy.deepcopy(module)
    opt = Optimizer(OptimizerKind.SGD, 0.05)
    step = training_step(module.train(), inputs, Loss.CROSS_ENTROPY, opt)
    program = compile_training(step, "sw26010", tmp_path, lambda w: None, "lltm")
    cells = [k for k in program.result.kernels if k.workload.key.split("-")[1].startswith("lltm_")]
    assert {k.workload.name.split("_", 1)[1] for k in cells} >= {"cell", "hidden", "cell_grad_gates"}
    assert all(k.status == "fallback: untuned, the analysis' choice" for k in cells)
    timing = program.timing
    assert not [s for s in timing.steps if s.where == "MPE" and s.relax_op.startswith("lltm")]
    assert timing.mpe_fraction <= 0.05
    shape = target_shape(module, inputs, Loss.CROSS_ENTROPY)
    batches = train_data.synthetic(4, 2, 4, tuple(inputs[0].shape), shape, Loss.CROSS_ENTROPY)
    compared = emulate_beside_torch(step, reference, batches, opt, tmp_path, 2)
    assert compared.loss_err <= 1e-4 and compared.param_err <= 1e-4
