"""Configs the emulator shows wrong, pinned until the generator is fixed (strict xfail: the test fails
once they compute the right result, so the mark is removed with the fix).

Found by ``benchmarks/training.py`` (session 12): ResNet-18 at width 1/8 on 32x32 images trained wrong
after tuning; the culprit is layer4's stride-2 3x3 convolution on a 2x2 input (a 1x1 output) at the
config below. The result is right with ``put_lines`` 0, with ``inner`` ow, with ``simd`` 1 or with
``tile_k`` 1, so the suspect is the register-block micro-kernel's vector loads and stores of a
line-padded output tile (its row pitch padded from 1 to 32 elements) along k.
"""

from __future__ import annotations

import pytest

from tuner.backends.emulator_backend import EmulatorBackend
from tuner.measure.base import Status
from tuner.workloads import Conv2d

CONV = Conv2d(8, 32, 2, 2, 64, 3, 3, stride_h=2, stride_w=2, pad_h=1, pad_w=1)
WRONG = {"tile_n": 2, "tile_oh": 1, "tile_ow": 1, "tile_k": 32, "tile_c": 2, "grid": "8x8", "share": "mesh",
         "dma": "strided", "put_lines": 1, "db_a": 1, "db_b": 1, "db_c": 0, "tile_order": "row", "inner": "k",
         "simd": 4, "unroll": 32, "acc": "reg", "pack": "b"}


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="line-padded output tile with a k-vector register block: wrong result")
def test_line_padded_one_column_output_with_a_k_vector_register_block(tmp_path) -> None:
    result = EmulatorBackend(workdir=tmp_path).measure(CONV, "sw26010", [WRONG])[0]
    assert result.status == Status.OK, result.error


@pytest.mark.slow
def test_the_same_config_without_line_padding_is_right(tmp_path) -> None:
    result = EmulatorBackend(workdir=tmp_path).measure(CONV, "sw26010", [{**WRONG, "put_lines": 0}])[0]
    assert result.status == Status.OK, result.error
