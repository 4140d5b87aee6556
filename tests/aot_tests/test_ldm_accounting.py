"""The LDM a compiled model's fused-epilogue kernel allocates is the LDM the analysis charges.

Regression of mobilenet_v2 on sw26010 (model_coverage): a tuned 1x1 projection conv (480 -> 160
channels on a 3x3 map) with a fused batch-norm overflowed LDM on the emulator although
``ScheduleSpace.analyze`` said 54120 B. The generated slave held a repacked copy of the weights
(``B_pk``) the analysis does not charge: the codegen took the weights' lanes along c as strided
because c is not their last index, though the 1x1 kernel's trailing r, s have extent 1 (the
analysis reads them as contiguous); and a repacked copy was padded to whole vectors (5 -> 8 k rows)
beyond the box the analysis charges. The fused epilogue's channel vectors (at most
tuner.aot.fusion.VECTOR_BYTES) come on top and must still fit the physical LDM.

Each kernel's LDM struct in the model's slave.c is read back: its tile buffers (``*_ldm``, ``*_pk``,
``C_buf``) must sum to the analysis' ldm_total, the whole struct must be that plus the epilogue
vectors and a few hundred bytes of descriptors and reply words; then the model runs on swemu.
"""

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
from tuner.space.space import ScheduleSpace  # noqa: E402

TARGET = "sw26010"
KEY = "conv2d-n1-c480-h3-w3-k160-r1-s1-stride_h1-stride_w1-pad_h0-pad_w0-dil_h1-dil_w1-groups1-float32"
# the config (inner c: data and weights both read along the reduction)
BASE = dict(tile_n=1, tile_oh=3, tile_ow=3, tile_k=5, tile_c=480, grid="1x8", share="bcast", dma="strided",
            put_lines=0, db_a=0, db_b=1, db_c=1, tile_order="row", simd=4, unroll=1, acc="ldm", pack="b")
SIZES = {"float": 4, "double": 8, "long": 8, "int": 4, "SW_REPLY_T": 4}
_FIELD = re.compile(r"^\s*(?:volatile\s+)?(\w+)\s+(.*);\s*$")
TILE = re.compile(r"^(?:[A-Z]\d*_(?:ldm|pk)|C_buf)$")  # a tile copy (the rest: descriptors, replies, vectors)

pytestmark = pytest.mark.needs("gcc", "make")


def struct_fields(slave: str, name: str) -> dict[str, int]:
    """Bytes of each member of kernel ``name``'s LDM struct in a model's slave.c."""
    body = re.search(rf"struct {name}_ldm {{\n(.*?)\n}};", slave, re.S)
    assert body is not None, f"no LDM struct of {name}"
    out: dict[str, int] = {}
    for line in body.group(1).splitlines():
        m = _FIELD.match(re.sub(r"\s*__attribute__\(\(.*?\)\)", "", line))
        assert m is not None, line
        for decl in m.group(2).split(","):
            ident = re.match(r"\s*(\w+)", decl).group(1)  # type: ignore[union-attr]
            elems = int(np.prod([int(d) for d in re.findall(r"\[(\d+)\]", decl)]))
            out[ident] = elems * SIZES[m.group(1)]
    return out


def _model() -> tuple[Any, Any]:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(480, 160, 1, bias=False)
    bn = torch.nn.BatchNorm2d(160)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    return torch.nn.Sequential(conv, bn).eval(), torch.randn(1, 480, 3, 3)


@pytest.mark.slow
@pytest.mark.parametrize("inner", ["c", "k"])
def test_fused_kernel_ldm_is_the_analysis(inner: str, tmp_path: Path) -> None:
    from tuner.aot.fusion import VECTOR_BYTES
    from tuner.targets import get_target

    config = dict(BASE, inner=inner)
    module, x = _model()

    def lookup(workload: Any) -> dict[str, Any] | None:
        return dict(config) if workload.key == KEY else None

    result = compile_model(module, TARGET, tmp_path / "m", lookup, example_inputs=(x,))
    kernels = [k for k in result.kernels if k.workload.key == KEY]
    assert len(kernels) == 1 and kernels[0].tuned
    k = kernels[0]
    assert k.epilogue is not None and sum(k.epilogue.vectors) == 2 * 160  # batch-norm: scale and shift
    space = ScheduleSpace(k.workload, TARGET)
    a = space.analyze(space.encode(config)[None])
    assert a.valid[0]
    charged = int(a.ldm_total[0])
    fields = struct_fields((result.out_dir / "slave.c").read_text(), k.name)
    tiles = {n: b for n, b in fields.items() if TILE.match(n)}
    # every tile copy the C holds is one the analysis charges, and no more
    assert sum(tiles.values()) == charged, (tiles, charged)
    vectors = sum(b for n, b in fields.items() if re.fullmatch(r"_ev\d+", n))
    assert vectors == 2 * 160 * 4 <= VECTOR_BYTES
    other = sum(fields.values()) - sum(tiles.values()) - vectors
    assert 0 < other < 512, fields  # descriptors and reply words
    assert sum(fields.values()) <= get_target(TARGET).ldm_bytes
    run = run_model(result.out_dir, [x.numpy()], TARGET)
    assert run.report["status"] == "ok" and not run.report["errors"]
    with torch.no_grad():
        ref = module(x).numpy().ravel()
    np.testing.assert_allclose(run.output, ref, rtol=1e-3, atol=1e-4 * float(np.abs(ref).max()))
