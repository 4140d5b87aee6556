"""Memory-bound operators as tuned expression tasks (issue #10 item 3): what tuning buys over the
rule-picked lowering, and whether the generated kernels are right.

1. Simulated time, per operator of a [1, C, H, W] activation (relu, broadcast add of a per-channel
   constant, add of two activations, 2x2 max pool, sum over H and W, NCHW -> NHWC transpose): the
   untuned lowering the compiler would run (tuner.aot.cpe_ops / cpe_layout's rule-picked CPE blocks, or
   the MPE where that is faster) against the expression task tuned on the simulator with ``--trials``
   trials (tuner.tune.tune_workloads, noise-free). Which one compile runs is the faster of the two.
2. Emulator check (tuner.backends.expr_check, what ``swtune check-op`` runs) of ``--configs`` random
   valid configs of each operator at a small size: results against TVM's llvm run, the emulator's DMA
   counts against the analysis, the lowered TIR's DMA figures against the analysis.

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any


def _model(c: int, h: int, w: int) -> tuple[Any, Any]:
    import torch

    from tuner.bridge.extract import torch_to_relax

    class Ops(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bias = torch.nn.Parameter(torch.randn(c, 1, 1))

        def forward(self, x: Any, y: Any) -> Any:
            return (torch.relu(x), x + self.bias, x + y, torch.nn.functional.max_pool2d(x, 2), x.sum(dim=(2, 3)),
                    x.permute(0, 2, 3, 1))

    torch.manual_seed(0)
    args = (torch.randn(1, c, h, w), torch.randn(1, c, h, w))
    return torch_to_relax(Ops().eval(), args), args


def _tasks(mod: Any, target: Any) -> tuple[Any, dict[str, Any]]:
    """The memory-bound tasks and, per workload key, the graph node that runs it."""
    from tuner.bridge.extract import extract_relax, memory_bound
    from tuner.ir.relax_reader import read_relax

    graph = read_relax(mod, target)
    nodes = {n.attrs["expr_workload"].key: n for n in graph.nodes if "expr_workload" in n.attrs}
    layers = [layer for layer in extract_relax(mod, target=target).layers if memory_bound(layer.workload)]
    return graph, {layer.workload.key: (layer, nodes[layer.workload.key]) for layer in layers}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="sw26010")
    p.add_argument("--shape", default="64,56,56", help="C,H,W of the simulated operators")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--configs", type=int, default=3, help="random configs per operator on the emulator (0: skip)")
    p.add_argument("--check-shape", default="8,12,16", help="C,H,W of the emulator-checked operators")
    args = p.parse_args()
    logging.disable(logging.WARNING)

    from tuner.aot.compiler import untuned_seconds
    from tuner.aot.cpe_ops import CpeMode
    from tuner.aot.timing import kernel_seconds
    from tuner.space.factory import space_for
    from tuner.targets import get_target
    from tuner.tune import tune_workloads

    tgt = get_target(args.target)
    c, h, w = (int(v) for v in args.shape.split(","))
    mod, _ = _model(c, h, w)
    graph, tasks = _tasks(mod, tgt)
    untuned = untuned_seconds(graph, tgt, CpeMode.FASTER)
    start = time.perf_counter()
    results = tune_workloads([layer.workload for layer, _ in tasks.values()], tgt, trials=args.trials, batch=8,
                             noise=0.0)
    tune_s = time.perf_counter() - start
    rows = []
    print(f"{'operator':<14} {'untuned us':>11} {'tuned us':>9} {'openacc us':>11}  runs")
    for (layer, node), r in zip(tasks.values(), results):
        if r.best_config is None:
            raise RuntimeError(f"{layer.workload.key}: no valid config found")
        space = space_for(layer.workload, tgt)
        t, pre = kernel_seconds(space, [r.best_config])
        tuned, base = float(t[0] + pre[0]), untuned(node).seconds
        rows.append({"operator": node.relax_op, "key": layer.workload.key, "untuned_us": base * 1e6,
                     "tuned_us": tuned * 1e6, "openacc_us": (r.baseline_time or 0.0) * 1e6,
                     "runs": "tuned" if tuned < base else "untuned", "trials": r.trials})
        print(f"{node.relax_op:<14} {base * 1e6:>11.1f} {tuned * 1e6:>9.1f} {rows[-1]['openacc_us']:>11.1f}  "
              f"{rows[-1]['runs']}")
    print(f"{len(tasks)} tasks tuned with {args.trials} trials each in {tune_s:.1f} s")

    checks: dict[str, Any] = {}
    if args.configs:
        from tuner.backends.expr_check import emulator_check

        cc, ch, cw = (int(v) for v in args.check_shape.split(","))
        _, small = _tasks(_model(cc, ch, cw)[0], tgt)
        for layer, node in small.values():
            s = emulator_check(space_for(layer.workload, tgt), args.configs, seed=1)
            checks[layer.workload.key] = {"operator": node.relax_op, **s.as_json()}
            print(f"emulator {node.relax_op:<14} {s.configs_checked} configs: wrong {s.wrong_results}, "
                  f"DMA mismatches {s.dma_count_mismatches}, TIR mismatches {s.tir_mismatches}, "
                  f"compile failures {s.compile_failures}, runtime errors {s.runtime_errors}")
    bad = sum(v["wrong_results"] + v["dma_count_mismatches"] + v["tir_mismatches"] + v["compile_failures"]
              + v["runtime_errors"] for v in checks.values())
    print(json.dumps({"target": tgt.name, "shape": [1, c, h, w], "trials": args.trials, "tune_seconds": tune_s,
                      "operators": rows, "tuned_faster": sum(r["runs"] == "tuned" for r in rows),
                      "emulator_configs": sum(v["configs_checked"] for v in checks.values()),
                      "emulator_problems": bad, "emulator": checks}))


if __name__ == "__main__":
    main()
