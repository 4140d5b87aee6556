"""The kinds of tuning task, one module each, each an implementation of tuner.task_kind.TaskKind.

Owns: what a kind of workload means to every layer (parse, space, simulated time, baseline, strategy,
tensor program, emulator and Sunway builds). The layers below reach a kind through
``tuner.task_kind.kind_of``. A kind is registered by one line of ``tuner.task_kind.BUILTIN_KINDS``
(another package's: its ``[project.entry-points."swtune.kinds"]``).

- ``gemm_like``: what the GEMM-like kinds share (a ScheduleSpace, the batch simulator, the
  OpenACC-like baseline, the registered strategies, the athread codegen);
- ``builtin``: conv2d, dense and batch_matmul, written by their spec modules;
- ``expr``: operators written as tensor expressions (op ``expr``);
- ``cpe_kernel``: memory-bound operators run block by block on the CPEs (op ``cpe_kernel``).
"""
