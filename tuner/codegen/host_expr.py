"""The host (MPE) program of an operator written as a tensor expression (tuner/expr).

Like tuner/codegen/host.py's for the built-in ops, without their pre-passes (an expression reads its
inputs as given): it reads one raw little-endian file per input (parameter order) or fills each with a
fixed pseudo-random pattern, spawns the slave kernel, prints ``SWTUNE_KERNEL_SECONDS=<s>`` and writes
the output with any line padding of its rows stripped. With ``pack="b"`` every b operand is stored tile
after tile (the layout the slave's one-request-per-box gets read): at build time when no b operand
follows a row axis (weights), else by the host before each call, timed with the kernel as the analysis
counts it.
"""

from __future__ import annotations

from math import prod

from tuner.codegen.host import c_pitch, host_prologue, pack_loop, shapes
from tuner.codegen.schedule import Scheduled
from tuner.codegen.tir import ctype
from tuner.expr.expr import Expr
from tuner.expr.geometry import ExprGeometry
from tuner.space.choices import Pack


def _expr(s: Scheduled) -> Expr:
    from tuner.expr.workload import ExprWorkload

    assert isinstance(s.workload, ExprWorkload)
    return s.workload.expr


def packed_roles(s: Scheduled) -> list[str]:
    """The operands the kernel reads packed tile after tile: every b operand with ``pack=b``."""
    if s.config.get("pack", Pack.NONE.label) != Pack.B.label:
        return []
    return [r for r in s.roles if r[0] == "b"]


def pack_tiles(s: Scheduled, role: str) -> tuple[list[int], list[int]]:
    """(shape of operand ``role``, shape of its tile) in the tile-after-tile copy the kernel reads."""
    geo = _expr(s)
    tensor = s.op.inputs[s.roles.index(role)]
    acc = next(a for a in geo.inputs if a.tensor == tensor)
    axes = {a.name: a.extent for a in geo.axes}
    tiles = {a: int(s.config[f"tile_{a}"]) for a in axes if f"tile_{a}" in s.config}
    full = []
    for d, extent in zip(acc.dims, acc.shape):
        axis = d.coefs[0][0]
        full.append(min(tiles[axis], axes[axis]) if axis in tiles else extent)
    return [int(e) for e in acc.shape], full


def _pack(s: Scheduled, role: str, ty: str) -> str:
    """C that stores operand ``role`` tile after tile into ``{role}_p`` (its boxes partition it:
    ExprGeometry.packable; whole tiles: the analysis' pack_needs_whole_tiles)."""
    tensor = s.op.inputs[s.roles.index(role)]
    shape, full = pack_tiles(s, role)
    return pack_loop(shape, full, role, f"{role}_p", label=tensor)


def expr_host_file(s: Scheduled) -> str:
    w = s.workload
    ty = ctype(w.dtype)
    sh = shapes(s)
    roles = s.roles
    n = {r: prod(sh[r]) for r in roles}
    rows_c, w_c, pitch = prod(sh["c"][:-1]), sh["c"][-1], c_pitch(s)
    hz = s.target.mpe_clock_hz
    k = len(roles)
    alloc = "\n".join(f"  {ty} *{r} = sw_alloc(sizeof({ty}) * {n[r]}L);" for r in roles)
    read = " ".join(f"sw_read(argv[{i + 1}], {r}, sizeof({ty}) * {n[r]}L);" for i, r in enumerate(roles))
    fill = " ".join(f"sw_fill({r}, {n[r]}L, {i + 1}u);" for i, r in enumerate(roles))
    free = " ".join(f"free({r});" for r in roles)
    files = " ".join(s.op.inputs)
    packed = packed_roles(s)
    alloc += "".join(f"\n  {ty} *{r}_p = sw_alloc(sizeof({ty}) * {n[r]}L);" for r in packed)
    pack = "".join(_pack(s, r, ty) for r in packed)
    ops = {op.access.tensor: op for op in ExprGeometry(_expr(s)).operands} if packed else {}
    constant = all(not ops[t].row_axes for t, r in zip(s.op.inputs, roles) if r in packed)
    pack_const, pack_run = (pack, "") if constant else ("", pack)
    args = ", ".join([f"{r}_p" if r in packed else r for r in roles] + ["c"])
    free += "".join(f" free({r}_p);" for r in packed)
    return f"""/* swtune host program: {w.key} on {s.target.name}
 * usage: prog [{files} output]   (raw {w.dtype} arrays; without files: a fixed pattern) */
{host_prologue(ty)}

int main(int argc, char **argv) {{
{alloc}
  {ty} *c = sw_alloc(sizeof({ty}) * {rows_c * pitch}L);
  if (argc >= {k + 1}) {{ {read} }}
  else {{ {fill} }}
  memset(c, 0, sizeof({ty}) * {rows_c * pitch}L);{pack_const}
  athread_init();
  unsigned long t1 = sw_cycles();{pack_run}
  swtune_args args = {{{args}}};
  athread_spawn(swtune_kernel, &args);
  athread_join();
  unsigned long t2 = sw_cycles();
  athread_halt();
  printf("SWTUNE_KERNEL_SECONDS=%.9e\\n", (double)(t2 - t1) / {hz!r});
  if (argc >= {k + 2}) {{
    FILE *f = fopen(argv[{k + 1}], "wb");
    if (!f) {{ fprintf(stderr, "cannot write %s\\n", argv[{k + 1}]); return 2; }}
    for (long r = 0; r < {rows_c}L; r++) fwrite(c + r * {pitch}L, sizeof({ty}), {w_c}, f);
    fclose(f);
  }}
  {free} free(c);
  return 0;
}}
"""
