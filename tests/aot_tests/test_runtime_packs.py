"""A packed operand that is not a constant (a weight training updates) is packed before each call:
by the MPE's loop nest or, where the placement says so, by a CPE transpose kernel; a runtime
transpose feeding the pack (dense reads weight[N, K]; ``x @ w`` hands it w[K, N]) is composed
into the same one permutation. Checked against numpy on swemu."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from emulator_helpers import run_model  # noqa: E402

from tuner.aot import compile_model  # noqa: E402
from tuner.aot.kernels import TilePack  # noqa: E402
from tuner.space.factory import space_for  # noqa: E402
from tuner.targets import get_target  # noqa: E402

TARGET = "sw26010"
pytestmark = pytest.mark.needs("gcc", "make")


def _matmul(m: int, k: int, n: int) -> tuple[object, list[np.ndarray], np.ndarray]:
    from tvm import relax

    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype("float32")
    w = rng.standard_normal((k, n)).astype("float32")
    bb = relax.BlockBuilder()
    px = relax.Var("x", relax.TensorType(x.shape, "float32"))
    pw = relax.Var("w", relax.TensorType(w.shape, "float32"))
    with bb.function("main", [px, pw]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.matmul(px, pw)))
        bb.emit_func_output(out)
    return bb.get(), [x, w], x @ w


def test_a_pack_that_moves_nothing_is_no_step(tmp_path: Path) -> None:
    """w^T[N, K] packed in tiles of whole columns [N, 1] is w[K, N]: the kernel reads w itself."""
    from tuner.bridge.extract import extract_relax
    from tuner.workloads import Dense

    mod, inputs, ref = _matmul(8, 64, 32)
    (layer,) = [la for la in extract_relax(mod).layers if isinstance(la.workload, Dense)]
    space = space_for(layer.workload, get_target(TARGET), {"pack": ["b"]})
    config = next(c for c in map(space.decode, space.sample(256, rng=5)) if c["tile_n"] == 32 and c["tile_k"] == 1)
    result = compile_model(mod, TARGET, tmp_path / "m", lambda w: config if w.key == layer.workload.key else None,
                           name="mm", cpe_mode="none")
    assert result.kernels[0].packs  # the kernel reads a packed b ...
    assert [n.op for n in result.graph.nodes] == ["kernel"]  # ... which is w: no pack, no transpose
    np.testing.assert_allclose(run_model(result.out_dir, inputs, TARGET).output, ref.ravel(), rtol=1e-4, atol=1e-4)


def test_a_tile_pack_is_the_transpose_of_its_split_axes() -> None:
    pack = TilePack((6, 8), (3, 4))
    shape, axes = pack.as_transpose()
    a = np.arange(48)
    packed = np.empty(48, dtype=a.dtype)
    packed[pack.order] = a
    np.testing.assert_array_equal(packed, a.reshape(shape).transpose(axes).ravel())


@pytest.mark.parametrize("cpe_mode", ["none", "all"])
def test_a_runtime_weight_is_packed_with_its_transpose_in_one_step(tmp_path: Path, cpe_mode: str) -> None:
    from tuner.bridge.extract import extract_relax
    from tuner.workloads import Dense

    mod, inputs, ref = _matmul(8, 64, 32)
    (layer,) = [la for la in extract_relax(mod).layers if isinstance(la.workload, Dense)]
    space = space_for(layer.workload, get_target(TARGET), {"pack": ["b"]})
    # tiles narrower than the operand both ways: a real permutation (whole rows would be w as it is)
    config = next(c for c in map(space.decode, space.sample(64, rng=5)) if c["tile_n"] < 32 and c["tile_k"] < 64)
    result = compile_model(mod, TARGET, tmp_path / "m", lambda w: config if w.key == layer.workload.key else None,
                           name="mm", cpe_mode=cpe_mode)
    nodes = result.graph.nodes
    packs = [n for n in nodes if n.op == "pack_b" or n.attrs.get("mpe_op") == "pack_b"]
    assert len(packs) == 1 and packs[0].inputs[0].name == "w"  # w itself, not its transposed copy
    assert not [n for n in nodes if n.op == "transpose" or n.attrs.get("mpe_op") == "transpose"]
    assert packs[0].op == ("cpe" if cpe_mode == "all" else "pack_b")
    got = run_model(result.out_dir, inputs, TARGET).output
    np.testing.assert_allclose(got, ref.ravel(), rtol=1e-4, atol=1e-4)
