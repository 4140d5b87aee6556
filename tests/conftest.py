"""Shared fixtures: small workloads of every op."""

from __future__ import annotations

import pytest

from tuner.workloads import BatchMatmul, Conv2d, Dense

SMALL_WORKLOADS = {
    "dense": Dense(64, 96, 128, "float32"),
    "dense_f64": Dense(256, 256, 256, "float64"),
    "batch_matmul": BatchMatmul(4, 32, 48, 64, "float32"),
    "conv2d": Conv2d(1, 16, 14, 14, 32, 3, 3, pad_h=1, pad_w=1),
    "conv2d_strided": Conv2d(2, 8, 15, 15, 16, 3, 3, stride_h=2, stride_w=2, pad_h=1, pad_w=1),
    "depthwise": Conv2d(1, 32, 14, 14, 32, 3, 3, pad_h=1, pad_w=1, groups=32),
}


@pytest.fixture(params=sorted(SMALL_WORKLOADS))
def small_workload(request):
    return SMALL_WORKLOADS[request.param]
