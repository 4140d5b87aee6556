"""image.resize2d on the CPEs (tuner.aot.cpe_resize, issue #28): nearest and bilinear NCHW resizes as
torch's F.interpolate imports them, each compiled from a tiny torch model, run on the athread emulator
and checked against torch (nearest exactly; bilinear within 1e-5 in float32, 1e-12 in float64); each
runs on the CPEs (its row in the report) and the emulator's DMA counts equal the kernel's plan. At
U-Net sizes the time model puts them on the CPEs, and the U-Net family's MPE time goes with them."""

from __future__ import annotations

import re
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

# name -> (F.interpolate arguments, input shape)
CASES: dict[str, tuple[dict[str, Any], tuple[int, ...]]] = {
    "nearest_x2": ({"scale_factor": 2, "mode": "nearest"}, (2, 3, 6, 8)),
    "bilinear_x2": ({"scale_factor": 2, "mode": "bilinear", "align_corners": False}, (2, 3, 6, 8)),
    "bilinear_x2_corners": ({"scale_factor": 2, "mode": "bilinear", "align_corners": True}, (2, 3, 6, 8)),
    "bilinear_5x7_to_9x13": ({"size": (9, 13), "mode": "bilinear", "align_corners": False}, (1, 4, 5, 7)),
    "bilinear_5x7_to_9x13_corners": ({"size": (9, 13), "mode": "bilinear", "align_corners": True}, (1, 4, 5, 7)),
    "nearest_x3_one_plane": ({"scale_factor": 3, "mode": "nearest"}, (1, 1, 4, 5)),
}
TOL = {"float32": 1e-5, "float64": 1e-12}  # rtol = atol


class _Resize(torch.nn.Module):
    def __init__(self, kw: dict[str, Any]) -> None:
        super().__init__()
        self.kw = kw

    def forward(self, x: Any) -> Any:
        return torch.nn.functional.interpolate(x, **self.kw)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_resize_on_the_cpes_matches_torch_and_its_dma_plan(tmp_path: Path, name: str, dtype: str,
                                                           monkeypatch: Any) -> None:
    """The resize kernel made the only choice (offload would otherwise keep the faster of it and the
    generic sliced kernel of tuner.space.cpe)."""
    import tuner.aot.cpe_ops as cpe_ops
    from tuner.aot.cpe_resize import ResizeOp
    from tuner.bridge.extract import torch_to_relax

    monkeypatch.setattr(cpe_ops, "kernel_for", lambda *a: None)  # not the generic sliced kernel
    kw, shape = CASES[name]
    torch.manual_seed(3)
    x = torch.randn(*shape, dtype=getattr(torch, dtype))
    model = _Resize(kw).eval()
    result = compile_model(torch_to_relax(model, (x,)), TARGET, tmp_path / name, lambda w: None, cpe_mode="all")
    rows = [r for r in result.rows if r.relax_op == "image.resize2d"]
    assert rows and {r.where for r in rows} == {"CPE (memory-bound)"}, result.rows
    ops = [n.attrs["cpe"] for n in result.graph.nodes if n.op == "cpe"]
    assert len(ops) == 1 and isinstance(ops[0], ResizeOp), ops
    run = run_model(result.out_dir, [x.numpy()], TARGET, dtype=getattr(np, dtype))
    with torch.no_grad():
        ref = model(x).numpy()
    got = run.output.reshape(ref.shape)
    if kw["mode"] == "nearest":
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=TOL[dtype], atol=TOL[dtype])
    plan = ops[0].dma_plan()
    assert {k: run.report["totals"][k] for k in plan} == plan
    # the LDM it declares (but the reply word) is the LDM it accounts
    size = {"float": 4, "double": 8, "int": 4}
    ty = "float" if dtype == "float32" else "double"
    declared = sum(size[t] * int(n) for t, n in re.findall(r"__thread_local (\w+) \w+\[(\d+)\];",
                                                          ops[0].slave_text(ty)))
    assert declared == ops[0].ldm_bytes


def test_resize_semantics_match_torch_without_the_emulator() -> None:
    """The kernel's arithmetic (tuner.aot.cpe_resize.reference) against torch on more sizes and
    scales than the emulator runs: down- and upsampling, one row or column."""
    from tuner.aot.cpe_resize import reference, spec_of

    f = torch.nn.functional
    for (ih, iw), (oh, ow) in [((5, 7), (9, 13)), ((8, 8), (16, 16)), ((9, 13), (5, 7)), ((1, 6), (3, 12)),
                               ((6, 1), (12, 3)), ((4, 4), (1, 1)), ((3, 5), (3, 5))]:
        for corners in (False, True):
            x = torch.randn(1, 2, ih, iw, dtype=torch.float64)
            ref = f.interpolate(x, size=(oh, ow), mode="bilinear", align_corners=corners).numpy()
            spec = spec_of(("linear", "align_corners" if corners else "half_pixel", "round"))
            assert spec is not None
            np.testing.assert_allclose(reference(x.numpy(), spec, (oh, ow)), ref, rtol=1e-12, atol=1e-12)
    for s in (2, 3, 4):  # nearest at integer scales, as torch's importer gives it (half_pixel, round)
        x = torch.randn(1, 2, 5, 7)
        spec = spec_of(("nearest_neighbor", "half_pixel", "round"))
        assert spec is not None
        np.testing.assert_array_equal(reference(x.numpy(), spec, (5 * s, 7 * s)),
                                      f.interpolate(x, scale_factor=s, mode="nearest").numpy())


def _tvm_resize(x: np.ndarray, size: tuple[int, int], method: str, coord: str, rounding: str) -> np.ndarray:
    """Relax image.resize2d of ``x`` as TVM legalizes it, built for llvm and run."""
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    v = relax.Var("x", relax.TensorType(x.shape, str(x.dtype)))
    with bb.function("main", [v]):
        with bb.dataflow():
            y = bb.emit_output(bb.emit(relax.op.image.resize2d(
                v, size, layout="NCHW", method=method, coordinate_transformation_mode=coord,
                rounding_method=rounding)))
        bb.emit_func_output(y)
    vm = relax.VirtualMachine(tvm.compile(bb.get(), target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.slow
def test_resize_semantics_match_tvm_in_every_mode() -> None:
    """Every coordinate mode and rounding the kernel takes (ONNX imports use more of them than torch)
    against TVM's own legalized resize2d: nearest equal (on sizes where no coordinate is an exact tie,
    which TVM's float32 coordinates may round either way), bilinear within TVM's float32 coordinates'
    error. In float32: TVM's legalized resize of float64 data returns values rounded to float32."""
    from tuner.aot.cpe_resize import Coord, Rounding, reference, spec_of

    rng = np.random.default_rng(0)
    for (ih, iw), (oh, ow) in [((4, 6), (8, 12)), ((8, 12), (4, 6)), ((6, 9), (4, 5)), ((5, 7), (9, 13))]:
        x = rng.standard_normal((1, 2, ih, iw)).astype(np.float32)  # (TVM's float64 resize rounds through float32)
        for coord in Coord:
            roundings = [""] + [r.value for r in Rounding] if (ih, iw) != (5, 7) else []
            for method, rounding in [("linear", ""), *(("nearest_neighbor", r) for r in roundings)]:
                spec = spec_of((method, coord.value, rounding))
                assert spec is not None
                got = reference(x, spec, (oh, ow))
                want = _tvm_resize(x, (oh, ow), method, coord.value, rounding)
                np.testing.assert_allclose(got, want, rtol=0 if method != "linear" else 1e-5,
                                           atol=0 if method != "linear" else 1e-5,
                                           err_msg=f"{(ih, iw)} -> {(oh, ow)} {coord.value} {method} {rounding}")


def test_resizes_of_model_size_win_on_the_cpes() -> None:
    """At U-Net sizes the time model puts nearest and bilinear resizes on the CPEs (faster than the
    MPE by the streaming bound alone), every block within the LDM budget; a row too long for the LDM
    stays on the MPE."""
    from tuner.aot.cpe_resize import plan_resize
    from tuner.aot.launch_groups import phase_seconds
    from tuner.targets import get_target

    tgt = get_target(TARGET)
    for raw in [("nearest_neighbor", "half_pixel", "round"), ("linear", "half_pixel", "round"),
                ("linear", "align_corners", "round")]:
        for shape in [(1, 64, 8, 8), (1, 32, 16, 16), (1, 64, 56, 56), (1, 16, 112, 112)]:
            out = (*shape[:2], 2 * shape[2], 2 * shape[3])
            op = plan_resize(raw, shape, out, tgt, 4)
            assert op is not None, (raw, shape)
            assert op.ldm_bytes <= tgt.ldm_budget_bytes
            mpe = (int(np.prod(shape)) + int(np.prod(out))) * 4 / tgt.mpe_copy_Bps
            assert op.seconds + phase_seconds(tgt) < mpe, (raw, shape, op.seconds, mpe)
    assert plan_resize(("linear", "half_pixel", "round"), (1, 1, 4, 8000), (1, 1, 8, 16000), tgt, 4) is None
    assert plan_resize(("cubic", "half_pixel", "round"), (1, 1, 4, 4), (1, 1, 8, 8), tgt, 4) is None


@pytest.mark.slow
def test_unet_resizes_leave_the_mpe(tmp_path: Path) -> None:
    """The U-Net family compiled as tests/bridge_tests/test_model_families.py compiles it (untuned):
    both its resizes (bilinear, nearest) run on the CPEs, and the MPE's share of its simulated time,
    about 0.21 when they ran there, is below 0.02."""
    from tuner.bridge.extract import torch_to_relax
    from tuner.models.torch_models import build

    module, (x,) = build("unet", width=0.25, image=32)
    result = compile_model(torch_to_relax(module, (x,)), TARGET, tmp_path / "unet", lambda w: None)
    rows = [r for r in result.rows if r.relax_op == "image.resize2d"]
    assert len(rows) == 2 and {r.where for r in rows} == {"CPE (memory-bound)"}, rows
    assert result.timing is not None and result.timing.mpe_fraction < 0.02, result.timing.mpe_fraction
