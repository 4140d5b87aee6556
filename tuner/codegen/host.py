"""The host (MPE) file, the shared header, the slave API shim and the Makefile of a generated kernel.

The host reads the inputs (raw little-endian arrays: conv data in NCHW, weights, or a/b of a GEMM) or
fills them with a fixed pseudo-random pattern, runs the op's prepass (zero-padding a conv input once:
the spec's PadPrepass, tuner/space/ops.py), spawns the slave kernel on the core group, times spawn +
join with the cycle counter and prints one line ``SWTUNE_KERNEL_SECONDS=<s>`` (plus
``SWTUNE_PAD_SECONDS``), then writes the output with any line padding of its rows stripped.
"""

from __future__ import annotations

from math import prod

import numpy as np

from tuner.codegen.schedule import Scheduled
from tuner.codegen.tir import ctype
from tuner.space.choices import Pack
from tuner.space.ops import PadPrepass, axis_tiles, geometry_for
from tuner.targets import Toolchain

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

def host_prologue(ty: str) -> str:
    """The start of every single-kernel host program: includes, the slave entry, the helpers and a
    deterministic fill for runs without input files."""
    return f"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <athread.h>
#include "swtune_kernel.h"

extern void SLAVE_FUN(swtune_kernel)(swtune_args *);

{HOST_HELPERS}

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


def pack_b(s: Scheduled, ty: str) -> tuple[str, str]:
    """C that stores b tile after tile (the pack knob) into ``bp``, and the name the kernel reads.

    The tile of b is the analysis' box (tuner/space/ops.py); only whole tiles pack, so the copy
    is a permutation. Returns ("", "b") when b is not packed."""
    if s.config.get("pack", Pack.NONE.label) != Pack.B.label:
        return "", "b"
    geo = geometry_for(s.workload)
    t = {a.name: axis_tiles(a.extent, np.array([float(s.config[f"tile_{a.name}"])])) for a in geo.axes}
    full = [int(d.full[0]) for d in geo.tensors(t)["b"]]
    return pack_loop(list(shapes(s)["b"]), full, "b", "bp"), "bp"


def header(s: Scheduled) -> str:
    ty = ctype(s.workload.dtype)
    return (f"/* swtune kernel interface: {s.workload.key} */\n#ifndef SWTUNE_KERNEL_H\n#define SWTUNE_KERNEL_H\n"
            f"typedef struct {{ {ty} {', '.join('*' + r for r in (*s.roles, 'c'))}; }} swtune_args;\n#endif\n")


def host_file(s: Scheduled) -> str:
    w = s.workload
    ty = ctype(w.dtype)
    sh = shapes(s)
    n_in, n_a, n_b = prod(sh["input"]), prod(sh["a"]), prod(sh["b"])
    rows_c = prod(sh["c"][:-1])
    w_c, pitch = sh["c"][-1], c_pitch(s)
    hz = s.target.mpe_clock_hz
    pre = geometry_for(w).prepass
    pad = pad_loop(pre, "in", "a", ty) if pre is not None else f"\n  memcpy(a, in, sizeof({ty}) * {n_a}L);"
    # A constant b (weights) is packed when the kernel is built, so before the timer; any other b
    # is packed by the host before each call, timed with the pad stage (tuner/space/analysis.py).
    pack, b_arg = pack_b(s, ty)
    pack_const, pack_run = (pack, "") if geometry_for(w).b_constant else ("", pack)
    return f"""/* swtune host program: {w.key} on {s.target.name}
 * usage: prog [input_a input_b output]   (raw {w.dtype} arrays; without files: a fixed pattern) */
{host_prologue(ty)}

int main(int argc, char **argv) {{
  {ty} *in = sw_alloc(sizeof({ty}) * {n_in}L), *a = sw_alloc(sizeof({ty}) * {n_a}L);
  {ty} *b = sw_alloc(sizeof({ty}) * {n_b}L), *c = sw_alloc(sizeof({ty}) * {rows_c * pitch}L);
  {ty} *bp = {"sw_alloc(sizeof(" + ty + ") * " + str(n_b) + "L)" if pack else "b"};
  if (argc >= 3) {{ sw_read(argv[1], in, sizeof({ty}) * {n_in}L); sw_read(argv[2], b, sizeof({ty}) * {n_b}L); }}
  else {{ sw_fill(in, {n_in}L, 1u); sw_fill(b, {n_b}L, 2u); }}
  memset(c, 0, sizeof({ty}) * {rows_c * pitch}L);{pack_const}
  athread_init();
  unsigned long t0 = sw_cycles();{pad}{pack_run}
  unsigned long t1 = sw_cycles();
  swtune_args args = {{a, {b_arg}, c}};
  athread_spawn(swtune_kernel, &args);
  athread_join();
  unsigned long t2 = sw_cycles();
  athread_halt();
  printf("SWTUNE_PAD_SECONDS=%.9e\\n", (double)(t1 - t0) / {hz!r});
  printf("SWTUNE_KERNEL_SECONDS=%.9e\\n", (double)(t2 - t1) / {hz!r});
  if (argc >= 4) {{
    FILE *f = fopen(argv[3], "wb");
    if (!f) {{ fprintf(stderr, "cannot write %s\\n", argv[3]); return 2; }}
    for (long r = 0; r < {rows_c}L; r++) fwrite(c + r * {pitch}L, sizeof({ty}), {w_c}, f);
    fclose(f);
  }}
  free(in); free(a); free(b); free(c);{" free(bp);" if pack else ""}
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
    emu_def = "-DSWTUNE_EMU" + (" -DSWTUNE_PRO" if pro else "")
    return f"""# swtune kernel for {s.target.name}: `make` builds with the Sunway toolchain,
# `make emu SWEMU=<tuner/codegen/emulator>` builds for the x86 athread emulator.
all: kernel
{real}

SWEMU ?= ../emulator
emu: kernel_emu
kernel_emu: host.c slave.c
\tgcc -O2 -Wno-psabi -pthread -I$(SWEMU) -I. {emu_def} -D__sw_host__ -c host.c -o host_emu.o
\tgcc -O2 -Wno-psabi -pthread -I$(SWEMU) -I. {emu_def} -D__sw_slave__ -c slave.c -o slave_emu.o
\tnm -P -g --defined-only slave_emu.o | awk '$$2=="T"||$$2=="W"{{print $$1" slave_"$$1}}' > slave.syms
\tobjcopy --redefine-syms=slave.syms slave_emu.o
\tgcc -O2 -pthread -I$(SWEMU) -c $(SWEMU)/athread_emu.c -o athread_emu.o
\tgcc -pthread host_emu.o slave_emu.o athread_emu.o -lm -o kernel_emu
clean:
\trm -f *.o kernel kernel_emu slave.syms
.PHONY: all emu clean
"""
