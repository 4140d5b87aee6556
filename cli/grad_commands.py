"""The gradient commands: ``grad`` (the gradient operators derived from an expression) and
``check-grad`` (those operators checked numerically and on the emulator).

An operator is ``FILE.py:FUNC`` returning te tensors, inputs first (as ``tune --op`` and ``check-op``
take it); its gradients are derived by tuner/expr/autodiff.py. TVM and torch are imported inside the
commands.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.output import console

OpArg = Annotated[str, typer.Argument(help="the operator: FILE.py:FUNC")]
ArgsOpt = Annotated[str | None, typer.Option(help="JSON keyword arguments of the function")]


def grad(
    op: OpArg,
    args: ArgsOpt = None,
    out: Annotated[Path | None, typer.Option(
        help="write the gradient operators as a workload file for `swtune submit --file`")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="one JSON line per gradient operator")] = False,
) -> None:
    """Print the gradient operators derived from an operator's expression.

    Each input's gradient is one or more expression operators (a strided input's by stride residue,
    so that none multiplies an inserted zero); each is a tuning task like any other."""
    from tuner.expr.autodiff import differentiate
    from tuner.expr.workload import tensors_from_op

    tensors, name = tensors_from_op(op, args)
    gradient = differentiate(tensors, name)
    workloads = [g.workload() for g in gradient.operators]
    if out is not None:
        out.write_text(json.dumps({"workloads": [w.to_json() for w in workloads],
                                   "labels": [g.name for g in gradient.operators]}, indent=1))
    if json_out:
        for g, wl in zip(gradient.operators, workloads):
            print(json.dumps({"name": g.name, "wrt": g.wrt, "formula": g.formula, "macs": g.macs,
                              "gemm_like": wl.expr.gemm_like, "workload_key": wl.key, "workload": wl.to_json()}))
        return
    console.print(gradient.describe(), highlight=False, soft_wrap=True, markup=False)
    table = Table(title=f"gradient operators of {name}")
    for col in ("operator", "gradient of", "multiply-adds", "kind", "workload"):
        table.add_column(col)
    for g, wl in zip(gradient.operators, workloads):
        table.add_row(g.name, g.wrt, f"{g.macs:,}", "GEMM-like" if wl.expr.gemm_like else "memory-bound", wl.key)
    console.print(table)
    if out is not None:
        console.print(f"wrote {out}: swtune submit --target sw26010 --file {out}")


def check_grad(
    op: OpArg,
    args: ArgsOpt = None,
    target: Annotated[str, typer.Option(help="sw26010 or sw26010-pro")] = "sw26010",
    configs: Annotated[int, typer.Option(min=1, help="random valid configs per gradient operator")] = 20,
    seed: Annotated[int, typer.Option()] = 0,
    torch_ref: Annotated[str | None, typer.Option(
        "--torch", help="FILE.py:FUNC, the operator in torch, called with the operator's input tensors in "
                        "order and the same --args: the gradients are also compared with torch autograd")] = None,
) -> None:
    """Check an operator's derived gradients: finite differences, torch autograd, and the emulator.

    In float64 whatever the operator's dtype, each input's gradient is compared with central finite
    differences of `sum(head * output)` (and with torch autograd given `--torch`); then `--configs`
    random valid configs of each gradient operator are generated, run on the emulator and checked as
    `check-op` checks them. Last line: one JSON object."""
    from tuner.backends.gradient_check import check_gradient
    from tuner.expr.workload import load_function, tensors_from_op

    tensors, name = tensors_from_op(op, args)
    reference = functools.partial(load_function(torch_ref), **json.loads(args or "{}")) if torch_ref else None
    check = check_gradient(tensors, target, configs, seed=seed, reference=reference, name=name)
    table = Table(title=f"gradient of {name}: {check.total('configs_checked')} configs on the emulator")
    for col in ("input", "finite differences (rel)", "torch autograd (rel)"):
        table.add_column(col)
    for x, err in check.fd.items():
        ag = check.autograd.get(x) if check.autograd is not None else None
        table.add_row(x, f"{err:.1e}", "-" if ag is None else f"{ag:.1e}")
    console.print(table)
    for problem in check.problems[:10]:
        console.print(f"[red]problem:[/red] {problem}")
    line = check.as_json()
    print(json.dumps(line))
    if check.failed or line["fd_max_rel_err"] > 1e-6 or line.get("autograd_max_rel_err", 0.0) > 1e-5:
        raise typer.Exit(1)
