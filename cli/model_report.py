"""The tables ``tune-model``, ``compile`` and ``train`` print from the swtune API's results: per layer,
per operator of the whole program, and per Relax binding of a compiled model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from cli.output import RATE, console

if TYPE_CHECKING:
    from swtune.results import ModelTuning

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


def layer_report(result: ModelTuning) -> None:
    """Per layer of a tuned model (``swtune.tune_model``): baseline (OpenACC-like schedule) vs the best
    measured time, weighted by calls; with a fitted profile (the tuning log's active one), each tuned
    config's simulated 95% interval."""
    profile = result.profile
    title = f"per-layer result on {result.target}" + (f" (simulator profile version {profile.version})" if profile
                                                       else "")
    table = Table(title=title)
    columns = ("layer", "calls", "trials", "baseline ms", "tuned ms",
               *(("95% interval ms",) if result.with_intervals else ()), "speedup", RATE,
               *(("core groups",) if result.chip else ()))
    for col in columns:
        table.add_column(col, justify="left" if col == "layer" else "right")
    for layer in result.layers:
        tuned, interval = layer.tuned_s, layer.interval
        shown = ([f"{interval[0] * 1e3:.3f} - {interval[1] * 1e3:.3f}" if interval else "-"]
                 if result.with_intervals else [])
        table.add_row(layer.name, str(layer.calls), str(layer.trials), f"{layer.baseline_s * 1e3:.3f}",
                      f"{tuned * 1e3:.3f}" if tuned else "untuned", *shown,
                      f"{layer.speedup:.2f}x" if layer.speedup else "-", _rate(layer.workload, tuned),
                      *((layer.core_groups or "-",) if result.chip else ()))
    console.print(table)
    untuned = result.untuned
    if untuned:
        console.print(f"[yellow]{len(untuned)} of {len(result.layers)} tasks untuned[/] (no successful measurement; "
                      f"counted at their baseline, and `swtune compile` runs them untuned): {', '.join(untuned)}",
                      soft_wrap=True, highlight=False)
    console.print(f"estimated end-to-end time of the tuned operators: {result.tuned_s * 1e3:.3f} ms "
                  f"(baseline {result.baseline_s * 1e3:.3f} ms, {result.baseline_s / result.tuned_s:.2f}x); the "
                  f"whole model follows. {result.elapsed_s:.0f} s.")


def profile_note(profile: Any, interval: tuple[float, float] | None) -> str:
    """How a report names the profile its simulated times come from, with the whole model's interval."""
    if profile is None:
        return ""
    if interval is None:
        return f" (simulator profile version {profile.version}, no fit draws: no interval)"
    return (f" (simulator profile version {profile.version}; 95% interval {interval[0] * 1e3:.3f} - "
            f"{interval[1] * 1e3:.3f} ms from its parameter uncertainty)")


def _rate(workload: Any, seconds: float | None) -> str:
    """GB/s for a memory-bound workload, GFLOPS for the others (tuner.workloads.rate_of)."""
    from tuner.workloads import Rate, rate, rate_of

    value = rate(workload, seconds)
    return "-" if value is None else f"{value:.1f}" + (" GB/s" if rate_of(workload) == Rate.GBPS else "")


def compile_report(result: Any, note: str = "") -> None:
    """What each Relax binding became (tuned kernel, fallback kernel, MPE C), the counts, the files;
    ``note``: the simulator profile behind the simulated times (``profile_note``)."""
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
