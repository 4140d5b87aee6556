"""Configs the emulator once showed wrong, kept as regression tests.

Found by ``benchmarks/training.py`` (session 12): ResNet-18 at width 1/8 on 32x32 images trained wrong
after tuning; the culprit was layer4's stride-2 3x3 convolution on a 2x2 input (a 1x1 output) at the
config below. With ``put_lines`` the output tile's rows are padded to whole lines in LDM, so a
one-column tile is strided along k (pitch 32), but the register-block micro-kernel took its trailing
unit dimensions as absent and loaded and stored k-vectors as if contiguous. The printer now gives the
vector loops the tile's LDM extents (``Printer.ldm_shape``) and the analysis charges the strided
output (``tuner/space/analysis.py`` ``_lines_padded``).
"""

from __future__ import annotations

import pytest

from tuner.backends.emulator_backend import EmulatorBackend
from tuner.measure.base import Status
from tuner.space import space_for
from tuner.workloads import Conv2d

CONV = Conv2d(8, 32, 2, 2, 64, 3, 3, stride_h=2, stride_w=2, pad_h=1, pad_w=1)
WRONG = {"tile_n": 2, "tile_oh": 1, "tile_ow": 1, "tile_k": 32, "tile_c": 2, "grid": "8x8", "share": "mesh",
         "dma": "strided", "put_lines": 1, "db_a": 1, "db_b": 1, "db_c": 0, "tile_order": "row", "inner": "k",
         "simd": 4, "unroll": 32, "acc": "reg", "pack": "b"}


@pytest.mark.slow
@pytest.mark.parametrize("put_lines", [1, 0])
def test_one_column_output_with_a_k_vector_register_block(tmp_path, put_lines: int) -> None:
    result = EmulatorBackend(workdir=tmp_path).measure(CONV, "sw26010", [{**WRONG, "put_lines": put_lines}])[0]
    assert result.status == Status.OK, result.error


def test_the_analysis_charges_the_line_padded_output_as_strided() -> None:
    """The model agrees with the C: with padded rows the k-vector accumulators move lane by lane."""
    space = space_for(CONV, "sw26010")
    cycles = {pl: space.analyze(space.encode({**WRONG, "put_lines": pl})[None, :]).compute.cycles[0]
              for pl in (0, 1)}
    assert cycles[1] > cycles[0]
