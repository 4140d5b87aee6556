"""swemu: an x86 emulator of the Sunway athread runtime (SW26010 / SW26010-Pro).

The C side lives next to this file (athread.h, slave.h, simd.h, dma.h,
athread_emu.c); :mod:`.build` compiles host + slave C files against it.
See README.md.
"""
from .build import (  # noqa: F401
    EMU_DIR,
    ERROR_EXIT_CODE,
    EXAMPLES_DIR,
    BuildError,
    build,
    build_single,
    compile_emulator,
    find_cc,
    rename_slave_objects,
    single_command,
)
