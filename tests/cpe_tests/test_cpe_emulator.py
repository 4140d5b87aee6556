"""A memory-bound CPE kernel measured by the emulator backend (tuner.kinds.cpe_kernel.emulate): the one-operator
program at the config is built and run on swemu, checked against TVM llvm, and its DMA against the
analysis' plan; a config the space rejects is a result, not an exception."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from tvm import relax  # noqa: E402

from tuner.backends.emulator_backend import EmulatorBackend  # noqa: E402
from tuner.ir.relax_reader import read_relax  # noqa: E402
from tuner.measure.base import Status  # noqa: E402
from tuner.space.cpe.task import kernel_workload  # noqa: E402
from tuner.space.factory import space_for  # noqa: E402

TARGET = "sw26010"


def _layer_norm_task():
    x = relax.Var("x", relax.TensorType((2, 12, 64), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            g, b = relax.const(np.ones(64, "float32")), relax.const(np.zeros(64, "float32"))
            out = bb.emit_output(bb.emit(relax.op.nn.layer_norm(x, g, b, axes=[-1], epsilon=1e-5)))
        bb.emit_func_output(out)
    (node,) = [n for n in read_relax(bb.get(), "sw26010").nodes if n.op == "tir"]
    return kernel_workload(node, "float32")


@pytest.mark.slow
def test_emulator_measures_cpe_kernel_configs(tmp_path: Path) -> None:
    wl = _layer_norm_task()
    space = space_for(wl, TARGET)
    default = space.default_config()
    vector = {**default, "simd": 4, "db": 1 - default["db"]}
    bad = {**default, "block": 5}  # not a divisor of 12
    results = EmulatorBackend(workdir=tmp_path).measure(wl, TARGET, [default, vector, bad])
    for r in results[:2]:
        assert r.status is Status.OK, r.error
        assert r.details["dma_match"], r.details
        assert r.details["dma"]["get_reqs"] > 0
    assert results[2].status is Status.INVALID_CONFIG
