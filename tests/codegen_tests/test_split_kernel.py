"""benchmarks/split_kernel.py: the compute-only twin of a generated kernel (issue #11's hardware measurement)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from tuner.codegen.sources import generate
from tuner.measure.simulator import simulate
from tuner.space.factory import space_for
from tuner.targets import get_target
from tuner.workloads import Conv2d

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
CONV = Conv2d(4, 16, 10, 10, 16, 3, 3, dtype="float64")


def _split():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("split_kernel")


def _best_mesh_config(seed: int = 0) -> dict:
    """The model's best of a sample among configs sharing over the mesh (register communication runs too)."""
    space = space_for(CONV, get_target("sw26010"))
    rows = space.sample(3000, np.random.default_rng(seed))
    t = simulate(space, rows)
    for i in np.argsort(t):
        cfg = space.decode(rows[i])
        if np.isfinite(t[i]) and cfg["share"] == "mesh" and int(cfg["simd"]) > 1:
            return cfg
    raise AssertionError("no valid mesh-sharing SIMD config in the sample")


def test_twin_patches_only_under_its_define():
    split = _split()
    slave = generate(CONV, "sw26010", _best_mesh_config()).files["slave.c"]
    twin = split.compute_only_slave(slave)
    # everything the full kernel has is still there, the twin's parts sit under SWTUNE_COMPUTE_ONLY
    assert twin.count("#ifdef SWTUNE_COMPUTE_ONLY") == 2
    assert "memset(A_ldm, 0, sizeof A_ldm);" in twin
    assert "#define SW_GET(mem, ldm, len, bsize, gap, rp) (++*(rp))" in twin
    # without its two blocks the twin is the full kernel, byte for byte
    stripped = twin.replace(split.COMPUTE_ONLY_API, "")
    start = stripped.index("#ifdef SWTUNE_COMPUTE_ONLY")
    assert stripped[:start] + stripped[stripped.index("#endif\n", start) + len("#endif\n"):] == slave
    with pytest.raises(ValueError):
        split.compute_only_slave(slave.replace('#include "swtune_slave_api.h"\n', ""))


def test_model_splits_the_kernel_into_compute_and_dma():
    split = _split()
    space = space_for(CONV, get_target("sw26010"))
    m = split.model_figures(space, _best_mesh_config())
    dma = m["dma_not_hidden_s"]
    assert dma >= 0 and m["compute_only_s"] > 0
    # the full kernel is the compute-only kernel plus the DMA nothing hides
    assert m["full_kernel_s"] == pytest.approx(m["compute_only_s"] + dma, rel=1e-9)


@pytest.mark.slow
@pytest.mark.needs("gcc", "objcopy", "nm")
def test_twin_runs_with_no_dma_and_the_full_kernel_stays_right(tmp_path):
    split = _split()
    target = get_target("sw26010")
    src = generate(CONV, target, _best_mesh_config())
    full = src.write(tmp_path / "full")
    twin = src.write(tmp_path / "twin")
    (twin / "slave.c").write_text(split.compute_only_slave(src.files["slave.c"]))
    got_full = split.emulate(full, CONV, target, compute_only=False)
    assert got_full["returncode"] == 0 and not got_full["errors"] and got_full["matches_numpy"]
    assert got_full["dma"]["get_reqs"] > 0 and got_full["dma"]["put_reqs"] > 0
    got_twin = split.emulate(twin, CONV, target, compute_only=True)
    assert got_twin["returncode"] == 0 and not got_twin["errors"]
    assert got_twin["dma"] == {"get_reqs": 0, "get_bytes": 0, "put_reqs": 0, "put_bytes": 0}
