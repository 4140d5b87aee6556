"""Parametric cost model of one DMA request on one Sunway core group (CG).

The model follows the physics summarised in ``FACTS.md`` §2.1, §2.2 and §2.5. Every term is in
CPE cycles of the target (1.45 GHz on SW26010, 2.25 GHz on SW26010-Pro).

A request is one athread DMA descriptor: ``n_blocks`` contiguous blocks of ``block_bytes`` each,
separated in main memory by ``gap_bytes`` (athread's stride is the *gap*, not the pitch), starting
``host_offset`` bytes past a 128-B line boundary. ``active_cpes`` CPEs issue such a request at the
same moment and each waits for its own (synchronous DMA). The time of the request is the longer of
two critical paths:

* **CPE path** (latency bound): the issuing CPE's DMA engine. A fixed issue-to-completion latency,
  a per-block cost for address generation, the lines moved at the engine's own bandwidth, and, for
  puts, stalls when a second write transaction hits a line whose read-modify-write is in flight.
* **CG path** (throughput bound): the memory controller serves the requests of all active CPEs one
  after another, so the last of them completes after ``active_cpes`` service times. One service is
  a per-request cost (the CG's request-rate cap), a per-block cost for gets, the lines moved at the
  CG bandwidth, and, for puts, the extra read of every partial-line write transaction.

Memory is accessed in whole 128-B lines: the bytes charged are the lines touched, so a 128-B block
at offset 4 costs two lines. A put transaction that does not cover its whole line needs a
read-modify-write (RMW). The DMA engine emits a fully covered line as one write; the touched part of
a partial line is cut at the 64-B sector boundary, and every such piece is a separate RMW. This
rule reproduces the measured oddities: a 64-B put at offset 4 (two pieces) costs twice a 32-B put at
offset 4 (one piece), and a 64-CPE 128-B put at offset 4 (three pieces) costs ~13x an aligned one.
For a lone CPE the first RMW is posted (free); a second piece in the same line waits for it.

Why max() and not a sum of the two paths: while the CG is busy with the other CPEs' requests, each
CPE's own latency elapses in parallel (a 64-CPE aligned 128-B put takes 533 cycles on the Pro, less
than the 240-cycle latency plus 64 line writes).

Strided descriptors (FACTS §2.1, swCandle PE_STEP): bandwidth is set by the contiguous block size,
not by the gap: 128-B blocks move ~5 GB/s per CG (get + put) with a 128-B, 512-B *or an 8-B* gap.
The first block of a descriptor is accounted exactly at its offset, like a request; every further
block like a line-aligned block of the same size plus ``block_cycles`` of CG service (and CPE
issue): the DMA engine merges the partial lines of neighbouring blocks (an 8-B gap measures within
5% of a 128-B one) but each block holds the memory controller about as long as a request does.
The fit puts ``block_cycles`` (~26 cycles on SW26010) above the per-request cost (~9-12): what makes
swCandle's separate 128-B requests 1.7x slower than strided blocks is their misaligned start (two
lines, partial-line writes), not the request; no aligned small-request data exists to say more.

Known limits (see ``benchmarks/fit_dma.py`` for the fit): no cross-CPE effects (DRAM row locality or
write combining when neighbouring CPEs touch the same lines), no read/write interference between
concurrent gets and puts, no DRAM bank/channel layout term (FACTS §2.2 reports +-20% from it).

The calibrated parameters live in :data:`FITTED`; ``python benchmarks/fit_dma.py`` re-derives them
from the measurement files with :func:`tuner.measure.calibration.fit`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

LINE_BYTES = 128  # main memory is read and written in 128-B lines (FACTS §1a "DMA memory granularity")
SECTOR_BYTES = 64  # a partial line is written in 64-B pieces (explains put 64 B @+4 = 2x put 32 B @+4)

OPS = ("get", "put")


@dataclass(frozen=True)
class DmaParams:
    """Model parameters of one target's core group, in CPE cycles and bytes per CPE cycle."""

    # --- CPE path: what a single CPE sees when the CG is idle ---
    get_latency: float  # cycles from issuing a one-line get to its reply (Pro: ~441 for any size <= 128 B)
    put_latency: float  # cycles for a one-line put to drain the LDM (Pro: ~240; DRAM write is posted)
    block_cycles: float  # CG service (and CPE issue) of each block after the first of a strided
    #                      descriptor, gets and puts, on top of its lines: a block costs the CG about
    #                      what a request does (FACTS §2.1); fitted to the swCandle PE_STEP points
    get_cpe_bw: float  # B/cycle one CPE's DMA engine sustains for gets (Pro: ~17.7 from large gets)
    put_cpe_bw: float  # B/cycle one CPE's DMA engine sustains for puts (Pro: ~18.7 from large puts)
    rmw_hazard_cycles: float  # CPE stall when a put's next write piece hits a line whose RMW is still
    #                           in flight (Pro 1 CPE: 64 B @+4 costs 366 cycles vs 240)

    # --- CG path: the shared memory controller serving all active CPEs in turn ---
    get_cg_bw: float  # B/cycle the CG delivers to readers (Pro: ~21.3 for 64 CPEs)
    put_cg_bw: float  # B/cycle the CG accepts from a single writer (Pro: peaks ~21 B/cycle at 4 CPEs)
    put_contention: float  # relative slowdown of a line write per extra concurrent writer: interleaved
    #                        write streams conflict in the DRAM rows (Pro: 64 CPEs drop to ~16 B/cycle)
    get_request_cycles: float  # CG cycles per get descriptor: the request-rate cap (Pro: 64 one-line
    #                            gets take 1150 cycles, i.e. ~18 cycles per request in all)
    put_request_cycles: float  # CG cycles per put descriptor (near 0: posted writes overlap the data)
    rmw_cycles: float  # extra CG cycles per partial-line write piece: the line is read, merged, written
    #                    back; this is what makes partial-line puts 4-12x slower under load
    misaligned_put_factor: float  # extra fraction of the line-write time for puts whose block start
    #                               is not line aligned: each line is merged from two LDM pieces

    def __post_init__(self) -> None:
        for name in ("get_latency", "put_latency", "get_cpe_bw", "put_cpe_bw", "get_cg_bw", "put_cg_bw"):
            if not getattr(self, name) > 0:
                raise ValueError(f"DmaParams.{name} must be > 0")
        for name in ("block_cycles", "rmw_hazard_cycles", "put_contention", "get_request_cycles",
                     "put_request_cycles", "rmw_cycles", "misaligned_put_factor"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"DmaParams.{name} must be >= 0")


_INV_LINE = 1.0 / LINE_BYTES  # exact (power of two): multiplying is faster than dividing
_INV_SECTOR = 1.0 / SECTOR_BYTES


# (lines, read-modify-write pieces, hazards, misaligned lines) of a block; the last three only for a put
_Counts = tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None]


def _block_counts(o: np.ndarray, b: np.ndarray, put: bool) -> _Counts:
    """Exact line accounting of one block of ``b`` bytes starting ``o`` (0..127) bytes into a line.

    Returns (lines touched, RMW write pieces, RMW hazards, misaligned lines); the last three only
    for a put (None for a get). All are float arrays holding whole numbers.
    """
    # in-place arithmetic: fresh 8-MB temporaries (page faults) dominate at 1e6 elements
    end = o + b
    t = end * _INV_LINE
    lines = np.ceil(t)
    if not put:
        return lines, None, None, None
    starts_mid_line = o > 0
    # lines fully covered: all but the partial ends (none for a block shorter than a line)
    full = np.floor(t, out=t)
    full -= starts_mid_line
    np.maximum(full, 0.0, out=full)
    sectors = np.multiply(end, _INV_SECTOR, out=end)
    np.ceil(sectors, out=sectors)
    sectors -= np.floor(o * _INV_SECTOR)
    rmw = sectors  # 64-B pieces of the partial lines: each one is a read-modify-write
    rmw -= full
    rmw -= full
    hazards = rmw - lines  # pieces beyond the first in the same partial line wait for it
    hazards += full
    misaligned = lines * starts_mid_line
    return lines, rmw, hazards, misaligned


def _check(name: str, value, positive: bool) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    ok = np.all(arr > 0) if positive else np.all(arr >= 0)  # comparisons are False for NaN
    if not ok:
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'}")
    return arr


_CHUNK = 16384  # elements per pass: the ~20 temporaries of one pass stay in L2 and are reused


def request_cycles(params: DmaParams, op: str, block_bytes, n_blocks=1, gap_bytes=0, active_cpes=64,
                   host_offset=0) -> np.ndarray:
    """CPE cycles of one DMA request issued simultaneously by ``active_cpes`` CPEs.

    ``op`` is "get" (main memory -> LDM) or "put" (LDM -> main memory). Numeric arguments broadcast
    as numpy arrays; the result is a float64 array of the broadcast shape (0-d for scalar inputs).
    ``gap_bytes`` is the gap between blocks in main memory (athread stride semantics), and
    ``host_offset`` the byte offset of the first block past a 128-B line boundary. Sizes that are
    not whole bytes are rounded up; ``n_blocks`` and ``active_cpes`` may be fractional (averages).
    """
    if op not in OPS:
        raise ValueError(f"unknown DMA op {op!r}; expected 'get' or 'put'")
    size = _check("block_bytes", block_bytes, positive=True)
    n = _check("n_blocks", n_blocks, positive=True)
    gap = _check("gap_bytes", gap_bytes, positive=False)
    cpes = _check("active_cpes", active_cpes, positive=True)
    offset = np.asarray(host_offset, dtype=float)
    if not np.all(np.isfinite(offset)):
        raise ValueError("host_offset must be finite")
    args = (size, n, gap, cpes, offset)
    shape = np.broadcast_shapes(*(a.shape for a in args))
    total = int(np.prod(shape))
    # Flat 1-d views (0-d inputs stay scalars and broadcast inside), processed in cache-sized
    # chunks: whole-array temporaries of 1e6 elements cost more in page faults than in arithmetic.
    flat = [a if a.ndim == 0 else np.broadcast_to(a, shape).reshape(-1) for a in args]
    out = np.empty(total)
    for lo in range(0, total, _CHUNK):
        part = [a if a.ndim == 0 else a[lo:lo + _CHUNK] for a in flat]
        out[lo:lo + _CHUNK] = _cycles(params, op == "put", *part)
    return out.reshape(shape)


def _block_service(params: DmaParams, put: bool, counts: _Counts,
                   cpes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(CPE-path cycles, CG service cycles) of one block with the given line accounting.

    Lines at the engine's or the CG's bandwidth, plus for puts the read-modify-write of partial
    lines; per-request and per-block costs are added by the caller.
    """
    lines, rmw, hazards, misaligned = counts
    if put:
        assert rmw is not None and hazards is not None and misaligned is not None  # counted for every put
        t_cpe = lines * (LINE_BYTES / params.put_cpe_bw)
        t_cpe += hazards * params.rmw_hazard_cycles
        # a put line costs more the more writers interleave in the DRAM rows
        line_write = (LINE_BYTES / params.put_cg_bw) * (1.0 + params.put_contention * (cpes - 1.0))
        data = misaligned * params.misaligned_put_factor
        data += lines
        data = data * line_write  # not in place: cpes may have a larger shape
        data += rmw * params.rmw_cycles
    else:
        t_cpe = lines * (LINE_BYTES / params.get_cpe_bw)
        data = lines * (LINE_BYTES / params.get_cg_bw)
    return t_cpe, data


def _cycles(params: DmaParams, put: bool, size: np.ndarray, n: np.ndarray, gap: np.ndarray, cpes: np.ndarray,
            offset: np.ndarray) -> np.ndarray:
    """:func:`request_cycles` on validated 1-d (or 0-d) arrays."""
    b = np.atleast_1d(np.ceil(size))  # 0-d arithmetic returns numpy scalars: no in-place updates
    o = np.rint(np.atleast_1d(offset))
    o -= LINE_BYTES * np.floor(o * _INV_LINE)  # offset mod 128 (np.mod is ~20x slower)

    first = _block_counts(o, b, put)
    t_cpe, service = _block_service(params, put, first, cpes)
    # Blocks after the first cost like a line-aligned block of the same size (module docstring).
    extra = n - 1.0
    if np.any(extra > 0):
        aligned = _block_counts(np.zeros_like(b), b.copy(), put)
        t_more, s_more = _block_service(params, put, aligned, cpes)
        t_cpe = t_cpe + extra * (t_more + params.block_cycles)  # not in place: n may be larger
        service = service + extra * (s_more + params.block_cycles)
    t_cpe = t_cpe + (params.put_latency if put else params.get_latency)
    service = service + (params.put_request_cycles if put else params.get_request_cycles)
    # the last of the simultaneous requests completes after all services; see module docstring
    return np.maximum(t_cpe, service * cpes)


# Fitted with `python benchmarks/fit_dma.py` (tuner.measure.calibration.fit; 4 significant digits) on
# tuner/measure/calibration_data/*.csv. Max relative bandwidth error over every calibration point:
# sw26010 0.150 (76 points: 52 contiguous, 24 strided), sw26010-pro 0.118 (112 points). For sw26010 the
# latencies, per-CPE bandwidths, hazard stall, put_contention and misaligned_put_factor are
# assumptions, not fits (see calibration._priors): its data has 64-CPE, core-group-bound points only.
# sw26010 block_cycles is fitted to the strided (PE_STEP) points; the Pro's is an assumption [A]
# (no strided Pro data): its measured ~18-cycle CG request rate.
FITTED_TARGETS = ("sw26010", "sw26010-pro")
# each parameter's fitted value per target, in FITTED_TARGETS' order: the source fitted_table() writes
_FITTED_VALUES: dict[str, tuple[float, float]] = {
    "get_latency": (287.4, 446.0),
    "put_latency": (150.2, 233.1),
    "block_cycles": (26.59, 18.0),
    "get_cpe_bw": (4.759, 16.92),
    "put_cpe_bw": (4.759, 18.39),
    "rmw_hazard_cycles": (89.32, 138.6),
    "get_cg_bw": (23.52, 21.46),
    "put_cg_bw": (16.46, 21.3),
    "put_contention": (0.006002, 0.006002),
    "get_request_cycles": (9.178, 12.28),
    "put_request_cycles": (11.83, 8.698e-16),
    "rmw_cycles": (19.61, 33.55),
    "misaligned_put_factor": (0.1336, 0.1336),
}
FITTED: dict[str, DmaParams] = {
    target: DmaParams(**{name: values[i] for name, values in _FITTED_VALUES.items()})
    for i, target in enumerate(FITTED_TARGETS)
}


def fitted_table(fits: Mapping[str, DmaParams]) -> str:
    """The source of the table ``_FITTED_VALUES`` holding ``fits`` (a DmaParams per target of
    FITTED_TARGETS): what a new fit is pasted as."""
    rows = [f'    "{f.name}": ({", ".join(repr(getattr(fits[t], f.name)) for t in FITTED_TARGETS)}),'
            for f in fields(DmaParams)]
    return "_FITTED_VALUES: dict[str, tuple[float, float]] = {\n" + "\n".join(rows) + "\n}\n"
