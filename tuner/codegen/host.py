"""The host (MPE) program, the shared header, the slave API shim and the Makefile of a generated kernel.

One host program serves every op (built-in or expression): it reads one raw little-endian file per
kernel operand (parameter order; the prepass' operand unpadded) or fills each with a fixed
pseudo-random pattern, then, timed, runs the op's prepass (zero-padding a conv input: the spec's
PadPrepass, tuner/space/ops.py) and packs any non-constant group-b operand tile after tile (the pack
knob; a constant one, a layer's weights, is packed before the timer as a compiled model packs it
once), spawns the slave kernel on the core group and joins it. It prints ``SWTUNE_PREPASS_SECONDS``
(the host work: what the simulator's breakdown calls host_prepass) and ``SWTUNE_KERNEL_SECONDS``
(host work + spawn to join: what tuner/measure/simulator.py ``simulate`` models, which charges the
prepass and the per-call pack), then writes the output with any line padding of its rows stripped.

A kernel split over several core groups (tuner/codegen/schedule.py: each CG runs its share of the tiles,
chosen by ``_CGN``) is launched on each of them with the same arguments, in the target's form
(:func:`chip_launch`): on SW26010 swDNN's, a host pthread per CG, each calling ``athread_init`` (which
binds it to the next CG) and then ``athread_spawn`` / ``athread_join`` on it; on SW26010-Pro the
all-shared mode, ``athread_spawn_cgs`` / ``athread_join_cgs``. Its buffers are in memory every CG
reaches (``malloc_cross``). A split reduction writes CG g's partial sums to its own output (its own
arguments) and a second spawn adds them (:func:`reduce_pass`).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from tuner.codegen.emulator.build import make_recipe
from tuner.codegen.schedule import Scheduled
from tuner.codegen.te_ops import role_group
from tuner.expr.expr import Reducer
from tuner.ir.cprint.dtypes import ctype
from tuner.space.choices import CgSplit, Pack
from tuner.space.ops import PadPrepass, axis_tiles, geometry_for
from tuner.targets import Family, Target, Toolchain

HOST_HELPERS = r"""static unsigned long sw_cycles(void) {
#if defined(SWTUNE_EMU) || defined(SWTUNE_PRO)
  return (unsigned long)athread_time_cycle();
#else
  unsigned long t;
  asm volatile("rtc %0" : "=r"(t));
  return t;
#endif
}

static void *sw_alloc(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 128, bytes ? bytes : 128)) { fprintf(stderr, "out of memory\n"); exit(2); }
  return p;
}

static void sw_read(const char *path, void *dst, size_t bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
  if (fread(dst, 1, bytes, f) != bytes || fgetc(f) != EOF) {
    fprintf(stderr, "%s: expected exactly %lu bytes\n", path, (unsigned long)bytes); exit(2);
  }
  fclose(f);
}
"""  # cycle counter, aligned allocation and exact-size input reads shared by every host program

def host_prologue(ty: str, chip: ChipLaunch | None = None) -> str:
    """The start of every single-kernel host program: includes, the slave entry, the helpers and a
    deterministic fill for runs without input files; ``chip``: a split kernel's launch, its helpers
    added and its buffers in cross memory."""
    helpers = HOST_HELPERS
    reduce_decl = ("\nextern void SLAVE_FUN(swtune_kernel_parts)(swtune_args *);"
                   "\nextern void SLAVE_FUN(swtune_reduce)(swtune_reduce_args *);") if chip and chip.reduce else ""
    if chip is not None:
        helpers = helpers.replace("posix_memalign(&p, 128, bytes ? bytes : 128)",
                                  "!(p = malloc_cross(bytes ? bytes : 128))") + chip.helpers
    return f"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <athread.h>
#include "swtune_kernel.h"

extern void SLAVE_FUN(swtune_kernel)(swtune_args *);{reduce_decl}

{helpers}

static void sw_fill({ty} *p, long n, unsigned seed) {{
  for (long i = 0; i < n; i++) {{ seed = seed * 1103515245u + 12345u; p[i] = ({ty})((seed >> 8) % 2001) / 1000 - 1; }}
}}
"""


SLAVE_API = r"""/* swtune: the DMA / sync calls a generated slave file uses, for sw5cc (SW26010) or swgcc (Pro). */
#ifndef SWTUNE_SLAVE_API_H
#define SWTUNE_SLAVE_API_H
#define SW_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SW_MAX(a, b) ((a) > (b) ? (a) : (b))
#define SW_PRAGMA(x) _Pragma(#x)
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#define SW_UNROLL(n) SW_PRAGMA(GCC unroll n)
#else
#define SW_UNROLL(n)
#endif
/* an unaligned vector load as an expression */
#define SW_VLOADU(vt, addr) ({ vt _v; simd_loadu(_v, (addr)); _v; })
#ifdef SWTUNE_PRO
#define SW_REPLY_T athread_rply_t
#define SW_GET(mem, ldm, len, bsize, gap, rp) do { \
    if (bsize) athread_dma_iget_stride((ldm), (mem), (len), (bsize), (gap), (rp)); \
    else athread_dma_iget((ldm), (mem), (len), (rp)); } while (0)
#define SW_PUT(ldm, mem, len, bsize, gap, rp) do { \
    if (bsize) athread_dma_iput_stride((mem), (ldm), (len), (bsize), (gap), (rp)); \
    else athread_dma_iput((mem), (ldm), (len), (rp)); } while (0)
#define SW_GET_ROWBC(mem, ldm, len, bsize, gap, rp) do { \
    if (bsize) athread_dma_row_ibcast_stride((ldm), (mem), (len), (bsize), (gap), (rp)); \
    else athread_dma_row_ibcast((ldm), (mem), (len), (rp)); } while (0)
#define SW_GET_COLBC(mem, ldm, len, bsize, gap, rp) do { \
    if (bsize) athread_dma_col_ibcast_stride((ldm), (mem), (len), (bsize), (gap), (rp)); \
    else athread_dma_col_ibcast((ldm), (mem), (len), (rp)); } while (0)
#define SW_WAIT(rp, n) athread_dma_wait_value((rp), (n))
#define SW_SYNC_ROW(mask) athread_ssync(ROW_SCOPE, (mask))
#define SW_SYNC_COL(mask) athread_ssync(COL_SCOPE, (mask))
#else
#define SW_REPLY_T int
#define SW_GET(mem, ldm, len, bsize, gap, rp) \
    athread_get(PE_MODE, (void *)(mem), (void *)(ldm), (len), (void *)(rp), 0, (gap), (bsize))
#define SW_GET_ROWBC(mem, ldm, len, bsize, gap, rp) \
    athread_get(ROW_MODE, (void *)(mem), (void *)(ldm), (len), (void *)(rp), 0, (gap), (bsize))
#define SW_PUT(ldm, mem, len, bsize, gap, rp) \
    athread_put(PE_MODE, (void *)(ldm), (void *)(mem), (len), (void *)(rp), (gap), (bsize))
#define SW_WAIT(rp, n) while (*(rp) != (n))
#define SW_SYNC_ROW(mask) athread_syn(ROW_SCOPE, (mask))
#define SW_SYNC_COL(mask) athread_syn(COL_SCOPE, (mask))
#endif
#endif
"""


def shapes(s: Scheduled) -> dict[str, tuple[int, ...]]:
    """Shapes of the kernel's buffers by role (a, b, c; a prepass's input padded) and of the
    user-facing input (the prepass' input, tuner/space/ops.py PadPrepass; else operand a)."""
    f = s.op.func
    out = {name: tuple(int(x) for x in p.shape) for name, p in zip((*s.roles, "c"), f.params)}
    pre = geometry_for(s.workload).prepass
    out["input"] = pre.shape if pre is not None else out[s.roles[0]]
    return out


def pad_loop(pre: PadPrepass, src: str, dst: str, ty: str) -> str:
    """C that zero-fills ``dst`` and copies ``src`` (row-major ``pre.shape``) into it padded by
    ``pre.pad`` at both ends of each dimension, one memcpy per innermost row."""
    shape, padded, pad = pre.shape, pre.padded, pre.pad
    loops = "".join(f"\n  {'  ' * d}for (long i{d} = 0; i{d} < {e}; i{d}++)" for d, e in enumerate(shape[:-1]))
    dst_at, src_at = "0", "0"
    for d in range(len(shape) - 1):
        dst_at = f"({dst_at}) * {padded[d]}L + i{d} + {pad[d]}" if d else f"i{d} + {pad[d]}"
        src_at = f"({src_at}) * {shape[d]}L + i{d}" if d else f"i{d}"
    dst_at = f"({dst_at}) * {padded[-1]}L + {pad[-1]}" if len(shape) > 1 else str(pad[-1])
    src_at = f"({src_at}) * {shape[-1]}L" if len(shape) > 1 else "0"
    return (f"\n  /* the prepass: {'x'.join(map(str, shape))} zero-padded by {tuple(pad)} */"
            f"\n  memset({dst}, 0, sizeof({ty}) * {prod(padded)}L);{loops}"
            f"\n  {'  ' * (len(shape) - 1)}memcpy({dst} + {dst_at}, {src} + {src_at}, sizeof({ty}) * {shape[-1]});")


def c_pitch(s: Scheduled) -> int:
    """Row pitch (elements) of the output in memory: padded to whole lines with put_lines."""
    last = shapes(s)["c"][-1]
    if not s.config["put_lines"]:
        return last
    per_line = 128 // s.workload.dtype_bytes
    return -(-last // per_line) * per_line


def pack_loop(shape: list[int], full: list[int], src: str, dst: str, label: str = "") -> str:
    """C that copies ``src`` (row-major ``shape``) into ``dst`` tile after tile (tiles of ``full``,
    which divide ``shape``): element e goes to its tile's slot times the tile size plus its offset.
    ``label`` names the operand in the C comment (default ``src``)."""
    body, t_stride, f_stride = [], 1, 1
    for e, f in zip(reversed(shape), reversed(full)):
        body.append(f"i = r % {e}L; r /= {e}L; t += (i / {f}L) * {t_stride}L; o += (i % {f}L) * {f_stride}L;")
        t_stride *= e // f
        f_stride *= f
    return (f"\n  /* pack {label or src}: tile after tile ({'x'.join(map(str, full))} tiles), one DMA per tile */"
            f"\n  for (long e = 0; e < {prod(shape)}L; e++) {{"
            f"\n    long r = e, i, t = 0, o = 0;"
            + "".join(f"\n    {x}" for x in body)
            + f"\n    {dst}[t * {prod(full)}L + o] = {src}[e];\n  }}")


def packed_roles(s: Scheduled) -> list[str]:
    """The operands the kernel reads packed tile after tile: every group-b operand with ``pack=b``."""
    if s.config.get("pack", Pack.NONE.label) != Pack.B.label:
        return []
    return [r for r in s.roles if role_group(r) == "b"]


def pack_tiles(s: Scheduled, role: str) -> tuple[list[int], list[int]]:
    """(shape of operand ``role``, shape of its tile) in the tile-after-tile copy the kernel reads:
    the analysis' box of the operand (tuner/space/ops.py); only whole tiles pack (the analysis'
    pack_needs_whole_tiles), so the copy is a permutation."""
    geo = geometry_for(s.workload)
    t = {a.name: axis_tiles(a.extent, np.array([float(s.config[f"tile_{a.name}"])])) for a in geo.axes}
    tensor = s.op.inputs[s.roles.index(role)]
    boxes, _ = geo.boxes(t)
    op, box = next((op, box) for op, box in zip(geo.operands, boxes) if op.access.tensor == tensor)
    shape = [int(e) for e in op.access.shape]
    assert prod(shape) == prod(shapes(s)[role]), f"{tensor}: its access and its kernel buffer differ in size"
    return shape, [int(d.full[0]) for d in box]


REDUCE_BLOCK = 512  # elements one CPE adds per step of a split reduction's pass (two LDM buffers of them)
# how a split reduction's pass folds partial b into a: the op's reducer (a max-plus product's max)
COMBINE = {Reducer.SUM: "{a} += {b}", Reducer.MAX: "{a} = SW_MAX({a}, {b})", Reducer.MIN: "{a} = SW_MIN({a}, {b})"}


def header(s: Scheduled) -> str:
    """The kernel's argument struct (host and slave); for a split reduction also the slave side of the pass
    that adds the core groups' partial outputs (:func:`reduce_pass`)."""
    ty = ctype(s.workload.dtype)
    reducer = geometry_for(s.workload).expr.reducer
    parts = reduce_pass(ty, s.cgs, COMBINE[reducer]) if s.cg_split is CgSplit.REDUCTION else ""
    return (f"/* swtune kernel interface: {s.workload.key} */\n#ifndef SWTUNE_KERNEL_H\n#define SWTUNE_KERNEL_H\n"
            f"typedef struct {{ {ty} {', '.join('*' + r for r in (*s.roles, 'c'))}; }} swtune_args;\n{parts}#endif\n")


def reduce_pass(ty: str, cgs: int, combine: str = COMBINE[Reducer.SUM]) -> str:
    """C of a reduction split over ``cgs`` core groups, slave side: ``swtune_kernel_parts`` (the Pro's one
    spawn on every CG runs the kernel on CG g's arguments, ``all[g]``: its partial output) and
    ``swtune_reduce``, the pass that adds the partials (``parts``, ``n`` elements apart; ``combine``: the
    op's reducer) into ``c``: CG g adds its ceil(n / cgs) elements, its CPEs taking blocks of
    REDUCE_BLOCK in turn, one get per partial and one put per block. Compiled into the slave file
    (SWTUNE_SLAVE, or the toolchain's __sw_slave__), the struct on both sides."""
    return f"""typedef struct {{ {ty} *parts, *c; long n; }} swtune_reduce_args;
#if defined(__sw_slave__) || defined(SWTUNE_SLAVE)
#include <slave.h>
#include "swtune_slave_api.h"
void swtune_kernel(swtune_args *);
void swtune_kernel_parts(swtune_args *all) {{ if (_CGN < {cgs}) swtune_kernel(all + _CGN); }}
__thread_local {ty} sw_red_acc[{REDUCE_BLOCK}] __attribute__((aligned(64)));
__thread_local {ty} sw_red_in[{REDUCE_BLOCK}] __attribute__((aligned(64)));
__thread_local volatile SW_REPLY_T sw_red_reply;
void swtune_reduce(swtune_reduce_args *r) {{
  const long n = r->n, per = (n + {cgs - 1}) / {cgs}, lo = _CGN * per, hi = SW_MIN(lo + per, n);
  long done = 0;
  sw_red_reply = 0;
  for (long b = lo + _MYID * {REDUCE_BLOCK}L; b < hi; b += {64 * REDUCE_BLOCK}L) {{
    const long len = SW_MIN({REDUCE_BLOCK}L, hi - b);
    SW_GET(r->parts + b, sw_red_acc, len * sizeof({ty}), 0, 0, &sw_red_reply);
    SW_WAIT(&sw_red_reply, ++done);
    for (int g = 1; g < {cgs}; g++) {{
      SW_GET(r->parts + g * n + b, sw_red_in, len * sizeof({ty}), 0, 0, &sw_red_reply);
      SW_WAIT(&sw_red_reply, ++done);
      for (long i = 0; i < len; i++) {combine.format(a="sw_red_acc[i]", b="sw_red_in[i]")};
    }}
    SW_PUT(sw_red_acc, r->c + b, len * sizeof({ty}), 0, 0, &sw_red_reply);
    SW_WAIT(&sw_red_reply, ++done);
  }}
}}
#endif
"""


def reduce_requests(n: int, cgs: int, g: int) -> tuple[int, int]:
    """(gets, puts) core group ``g`` issues in the pass that adds ``cgs`` partial outputs of ``n``
    elements (:func:`reduce_pass`): one get per partial and one put per block of its share."""
    per = -(-n // cgs)
    blocks = -(-max(0, min(per, n - g * per)) // REDUCE_BLOCK)
    return blocks * cgs, blocks


@dataclass(frozen=True)
class ChipLaunch:
    """C of a kernel's launch on ``cgs`` core groups: helpers before main, the runtime's
    initialisation, and the spawn-to-join lines."""

    helpers: str
    init: str
    run: str
    reduce: bool = False  # a split reduction's launch: the slave entries of reduce_pass


@dataclass(frozen=True)
class Phase:
    """One spawn of a launch: the slave function, its argument, and whether that is an array with one
    entry per core group (CG g runs on ``args[g]``; else every CG gets the same)."""

    kernel: str
    args: str
    per_cg: bool = False


def chip_launch(target: Target, cgs: int, phases: list[Phase]) -> ChipLaunch:
    """The target's form of running ``phases`` one after another on ``cgs`` core groups (the module
    docstring); one CG: ``athread_spawn`` and ``athread_join`` as ever."""
    if cgs == 1:
        return ChipLaunch("", "athread_init();", "\n  ".join(
            f"athread_spawn({p.kernel}, {p.args});\n  athread_join();" for p in phases))
    per_cg = any(p.per_cg for p in phases)
    if target.family is Family.SW26010_PRO:  # a per-CG argument: the slave picks entry _CGN (reduce_pass)
        return ChipLaunch("", "athread_init_cgs();", "\n  ".join(
            f"athread_spawn_cgs({p.kernel + '_parts' if p.per_cg else p.kernel}, {p.args});  "
            "/* every core group; each runs part _CGN */\n  athread_join_cgs();" for p in phases), per_cg)
    spawns = []
    for i, p in enumerate(phases):
        arg = f"(swtune_args *)sw_cg_args[{i}] + g" if p.per_cg else f"sw_cg_args[{i}]"
        wait = "  pthread_barrier_wait(&sw_cg_phase);  /* every CG has finished the last phase */\n" if i else ""
        spawns.append(f"{wait}  athread_spawn({p.kernel}, {arg});\n  athread_join();\n")
    barrier = "static pthread_barrier_t sw_cg_phase;\n" if len(phases) > 1 else ""
    helpers = f"""
#include <pthread.h>
#include <semaphore.h>

static void *sw_cg_args[{len(phases)}];  /* each phase's arguments */
static sem_t sw_cg_bound;
{barrier}
/* one host thread per core group (swDNN's form): its athread_init binds it to the next CG */
static void *sw_cg_main(void *cg) {{
  long g = (long)cg;
  (void)g;
  athread_init();
  sem_post(&sw_cg_bound);
{"".join(spawns)}  return NULL;
}}
"""
    run = "".join(f"sw_cg_args[{i}] = {p.args};\n  " for i, p in enumerate(phases))
    if len(phases) > 1:
        run += f"pthread_barrier_init(&sw_cg_phase, NULL, {cgs});\n  "
    run += (f"pthread_t sw_cg[{cgs}];\n  sem_init(&sw_cg_bound, 0, 0);"
            f"\n  for (long g = 0; g < {cgs}; g++) {{  /* one after another: thread g holds CG g */"
            "\n    pthread_create(&sw_cg[g], NULL, sw_cg_main, (void *)g);\n    sem_wait(&sw_cg_bound);\n  }"
            f"\n  for (int g = 0; g < {cgs}; g++) pthread_join(sw_cg[g], NULL);")
    return ChipLaunch(helpers, "", run, per_cg)


def host_file(s: Scheduled) -> str:
    """The host program of any op: one input per kernel operand (parameter order), the spec's
    prepass, the per-call packs, the spawn; the one time it prints is what tuner/measure/simulator.py
    ``simulate`` models (module docstring)."""
    w = s.workload
    ty = ctype(w.dtype)
    sh = shapes(s)
    roles = s.roles
    geo = geometry_for(w)
    pre = geo.prepass
    pre_role = roles[s.op.inputs.index(pre.tensor)] if pre is not None else None
    n = {r: prod(sh[r]) for r in roles}
    # what the host reads: the prepass' input (unpadded) for its operand, the kernel's buffer else
    src = {r: f"{r}_in" if r == pre_role else r for r in roles}
    n_src = {r: prod(sh["input"]) if r == pre_role else n[r] for r in roles}
    rows_c, w_c, pitch = prod(sh["c"][:-1]), sh["c"][-1], c_pitch(s)
    hz = s.target.mpe_clock_hz
    k = len(roles)
    packed = packed_roles(s)
    bufs = [src[r] for r in roles]
    alloc = "".join(f"\n  {ty} *{src[r]} = sw_alloc(sizeof({ty}) * {n_src[r]}L);" for r in roles)
    if pre_role is not None:
        alloc += f"\n  {ty} *{pre_role} = sw_alloc(sizeof({ty}) * {n[pre_role]}L);"
        bufs.append(pre_role)
    alloc += "".join(f"\n  {ty} *{r}_p = sw_alloc(sizeof({ty}) * {n[r]}L);" for r in packed)
    bufs += [f"{r}_p" for r in packed]
    read = " ".join(f"sw_read(argv[{i + 1}], {src[r]}, sizeof({ty}) * {n_src[r]}L);" for i, r in enumerate(roles))
    fill = " ".join(f"sw_fill({src[r]}, {n_src[r]}L, {i + 1}u);" for i, r in enumerate(roles))
    prepass = pad_loop(pre, src[pre_role], pre_role, ty) if pre is not None and pre_role is not None else ""
    pack = "".join(pack_loop(*pack_tiles(s, r), r, f"{r}_p", label=s.op.inputs[roles.index(r)]) for r in packed)
    # A constant b (weights) is packed when the kernel is built, outside the timed region; any other
    # is packed before each call, timed with the kernel: the analysis' host_pack_bytes, all b
    # operands or none (OpGeometry.b_constant).
    pack_const, pack_run = (pack, "") if geo.b_constant else ("", pack)
    inputs = ", ".join(f"{r}_p" if r in packed else r for r in roles)
    args = f"{inputs}, c"
    parts = ""
    phases = [Phase("swtune_kernel", "&args")]
    if s.cg_split is CgSplit.REDUCTION:  # CG g writes its partial sums to c_parts + g*n; a pass adds them
        n_c = rows_c * pitch
        parts = (f"\n  {ty} *c_parts = sw_alloc(sizeof({ty}) * {s.cgs * n_c}L);\n  swtune_args args[{s.cgs}];"
                 f"\n  for (int g = 0; g < {s.cgs}; g++) {{ swtune_args a_g = {{{inputs}, c_parts + g * {n_c}L}}; "
                 "args[g] = a_g; }"
                 f"\n  swtune_reduce_args red = {{c_parts, c, {n_c}L}};")
        phases = [Phase("swtune_kernel", "args", per_cg=True), Phase("swtune_reduce", "&red")]
    launch = chip_launch(s.target, s.cgs, phases)
    # cross memory is not freed: the runtime releases it with the program
    free = "".join(f"\n  {' '.join(f'free({b});' for b in bufs + ['c'])}" if s.cgs == 1 else "")
    files = " ".join(s.op.inputs)
    init = f"\n  {launch.init}" if launch.init else ""
    return f"""/* swtune host program: {w.key} on {s.target.name}
 * usage: prog [{files} output]   (raw {w.dtype} arrays; without files: a fixed pattern) */
{host_prologue(ty, launch if s.cgs > 1 else None)}

int main(int argc, char **argv) {{{alloc}
  {ty} *c = sw_alloc(sizeof({ty}) * {rows_c * pitch}L);
  if (argc >= {k + 1}) {{ {read} }}
  else {{ {fill} }}
  memset(c, 0, sizeof({ty}) * {rows_c * pitch}L);{pack_const}{parts}{init}
  unsigned long t0 = sw_cycles();{prepass}{pack_run}
  unsigned long t1 = sw_cycles();{'' if parts else f'''
  swtune_args args = {{{args}}};'''}
  {launch.run}
  unsigned long t2 = sw_cycles();
  athread_halt();
  printf("SWTUNE_PREPASS_SECONDS=%.9e\\n", (double)(t1 - t0) / {hz!r});
  printf("SWTUNE_KERNEL_SECONDS=%.9e\\n", (double)(t2 - t0) / {hz!r});
  if (argc >= {k + 2}) {{
    FILE *f = fopen(argv[{k + 1}], "wb");
    if (!f) {{ fprintf(stderr, "cannot write %s\\n", argv[{k + 1}]); return 2; }}
    for (long r = 0; r < {rows_c}L; r++) fwrite(c + r * {pitch}L, sizeof({ty}), {w_c}, f);
    fclose(f);
  }}{free}
  return 0;
}}
"""


def makefile(s: Scheduled) -> str:
    pro = s.target.toolchain is Toolchain.SWGCC
    if pro:
        real = """CC_HOST ?= swgcc
CC_SLAVE ?= swgcc
host.o: host.c swtune_kernel.h
\t$(CC_HOST) -mhost -msimd -O3 -faddress_align=128 -DSWTUNE_PRO -c host.c -o host.o
slave.o: slave.c swtune_kernel.h swtune_slave_api.h
\t$(CC_SLAVE) -mslave -msimd -O3 -faddress_align=64 -DSWTUNE_PRO -c slave.c -o slave.o
kernel: host.o slave.o
\t$(CC_HOST) -mhybrid host.o slave.o -lm_slave -o kernel"""
    else:
        real = """CC_HOST ?= sw5cc
CC_SLAVE ?= sw5cc
host.o: host.c swtune_kernel.h
\t$(CC_HOST) -host -msimd -O2 -std=gnu99 -c host.c -o host.o
slave.o: slave.c swtune_kernel.h swtune_slave_api.h
\t$(CC_SLAVE) -slave -msimd -O1 -std=gnu99 -c slave.c -o slave.o
kernel: host.o slave.o
\t$(CC_HOST) -hybrid host.o slave.o -o kernel"""
    if s.cg_split is CgSplit.REDUCTION:  # the slave side of the pass that adds the partials (reduce_pass)
        real = real.replace("-c slave.c", "-DSWTUNE_SLAVE -c slave.c")
    if not pro and s.cgs > 1:  # the all-share mode, every CG's memory in one process (swCaffe's Makefile)
        real = real.replace("-hybrid host.o", "-hybrid -allshare host.o").replace("o -o kernel",
                                                                                  "o -lpthread -o kernel")
    return f"""# swtune kernel for {s.target.name}: `make` builds with the Sunway toolchain,
# `make emu SWEMU=<tuner/codegen/emulator>` builds for the x86 athread emulator.
all: kernel
{real}

SWEMU ?= ../emulator
emu: kernel_emu
kernel_emu: host.c slave.c
{make_recipe("kernel_emu", pro=pro)}clean:
\trm -f *.o kernel kernel_emu slave.syms
.PHONY: all emu clean
"""
