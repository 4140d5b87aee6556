"""Element-wise epilogues fused into the GEMM-like kernels: results on the emulator against torch,
and the fused kernels' DMA equal to the unfused kernels' (a unary epilogue moves no data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402

TARGET = "sw26010"
pytestmark = pytest.mark.needs("gcc", "make")
F = torch.nn.functional


class _Net(torch.nn.Module):
    """conv -> relu, conv -> relu6 (clip), dense -> gelu -> sigmoid (a chain), batch_matmul -> tanh."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False)
        self.fc = torch.nn.Linear(128, 24, bias=False)

    def forward(self, x: Any) -> Any:
        y = F.relu6(self.c2(F.relu(self.c1(x))))  # [1, 8, 4, 4]
        t = y.flatten(2)  # [1, 8, 16]
        z = torch.tanh(torch.matmul(t, t.transpose(1, 2)))  # [1, 8, 8]
        return torch.sigmoid(F.gelu(self.fc(y.flatten(1)))), z


def _compiled_both_ways(model: Any, x: Any, out: Path, **options: Any) -> tuple[Any, Any]:
    """``model`` compiled untuned with its epilogues fused, and without fusion (``options``: to both)."""
    from tuner.bridge.extract import torch_to_relax

    mod = torch_to_relax(model, (x,))
    return (compile_model(mod, TARGET, out / "fused", lambda w: None, cpe_mode="none", **options),
            compile_model(mod, TARGET, out / "plain", lambda w: None, cpe_mode="none", fuse=False, **options))


def _run_both(fused: Any, plain: Any, model: Any, x: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Both programs on the emulator: the fused one's outputs match torch's; each one's DMA totals."""
    fused_run, plain_run = run_model(fused.out_dir, [x.numpy()], TARGET), run_model(plain.out_dir, [x.numpy()], TARGET)
    with torch.no_grad():
        outs = model(x)
    ref = np.concatenate([t.numpy().ravel() for t in (outs if isinstance(outs, tuple) else (outs,))])
    np.testing.assert_allclose(fused_run.output, ref, rtol=1e-3, atol=1e-5)
    return fused_run.report["totals"], plain_run.report["totals"]


@pytest.mark.slow
def test_unary_epilogues_fuse_into_their_kernels(tmp_path: Path) -> None:
    torch.manual_seed(3)
    model, x = _Net().eval(), torch.randn(1, 3, 8, 8)
    fused, plain = _compiled_both_ways(model, x, tmp_path)
    eps = {k.workload.op: k.epilogue.name for k in fused.kernels if k.epilogue is not None}
    assert eps == {"conv2d": eps["conv2d"], "dense": "nn.gelu+sigmoid", "batch_matmul": "tanh"}
    assert {k.epilogue.name for k in fused.kernels if k.workload.op == "conv2d"} == {"nn.relu", "clip"}
    assert fused.counts()["fused epilogue"] == 5 and "fused epilogue" not in plain.counts()
    assert len(fused.graph.nodes) == len(plain.graph.nodes) - 5
    dma_fused, dma_plain = _run_both(fused, plain, model, x)
    for key in ("get_reqs", "get_bytes", "put_reqs", "put_bytes"):  # no extra data moved
        assert dma_fused[key] == dma_plain[key], key
    assert fused.timing is not None and plain.timing is not None
    assert fused.timing.tuned_s < plain.timing.tuned_s  # five MPE steps fewer


class _BiasNet(torch.nn.Module):
    """conv + bias -> batch_norm -> relu, dense + bias -> gelu, a 3-D linear (a view) + bias."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 36, 16)
        self.seq = torch.nn.Linear(36, 12)
        with torch.no_grad():  # non-trivial running statistics
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x: Any) -> Any:
        y = F.relu(self.bn(self.conv(x)))  # [1, 8, 6, 6]
        return F.gelu(self.fc(y.flatten(1))), self.seq(y.flatten(2))


@pytest.mark.slow
def test_per_channel_epilogues_fuse_and_fetch_their_vectors_once_per_cpe(tmp_path: Path) -> None:
    torch.manual_seed(4)
    model, x = _BiasNet().eval(), torch.randn(1, 3, 6, 6)
    fused, plain = _compiled_both_ways(model, x, tmp_path)
    names = sorted(k.epilogue.name for k in fused.kernels if k.epilogue is not None)
    assert names == ["add", "add+nn.batch_norm+nn.relu", "add+nn.gelu"]
    dma_fused, dma_plain = _run_both(fused, plain, model, x)
    vectors = [n for k in fused.kernels for n in k.epilogue.vectors]  # each kernel runs once here
    assert dma_fused["get_reqs"] == dma_plain["get_reqs"] + 64 * len(vectors)
    assert dma_fused["get_bytes"] == dma_plain["get_bytes"] + 64 * 4 * sum(vectors)
    assert dma_fused["put_reqs"] == dma_plain["put_reqs"] and dma_fused["put_bytes"] == dma_plain["put_bytes"]


class _ResidualNet(torch.nn.Module):
    """conv -> batch-norm -> + input (a ResNet shortcut) -> relu."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x: Any) -> Any:
        return F.relu(self.bn(self.conv(x)) + x)


@pytest.mark.slow
def test_residual_add_fuses_with_its_operand_dma_in_the_analysis(tmp_path: Path) -> None:
    """The residual add runs in the conv kernel: a workload of its own (epilogue=residual_add), and
    its operand's gets (the emulator's counts) are the analysis' plan for them; the same result."""
    from tuner.bridge.extract import extract_relax, torch_to_relax
    from tuner.space.space import ScheduleSpace
    from tuner.targets import get_target

    torch.manual_seed(6)
    model, x = _ResidualNet().eval(), torch.randn(1, 8, 6, 6)
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    fused, plain = _compiled_both_ways(model, x, tmp_path, group_launches=False)
    (k,) = fused.kernels
    assert k.epilogue is not None and k.epilogue.residual and k.epilogue.name == "nn.batch_norm+add+nn.relu"
    assert k.workload.epilogue == "residual_add" and k.workload.key.endswith("-ep_residual_add")
    assert plain.kernels[0].workload.key + "-ep_residual_add" == k.workload.key
    # tune-model tunes the kernel in the form compile builds it
    assert [layer.workload.key for layer in extract_relax(torch_to_relax(model, (x,))).layers] == [k.workload.key]
    assert [r.where for r in fused.rows if r.relax_op in ("add", "nn.relu")] == ["fused epilogue"] * 2
    dma_fused, dma_plain = _run_both(fused, plain, model, x)
    space = ScheduleSpace(k.workload, get_target(TARGET))
    a = space.analyze(space.encode(k.config)[None, :])
    assert a.valid[0] and a.epilogue is not None
    res_reqs, res_bytes = int(a.epilogue.get.total_requests[0]), int(a.epilogue.get.total_bytes[0])
    assert (res_reqs, res_bytes) == (int(a.c.total_requests[0]), int(a.c.total_bytes[0]))  # mirrors the puts
    vectors = k.epilogue.vectors  # batch-norm scale and shift, once per CPE
    assert dma_fused["get_reqs"] == dma_plain["get_reqs"] + 64 * len(vectors) + res_reqs
    assert dma_fused["get_bytes"] == dma_plain["get_bytes"] + 64 * 4 * sum(vectors) + res_bytes
    assert dma_fused["put_reqs"] == dma_plain["put_reqs"] and dma_fused["put_bytes"] == dma_plain["put_bytes"]
    # the simulator charges the operand's gets and the per-element add: the fused workload is slower
    from tuner.measure.simulator import simulate

    base = ScheduleSpace(plain.kernels[0].workload, get_target(TARGET))
    assert simulate(space, space.encode(k.config)[None, :])[0] > simulate(base, base.encode(k.config)[None, :])[0]


class _BackwardLikeNet(torch.nn.Module):
    """A GEMM whose result is multiplied by a derivative of other values computed after it, as in a
    backward pass (d = dy @ W times tanh's 1 - t*t): the derivative's nodes move before the kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(48, 40, bias=False)

    def forward(self, dy: Any, h: Any) -> Any:
        g = self.fc(dy)
        t = torch.tanh(h)
        return g * (1.0 - t * t)


@pytest.mark.slow
def test_residual_multiply_fuses_a_derivative_computed_after_the_gemm(tmp_path: Path) -> None:
    from tuner.bridge.extract import extract_relax, torch_to_relax
    from tuner.space.space import ScheduleSpace
    from tuner.targets import get_target

    torch.manual_seed(7)
    model, dy, h = _BackwardLikeNet().eval(), torch.randn(6, 48), torch.randn(6, 40)
    mod = torch_to_relax(model, (dy, h))
    fused = compile_model(mod, TARGET, tmp_path / "fused", lambda w: None, cpe_mode="none", group_launches=False)
    (k,) = fused.kernels
    same = lambda w: k.config if getattr(w, "op", "") == "dense" else None  # noqa: E731 (its schedule, no epilogue)
    plain = compile_model(mod, TARGET, tmp_path / "plain", same, cpe_mode="none", group_launches=False, fuse=False)
    assert k.epilogue is not None and k.epilogue.residual and k.epilogue.name == "multiply"
    assert k.workload.epilogue == "residual_multiply" and k.workload.key.endswith("-ep_residual_multiply")
    layers = [layer.workload.key for layer in extract_relax(mod).layers]
    assert [key for key in layers if key.startswith("dense")] == [k.workload.key]  # tuned in the form built
    # the derivative (tanh, t * t, 1 - t*t) now runs before the kernel that reads it
    order = [s.source for s in fused.graph.nodes]
    kernel_at = next(i for i, n in enumerate(fused.graph.nodes) if n.op == "kernel")
    assert len(order[:kernel_at]) >= 3
    run = run_model(fused.out_dir, [dy.numpy(), h.numpy()], TARGET)
    base = run_model(plain.out_dir, [dy.numpy(), h.numpy()], TARGET)
    with torch.no_grad():
        np.testing.assert_allclose(run.output, model(dy, h).numpy().ravel(), rtol=1e-4, atol=1e-6)
    space = ScheduleSpace(k.workload, get_target(TARGET))
    a = space.analyze(space.encode(k.config)[None, :])
    res_reqs, res_bytes = int(a.epilogue.get.total_requests[0]), int(a.epilogue.get.total_bytes[0])
    kernel_gets = base.report["totals"]["get_reqs"] + res_reqs
    assert run.report["totals"]["get_reqs"] == kernel_gets
    assert run.report["totals"]["get_bytes"] == base.report["totals"]["get_bytes"] + res_bytes
