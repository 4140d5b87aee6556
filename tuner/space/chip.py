"""One kernel split over several core groups of a chip: the knobs, the per-CG share and the cross-CG plan.

A target with ``cgs`` > 1 (``tuner.targets.with_cgs``: ``sw26010-4cg``) adds three knobs to a schedule
space: ``cgs``, how many core groups the kernel uses (a small layer may run fastest on fewer); ``cg_split``,
what they divide (tuner.space.choices.CgSplit: row tiles, col tiles or the reduction); and ``cg_operands``,
where the operand every CG needs in full lives (CgOperands: a copy per CG, or one copy read across).

Each CG runs the one-CG schedule on its share, at its own memory's rates (each CG has its own memory
controller), so the analysis describes the busiest CG's kernel: its share of the split tiles, the rest as
on one CG. What splitting adds is charged here, each from a Target figure that is an assumption with
bounds (tuner/profile.py): launching and joining the other CGs (``cg_launch_s``); the operand read across
the chip, at ``cross_bw_fraction`` of a CG's own rate and no faster than its home controller serves all
the CGs reading it, plus ``cross_request_cycles`` per request; an activation replicated before each call
(weights are replicated once, when the model loads); and, for a split reduction, the pass that adds the
CGs' partial outputs. Where the split operand itself lives (each CG's slice in its own memory) is the
compiled program's placement; a kernel's time assumes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod

import numpy as np

from tuner.space.choices import CgOperands, CgSplit, Reason, Share
from tuner.space.cpe.schedule import CPES
from tuner.space.knobs import Knob
from tuner.space.ops import Dim
from tuner.targets import Target

CHIP_KNOBS = ("cgs", "cg_split", "cg_operands")


def one_cg_part(config: Mapping[str, object]) -> dict[str, object]:
    """The schedule each core group runs: a split config without its chip knobs (the same tiles, mesh
    and loops), a config of the preset's one-CG space."""
    return {k: v for k, v in config.items() if k not in CHIP_KNOBS}


def chip_knobs(target: Target) -> list[Knob]:
    """The split's knobs: none on a one-CG target, so its space and stored configs stay as they were;
    a one-CG config read in a chip space takes the defaults (1 CG), which lets old records seed it."""
    if target.cgs == 1:
        return []
    knobs = [
        Knob("cgs", tuple(range(1, target.cgs + 1)), default=1,
             doc=f"core groups the kernel is split over (1 to {target.cgs})"),
        Knob("cg_split", CgSplit.labels(), ordered=False, default=CgSplit.ROWS.label,
             doc="what the core groups divide: row tiles (batch, output rows, M), col tiles (output "
                 "channels, N) or the reduction (K; one more pass adds the partial outputs)"),
        Knob("cg_operands", CgOperands.labels(), ordered=False, default=CgOperands.REPLICATE.label,
             doc="the operand every core group needs in full: a copy in each CG's memory, or one copy "
                 "read across the chip"),
    ]
    assert tuple(k.name for k in knobs) == CHIP_KNOBS
    return knobs


@dataclass
class ChipPlan:
    """The split of each config: the busiest CG's share of the tiles and what crossing CGs costs."""

    cgs: np.ndarray  # core groups used
    split: np.ndarray  # CgSplit codes
    rows_total: np.ndarray  # row tiles of the busiest CG
    cols_total: np.ndarray  # col tiles of the busiest CG
    k_tiles: np.ndarray  # reduction tiles of the busiest CG
    red_share: np.ndarray  # its share of the reduction extent (1 unless the reduction is split)
    cross_a: np.ndarray  # group a read across CGs (every CG but its home reads it across)
    cross_b: np.ndarray
    replicate_bytes: np.ndarray  # activation bytes copied into each other CG before every call
    reduce_bytes: np.ndarray  # output bytes whose partial sums one more pass adds (split reduction)
    reason: np.ndarray  # Reason codes of configs the split makes invalid (OK elsewhere)

    @property
    def cross_bytes(self) -> np.ndarray:
        """Bytes one call moves between core groups beyond the kernel's own cross reads (which the
        analysis' DMA plan counts): replicated activations and the partial sums a split reduction reads."""
        others = self.cgs - 1
        return others * self.replicate_bytes + others / np.maximum(self.cgs, 1) * self.reduce_bytes


def plan_chip(v: Mapping[str, np.ndarray], n: int, rows_total: np.ndarray, cols_total: np.ndarray,
              k_tiles: np.ndarray, group_bytes: Mapping[str, float], b_constant: bool, out_bytes: float,
              has_epilogue: bool) -> ChipPlan:
    """The split of ``n`` configs (knob codes ``v``) of a kernel with the given whole-kernel tile counts,
    full bytes of each operand group ("a", "b") and of the output. Without the knobs: one CG."""
    one = np.ones(n)
    if "cgs" not in v:
        no = np.zeros(n, dtype=bool)
        zero = np.zeros(n)
        return ChipPlan(one, np.zeros(n, dtype=np.int64), rows_total, cols_total, k_tiles, one, no, no, zero, zero,
                        np.zeros(n, dtype=np.int64))
    cgs, split = v["cgs"].astype(np.float64), v["cg_split"].astype(np.int64)
    cross = v["cg_operands"] == CgOperands.CROSS
    several = cgs > 1
    rows, cols, red = (several & (split == s) for s in (CgSplit.ROWS, CgSplit.COLS, CgSplit.REDUCTION))
    split_tiles = np.select([rows, cols, red], [rows_total, cols_total, k_tiles], np.inf)
    cg_k_tiles = np.where(red, np.ceil(k_tiles / cgs), k_tiles)
    # the operand every CG needs in full: b (weights, B) when rows split, a (data, A) when cols split;
    # a split reduction slices both along K
    whole_a, whole_b = cols, rows
    copy_b = whole_b & ~cross & (not b_constant)  # constant weights are copied once, when the model loads
    replicate = (np.where(whole_a & ~cross, group_bytes.get("a", 0.0), 0.0)
                 + np.where(copy_b, group_bytes.get("b", 0.0), 0.0))
    reason = np.zeros(n, dtype=np.int64)
    reason[split_tiles < cgs] = int(Reason.CG_SPLIT_FEWER_TILES_THAN_CGS)  # a CG with nothing to do
    # one CG: every split and placement mean the same kernel, and a split reduction has no operand every
    # CG needs in full: a single config stands for each such kernel
    reason[(~several & (split != CgSplit.ROWS)) | ((~several | red) & cross)] = int(Reason.CG_KNOB_WITHOUT_EFFECT)
    if has_epilogue:  # the fused residual belongs after the partial sums are added
        reason[red] = int(Reason.CG_REDUCTION_WITH_EPILOGUE)
    if "share" in v:  # k tiles handed round the mesh: a CG's share of k is not generated (codegen/schedule.py)
        reason[red & (v["share"] == Share.MESH)] = int(Reason.CG_REDUCTION_WITH_MESH)
    return ChipPlan(
        cgs=cgs, split=split,
        rows_total=np.where(rows, np.ceil(rows_total / cgs), rows_total),
        cols_total=np.where(cols, np.ceil(cols_total / cgs), cols_total),
        k_tiles=cg_k_tiles, red_share=np.where(red, cg_k_tiles / np.maximum(k_tiles, 1.0), 1.0),
        cross_a=whole_a & cross, cross_b=whole_b & cross,
        replicate_bytes=replicate, reduce_bytes=np.where(red, out_bytes, 0.0), reason=reason,
    )


def tensor_bytes(box: list[Dim], dtype_bytes: int) -> float:
    """Bytes of the whole tensor an operand's box tiles."""
    return float(prod(d.extent for d in box) * dtype_bytes)


def cross_factor(target: Target, cgs: np.ndarray) -> np.ndarray:
    """How much longer a transfer from another CG's memory takes than from one's own: the cross path's
    rate, and the home controller serving every CG that reads the operand."""
    return np.maximum(1.0 / target.cross_bw_fraction, cgs)


def chip_seconds(target: Target, plan: ChipPlan) -> np.ndarray:
    """What splitting adds to a kernel beyond its busiest CG's share: launching the other CGs, copying
    the replicated activation in before the call, and a split reduction's pass over the partial sums
    (another launch; each CG adds its slice of the output, reading the other CGs' partials across)."""
    several = plan.cgs > 1
    rate = target.sustained_dma.get_bw * target.clock_hz  # one CG's streaming rate, bytes per second
    factor = cross_factor(target, plan.cgs)
    others = np.maximum(plan.cgs - 1.0, 0.0)
    launch = np.where(several, target.cg_launch_s, 0.0)
    replicate = plan.replicate_bytes * np.maximum(factor, others) / rate
    slice_bytes = plan.reduce_bytes / np.maximum(plan.cgs, 1.0)
    reduce = np.where(plan.reduce_bytes > 0,
                      target.spawn_join_s + target.cg_launch_s + slice_bytes * (2.0 + others * factor) / rate, 0.0)
    return launch + replicate + reduce


def chip_seeds(one_cg_config: Mapping[str, object], cgs: int) -> list[dict[str, object]]:
    """Configs of a chip space that a one-CG record starts the search from: the record itself (one CG,
    the same kernel and time) and its tiles split over all ``cgs`` CGs each way (the space keeps the
    valid ones: tuner.search.base.SearchStrategy.queue_seeds)."""
    base = one_cg_part(one_cg_config)
    seeds: list[dict[str, object]] = [dict(base)]
    if cgs > 1:
        seeds += [{**base, "cgs": cgs, "cg_split": split.label, "cg_operands": CgOperands.REPLICATE.label}
                  for split in CgSplit]
    return seeds


def seed_target(target: Target) -> str | None:
    """The target whose best records start a search on ``target``: a chip target's preset (a tuning log
    from before the split holds one-CG records of its workloads), or None for a one-CG target, whose
    own records are its log."""
    return target.base_name if target.cgs > 1 else None


def task_seeds(target: Target, records: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """The configs a search on ``target`` starts from, given the configs of its ``seed_target``'s best
    records: each record's ``chip_seeds``, in order (the strategy queues each valid new one once:
    tuner.search.base.SearchStrategy.queue_start)."""
    return [seed for record in records for seed in chip_seeds(record, target.cgs)]


def split_label(config: Mapping[str, object]) -> str:
    """How a tuned config uses the chip, for reports: "4 CGs, cols" for a split GEMM-like kernel, "4 CGs"
    for a memory-bound CPE kernel whose blocks spread over 4 CGs' CPEs (its ``active`` above 64), else
    "1 CG"."""
    cgs = config.get("cgs", 1)
    if isinstance(cgs, int) and cgs > 1:
        return f"{cgs} CGs, {config.get('cg_split', CgSplit.ROWS.label)}"
    active = config.get("active")
    if isinstance(active, int) and active > CPES:
        return f"{-(-active // CPES)} CGs"
    return "1 CG"
