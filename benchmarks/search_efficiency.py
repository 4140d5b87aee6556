"""Search efficiency: trials to reach 95% of the reference optimum, ours vs random vs peer tuners.

    python benchmarks/search_efficiency.py [--quick] [--seeds 5] [--png out.png]

Suite: the distinct conv and dense layers of AlexNet, VGG-19 and ResNet-18 at batch 1 and 64
(float32, sw26010) plus a float64 subset on sw26010-pro; --quick takes a representative subset.
Reference optimum per workload: exhaustive enumeration when the space is small enough, else the best
of a 20,000-config random sample. For each workload and seed, every method runs until its best
config reaches 95% of the reference throughput (or its trial cap). Methods: random search, ours
(model-guided), ours with transfer (a base model trained on our search histories of the *other*
workloads of the same target), Optuna TPE and nevergrad's TwoPointsDE. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import _common  # noqa: F401
import numpy as np
from _common import emit
from peers import PEERS, run_peer

from cost_model import XGBoostCostModel
from tuner.measure.simulator import Simulator, simulate
from tuner.models import model_layers
from tuner.search import create_strategy
from tuner.search.features import features
from tuner.space import ScheduleSpace
from tuner.workloads import Workload

TARGET_FRACTION = 0.95
# Trial caps: a run that has not reached the goal by then counts as cap + 1 (censored, which can only
# understate how many trials that method needs). Peers are the slowest to drive (their own overhead).
CAPS = {"random": 5000, "ours": 1000, "ours_transfer": 1000, "optuna_tpe": 600, "nevergrad_de": 600}


def suite(quick: bool) -> list[tuple[str, Workload]]:
    """(target, workload) pairs, distinct."""
    seen: dict[str, tuple[str, Workload]] = {}
    batches = (1, 64)
    for model in ("alexnet", "vgg19", "resnet18"):
        for batch in batches:
            for layer in model_layers(model, batch, "float32"):
                seen.setdefault(f"sw26010:{layer.workload.key}", ("sw26010", layer.workload))
    for layer in model_layers("alexnet", 1, "float64") + model_layers("resnet18", 1, "float64")[:4]:
        seen.setdefault(f"sw26010-pro:{layer.workload.key}", ("sw26010-pro", layer.workload))
    items = list(seen.values())
    if not quick:
        return items
    picks = [  # a conv and a dense layer at batch 1, a batch-64 conv, a float64 layer on the Pro
        ("sw26010", "alexnet", 1, "conv2"), ("sw26010", "alexnet", 1, "fc7"),
        ("sw26010", "resnet18", 64, "layer2.0.downsample"), ("sw26010-pro", "alexnet", 1, "conv3"),
    ]
    out = []
    for target, model, batch, name in picks:
        dtype = "float64" if target == "sw26010-pro" else "float32"
        layer = next(l for l in model_layers(model, batch, dtype) if l.name == name)
        out.append((target, layer.workload))
    return out


def reference_time(space: ScheduleSpace) -> tuple[float, str]:
    every = space.enumerate(limit=500_000)
    if every is not None:
        return float(simulate(space, every).min()), "exhaustive"
    sample = space.sample(20_000, np.random.default_rng(12345))
    return float(simulate(space, sample).min()), "random-20000"


def trials_to(curve: list[float], goal: float, cap: int) -> int:
    for i, best in enumerate(curve):
        if best <= goal:
            return i + 1
    return cap + 1  # censored: never reached within the cap


def run_search(name: str, space: ScheduleSpace, seed: int, cap: int, goal: float, batch: int,
               base=None) -> tuple[list[float], object]:
    """Best-so-far curve of a registered strategy, stopping at ``goal`` seconds or ``cap`` trials."""
    sim = Simulator(seed=seed)
    options = {"base_model": base} if name == "model" else {}
    search = create_strategy(name, space, seed=seed, **options)
    curve: list[float] = []
    while len(curve) < cap:
        configs = search.ask(min(batch, cap - len(curve)))
        if not configs:
            break
        results = sim.measure(space.workload, space.target, configs)
        search.tell(configs, results)
        for r in results:
            curve.append(min(curve[-1], r.mean_time) if curve else r.mean_time)
        if curve[-1] <= goal:
            break
    return curve, search


def run_ours(space: ScheduleSpace, seed: int, cap: int, goal: float, base=None) -> tuple[list[float], object]:
    return run_search("model", space, seed, cap, goal, batch=16, base=base)


def run_random(space: ScheduleSpace, seed: int, cap: int, goal: float) -> list[float]:
    return run_search("random", space, seed, cap, goal, batch=256)[0]


def run_methods(job: tuple[tuple[str, Workload], float, int, list[str]]
                ) -> tuple[dict[str, list[float]], tuple[np.ndarray, np.ndarray]]:
    """Every method except transfer on one (workload, seed); plus a search history for transfer."""
    (target, workload), ref, seed, peers = job
    space = ScheduleSpace(workload, target)
    goal = ref / TARGET_FRACTION
    curves = {"random": run_random(space, seed, CAPS["random"], goal)}
    curves["ours"], search = run_ours(space, seed, CAPS["ours"], goal)
    # a history of at least 128 trials (as the tuning log would hold) for transfer to other workloads
    if len(search.measured_time) < 128:
        _, search = run_ours(space, 100 + seed, 128, 0.0)
    history = (features(space, np.stack(search.measured_index)), np.asarray(search.measured_time))
    for peer in peers:
        curves[peer] = run_peer(peer, space, seed, CAPS[peer], lambda rows: simulate(space, rows), goal)
    return curves, history


def round_time(seed: int = 0) -> float:
    """One round of 64 proposals from a 5,000-record history, retraining included (median of 3)."""
    layer = model_layers("resnet18", 1)[2]
    space = ScheduleSpace(layer.workload, "sw26010")
    rows = space.sample(5000, np.random.default_rng(seed))
    sim = Simulator()
    configs = [space.decode(r) for r in rows]
    results = sim.measure(space.workload, space.target, configs)
    durations = []
    for rep in range(3):
        search = create_strategy("model", space, seed=rep)
        search.tell(configs, results)  # not proposed by it: recorded as measured all the same
        start = time.perf_counter()
        proposals = search.ask(64)
        durations.append(time.perf_counter() - start)
        assert len(proposals) == 64
    return statistics.median(durations)


def plot(curves: dict[str, list[np.ndarray]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for method, runs in curves.items():
        length = max(len(r) for r in runs)
        grid = np.full((len(runs), length), np.nan)
        for i, r in enumerate(runs):
            grid[i, : len(r)] = r
            grid[i, len(r):] = r[-1]  # runs stop at the goal: hold their final value
        ax.plot(np.arange(1, length + 1), np.nanmedian(grid, axis=0), label=method)
    ax.set_xscale("log")
    ax.set_xlabel("trials")
    ax.set_ylabel("best throughput / reference (median over workloads and seeds)")
    ax.axhline(TARGET_FRACTION, color="grey", linestyle=":")
    ax.legend()
    ax.set_title("swtune search efficiency (simulated SW26010 / SW26010-Pro)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--png", default="benchmarks/out/search_efficiency.png")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (one per core)")
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    peers = [p for p in args.peers.split(",") if p]
    items = suite(args.quick)
    print(f"{len(items)} workloads x {len(seeds)} seeds; methods: random, ours, ours_transfer, {', '.join(peers)}")

    spaces = [ScheduleSpace(w, t) for t, w in items]
    refs = []
    for space in spaces:
        ref, how = reference_time(space)
        refs.append(ref)
        print(f"  {space.target.name} {space.workload.key}: reference {ref * 1e3:.4f} ms ({how})")

    trials: dict[str, list[int]] = {m: [] for m in ["random", "ours", "ours_transfer", *peers]}
    curves: dict[str, list[np.ndarray]] = {m: [] for m in trials}
    histories: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    started = time.perf_counter()

    def record(method: str, i: int, curve: list[float]) -> None:
        goal = refs[i] / TARGET_FRACTION
        trials[method].append(trials_to(curve, goal, CAPS[method]))
        curves[method].append(refs[i] / np.asarray(curve))

    jobs = [(i, seed) for i in range(len(spaces)) for seed in seeds]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:  # one run per core
        runs = pool.map(run_methods, [(items[i], refs[i], seed, peers) for i, seed in jobs])
        for (i, seed), (curves_of, history) in zip(jobs, runs):
            for method, curve in curves_of.items():
                record(method, i, curve)
            histories[(i, seed)] = history
            if seed == seeds[-1]:
                print(f"  [{time.perf_counter() - started:6.0f}s] {spaces[i].workload.key}: " +
                      ", ".join(f"{m} {statistics.median(v[-len(seeds):]):.0f}" for m, v in trials.items() if v))

    for i, space in enumerate(spaces):
        goal = refs[i] / TARGET_FRACTION
        for seed in seeds:
            others = [(j, histories[(j, seed)]) for j in range(len(spaces))
                      if j != i and spaces[j].target.name == space.target.name]
            if not others:
                record("ours_transfer", i, run_ours(space, seed, CAPS["ours_transfer"], goal)[0])
                continue
            base = XGBoostCostModel(seed=seed)
            base.update(np.concatenate([h[0] for _, h in others]), np.concatenate([h[1] for _, h in others]),
                        np.concatenate([np.full(len(h[1]), j) for j, h in others]))
            record("ours_transfer", i, run_ours(space, seed, CAPS["ours_transfer"], goal, base=base)[0])

    medians = {m: float(statistics.median(v)) for m, v in trials.items()}
    for m, v in trials.items():
        print(f"{m:>16}: median trials to 95% = {medians[m]:.0f}  (runs {len(v)}, censored "
              f"{sum(t > CAPS[m] for t in v)})")
    png = Path(args.png)
    png.parent.mkdir(parents=True, exist_ok=True)
    plot(curves, png)
    print(f"curves written to {png}")
    rt = round_time()
    print(f"round time (64 proposals, 5000-record history, retraining): {rt:.3f} s")
    emit({
        "workloads": len(items), "seeds": len(seeds), "quick": args.quick,
        "median_trials_to_95": medians,
        "ratio_random_over_ours": round(medians["random"] / medians["ours"], 2),
        "ratio_random_over_ours_transfer": round(medians["random"] / medians["ours_transfer"], 2),
        "ratio_peer_over_ours": {p: round(medians[p] / medians["ours"], 2) for p in peers},
        "round_time_s": round(rt, 3),
        "png": str(png),
        "wall_s": round(time.perf_counter() - started, 1),
    })


if __name__ == "__main__":
    main()
