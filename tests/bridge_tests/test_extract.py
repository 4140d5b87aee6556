"""Task extraction from PyTorch and ONNX models through TVM Relax."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("torch", reason="task extraction needs torch (dev extra)")

from tuner.bridge.extract import extract_onnx, extract_torch  # noqa: E402
from tuner.models.torch_models import build  # noqa: E402
from tuner.models.zoo import alexnet, resnet18  # noqa: E402
from tuner.workloads import Conv2d, Dense  # noqa: E402


@pytest.fixture(scope="module")
def resnet_tasks():
    module, inputs = build("resnet18", width=0.25, image=64)
    return extract_torch(module, inputs)


@pytest.mark.slow
def test_alexnet_tasks_equal_the_reference_layer_table():
    module, inputs = build("alexnet")
    tasks = extract_torch(module, inputs)
    gemm = [l for l in tasks.layers if l.workload.op not in ("expr", "cpe_kernel")]
    assert [l.workload.key for l in gemm] == [l.workload.key for l in alexnet(1)]
    assert all(l.weight == 1 for l in gemm)
    # memory-bound expression tasks, as the compiler builds them: the three max pools (no padding: one
    # compute block), and the bias add and relu of the two hidden dense layers, which the compiler
    # leaves unfused; the conv layers' bias adds and relus run fused in their kernels (no task)
    memory = {}
    for l in tasks.layers:
        if l.workload.op == "expr":
            memory[l.name.rsplit("_", 1)[0]] = memory.get(l.name.rsplit("_", 1)[0], 0) + l.weight
    assert memory == {"max_pool2d": 3, "add": 2, "relu": 2}
    assert tasks.untuned == {"add": 6, "nn.relu": 5, "zeros_like": 3}


@pytest.mark.slow
def test_resnet_repeated_layers_are_merged_with_their_counts(resnet_tasks):
    by_key = {l.workload.key: l for l in resnet_tasks.layers}
    stage1 = Conv2d(1, 16, 16, 16, 16, 3, 3, pad_h=1, pad_w=1)
    # two blocks x two convs; the second conv of each block runs the shortcut add as its epilogue,
    # so it is a task of its own (the form the compiler builds)
    assert by_key[stage1.key].weight == 2
    assert by_key[replace(stage1, epilogue="residual_add").key].weight == 2
    downsample = Conv2d(1, 16, 16, 16, 32, 1, 1, stride_h=2, stride_w=2)
    # the downsample conv runs after the block's second conv, so the shortcut add fuses into it
    assert downsample.key not in by_key and by_key[replace(downsample, epilogue="residual_add").key].weight == 1
    assert Dense(1, 1000, 128, "float32").key in by_key
    plain: dict[str, int] = {}
    for l in resnet_tasks.layers:  # without the epilogues: as many tasks as the reference layer table
        if l.workload.op == "cpe_kernel":
            continue
        key = replace(l.workload, epilogue="none").key
        plain[key] = plain.get(key, 0) + l.weight
    assert len(plain) == len(resnet18(1)) and plain[stage1.key] == 4


def test_operators_we_cannot_tune_are_listed_not_dropped(resnet_tasks):
    assert resnet_tasks.untuned["nn.batch_norm"] == 20
    assert resnet_tasks.untuned["nn.relu"] == 17
    # the padded max pool and the global mean are multi-block: CPE kernel tasks, not untuned
    assert "nn.max_pool2d" not in resnet_tasks.untuned and "mean" not in resnet_tasks.untuned
    kernels = sorted(l.workload.name for l in resnet_tasks.layers if l.workload.op == "cpe_kernel")
    assert kernels == ["mean", "nn_max_pool2d"]


@pytest.mark.slow
def test_onnx_file_gives_the_same_tasks_as_torch(tmp_path):
    import torch

    module, inputs = build("alexnet", width=0.25)
    path = tmp_path / "alexnet.onnx"
    torch.onnx.export(module, inputs, str(path), dynamo=False, input_names=["x"])
    from_onnx = extract_onnx(path)
    from_torch = extract_torch(module, inputs)
    # expression tasks too: their keys hash the PrimFunc with its parameters renamed by position, not
    # after the importer's binding names
    assert [l.workload.key for l in from_onnx.layers] == [l.workload.key for l in from_torch.layers]
    assert any(l.workload.op == "expr" for l in from_onnx.layers)
    assert from_onnx.untuned["nn.relu"] == 7
