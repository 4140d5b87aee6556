"""Sunway target presets: every hardware figure the analysis and the simulator use, in one place.

Figures come from ../shared/sunway/FACTS.md; the tag after each says how sure it is:
[P] primary source, [S] secondary, [D] derived, [A] an assumption of ours where FACTS marks the
figure unverified (kept explicit so a later measurement can replace it). DMA parameters are fitted to
the calibration data by ``benchmarks/fit_dma.py`` and live in ``tuner.dma_model.FITTED``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from tuner.errors import NotBuiltYetError, UnknownTargetError

if TYPE_CHECKING:
    from tuner.dma_model import DmaParams


class Family(StrEnum):
    """Processor generation: decides the slave API (athread vs CRTS names) and the LDM size."""

    SW26010 = "sw26010"
    SW26010_PRO = "sw26010-pro"


class Toolchain(StrEnum):
    """Compiler of the generated C (FACTS §3): sw5cc (gcc 4.1-based) or swgcc."""

    SW5CC = "sw5cc"
    SWGCC = "swgcc"


class Sharing(StrEnum):
    """How CPEs share tiles over the mesh."""

    RLC = "rlc"  # register communication over row/column buses (SW26010)
    RMA = "rma"  # remote LDM access (SW26010-Pro)


@dataclass(frozen=True)
class SustainedDma:
    """A core group's sustained DMA service when all its CPEs issue (FACTS §2 fits): plateau bytes per
    CPE cycle and fixed service cycles per DMA block, per direction. The cost model's roofline prior
    (tuner/search/features.py) reads these, never the simulator's fitted DMA model."""

    get_bw: float
    get_block_cycles: float
    put_bw: float
    put_block_cycles: float


@dataclass(frozen=True)
class Target:
    """One core group of a Sunway processor (the unit a kernel is spawned on), or ``cgs`` of a chip's
    core groups used together (:func:`with_cgs`: named like ``sw26010-4cg``). Every per-CG figure below
    is one CG's; each CG has its own memory and memory controller, so a kernel split over ``cgs`` CGs
    runs each part at one CG's rates, and pays the cross-CG costs at the end of the list."""

    name: str
    description: str
    clock_hz: float  # CPE clock
    mesh_rows: int
    mesh_cols: int
    ldm_bytes: int  # physical LDM per CPE
    ldm_budget_bytes: int  # usable for tiles (stack, reply words and runtime take the rest)
    simd_widths: dict[str, tuple[int, ...]]  # vector lanes available per dtype (1 = scalar)
    family: Family
    toolchain: Toolchain
    mpe_clock_hz: float
    # --- the CPE's compute (tuner/space/compute.py): two in-order pipes, P0 floating point and
    # vector, P1 LDM load/store and integer, dual issue ---
    vector_registers: int  # architectural vector registers: accumulators + operands must fit
    vector_bits: int  # width of one vector register
    fp_latency_cycles: int  # dependent FMA latency: bounds short accumulator chains
    ldm_latency_cycles: int  # LDM load-to-use latency: an accumulator kept in LDM adds it per step
    loop_overhead_ops: float  # P1 (integer) ops per inner-loop iteration: counter, compare-branch, address
    block_overhead_cycles: float  # per register block: entering the reduction loop, pointer setup
    spill_ops_per_register: float  # P1 ops per iteration for each vector register beyond the file
    tile_overhead_cycles: float  # per output tile: loop setup, zeroing bookkeeping, reply waits
    spawn_join_s: float  # athread_spawn + athread_join
    mem_bandwidth_Bps: float  # theoretical DRAM bandwidth of the core group
    mpe_copy_Bps: float  # MPE memcpy rate, used for host-side padding of conv inputs
    sharing: Sharing  # how CPEs share tiles
    share_latency_cycles: float  # one register/RMA message, sender to receiver
    share_bytes_per_cycle: float  # row/column bus (RLC) or per-flow RMA bandwidth
    sustained_dma: SustainedDma  # measured DMA plateau and per-block service with 64 CPEs issuing
    dma_put_line_bytes: int = 128  # DRAM is accessed in whole lines
    # --- scalar C outside the tuned kernels (tuner.aot: MPE steps, memory-bound CPE kernels, fused
    # epilogues); all assumptions [A], not measured ---
    mpe_cycles_per_op: float = 1.0  # [A] MPE: one scalar instruction (load, store, arith) per cycle
    mpe_transcendental_cycles: float = 20.0  # [A] MPE: libm-style exp/erf/tanh/sqrt or a float division
    cpe_transcendental_cycles: float = 20.0  # [A] CPE: the same, scalar, in generated C
    cpe_sync_cycles: float = 1000.0  # [A] athread_ssync_array across the 64 CPEs (between spawn phases)
    # --- costs a simulator profile may set (tuner/profile.py); these defaults are the model as it was
    # before profiles: every FMA issues in one cycle, double-buffered DMA hides entirely under compute,
    # a DMA wait costs nothing beyond its transfer ---
    p0_cycles_per_fma: float = 1.0  # P0 cycles per vector FMA of the inner loop (tuner/space/compute.py)
    dma_overlap: float = 1.0  # fraction of double-buffered DMA under compute (tuner/measure/simulator.py)
    dma_wait_cycles: float = 0.0  # per DMA wait: each reduction step's gets, each tile's put
    # --- the chip: how many core groups it has and what using several costs. No published figure
    # gives any cross-CG cost (../shared/sunway/whole-chip-sources.md), so each is an assumption [A]
    # with bounds, a parameter of the simulator profile (tuner/profile.py) that calibration can fit ---
    cgs_per_chip: int = 1  # core groups on one chip
    cgs: int = 1  # core groups a kernel may be split over (1: the preset; with_cgs sets more)
    cross_bw_fraction: float = 0.5  # [A] a CG's DMA rate from another CG's memory, over its own
    cross_request_cycles: float = 200.0  # [A] CPE cycles a DMA request to another CG's memory adds
    cg_launch_s: float = 10e-6  # [A] starting and joining the other CGs of a split kernel, beyond one CG's
    cg_sync_s: float = 3e-6  # [A] a barrier across CGs between phases of one spawn (flags through memory)
    extra: dict[str, str] = field(default_factory=dict)  # provenance notes shown by `swtune targets`

    @property
    def base_name(self) -> str:
        """The preset this target is a core-group count of (its name without ``-Ncg``)."""
        return _CHIP_NAME.sub("", self.name)

    def require_one_cg(self, what: str) -> None:
        """Refuse to compile a whole program for ``cgs`` CGs: one split kernel is generated
        (tuner/codegen/schedule.py: rows and cols splits), but a program's shared spawns across CGs, its
        memory-bound CPE kernels over several CGs and its tensor placement are not, so a compiled program
        would not be the one the tuning timed."""
        if self.cgs > 1:
            raise NotBuiltYetError(f"{what} for {self.name}: one kernel split over {self.cgs} CGs is generated, "
                                   "a whole program (its shared spawns across CGs, CPE kernels over several "
                                   "CGs, tensor placement) is not; it can be tuned and timed on the simulator, "
                                   f"not yet compiled. Use target {self.base_name}.")

    @property
    def cpes(self) -> int:
        return self.mesh_rows * self.mesh_cols

    def max_simd(self, dtype: str) -> int:
        return max(self.simd_widths[dtype])

    def peak_flops_per_cpe_cycle(self, dtype: str) -> float:
        """One vector FMA per cycle on the floating-point pipe: 2 flops per lane."""
        return 2.0 * self.max_simd(dtype)

    def peak_flops(self, dtype: str) -> float:
        """Core-group peak in flop/s (CPEs only, as published peaks count them)."""
        return self.peak_flops_per_cpe_cycle(dtype) * self.clock_hz * self.cpes

    @property
    def dma(self) -> DmaParams:
        from tuner.dma_model import FITTED  # local: keeps targets import-light

        return FITTED[self.base_name]


SW26010 = Target(
    name="sw26010",
    description="SW26010 (Sunway TaihuLight), one core group: 1 MPE + 8x8 CPEs, 64 KB LDM",
    clock_hz=1.45e9,  # [S] Dongarra report
    mesh_rows=8,  # [P] 8x8 CPEs per CG
    mesh_cols=8,
    ldm_bytes=64 * 1024,  # [P] Dongarra report
    ldm_budget_bytes=56 * 1024,  # [P] swDNN kernels use 55296-57344 B
    # floatv4 has 4 lanes like doublev4, so SP peak = DP peak [D]
    simd_widths={"float32": (1, 4), "float64": (1, 4)},
    family=Family.SW26010,  # [P] FACTS §1a
    toolchain=Toolchain.SW5CC,  # [P] FACTS §3.1
    mpe_clock_hz=1.45e9,  # [S] Dongarra report: MPE and CPE at 1.45 GHz
    vector_registers=32,  # [A] FACTS gives no register count; 32 as in the issue and the SW64 ISA
    vector_bits=256,  # [P] simd.h doublev4/floatv4
    fp_latency_cycles=7,  # [S] Chips and Cheese (FACTS §1a, unverified against swCandle)
    ldm_latency_cycles=4,  # [S] Chips and Cheese (FACTS §1a)
    loop_overhead_ops=3.0,  # [A] counter update, compare-and-branch, one address update on P1
    block_overhead_cycles=6.0,  # [A] loop entry and pointer setup per register block
    spill_ops_per_register=2.0,  # [A] a spilled register is stored and reloaded every iteration
    tile_overhead_cycles=200.0,  # [A] loop setup and reply-word waits per tile
    spawn_join_s=30e-6,  # [D] swCandle BCAST minimum kernel time
    mem_bandwidth_Bps=34.1e9,  # [S] 136.51 GB/s per chip / 4
    mpe_copy_Bps=8e9,  # [A] MPE streaming copy through its caches
    sharing=Sharing.RLC,  # [P] swGEMM putr/putc
    cgs_per_chip=4,  # [P] Dongarra report: 4 CGs per chip
    # one host pthread per CG (swDNN's form): creating and joining 3 more threads, each spawning on its
    # CG, and swCaffe's flag handshake through CG 0
    cg_launch_s=15e-6,  # [A]
    share_latency_cycles=10.0,  # [A] FACTS 2.4: about 10 cycles is quoted but unverified
    share_bytes_per_cycle=32.0,  # [A] one 256-bit register per cycle per row/column bus (FACTS 2.4)
    # [D] FACTS §2.1 (swCandle PE_CONT, 64 CPEs, get+put pairs): T_pair = 4.33 us + 0.0061 us/B x S,
    # i.e. ~21 GB/s (14.5 B/cycle at 1.45 GHz) and 4.33 us x 1.45 GHz / 64 CPEs / 2 requests = 49 cycles
    sustained_dma=SustainedDma(get_bw=14.5, get_block_cycles=49.0, put_bw=14.5, put_block_cycles=49.0),  # [D]
    extra={"dgemm_reference": "88.7-95% of CG peak with RLC sharing (ICPP'17)"},
)

SW26010_PRO = Target(
    name="sw26010-pro",
    description="SW26010-Pro (new Sunway), one core group: 1 MPE + 8x8 CPEs, 256 KB LDM",
    clock_hz=2.25e9,  # [P] cpuinfo
    mesh_rows=8,  # [S] 8x8 CPEs per CG
    mesh_cols=8,
    ldm_bytes=256 * 1024,  # [S] C&C, Tom's HW; [P] swops ldm_malloc max 262144
    ldm_budget_bytes=210 * 1024,  # [P] swops: >220 KB faults, uses <= 210 KB
    # 512-bit SIMD: doublev8 and floatv8; doublev4/floatv4 also exist. FP32 = FP64 lanes [D][A]
    simd_widths={"float32": (1, 4, 8), "float64": (1, 4, 8)},
    family=Family.SW26010_PRO,  # [S] FACTS §1b (sw_test chip identity unverified)
    toolchain=Toolchain.SWGCC,  # [P] FACTS §3.2
    mpe_clock_hz=2.1e9,  # [P] sw_test cpuinfo
    vector_registers=32,  # [A] as SW26010
    vector_bits=512,  # [P] Pro simd.h doublev8/floatv8
    fp_latency_cycles=7,  # [A] carried over from SW26010
    ldm_latency_cycles=4,  # [A] carried over from SW26010
    loop_overhead_ops=3.0,  # [A]
    block_overhead_cycles=6.0,  # [A]
    spill_ops_per_register=2.0,  # [A]
    tile_overhead_cycles=200.0,  # [A]
    spawn_join_s=30e-6,  # [A] carried over from SW26010
    mem_bandwidth_Bps=51.2e9,  # [S] DDR4-3200 x 128 bit
    mpe_copy_Bps=12e9,  # [A]
    sharing=Sharing.RMA,  # [S] FACTS §1b: RMA replaces register communication
    cgs_per_chip=6,  # [S] FACTS §1b: 6 CGs per chip
    cg_launch_s=8e-6,  # [A] athread_spawn_cgs + athread_join_cgs beyond one CG's spawn and join
    share_latency_cycles=108.0,  # [P] sw_test RMA median one-way latency, 8 B
    share_bytes_per_cycle=24.5,  # [P] sw_test single-flow RMA bandwidth, 64 KiB
    # [D] FACTS §2.2 (sw_test, 64 CPEs): get 21.3 B/cycle, alpha 976 cycles / 64 = 15; put 16.0, 258 / 64 = 4
    sustained_dma=SustainedDma(get_bw=21.3, get_block_cycles=15.3, put_bw=16.0, put_block_cycles=4.0),  # [D]
    extra={"fp32_peak": "FP32 peak conflicting (27.6 vs 14.0 TF); we assume FP32 lanes = FP64 lanes"},
)

TARGETS: dict[str, Target] = {t.name: t for t in (SW26010, SW26010_PRO)}
_CHIP_NAME = re.compile(r"-(\d+)cg$")


def with_cgs(target: str | Target, cgs: int) -> Target:
    """The target with kernels split over ``cgs`` core groups (1 to the chip's count); named
    ``<preset>-<cgs>cg`` when more than one, so a tuning log keeps its records apart."""
    base = get_target(target)
    preset = TARGETS[base.base_name]
    if not isinstance(cgs, int) or isinstance(cgs, bool) or not 1 <= cgs <= preset.cgs_per_chip:
        raise UnknownTargetError(f"{preset.name} has {preset.cgs_per_chip} core groups per chip: "
                                 f"--cgs must be 1 to {preset.cgs_per_chip}, got {cgs}")
    name = preset.name if cgs == 1 else f"{preset.name}-{cgs}cg"
    return replace(base, name=name, cgs=cgs)


def get_target(target: str | Target) -> Target:
    """Resolve a preset name, or a preset's core-group count ``<preset>-<N>cg`` (or pass a Target through)."""
    if isinstance(target, Target):
        return target
    key = str(target).lower().replace("_", "-")
    chip = _CHIP_NAME.search(key)
    if chip:
        return with_cgs(get_target(key[: chip.start()]), int(chip.group(1)))
    if key in ("sw26010p", "sw26010pro"):
        key = "sw26010-pro"
    try:
        return TARGETS[key]
    except KeyError:
        raise UnknownTargetError(f"unknown target {target!r}; expected one of {sorted(TARGETS)}, "
                                 f"or one of them with '-<N>cg' for N core groups") from None
