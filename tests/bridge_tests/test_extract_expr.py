"""Task extraction of operators no built-in reader takes: GEMM-like PrimFuncs become expression operators."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="task extraction needs torch (dev extra)")

from tuner.bridge.extract import extract_torch  # noqa: E402
from tuner.expr.workload import ExprWorkload  # noqa: E402
from tuner.space import space_for  # noqa: E402
from tuner.workloads import BatchMatmul, Conv2d, workload_from_json  # noqa: E402


class Novel(torch.nn.Module):
    def forward(self, x, w, v, u, a, b):
        y = torch.nn.functional.conv3d(v, u, stride=2)  # a pad stage of padding 0: inlined
        y2 = torch.nn.functional.conv3d(v, u, padding=1)  # a real zero padding: two stages, not taken
        z = torch.nn.functional.conv1d(x, w, padding=1)  # the built-in conv2d task of height 1
        y3 = torch.nn.functional.conv3d(v, u, stride=2)  # the same operator again: merged, counted
        return y.sum(dim=2), y2, z, y3, torch.bmm(a, b)


@pytest.fixture(scope="module")
def tasks():
    inputs = (torch.randn(1, 4, 16), torch.randn(6, 4, 3), torch.randn(1, 2, 5, 6, 7), torch.randn(3, 2, 3, 3, 3),
              torch.randn(2, 4, 5), torch.randn(2, 5, 6))
    return extract_torch(Novel(), inputs)


def test_gemm_like_operators_without_a_reader_become_expression_workloads(tasks):
    by_name = {l.name.rsplit("_", 1)[0]: l for l in tasks.layers}
    # the sum and bmm's transposed b operand (a layout copy the compiler adds) are memory-bound tasks
    assert set(by_name) == {"conv3d", "conv2d", "batch_matmul", "sum", "transpose"}
    conv3d = by_name["conv3d"]
    assert isinstance(conv3d.workload, ExprWorkload) and conv3d.weight == 2
    assert isinstance(by_name["batch_matmul"].workload, BatchMatmul)  # a built-in op stays built in
    # conv1d is the built-in conv2d of height 1, its padding kept on the width
    assert by_name["conv2d"].workload == Conv2d(1, 4, 1, 16, 6, 1, 3, pad_w=1)
    expr = conv3d.workload.expr
    assert [a.extent for a in expr.spatial] == [1, 3, 2, 2, 3] and sorted(a.extent for a in expr.reduce) == [2, 3, 3, 3]
    assert expr.inputs[0].dims[2].coefs == (("yy", 2), ("ry", 1))  # stride 2 read from the PrimFunc


def test_what_is_not_taken_is_listed(tasks):
    # the padded conv3d (two stages: a zero padding computes) stays untuned, by name
    assert tasks.untuned == {"nn.conv3d": 1}


def test_memory_bound_operators_are_expression_tasks(tasks):
    from tuner.bridge.extract import memory_bound

    by_name = {l.name.rsplit("_", 1)[0]: l for l in tasks.layers}
    total, copy = by_name["sum"].workload, by_name["transpose"].workload
    assert memory_bound(total) and memory_bound(copy) and not memory_bound(by_name["conv3d"].workload)
    assert total.expr.reducer.value == "sum" and [a.extent for a in total.expr.reduce] == [2]
    assert not copy.expr.reduce and copy.expr.inputs[0].shape == (2, 5, 6)  # b of bmm, read as [B, N, K]
    assert [a.extent for a in copy.expr.spatial] == [2, 6, 5]


def test_extracted_expression_operators_travel_and_have_a_space(tasks):
    for layer in tasks.layers:
        if isinstance(layer.workload, ExprWorkload):
            back = workload_from_json(layer.workload.canonical_json())
            assert back.key == layer.workload.key
            assert len(space_for(back, "sw26010").sample(8, 0)) == 8
