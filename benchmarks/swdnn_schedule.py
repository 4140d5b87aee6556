"""swDNN's own conv schedule through the simulator's DMA model, against swDNN's measurements (issue #11).

    nice python benchmarks/swdnn_schedule.py [--efficiency 1.0] [--flat-gbps 22]

benchmarks/swdnn_population.py compares the *best* config our search finds with what swDNN measured on the
same shapes (0.75 vs 0.39 of 3.06 TF on the Ro=16 shapes) and reads the gap as the simulator flattering conv.
That compares two different schedules. This script asks the like-with-like question: what does the
simulator's cost model say about *swDNN's* schedule, the one perf.1 timed?

swDNN v12 (feifeibear/swDNN ``swCNNv12-4cg-opt-batch-size-aware/core_functions.c`` and ``test.c``, read, not
copied), per core group, with the batch innermost (B, Ni, Ci, Ri) and the 64 CPEs as an 8x8 grid:

- every CPE holds a B/8 x Ni/8 slice of one input pixel, a Ni/8 x No/8 x K slice of one kernel row and a
  B/8 x No/8 x Costride slice of the output; Costride output columns are what fits in 55 KB of LDM;
- for each output-column block and each of its Ro/4 output rows: zero the output block; for each kernel row
  (3): fetch the next row's 3 weight slices (asynchronous); for each input pixel of the block: fetch the
  next pixel (asynchronous), run the mesh GEMM (register communication over the 8x8 grid) for each of the
  up-to-3 output columns it feeds, then wait for the pixel; after the block, put the Costride output columns
  one by one, each waited on;
- its descriptors: an input pixel is Ni/8 blocks of B bytes, a weight slice No/8 blocks of Ni bytes, an
  output column No/8 blocks of B bytes (blocks 128-256 B, strided).

The loop above is replayed with one FIFO DMA queue (the 64 CPEs issue the same request at the same time, so
one request's time is :func:`tuner.dma_model.request_cycles` with 64 active CPEs) and a GEMM that
issues one vector FMA per cycle times ``--efficiency`` (swDNN's hand-written ``gemm.S`` is not public, so
the inner loop is a parameter). Two DMA hypotheses:

- ``model``: the simulator's fitted DMA model, which charges each 128-B block about what swCandle's
  PE_STEP measured (~5 GB/s per CG for 128-B blocks; there each CPE reads its own region and the gaps
  are read by nobody);
- ``flat``: the CG moves every request at ``--flat-gbps`` (default 22 GB/s: swDNN's own "Test Multiple
  DMA Read" in perf.1 measures 21.2-23.6 GB/s for the same input descriptor, all 64 CPEs reading the
  same addresses, so it is optimistic), plus the model's DMA latency.

Per hypothesis: the modelled fraction of 3.06 TF for each of the 43 Ro=16 shapes swDNN measured, its ratio
to the measurement, and the inner-loop efficiency that fits the measurements best (least squares on log
ratios); then the flat hypothesis with its bandwidth free too (``joint_fit``). None of these fits is a
hardware figure: they say which (DMA, inner loop) pairs swDNN's timings allow (docs/simulator_fidelity.md).
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import _common  # noqa: F401  (sets the import path)
import numpy as np
from _common import emit
from swdnn_population import CGS, CHIP_PEAK, SWDNN_MEASURED_RO16, chip_flops, costride

from tuner.dma_model import request_cycles
from tuner.targets import Target, get_target

K = 3
RO = 16  # the image size of the shapes swDNN's perf.1 measured and swdnn_population.py transcribed
SWDNN_DMA_TEST_GBPS = 22.0  # perf.1 "Test Multiple DMA Read": 21.2-23.6 GB/s (same-address 128-B blocks)
CPES = 64


class DmaHypothesis(StrEnum):
    """How one of swDNN's requests, issued by all 64 CPEs at once, is charged."""

    MODEL = "model"  # the simulator's fitted request model (tuner/dma_model.py)
    FLAT = "flat"  # a flat core-group bandwidth plus the model's latency


@dataclass(frozen=True)
class Requests:
    """Cycles of one request of each kind, all 64 CPEs issuing it together."""

    input_get: float
    weight_get: float
    output_put: float


def requests(target: Target, batch: int, ni: int, no: int, hypothesis: DmaHypothesis,
             flat_gbps: float = SWDNN_DMA_TEST_GBPS) -> Requests:
    """swDNN's three descriptors (module docstring) under one DMA hypothesis."""
    shapes = {"input_get": ("get", batch, ni // 8), "weight_get": ("get", ni, no // 8),
              "output_put": ("put", batch, no // 8)}
    out: dict[str, float] = {}
    for name, (op, block, blocks) in shapes.items():
        if hypothesis is DmaHypothesis.MODEL:
            out[name] = float(request_cycles(target.dma, op, block, n_blocks=blocks, active_cpes=CPES))
        else:
            latency = target.dma.get_latency if op == "get" else target.dma.put_latency
            bytes_per_cycle = flat_gbps * 1e9 / target.clock_hz
            out[name] = max(latency, CPES * block * blocks / bytes_per_cycle)
    return Requests(**out)


def cg_cycles(ro: int, batch: int, ni: int, no: int, req: Requests, efficiency: float) -> float:
    """Cycles of one core group running swDNN v12's loop nest on its Ro/4 output rows (module docstring)."""
    rows, co = ro // CGS, ro
    ci = co + K - 1
    stride = costride(batch, ni, no)
    gemm = (batch // 8) * (no // 8) * ni / 4 / efficiency  # vector FMAs of one mesh GEMM per CPE
    t = K * req.weight_get + req.input_get  # the first weights and pixel, waited on
    for co_start in range(0, co, stride):
        co_end = min(co_start + stride, co)
        ci_end = min(co_start + stride + K, ci)  # test.c/core_functions.c: CiEnd = CoStart + Costride + K
        width = co_end - co_start
        for _ in range(rows):
            t += batch * no * width / 256  # zero the output block: B/8 x No/8 x width doubles, 4 per store
            for _kr in range(K):
                queue = t + K * req.weight_get  # the next kernel row's weights go first in the queue
                for cci in range(co_start, ci_end):
                    start = max(t, queue)  # the next pixel's get, behind whatever is queued
                    queue = start + req.input_get
                    feeds = sum(1 for kc in range(K) if co_start <= cci - kc < co_end)
                    t = max(t + feeds * gemm, queue)  # compute, then wait for the next pixel
                t = max(t, queue)  # wait for the weights
            t += width * req.output_put  # each output column put and waited on
    return t


def fraction(target: Target, batch: int, ni: int, no: int, hypothesis: DmaHypothesis, efficiency: float,
             flat_gbps: float = SWDNN_DMA_TEST_GBPS) -> float:
    """Modelled full-chip fraction of 3.06 TF of swDNN's schedule on one Ro=16 shape (spawn+join included)."""
    req = requests(target, batch, ni, no, hypothesis, flat_gbps)
    seconds = cg_cycles(RO, batch, ni, no, req, efficiency) / target.clock_hz + target.spawn_join_s
    return chip_flops(RO, batch, ni, no) / seconds / CHIP_PEAK


def compare(hypothesis: DmaHypothesis, efficiency: float, flat_gbps: float = SWDNN_DMA_TEST_GBPS,
            target: Target | None = None) -> dict[str, float]:
    """Modelled vs measured over the 43 Ro=16 shapes: correlation, ratio range, rms of the log ratio."""
    tgt = target or get_target("sw26010")
    shapes = list(SWDNN_MEASURED_RO16)
    model = np.array([fraction(tgt, b, ni, no, hypothesis, efficiency, flat_gbps) for b, ni, no in shapes])
    measured = np.array([SWDNN_MEASURED_RO16[s] * 1e9 / CHIP_PEAK for s in shapes])
    ratio = model / measured
    return {"efficiency": efficiency, "model_mean": float(model.mean()), "measured_mean": float(measured.mean()),
            "correlation": float(np.corrcoef(model, measured)[0, 1]), "ratio_min": float(ratio.min()),
            "ratio_median": float(np.median(ratio)), "ratio_max": float(ratio.max()),
            "rms_log_ratio": float(np.sqrt(np.mean(np.log(ratio) ** 2)))}


def fit_efficiency(hypothesis: DmaHypothesis, flat_gbps: float = SWDNN_DMA_TEST_GBPS) -> dict[str, float]:
    """The inner-loop efficiency (0.30-1.00, step 0.01) with the smallest rms log ratio."""
    fits = [compare(hypothesis, e / 100, flat_gbps) for e in range(30, 101)]
    return min(fits, key=lambda f: f["rms_log_ratio"])


def joint_fit(gbps: tuple[float, ...] = (4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 25, 28)) -> dict[str, float]:
    """The (flat bandwidth, inner-loop efficiency) pair that fits the measurements best: the flat hypothesis
    with both unknowns free. The two trade off (a slower DMA leaves less for the inner loop to explain), and
    the Costride trend of the sweep is what separates them."""
    fits = [{**fit_efficiency(DmaHypothesis.FLAT, g), "flat_gbps": g} for g in gbps]
    return min(fits, key=lambda f: f["rms_log_ratio"])


def _rounded(figures: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--efficiency", type=float, default=1.0,
                        help="swDNN GEMM inner loop: vector FMAs issued per cycle (1 = every cycle)")
    parser.add_argument("--flat-gbps", type=float, default=SWDNN_DMA_TEST_GBPS,
                        help="core-group bandwidth of the flat DMA hypothesis")
    args = parser.parse_args()
    target = get_target("sw26010")
    def per_shape(h: DmaHypothesis) -> Callable[[int, int, int], float]:
        return lambda b, ni, no: fraction(target, b, ni, no, h, args.efficiency, args.flat_gbps)

    per = {h.value: per_shape(h) for h in DmaHypothesis}
    print(f"swDNN v12 schedule, Ro=Co=16, inner loop at {args.efficiency:.2f} FMA/cycle "
          f"(fractions of 3.06 TF; flat DMA at {args.flat_gbps:g} GB/s)")
    for (b, ni, no), gflops in SWDNN_MEASURED_RO16.items():
        measured = gflops * 1e9 / CHIP_PEAK
        cols = "  ".join(f"{name} {fn(b, ni, no):.3f}" for name, fn in per.items())
        print(f"B={b} Ni={ni:3d} No={no:3d} Costride={costride(b, ni, no):2d}: measured {measured:.3f}  {cols}")
    figures: dict[str, object] = {}
    for h in DmaHypothesis:
        at = _rounded(compare(h, args.efficiency, args.flat_gbps, target))
        fit = _rounded(fit_efficiency(h, args.flat_gbps))
        figures[h.value] = {"at_efficiency": at, "best_fit": fit}
        print(f"{h.value}: at {args.efficiency:.2f}: corr {at['correlation']}, model/measured "
              f"{at['ratio_min']}-{at['ratio_max']} (median {at['ratio_median']}); best fit: efficiency "
              f"{fit['efficiency']} (rms log ratio {fit['rms_log_ratio']}, median ratio {fit['ratio_median']})")
    joint = _rounded(joint_fit())
    print(f"joint fit (flat DMA, both free): {joint['flat_gbps']:g} GB/s and efficiency {joint['efficiency']} "
          f"(rms log ratio {joint['rms_log_ratio']}, model/measured {joint['ratio_min']}-{joint['ratio_max']})")
    fractions = [g * 1e9 / CHIP_PEAK for g in SWDNN_MEASURED_RO16.values()]
    emit({"joint_fit": joint, "shapes": len(SWDNN_MEASURED_RO16),
          "measured_mean": round(statistics.fmean(fractions), 4),
          "efficiency": args.efficiency, "flat_gbps": args.flat_gbps, "hypotheses": figures,
          "assumptions": [
              "swDNN v12 loop nest and descriptors from its core_functions.c/test.c; one FIFO DMA queue, "
              "all 64 CPEs issuing each request together",
              "swDNN's GEMM (hand-written gemm.S, not public) issues one vector FMA per cycle times efficiency",
              "4 CGs by output rows, chip time = one CG's time, 3.06 TF denominator (as swdnn_population.py)",
          ]})


if __name__ == "__main__":
    main()
