"""A compiled training step against torch: losses, parameters and optimizer state after 5 steps on the
emulator, for SGD, momentum and Adam; the step's phases; the driver's checkpoints."""

from __future__ import annotations

import copy
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from train_helpers import assert_two_steps_match_torch, emulate_beside_torch, sgd_step  # noqa: E402

from tuner.ir.optimizers import Optimizer, OptimizerKind  # noqa: E402
from tuner.ir.training import Loss, Phase, target_shape, training_step  # noqa: E402
from tuner.models.trainable import build_trainable  # noqa: E402
from tuner.train import data as train_data  # noqa: E402
from tuner.train.checks import run_killed  # noqa: E402
from tuner.train.program import (  # noqa: E402
    TrainingRunError,
    build_emulated,
    compile_training,
    run_emulated,
    split_state,
)
from tuner.train.reference import relative_error, torch_steps  # noqa: E402

STEPS = 5



def _compiled(name: str, opt: Optimizer, tmp: Path, batch: int = 4) -> tuple[Any, Any, train_data.Batches, Any]:
    module, inputs = build_trainable(name, batch)
    reference = copy.deepcopy(module)
    shape = target_shape(module, inputs, Loss.CROSS_ENTROPY)
    batches = train_data.synthetic(1, 3, batch, tuple(inputs[0].shape), shape, Loss.CROSS_ENTROPY)
    step = training_step(module, inputs, Loss.CROSS_ENTROPY, opt)
    program = compile_training(step, "sw26010", tmp, lambda w: None, name)
    batches.tofile(tmp / "data.bin", step.dtype)
    build_emulated(tmp)
    return step, program, batches, reference


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(OptimizerKind))
def test_mlp_trains_like_torch_for_each_optimizer(tmp_path: Path, kind: OptimizerKind) -> None:
    opt = Optimizer(kind, 0.05 if kind != OptimizerKind.ADAM else 0.01)
    step, program, batches, reference = _compiled("mlp", opt, tmp_path)
    run = run_emulated(tmp_path, tmp_path / "data.bin", STEPS, step.dtype)
    ref = torch_steps(reference, batches, opt, Loss.CROSS_ENTROPY, STEPS)
    assert relative_error(run.losses, np.array(ref.losses)) <= 1e-4
    state = split_state(run.state, step)
    for name, value in ref.params.items():
        assert relative_error(state[name], value) <= 1e-4, name
    # the optimizer's state too: torch's momentum buffers, Adam's moments and its step count
    by_param = {name: ref.optimizer.state[p] for name, p in ref.model.named_parameters()}
    if kind == OptimizerKind.MOMENTUM:
        for name, st in by_param.items():
            assert relative_error(state[f"{name}_momentum"], st["momentum_buffer"].numpy()) <= 1e-4
    if kind == OptimizerKind.ADAM:
        for name, st in by_param.items():
            assert relative_error(state[f"{name}_adam_m"], st["exp_avg"].numpy()) <= 1e-4
            assert relative_error(state[f"{name}_adam_v"], st["exp_avg_sq"].numpy()) <= 1e-4
        assert state["adam_beta1_power"] == pytest.approx(opt.beta1 ** STEPS, rel=1e-6)
    assert np.all(np.abs(run.losses[1:] - run.losses[:-1]) > 0)  # the parameters did change step to step


@pytest.mark.slow
def test_cnn_with_batch_norm_and_dropout_trains_like_torch(tmp_path: Path) -> None:
    opt = Optimizer(OptimizerKind.MOMENTUM, 0.05)
    step, program, batches, reference = _compiled("cnn", opt, tmp_path)
    assert [d.p for d in step.dropouts] == [0.25]
    run = run_emulated(tmp_path, tmp_path / "data.bin", STEPS, step.dtype)
    ref = torch_steps(reference, batches, opt, Loss.CROSS_ENTROPY, STEPS)  # the program's masks applied
    assert relative_error(run.losses, np.array(ref.losses)) <= 1e-4
    state = split_state(run.state, step)
    assert max(relative_error(state[n], v) for n, v in ref.params.items()) <= 1e-4
    # the running statistics were updated as torch updates them (momentum 0.1, unbiased variance)
    assert set(ref.buffers) == {n for n, _ in step.buffers}
    for name, value in ref.buffers.items():
        assert relative_error(state[name], value) <= 1e-4, name
        assert not np.allclose(state[name], dict(step.buffers)[name])
    # with other masks the losses differ: the program does drop
    other = torch_steps(reference, batches, opt, Loss.CROSS_ENTROPY, STEPS, dropout_seed=1)
    assert relative_error(run.losses, np.array(other.losses)) > 1e-3
    # the convolutions' gradients are the derived expression operators, compiled as CPE kernels untuned (#46)
    assert any("_grad_" in s.attrs["workload"].key for s in program.result.graph.nodes if s.op == "kernel")


def test_every_binding_has_a_phase_and_each_phase_has_work() -> None:
    module, inputs = build_trainable("mlp", 4)
    step = training_step(module, inputs, Loss.MSE, Optimizer(OptimizerKind.SGD, 0.1))
    phases = list(step.phases.values())
    assert set(phases) == set(Phase)
    # forward, then backward, then update: never back
    order = [list(Phase).index(p) for p in phases]
    assert order == sorted(order)
    main = step.module["main"]
    names = [b.var.name for block in main.body.blocks for b in block.bindings]
    assert len(names) == len(set(names))  # inlining left no repeated binding name


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_checkpoint_bit_for_bit(tmp_path: Path) -> None:
    opt = Optimizer(OptimizerKind.ADAM, 0.01)
    step, _, _, _ = _compiled("mlp", opt, tmp_path)
    steps, every = 60, 2
    whole = run_emulated(tmp_path, tmp_path / "data.bin", steps, step.dtype)
    ckpt = tmp_path / "ckpt.bin"
    assert run_killed(tmp_path, tmp_path / "data.bin", steps, ckpt, every, kill_after=5) == -signal.SIGKILL
    assert ckpt.exists()
    # The kill may land while the next checkpoint is being written: a half-written .tmp must not
    # matter (the program reads only the renamed whole file and truncates the .tmp when it writes).
    (tmp_path / "ckpt.bin.tmp").write_bytes(b"half a checkpoint")
    resumed = run_emulated(tmp_path, tmp_path / "data.bin", steps, step.dtype, checkpoint=ckpt, every=every)
    assert resumed.resumed_from is not None and 0 < resumed.resumed_from < steps
    assert resumed.losses.tobytes() == whole.losses.tobytes()
    assert resumed.state.tobytes() == whole.state.tobytes()


@pytest.mark.slow
def test_a_bad_checkpoint_is_refused_and_kept(tmp_path: Path) -> None:
    step, _, _, _ = _compiled("mlp", Optimizer(OptimizerKind.SGD, 0.1), tmp_path)
    ckpt = tmp_path / "ckpt.bin"
    run_emulated(tmp_path, tmp_path / "data.bin", 4, step.dtype, checkpoint=ckpt, every=2)
    assert (tmp_path / "ckpt.bin.prev").exists()  # step 2's, kept beside step 4's
    good = ckpt.read_bytes()

    def refused(data: bytes, why: str) -> None:
        ckpt.write_bytes(data)
        with pytest.raises(TrainingRunError, match=why):
            run_emulated(tmp_path, tmp_path / "data.bin", 8, step.dtype, checkpoint=ckpt, every=2)
        assert ckpt.read_bytes() == data  # left as it was

    flipped = bytearray(good)
    flipped[-1] ^= 0x40
    refused(bytes(flipped), "checksum")
    refused(good[:-8], "truncated")
    other = bytearray(good)
    other[8] ^= 0x01  # the model fingerprint
    refused(bytes(other), "another model")
    refused(b"not a checkpoint at all, just text", "not a swtune checkpoint")


def test_data_that_does_not_fit_the_model_is_refused(tmp_path: Path) -> None:
    x = np.zeros((8, 5), np.float32)
    with pytest.raises(train_data.DataError, match=r"x must be \[N, 32\]"):
        train_data.batches(x, np.zeros(8, np.int64), 4, (4, 32), (4, 10), Loss.CROSS_ENTROPY)
    x = np.zeros((8, 32), np.float32)
    with pytest.raises(train_data.DataError, match=r"labels must lie in \[0, 10\)"):
        train_data.batches(x, np.full(8, 10), 4, (4, 32), (4, 10), Loss.CROSS_ENTROPY)
    with pytest.raises(train_data.DataError, match="integer class labels"):
        train_data.batches(x, np.zeros(8, np.float32), 4, (4, 32), (4, 10), Loss.CROSS_ENTROPY)
    with pytest.raises(train_data.DataError, match="do not make one batch"):
        train_data.batches(x[:3], np.zeros(3, np.int64), 4, (4, 32), (4, 10), Loss.CROSS_ENTROPY)
    bad = tmp_path / "bad.npz"
    np.savez(bad, inputs=x)
    with pytest.raises(train_data.DataError, match="expected arrays 'x' and 'y'"):
        train_data.from_npz(bad, 4, (4, 32), (4, 10), Loss.CROSS_ENTROPY)
    good = train_data.batches(x, np.arange(8) % 10, 4, (4, 32), (4, 10), Loss.CROSS_ENTROPY)
    assert good.target.shape == (2, 4, 10) and np.all(good.target.sum(-1) == 1)


def test_a_loss_that_cannot_apply_is_refused() -> None:
    from tuner.ir.graph import AotError

    module = torch.nn.Conv2d(3, 4, 3)
    with pytest.raises(AotError, match=r"cross-entropy needs the model to output \[batch, classes\]"):
        target_shape(module, (torch.randn(2, 3, 8, 8),), Loss.CROSS_ENTROPY)
    with pytest.raises(ValueError, match="learning rate"):
        Optimizer(OptimizerKind.SGD, float("nan"))


@pytest.mark.slow
def test_a_model_with_an_expression_operator_trains_through_its_derived_gradient(tmp_path: Path) -> None:
    from tuner.expr.workload import load_function

    example = Path(__file__).resolve().parents[2] / "examples" / "train" / "gated_mlp.py"
    module, inputs = load_function(f"{example}:model")(batch=4)
    reference = copy.deepcopy(module)
    opt = Optimizer(OptimizerKind.ADAM, 0.01)
    shape = target_shape(module, inputs, Loss.CROSS_ENTROPY)
    batches = train_data.synthetic(2, 2, 4, tuple(inputs[0].shape), shape, Loss.CROSS_ENTROPY)
    step = training_step(module, inputs, Loss.CROSS_ENTROPY, opt)
    program = compile_training(step, "sw26010", tmp_path, lambda w: None, "gated")
    # the operator's forward and its derived gradient operators are steps of the program
    sources = " ".join(str(n.attrs.get("function", "")) for n in program.result.graph.nodes)
    kernels = " ".join(k.workload.key for k in program.result.kernels)
    assert "gated_dense" in sources + kernels and "gated_dense_grad_" in sources + kernels
    compared = emulate_beside_torch(step, reference, batches, opt, tmp_path, STEPS)  # torch: the operator's twin
    assert compared.loss_err <= 1e-4
    assert {"2.weight", "2.bias", "2.gate"} <= set(compared.state) and compared.param_err <= 1e-4


@pytest.mark.slow
def test_a_forward_of_several_stages_runs_stage_by_stage_and_once() -> None:
    """gated_dense is two reductions and a gate: no one expression operator, so its forward becomes one
    call per stage (each a tuning task the CPEs run, not plain C on the MPE), and the backward reads
    the forward's value and logit instead of computing them again."""
    from tvm import relax

    from tuner.expr.workload import load_function

    example = Path(__file__).resolve().parents[2] / "examples" / "train" / "gated_mlp.py"
    module, inputs = load_function(f"{example}:model")(batch=4)
    step = training_step(module, inputs, Loss.CROSS_ENTROPY, Optimizer(OptimizerKind.MOMENTUM, 0.01))
    called: list[str] = []
    for block in step.module["main"].body.blocks:
        for b in block.bindings:
            if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "") == "relax.call_tir":
                called.append(str(b.value.args[0].name_hint))
    for stage in ("value", "logit", "gated_dense"):  # forward stages, each called once
        assert called.count(f"gated_dense_pass_{stage}") == 1, called
    assert "gated_dense" not in called  # the whole four-stage function is gone
    assert any(n.startswith("gated_dense_grad_") for n in called)


class _TwoConvNet(torch.nn.Module):
    """conv -> relu -> conv -> relu -> linear: the second conv's data gradient is multiplied by the
    first relu's mask, an epilogue of the derived (expression) operator when its fused form is tuned."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.c2 = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x: Any) -> Any:
        return self.fc(torch.relu(self.c2(torch.relu(self.c1(x)))).flatten(1))


@pytest.mark.slow
def test_a_derived_data_gradient_takes_the_relu_mask_as_its_epilogue(tmp_path: Path) -> None:
    from tuner.bridge.extract import extract_relax, memory_bound
    from tuner.space.factory import space_for
    from tuner.targets import get_target

    torch.manual_seed(3)
    module, x = _TwoConvNet().train(), torch.randn(2, 3, 6, 6)
    step, reference, opt = sgd_step(module, x)
    layers = [layer.workload for layer in extract_relax(step.module).layers if not memory_bound(layer.workload)]
    fused = [w for w in layers if "grad_data" in w.key]
    assert [w.epilogue for w in fused] == ["residual_multiply"]  # tuned in the form the compiler builds
    tgt = get_target("sw26010")
    configs = {}
    for w in layers:  # every GEMM-like task "tuned" (a valid config from its space)
        space = space_for(w, tgt)
        configs[w.key] = space.decode(space.sample(1, rng=1)[0])
    program = compile_training(step, "sw26010", tmp_path, lambda w: configs.get(w.key), "twoconv")
    (k,) = [k for k in program.result.kernels if k.workload.key == fused[0].key]
    assert k.status == "tuned" and k.epilogue is not None and k.epilogue.residual
    assert_two_steps_match_torch(step, module, reference, x, opt, tmp_path)
