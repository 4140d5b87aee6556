"""Search efficiency against the strong reference: trials to 95% of the optimum, ours vs random vs peers.

    python benchmarks/search_efficiency.py [--quick] [--seeds 5] [--peer-seeds optuna_tpe=5,smac=1,...]
        [--variants plain,perturbed] [--methods ours,ours_transfer,random,PEER...] [--ours-options JSON]
        [--cache benchmarks/data/search_runs.jsonl] [--reference benchmarks/data/reference.json] [--jobs 2]

Resumable and splittable: every finished run is a JSON line in ``--cache`` (``run_cache.py``: keyed by
method, variant, workload, seed, cap, noise, reference fingerprint and the method's code), so pieces
run by separate processes, e.g. ``--methods ours,ours_transfer,random`` and ``--methods smac,skopt_et
--peer-seeds smac=1,skopt_et=1``, merge: each process reuses what is stored, and its summary covers
every stored run of the same settings (seeds and runs per method are reported; slow peers run fewer
seeds, never a lower cap). An interrupted run continues where it stopped.

Suite: see ``workload_suite``. Reference optimum: ``reference.py`` (exhaustive, or a 200k sample
hill-climbed from its 50 best, refreshed by any run that measures better), per variant. Every method
measures through ``objective.TrialLog`` with the same trial cap (``CAP``): repeats are answered from
the log and invalid proposals are refused, neither costs a trial; measurements carry lognormal noise
(``objective.NOISE``) and a run is scored on the *true* time of the config it would report (its best
measured one). A run that has not reached 95% by the cap is censored and counts as cap + 1 (this can
only understate what that method needs). Ours runs the whole cap (for ``final_fraction_at_1000``);
the others stop at 95%. Random search: the median of the geometric distribution whose success
probability is the share of a 200,000-config sample within 95% (its exact behaviour, without a cap);
runs of it at the cap are reported as well. Ours with transfer: a base model trained on ours' histories
of the *other* workloads of the same target. Variant ``perturbed``: the simulator times a hidden factor
per config (``objective.mismatch_factor``). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import _common  # noqa: F401
import numpy as np
import reference
from _common import emit
from objective import NOISE, Objective, TrialLog, Variant
from peers import PEERS, run_peer
from run_cache import RunCache, code_fingerprint, equivalent_codes, parse_key, restamp_code, run_key
from workload_suite import suite

from cost_model import XGBoostCostModel
from tuner.measure.base import OK, MeasureResult
from tuner.models import model_layers
from tuner.search import create_strategy
from tuner.search.transfer import History, base_model
from tuner.space import ScheduleSpace
from tuner.space.factory import space_for

TARGET_FRACTION = 0.95
CAP = 1000
RANDOM_SAMPLE = 200_000
BATCH = 16  # ours: proposals per round
DEFAULT_PEER_SEEDS = {"optuna_tpe": 5, "nevergrad_de": 5, "skopt_et": 1, "smac": 1}  # the slow ones run fewer


def trials_to(curve: list[float], goal: float, cap: int | None = None) -> int:
    cap = CAP if cap is None else cap
    for i, best in enumerate(curve):
        if best <= goal:
            return i + 1
    return cap + 1  # censored: never reached within the cap


def run_ours(space: ScheduleSpace, variant: Variant, seed: int, goal: float, full: bool, base=None,
             options: dict[str, Any] | None = None) -> tuple[TrialLog, Any]:
    """Our model-guided search through the trial log; ``full`` runs the whole cap."""
    log = TrialLog(Objective(space, variant, seed=seed), CAP, goal=0.0 if full else goal)
    search = create_strategy("model", space, seed=seed, base_model=base, **(options or {}))
    while not log.done:
        configs = search.ask(min(BATCH, CAP - len(log.curve)))
        if not configs:
            break
        rows = np.stack([space.encode(c) for c in configs])
        seconds = log.evaluate(rows)
        search.tell(configs, [MeasureResult(config=c, status=OK, times=(float(s),)) if math.isfinite(s)
                              else MeasureResult(config=c, status="invalid_config", error="invalid")
                              for c, s in zip(configs, seconds)])
    return log, search


def run_random(space: ScheduleSpace, variant: Variant, seed: int, goal: float) -> TrialLog:
    log = TrialLog(Objective(space, variant, seed=seed), CAP, goal=goal)
    search = create_strategy("random", space, seed=seed)
    while not log.done:
        configs = search.ask(256)
        if not configs:
            break
        log.evaluate(np.stack([space.encode(c) for c in configs]))
    return log


def random_median_trials(space: ScheduleSpace, variant: Variant, goal: float) -> tuple[float, bool]:
    """Median trials of uniform random search to reach ``goal`` (and whether it is a lower bound)."""
    rows = space.sample(RANDOM_SAMPLE, np.random.default_rng(777))
    hits = int((Objective(space, variant, noise=0.0).true(rows) <= goal).sum())
    if hits == 0:  # none in the sample: the median is at least the one of a 1-in-(sample+1) hit rate
        return math.log(2) * (len(rows) + 1), True
    p = hits / len(rows)
    return float(max(1, math.ceil(math.log(0.5) / math.log1p(-p)))), False


# method, variant, workload index, seed, goal, ours options, base model (transfer)
Job = tuple[str, Variant, int, int, float, dict, Any]


def run_job(job: Job) -> dict[str, Any]:
    method, variant, i, seed, goal, options, base = job
    target, workload = suite(bool(QUICK))[i]
    space = space_for(workload, target)
    began = time.perf_counter()
    out: dict[str, Any] = {"method": method, "variant": variant, "i": i, "seed": seed}
    if method == "ours":
        log, search = run_ours(space, variant, seed, goal, full=True, options=options)
        out["history"] = (np.stack(search.measured_index).tolist(), [float(t) for t in search.measured_time])
    elif method == "ours_transfer":
        log, _ = run_ours(space, variant, seed, goal, full=False, base=base, options=options)
    elif method == "random":
        log = run_random(space, variant, seed, goal)
    else:
        log = run_peer(method, space, seed, TrialLog(Objective(space, variant, seed=seed), CAP, goal=goal))
    out.update(curve=log.curve, best_true=log.best_true_seen,
               best_row=None if log.best_true_row is None else log.best_true_row.tolist(),
               repeats=log.repeats, invalid=log.invalid, seconds=time.perf_counter() - began)
    return out


QUICK: bool | None = None  # set in each worker process by _init


def _init(quick: bool) -> None:
    global QUICK
    QUICK = quick


def round_time(seed: int = 0) -> float:
    """One round of 64 proposals from a 5,000-record history, retraining included (median of 3)."""
    layer = model_layers("resnet18", 1)[2]
    space = space_for(layer.workload, "sw26010")
    rows = space.sample(5000, np.random.default_rng(seed))
    seconds = Objective(space).measure(rows)
    configs = [space.decode(r) for r in rows]
    results = [MeasureResult(config=c, status=OK, times=(float(s),)) for c, s in zip(configs, seconds)]
    durations = []
    for rep in range(3):
        search = create_strategy("model", space, seed=rep)
        search.tell(configs, results)  # not proposed by it: recorded as measured all the same
        start = time.perf_counter()
        proposals = search.ask(64)
        durations.append(time.perf_counter() - start)
        assert len(proposals) == 64
    return statistics.median(durations)


def plot(curves: dict[Variant, dict[str, list[np.ndarray]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(7 * len(curves), 5), squeeze=False)
    for ax, (variant, by_method) in zip(axes[0], curves.items()):
        for method, runs in by_method.items():
            if not runs:
                continue
            grid = np.full((len(runs), CAP), np.nan)
            for k, r in enumerate(runs):
                grid[k, : len(r)] = r[:CAP]
                grid[k, len(r):] = r[-1]  # runs that stop at the goal hold their final value
            ax.plot(np.arange(1, CAP + 1), np.nanmedian(grid, axis=0), label=f"{method} ({len(runs)} runs)")
        ax.set_xscale("log")
        ax.set_xlabel("trials (repeats and invalid proposals free)")
        ax.set_ylabel("best throughput / strong reference (median of runs)")
        ax.axhline(TARGET_FRACTION, color="grey", linestyle=":")
        ax.set_ylim(0.3, 1.01)
        ax.legend(fontsize=8)
        ax.set_title(f"{variant.value}: simulated SW26010 / Pro, noise {NOISE:.0%}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def summarise(trials: dict[str, list[int]], finals: dict[str, list[float]], random_median: list[float],
              peers: list[str], cells: dict[str, dict[tuple[int, int], int]]) -> dict[str, Any]:
    """Medians, censored counts, ratios. A peer's ratio is paired: ours' median over the same
    (workload, seed) runs the peer ran (slow peers run a subset)."""
    medians = {m: float(statistics.median(v)) for m, v in trials.items() if v}
    medians["random"] = float(statistics.median(random_median))
    block: dict[str, Any] = {
        "median_trials_to_95": {m: round(v, 1) for m, v in medians.items()},
        "censored": {m: sum(t > CAP for t in v) for m, v in trials.items() if v},
        "runs": {m: len(v) for m, v in trials.items() if v},
        "final_fraction_at_1000": {m: round(float(statistics.median(v)), 4) for m, v in finals.items() if v},
    }
    if "ours" in medians:
        block["ratio_random_over_ours"] = round(medians["random"] / medians["ours"], 2)
        paired = {}
        for p in peers:
            if p in medians:
                ours_same = [cells["ours"][c] for c in cells[p] if c in cells["ours"]]
                paired[p] = round(medians[p] / statistics.median(ours_same), 2) if ours_same else None
        block["ratio_peer_over_ours"] = paired
    if "ours_transfer" in medians:
        block["ratio_random_over_ours_transfer"] = round(medians["random"] / medians["ours_transfer"], 2)
    return block


def main() -> None:
    global CAP
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=5, help="seeds of ours, ours_transfer and random")
    parser.add_argument("--peer-seeds", default=",".join(f"{k}={v}" for k, v in DEFAULT_PEER_SEEDS.items()))
    parser.add_argument("--peer-workloads", default="",
                        help="e.g. smac=0;skopt_et=0,2: suite indices a slow peer runs on (default: all)")
    parser.add_argument("--variants", default="plain,perturbed")
    parser.add_argument("--methods", default="ours,ours_transfer,random," + ",".join(PEERS))
    parser.add_argument("--ours-options", default="{}", help="JSON options of ModelGuidedSearch (ablations)")
    parser.add_argument("--png", default="benchmarks/out/search_efficiency.png")
    parser.add_argument("--workloads", default="", help="indices into the suite (default: all)")
    parser.add_argument("--cap", type=int, default=1000, help="trial cap of every method (smoke tests only)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (one per core)")
    parser.add_argument("--compact", action="store_true",
                        help="first drop stored runs of older code or simulators from --cache (default options only)")
    parser.add_argument("--restamp-code", default="", metavar="REV",
                        help="record the methods' code as equivalent to their code at git revision REV where "
                             "they differ in docstrings and comments only (stored runs stay valid), and exit")
    parser.add_argument("--reference", default=str(reference.DATA),
                        help="the strong references' file (refreshed when a run measures better)")
    parser.add_argument("--summary-only", action="store_true",
                        help="run nothing: summarise the stored runs of these settings (the merge of the pieces)")
    # kept in the repository (benchmarks/data/), so the slow peers' hours of runs reach the next
    # session: a run is reused only while its method's code and the simulator's are unchanged
    parser.add_argument("--cache", default="benchmarks/data/search_runs.jsonl",
                        help="finished runs, one JSON line each: reused, and merged into the summary ('' = off)")
    args = parser.parse_args()
    if args.restamp_code:
        emit({"restamp_code": args.restamp_code, "methods": restamp_code(args.restamp_code)})
        return
    CAP = args.cap  # module-wide: worker processes are forked after this
    reference.DATA = Path(args.reference)
    methods = [m for m in args.methods.split(",") if m]
    peer_seeds = {k: int(v) for k, v in (kv.split("=") for kv in args.peer_seeds.split(",") if kv)}
    seeds_of = {m: peer_seeds.get(m, args.seeds) if m in PEERS else args.seeds for m in methods}
    if "ours_transfer" in methods and "ours" not in methods:
        parser.error("ours_transfer learns from ours' histories: run ours too")
    peer_workloads = {k: {int(x) for x in v.split(",")} for k, v in
                      (kv.split("=") for kv in args.peer_workloads.split(";") if kv)}
    options = json.loads(args.ours_options)
    variants = [Variant(v) for v in args.variants.split(",") if v]
    items = suite(args.quick)
    picked = [int(x) for x in args.workloads.split(",") if x] or list(range(len(items)))
    spaces = [space_for(w, t) for t, w in items]
    print(f"{len(items)} workloads, variants {[v.value for v in variants]}, cap {CAP}, noise {NOISE:.0%}; "
          f"seeds: {seeds_of}; ours options {options}", flush=True)

    started = time.perf_counter()
    cache = RunCache(Path(args.cache) if args.cache else None)
    refs: dict[tuple[Variant, int], float] = {}
    random_median: dict[Variant, list[float]] = {v: [] for v in variants}
    random_lower_bounds = 0
    for v in variants:
        for i, space in enumerate(spaces):
            if i not in picked:
                continue
            entry = reference.ensure(v, space)
            refs[(v, i)] = entry["seconds"]
            goal = entry["seconds"] / TARGET_FRACTION
            # random's law is a 200k-config simulation per workload: stored like a run, so pieces share it
            law_key = run_key("random_law", v.value, f"{space.target.name}:{space.workload.key}", 0, RANDOM_SAMPLE,
                              0.0, reference.fingerprint(), repr(goal))
            law = cache.runs.get(law_key)
            if law is None:
                med, bound = random_median_trials(space, v, goal)
                cache.put(law_key, {"method": "random_law", "median": med, "lower_bound": bool(bound)})
            else:
                med, bound = law["median"], law["lower_bound"]
            random_lower_bounds += bound
            random_median[v] += [med] * args.seeds
            print(f"  {v.value} {space.target.name} {space.workload.key}: reference {entry['seconds'] * 1e3:.4f} ms "
                  f"({entry['how']}); random needs {'>=' if bound else ''}{med:.0f} trials (median)", flush=True)

    ref_fp = reference.fingerprint()
    same_times = reference.equivalent_fingerprints()  # older fingerprints checked to give identical times
    codes = {m: code_fingerprint(m, options) for m in ("ours", "ours_transfer", "random", *PEERS)}
    # older fingerprints of the same code (docstring edits, recorded by --restamp-code): the current first
    same_code = {m: sorted(equivalent_codes(m, options), key=lambda c, m=m: c != codes[m]) for m in codes}
    if args.compact:
        if options:
            raise SystemExit("--compact keeps the runs of the default options only: drop --ours-options")

        def current(key: str) -> bool:
            k = parse_key(key)
            return k.reference in same_times and (k.method not in codes or k.code in same_code[k.method])

        print(f"compacted {args.cache}: {cache.compact(current)} stale runs dropped", flush=True)

    def key_of(m: str, v: Variant, i: int, seed: int, fp: str = ref_fp, code: str = "") -> str:
        return run_key(m, v.value, f"{spaces[i].target.name}:{spaces[i].workload.key}", seed, CAP, NOISE, fp,
                       code or codes[m])

    def cached(m: str, v: Variant, i: int, seed: int) -> dict[str, Any] | None:
        row = None
        for fp in sorted(same_times, key=lambda f: f != ref_fp):  # the current fingerprint first
            for code in same_code[m]:
                row = cache.get(key_of(m, v, i, seed, fp, code), refs[(v, i)] / TARGET_FRACTION, CAP)
                if row is not None:
                    break
            if row is not None:
                break
        if row is None:
            return None
        out = dict(row)
        out.update(variant=v, i=i, cached=True)
        return out

    jobs: list[Job] = []
    for v in variants:
        for i in picked:
            for m in methods:
                if m == "ours_transfer":
                    continue
                if m in peer_workloads and i not in peer_workloads[m]:
                    continue
                for seed in range(seeds_of[m]):
                    jobs.append((m, v, i, seed, refs[(v, i)] / TARGET_FRACTION, options, None))
    slowness = {"ours": 0, "random": 0, "optuna_tpe": 1, "nevergrad_de": 1, "skopt_et": 2, "smac": 3}
    jobs.sort(key=lambda j: slowness.get(j[0], 1))  # ours first: its figures are there even if peers overrun
    trials: dict[Variant, dict[str, list[int]]] = {v: {} for v in variants}
    finals: dict[Variant, dict[str, list[float]]] = {v: {"ours": []} for v in variants}
    curves: dict[Variant, dict[str, list[np.ndarray]]] = {v: {} for v in variants}
    histories: dict[tuple[Variant, int, int], tuple[list, list]] = {}
    cells: dict[Variant, dict[str, dict[tuple[int, int], int]]] = {v: {} for v in variants}
    extras: dict[str, dict[str, float]] = {}
    done: set[str] = set()  # keys already recorded in this summary
    refreshed = 0
    reused = 0

    def record(out: dict[str, Any]) -> None:
        nonlocal refreshed
        v, i, m = out["variant"], out["i"], out["method"]
        ref = refs[(v, i)]
        curve = out["curve"]
        trials[v].setdefault(m, []).append(trials_to(curve, ref / TARGET_FRACTION))
        cells[v].setdefault(m, {})[(i, out["seed"])] = trials[v][m][-1]
        curves[v].setdefault(m, []).append(ref / np.asarray(curve) if curve else np.array([0.0]))
        if m == "ours":
            finals[v]["ours"].append(ref / curve[-1])
        if out["best_row"] is not None and out["best_true"] < ref * (1 - 1e-9):
            if reference.refresh(v, spaces[i], out["best_true"], out["best_row"], f"a {m} run, seed {out['seed']}"):
                refreshed += 1
                print(f"  ! {m} seed {out['seed']} beat the reference of {spaces[i].workload.key} ({v.value}): "
                      f"{out['best_true'] * 1e3:.4f} < {ref * 1e3:.4f} ms; stored for the next run", flush=True)
        e = extras.setdefault(f"{v.value}:{m}", {"repeats": 0, "invalid": 0, "seconds": 0.0})
        e["repeats"] += out["repeats"]
        e["invalid"] += out["invalid"]
        e["seconds"] += out["seconds"]

    def report(out: dict[str, Any]) -> None:
        nonlocal reused
        key = key_of(out["method"], out["variant"], out["i"], out["seed"])
        if key in done:
            return
        done.add(key)
        if out.get("cached"):
            reused += 1
        else:
            cache.put(key, {k: (x.value if isinstance(x, Variant) else x) for k, x in out.items()})
        record(out)
        if out["method"] == "ours":
            histories[(out["variant"], out["i"], out["seed"])] = out["history"]
        final = (f", final {refs[(out['variant'], out['i'])] / out['curve'][-1]:.4f}"
                 if out["method"] == "ours" and out["curve"] else "")
        print(f"  [{time.perf_counter() - started:6.0f}s] {out['variant'].value} {out['method']} "
              f"w{out['i']} s{out['seed']}: {trials[out['variant']][out['method']][-1]} trials{final}, "
              f"{out['seconds']:.0f} s{' (cached)' if out.get('cached') else ''}", flush=True)

    def run_all(pool: ProcessPoolExecutor, batch: list[Job]) -> None:
        """Stored runs are reported at once, the others run (in order) and are stored as they finish."""
        todo = []
        for job in batch:
            hit = cached(job[0], job[1], job[2], job[3])
            if hit is not None:
                report(hit)
            elif not args.summary_only:
                todo.append(job)
        for out in pool.map(run_job, todo):
            report(out)

    def transfer_base(v: Variant, i: int, seed: int) -> XGBoostCostModel | None:
        """A model of ours' histories on the other workloads of the same target (same seed)."""
        others = [(j, histories[(v, j, seed)]) for j in picked
                  if j != i and spaces[j].target.name == spaces[i].target.name and (v, j, seed) in histories]
        if not others:
            return None
        return base_model([History(spaces[j], np.asarray(h[0], dtype=np.int64), np.asarray(h[1])) for j, h in others],
                          seed=seed)

    # ours first, then ours with transfer (it learns from ours' histories), then random and the peers
    # slowest last: the figures of ours are there even when the slow peers overrun
    with ProcessPoolExecutor(max_workers=args.jobs, initializer=_init, initargs=(args.quick,)) as pool:
        run_all(pool, [j for j in jobs if j[0] == "ours"])
        if "ours_transfer" in methods:
            transfer_jobs: list[Job] = []
            for v in variants:
                for i in picked:
                    for seed in range(args.seeds):
                        if cached("ours_transfer", v, i, seed) is not None or args.summary_only:
                            transfer_jobs.append(("ours_transfer", v, i, seed, 0.0, options, None))
                        else:
                            transfer_jobs.append(("ours_transfer", v, i, seed, refs[(v, i)] / TARGET_FRACTION,
                                                  options, transfer_base(v, i, seed)))
            run_all(pool, transfer_jobs)
        # ours' figures before the peers run (random's are its geometric law): kept if the peers overrun
        partial = {v.value: summarise(trials[v], finals[v], random_median[v], [], cells[v]) for v in variants}
        print(f"partial, before random runs and peers: {json.dumps(partial)}", flush=True)
        run_all(pool, [j for j in jobs if j[0] != "ours"])

    # merge: every stored run of these settings that this process did not run (other pieces, other seeds)
    cache.reload()
    for v in variants:
        for i in picked:
            for row in cache.matching(v.value, f"{spaces[i].target.name}:{spaces[i].workload.key}", CAP, NOISE,
                                      same_times, same_code):
                hit = cached(row["method"], v, i, row["seed"])
                if hit is not None:
                    report(hit)
    seeds_ran = {m: len({s for v in variants for (_, s) in cells[v].get(m, {})})
                 for m in sorted({m for v in variants for m in cells[v]})}
    runs_per_method = {m: sum(len(cells[v].get(m, {})) for v in variants) for m in seeds_ran}
    print(f"merged: {reused} stored runs reused; seeds per method {seeds_ran}, runs {runs_per_method}", flush=True)

    for v in variants:
        for m, t in trials[v].items():
            if t:
                print(f"{v.value:>9} {m:>14}: median trials to 95% = {statistics.median(t):.0f} "
                      f"(runs {len(t)}, censored {sum(x > CAP for x in t)})")
    png = Path(args.png)
    png.parent.mkdir(parents=True, exist_ok=True)
    plot(curves, png)
    print(f"curves written to {png}")
    rt = round_time()
    print(f"round time (64 proposals, 5000-record history, retraining): {rt:.3f} s")
    random_runs = {v.value: {"censored_at_cap": sum(t > CAP for t in trials[v]["random"]),
                             "runs": len(trials[v]["random"])} for v in variants if trials[v].get("random")}
    for v in variants:
        trials[v].pop("random", None)
    peers = [p for p in PEERS if any(p in cells[v] for v in variants)]  # run here or merged from the cache
    blocks = {v: summarise(trials[v], finals[v], random_median[v], peers, cells[v]) for v in variants}
    result: dict[str, Any] = {
        "reference": "strong", "reference_fingerprint": reference.fingerprint(), "references_refreshed": refreshed,
        "workloads": len(picked), "quick": args.quick, "cap": CAP, "noise": NOISE, "seeds": seeds_ran,
        "seeds_requested_here": seeds_of, "runs_merged_from_cache": reused,
        "random_trials": "median of the geometric law of a 200k-sample hit rate", "random_lower_bounds":
        random_lower_bounds, "random_runs_at_cap": random_runs, "ours_options": options,
        "repeats_invalid_seconds": extras, "round_time_s": round(rt, 3), "png": str(png),
    }
    if Variant.PLAIN in blocks:
        result.update(blocks[Variant.PLAIN])
    if Variant.PERTURBED in blocks:
        result["perturbed"] = blocks[Variant.PERTURBED]
    result["wall_s"] = round(time.perf_counter() - started, 1)
    emit(result)


if __name__ == "__main__":
    main()
