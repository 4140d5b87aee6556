"""The tables ``tune-model`` and ``compile`` print: per layer, per operator of the whole program,
and per Relax binding of a compiled model."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from cli.output import RATE, console

MPE_LINES = 5  # the MPE operators the report names one by one (most time first), then one line for the rest


def whole_model_report(mt: Any, model: str, target: str, note: str = "") -> None:
    """The simulated end-to-end time of the whole model, per operator, tuned vs baseline program;
    ``note`` names the simulator profile behind the times and the interval it gives."""
    from tuner.aot.timing import format_table

    table = Table(title=f"{model} on {target}: simulated end-to-end time by operator (tuned program)")
    # an operator's name is what tells two rows apart (conv2d_grad_data, conv2d_grad_weight): folded onto
    # a second line on a narrow terminal (80 columns off one), never cut to "conv2d_gr…"; the numeric
    # headers take two lines to leave it the room
    table.add_column("operator", min_width=16, overflow="fold")
    table.add_column("where")
    for col in ("calls", "tuned\nms", "share", "baseline\nms", "baseline\nshare"):
        table.add_column(col, justify="right")
    for row in format_table(mt):
        table.add_row(*row)
    console.print(table)
    sm = mt.summary()
    console.print(f"whole model (simulated): tuned {sm['tuned_ms']:.3f} ms{note}, OpenACC-like baseline "
                  f"{sm['baseline_ms']:.3f} ms ({sm['speedup_vs_baseline']:.2f}x); MPE {sm['mpe_ms']:.3f} ms "
                  f"({sm['mpe_time_fraction']:.1%}, {sm['mpe_steps']} steps); {sm['kernel_launches']} kernel launches, "
                  f"spawn/join {sm['spawn_join_ms']:.3f} ms included.", soft_wrap=True)
    if sm["untuned_steps"]:
        console.print(f"{sm['untuned_steps']} steps run a task's kernel without its own tuned record (a near record or "
                      f"the baseline): {sm['untuned_time_fraction']:.1%} of the time; tuning them (--trials) can "
                      "make the program faster", soft_wrap=True, highlight=False)
    if sm["tuned_ms"] > sm["baseline_ms"]:
        slower = sm["tuned_ms"] - sm["baseline_ms"]
        console.print(f"[yellow]the tuned program simulates {slower:.3f} ms slower than its baseline[/]: the "
                      "operators above whose tuned ms exceed their baseline ms cost it", soft_wrap=True)
    mpe = mt.mpe_operators()
    for op, why, calls, seconds in mpe[:MPE_LINES]:
        console.print(f"  on the MPE: {op} x{calls} ({seconds * 1e3:.3f} ms): {why}", soft_wrap=True, highlight=False)
    if len(mpe) > MPE_LINES:
        rest = mpe[MPE_LINES:]
        console.print(f"  on the MPE: {len(rest)} more operators ({sum(r[3] for r in rest) * 1e3:.3f} ms)",
                      soft_wrap=True, highlight=False)


def layer_report(layers: list[Any], tasks: list[dict[str, Any]], best: dict[str, Any], target: str,
                 elapsed: float, profile: Any = None) -> None:
    """Per layer: baseline (OpenACC-like schedule) vs the best measured time, weighted by calls; with a
    fitted ``profile`` (the tuning log's active one), each tuned config's simulated 95% interval."""
    from service.demo import baselines
    from tuner.calibrate.intervals import simulated_interval
    from tuner.space.chip import split_label
    from tuner.targets import get_target

    base = baselines(layers, target)
    with_draws = profile is not None and bool(profile.fit.get("draws"))
    title = f"per-layer result on {target}" + (f" (simulator profile version {profile.version})" if profile else "")
    table = Table(title=title)
    chip = get_target(target).cgs > 1  # kernels may split over core groups: say how each does
    columns = ("layer", "calls", "trials", "baseline ms", "tuned ms", *(("95% interval ms",) if with_draws else ()),
               "speedup", RATE, *(("core groups",) if chip else ()))
    for col in columns:
        table.add_column(col, justify="left" if col == "layer" else "right")
    total_base = total_tuned = 0.0
    untuned: list[str] = []
    for layer, task in zip(layers, tasks):
        found = best.get(layer.workload.key)
        tuned = found["mean_time"] if found else None
        b = base[layer.name]
        total_base += layer.weight * b
        total_tuned += layer.weight * (tuned if tuned else b)
        if not tuned:
            untuned.append(layer.name)
        interval = simulated_interval(profile, layer.workload, found["config"]) if with_draws and found else None
        shown = [f"{interval[0] * 1e3:.3f} - {interval[1] * 1e3:.3f}" if interval else "-"] if with_draws else []
        table.add_row(layer.name, str(layer.weight), str(task.get("trials_done", 0)), f"{b * 1e3:.3f}",
                      f"{tuned * 1e3:.3f}" if tuned else "untuned", *shown, f"{b / tuned:.2f}x" if tuned else "-",
                      _rate(layer.workload, tuned),
                      *((split_label(found["config"]) if found else "-",) if chip else ()))
    console.print(table)
    if untuned:
        console.print(f"[yellow]{len(untuned)} of {len(layers)} tasks untuned[/] (no successful measurement; counted "
                      f"at their baseline, and `swtune compile` runs them untuned): {', '.join(untuned)}",
                      soft_wrap=True, highlight=False)
    console.print(f"estimated end-to-end time of the tuned operators: {total_tuned * 1e3:.3f} ms "
                  f"(baseline {total_base * 1e3:.3f} ms, {total_base / total_tuned:.2f}x); the whole model "
                  f"follows. {elapsed:.0f} s.")


def _rate(workload: Any, seconds: float | None) -> str:
    """GB/s for a memory-bound workload, GFLOPS for the others (tuner.workloads.rate_of)."""
    from tuner.workloads import Rate, rate, rate_of

    value = rate(workload, seconds)
    return "-" if value is None else f"{value:.1f}" + (" GB/s" if rate_of(workload) == Rate.GBPS else "")


def compile_report(result: Any, note: str = "") -> None:
    """What each Relax binding became (tuned kernel, fallback kernel, MPE C), the counts, the files;
    ``note``: the simulator profile behind the simulated times (cli.schedule_lookup.profile_note)."""
    from tuner.ir.graph import Where

    styles = {Where.TUNED_KERNEL: "green", Where.FALLBACK_KERNEL: "yellow", Where.MPE: "cyan"}
    table = Table(title=f"{result.out_dir} ({result.target})")
    for col in ("#", "binding", "op", "where", "detail"):
        table.add_column(col, justify="right" if col == "#" else "left")
    for i, r in enumerate(result.rows):
        style = styles.get(r.where, "dim")
        table.add_row(str(i), r.source, r.relax_op, f"[{style}]{r.where}[/]", r.detail)
    console.print(table)
    counts = result.counts()
    untuned = [k for k in result.kernels if not k.tuned]
    cpe_tasks = [op for op in result.cpe_ops if getattr(op, "workload", None) is not None]
    untuned_cpe = [op for op in cpe_tasks if not op.tuned]
    console.print(f"{counts.get(Where.TUNED_KERNEL, 0)} tuned kernel calls, {counts.get(Where.FALLBACK_KERNEL, 0)} "
                  f"fallback kernel calls ({len(untuned)} of {len(result.kernels)} distinct kernels untuned; "
                  f"{len(untuned_cpe)} of {len(cpe_tasks)} CPE kernel tasks untuned), "
                  f"{counts.get(Where.MPE, 0)} MPE steps, {counts.get(Where.VIEW, 0)} views, "
                  f"{counts.get(Where.COMPILE_TIME, 0)} folded at compile time.", soft_wrap=True)
    if result.timing is not None:
        whole_model_report(result.timing, result.out_dir.name, result.target, note)
    console.print(f"wrote {', '.join(result.files)} to {result.out_dir}; build with "
                  f"`make -C {result.out_dir}` (Sunway) or `make -C {result.out_dir} emu` (x86 emulator), "
                  f"run `./model weights.bin input.bin output.bin`.", soft_wrap=True)
