"""Matmul of any rank (issue #28 item 1): torch ``Linear`` on a 4-D tensor, attention's 4-D ``q @ k^T``,
5-D batches, a weight broadcast across batch dims, vector operands and an einsum, from torch and from
ONNX. Each is a GEMM-like task (dense or batch_matmul where a reshape is free, an expression operator
where an operand is broadcast), compiled tuned, run on the athread emulator and checked against torch.
Also conv1d, which is the conv2d task of height 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tuner.errors import InvalidWorkloadError
from tuner.ir.relax_ops import MatmulForm, matmul_geometry


@pytest.mark.parametrize(("a", "b", "form", "bmnk", "out"), [
    ((1, 14, 14, 64), (64, 256), MatmulForm.DENSE, (1, 196, 256, 64), (1, 14, 14, 256)),  # ConvNeXt's Linear
    ((1, 4, 32, 16), (1, 4, 16, 32), MatmulForm.BATCH, (4, 32, 32, 16), (1, 4, 32, 32)),  # GPT attention
    ((2, 1, 3, 8, 16), (2, 1, 3, 16, 8), MatmulForm.BATCH, (6, 8, 8, 16), (2, 1, 3, 8, 8)),
    ((1, 4, 8, 16), (4, 16, 8), MatmulForm.BATCH, (4, 8, 8, 16), (1, 4, 8, 8)),  # leading 1s are free
    ((2, 8, 16), (1, 16, 4), MatmulForm.DENSE, (1, 16, 4, 16), (2, 8, 4)),  # one weight, batch dims of 1
    ((1, 8, 16), (1, 16, 8), MatmulForm.BATCH, (1, 8, 8, 16), (1, 8, 8)),  # x @ x^T of one sequence
    ((64,), (64, 32), MatmulForm.DENSE, (1, 1, 32, 64), (32,)),
    ((5, 64), (64,), MatmulForm.DENSE, (1, 5, 1, 64), (5,)),
])
def test_matmul_geometry_is_free_reshape(a: tuple[int, ...], b: tuple[int, ...], form: MatmulForm,
                                         bmnk: tuple[int, int, int, int], out: tuple[int, ...]) -> None:
    g = matmul_geometry(a, b)
    assert (g.form, (g.batch, g.m, g.n, g.k), g.out_shape) == (form, bmnk, out)
    assert g.out_shape == np.matmul(np.zeros(a), np.zeros(b)).shape


@pytest.mark.parametrize(("a", "b"), [((2, 4, 5, 16), (4, 16, 8)), ((4, 5), (2, 5, 3)), ((3, 4), (5, 6)),
                                      ((2, 3, 4), (3, 3, 4, 5))])
def test_matmul_geometry_refuses_a_copy_or_a_mismatch(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    with pytest.raises(InvalidWorkloadError):
        matmul_geometry(a, b)


torch = pytest.importorskip("torch")
pytest.importorskip("tvm")
needs_make = pytest.mark.needs("gcc", "make")
TARGET = "sw26010"


class _Matmuls(torch.nn.Module):
    """Every form at once; each output is compared on its own."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(64, 32)
        self.w3 = torch.nn.Parameter(torch.randn(4, 16, 8) * 0.3, requires_grad=False)

    def forward(self, x4: Any, q: Any, k: Any, x5: Any) -> Any:
        return (
            self.linear(x4),  # [1, 3, 5, 64] -> [1, 3, 5, 32]: dense, M = 15
            q @ k.transpose(-2, -1),  # [1, 4, 8, 16] x [1, 4, 16, 8]: batch_matmul, b read untransposed
            x5 @ x5.transpose(-1, -2),  # [2, 1, 3, 8, 16]: batch_matmul over 6 matrices
            q.reshape(1, 4, 8, 16).expand(2, 4, 8, 16) @ self.w3,  # weight broadcast over the batch: expression
            x4[0, 0, 0] @ self.linear.weight.T,  # a vector: dense with M = 1
            torch.einsum("bhqd,bhkd->bhqk", q, k),
        )


def _inputs() -> tuple[Any, ...]:
    torch.manual_seed(0)
    return (torch.randn(1, 3, 5, 64), torch.randn(1, 4, 8, 16), torch.randn(1, 4, 8, 16), torch.randn(2, 1, 3, 8, 16))


def _tuned_lookup(mod: Any) -> tuple[Any, list[Any]]:
    """A lookup with a sampled valid config for every GEMM-like task of the model."""
    from tuner.bridge.extract import extract_relax
    from tuner.space.factory import space_for

    workloads = [layer.workload for layer in extract_relax(mod).layers]

    def lookup(workload: Any) -> dict[str, Any] | None:
        if workload.op == "cpe_kernel":
            return None
        space = space_for(workload, TARGET)
        return space.decode(space.sample(1, rng=3)[0])

    return lookup, workloads


@pytest.mark.slow
@needs_make
@pytest.mark.parametrize("frontend", ["torch", "onnx"])
def test_every_matmul_form_is_a_tuned_task_and_matches_torch(tmp_path: Path, frontend: str) -> None:
    from emulator_helpers import run_model

    from tuner.aot import compile_model
    from tuner.bridge.extract import onnx_to_relax, torch_to_relax
    from tuner.task_kind import kind_of

    model, inputs = _Matmuls().eval(), _inputs()
    if frontend == "onnx":
        pytest.importorskip("onnx")
        path = tmp_path / "matmuls.onnx"
        torch.onnx.export(model, inputs, str(path), dynamo=False, opset_version=17,
                          input_names=["x4", "q", "k", "x5"])
        mod = onnx_to_relax(path)
    else:
        mod = torch_to_relax(model, inputs)
    lookup, workloads = _tuned_lookup(mod)
    ops = [w.op for w in workloads]
    assert "dense" in ops and "batch_matmul" in ops
    if frontend == "onnx":  # torch.export copies a broadcast operand (expand) and lowers einsum to bmm itself
        # the broadcast weight and the einsum: GEMM-like expression operators, not untuned MPE code
        assert sum(1 for w in workloads if w.op == "expr" and not kind_of(w).memory_bound(w)) >= 1
    result = compile_model(mod, TARGET, tmp_path / frontend, lookup)
    assert result.kernels and all(k.status == "tuned" for k in result.kernels)
    # every matmul's product runs as a tuned CPE kernel (a small layout copy beside it may stay on the MPE)
    bindings = {r.source for r in result.rows if r.relax_op in ("matmul", "einsum")}
    tuned = {r.source for r in result.rows if r.relax_op in ("matmul", "einsum") and r.where == "tuned kernel"}
    assert len(bindings) >= 5 and tuned == bindings, [(r.source, r.relax_op, r.where) for r in result.rows]
    got = run_model(result.out_dir, [t.numpy() for t in inputs], TARGET).output
    with torch.no_grad():
        refs = [r.numpy() for r in model(*inputs)]
    assert got.size == sum(r.size for r in refs)
    pos = 0
    for i, ref in enumerate(refs):
        part = got[pos:pos + ref.size].reshape(ref.shape)
        pos += ref.size
        np.testing.assert_allclose(part, ref, rtol=1e-3, atol=1e-5, err_msg=f"output {i}")


@pytest.mark.parametrize("frontend", ["torch", "onnx"])
def test_attention_reads_k_without_a_transpose_copy(tmp_path: Path, frontend: str) -> None:
    """``q @ k^T`` on 4-D tensors: the kernel reads k as [B, N, K] itself; no layout copy of k runs."""
    from tuner.bridge.extract import onnx_to_relax, torch_to_relax
    from tuner.ir.relax_reader import read_relax

    class Attention(torch.nn.Module):
        def forward(self, q: Any, k: Any) -> Any:
            return torch.softmax(q @ k.transpose(-2, -1), dim=-1)

    q, k = torch.randn(1, 4, 8, 16), torch.randn(1, 4, 8, 16)
    if frontend == "onnx":
        pytest.importorskip("onnx")
        path = tmp_path / "attn.onnx"
        torch.onnx.export(Attention(), (q, k), str(path), dynamo=False, opset_version=17)
        mod = onnx_to_relax(path)
    else:
        mod = torch_to_relax(Attention(), (q, k))
    graph = read_relax(mod, "sw26010")
    assert [n.attrs["workload"].key for n in graph.nodes if n.op == "kernel"] == ["batch_matmul-b4-m8-n8-k16-float32"]
    assert not [n for n in graph.nodes if n.op == "transpose"]


@pytest.mark.slow
@needs_make
@pytest.mark.parametrize("frontend", ["torch", "onnx"])
def test_conv1d_is_a_conv2d_of_height_one_and_matches_torch(tmp_path: Path, frontend: str) -> None:
    """A 1-D convolution (strided, padded, grouped) is the tuned conv2d task of height 1 (from torch and
    from ONNX alike), and the program matches torch on the emulator."""
    from emulator_helpers import run_model

    from tuner.aot import compile_model
    from tuner.bridge.extract import extract_relax, onnx_to_relax, torch_to_relax

    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Conv1d(4, 8, 5, stride=2, padding=2), torch.nn.ReLU(),
                                torch.nn.Conv1d(8, 8, 3, padding=1, groups=2)).eval()
    x = torch.randn(1, 4, 64)
    if frontend == "onnx":
        pytest.importorskip("onnx")
        path = tmp_path / "c1.onnx"
        torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17)
        mod = onnx_to_relax(path)
    else:
        mod = torch_to_relax(model, (x,))
    lookup, _ = _tuned_lookup(mod)
    keys = sorted(layer.workload.key for layer in extract_relax(mod).layers if layer.workload.op == "conv2d")
    assert keys == ["conv2d-n1-c4-h1-w64-k8-r1-s5-stride_h1-stride_w2-pad_h0-pad_w2-dil_h1-dil_w1-groups1-float32",
                    "conv2d-n1-c8-h1-w32-k8-r1-s3-stride_h1-stride_w1-pad_h0-pad_w1-dil_h1-dil_w1-groups2-float32"]
    result = compile_model(mod, TARGET, tmp_path / frontend, lookup)
    assert sorted(k.workload.key for k in result.kernels if k.tuned) == keys
    got = run_model(result.out_dir, [x.numpy()], TARGET).output
    with torch.no_grad():
        ref = model(x).numpy()
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-3, atol=1e-5)
