"""The Makefile of a compiled model: sw5cc (SW26010), swgcc (SW26010-Pro) and emu (gcc + swemu).

Flags are those of FACTS.md section 3 and of the per-kernel Makefile (tuner/codegen/host.py):
sw5cc slave files at -O1 (swGEMM's advice), swgcc with -faddress_align, and the emulator build in
two stages with the ``slave_`` renaming sw5cc does. Slave files built at -O2 or above (emulated,
and swgcc's -O3) get ``-fno-strict-aliasing`` (sw5cc's -O1 does not turn the analysis on): at -O2
gcc's type-based alias analysis miscompiled a fused CPE kernel whose LDM intermediate lives in the
kernels' LDM union (a ResNet-18 training step trained wrong; the same file at -O0 or with this flag
is right).
"""

from __future__ import annotations

from pathlib import Path

from tuner.codegen.emulator.build import make_recipe
from tuner.targets import Toolchain, get_target


def makefile(target: str, emulator_dir: str | Path) -> str:
    pro = get_target(target).toolchain is Toolchain.SWGCC
    default = "swgcc" if pro else "sw5cc"
    # Pro kernels assume 256 KB of LDM and 8-lane vectors: they cannot run on an SW26010
    guard = ("\t@echo 'the kernels were generated for SW26010-Pro: build with make swgcc' >&2; exit 2\n"
             if pro else "")
    return f"""# swtune AOT model for {target}.
#   make {default}   build `model` with the Sunway toolchain (the default target)
#   make emu     build `model_emu` for x86 against the athread emulator (SWEMU=<tuner/codegen/emulator>)
#   make emu-mpi build `model_emu_mpi` (mpicc): a training program's ranks, `mpirun -np R ./model_emu_mpi ...`
# run: ./model weights.bin input.bin output.bin      (SWTUNE_PROFILE=1 prints per-step seconds)
SWEMU ?= {Path(emulator_dir).resolve()}
HDRS = swtune_kernel.h swtune_slave_api.h model.h

all: {default}

# SW26010 (TaihuLight), sw5cc
sw5cc: $(HDRS) host.c slave.c
{guard}\tsw5cc -host -msimd -O2 -std=gnu99 -c host.c -o host.o
\tsw5cc -slave -msimd -O1 -std=gnu99 -c slave.c -o slave.o
\tsw5cc -hybrid host.o slave.o -lm -o model

# SW26010-Pro, swgcc
swgcc: $(HDRS) host.c slave.c
\tswgcc -mhost -msimd -O3 -faddress_align=128 -DSWTUNE_PRO -c host.c -o host.o
\tswgcc -mslave -msimd -O3 -fno-strict-aliasing -faddress_align=64 -DSWTUNE_PRO -c slave.c -o slave.o
\tswgcc -mhybrid host.o slave.o -lm_slave -lm -o model

# x86 + swemu (functional emulation: one pthread per CPE, LDM limited, DMA counted)
emu: model_emu
model_emu: $(HDRS) host.c slave.c
{make_recipe("model_emu", pro=pro, slave_flags=" -fno-strict-aliasing")}
# the same with MPI (mpicc, -DSWTUNE_MPI): a training program's ranks average gradients with MPI_Allreduce
emu-mpi: model_emu_mpi
model_emu_mpi: $(HDRS) host.c slave.c
{make_recipe("model_emu_mpi", pro=pro, objects="mpi", syms="slave_mpi.syms", cc="mpicc",
             host_defines=" -DSWTUNE_MPI", slave_flags=" -fno-strict-aliasing")}
clean:
\trm -f *.o model model_emu model_emu_mpi slave.syms slave_mpi.syms
.PHONY: all sw5cc swgcc emu emu-mpi clean
"""
