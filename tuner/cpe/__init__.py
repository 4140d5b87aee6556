"""Memory-bound operators on the CPEs as tuning tasks: their workload, schedule space and search.

A generic operator of a model that tuner.aot.cpe_ops runs block by block on the CPEs (softmax,
layer_norm, gelu, mean, padded pools, ...) is a task like a GEMM-like kernel: ``workload`` names it in
the tuning log, ``space`` holds every schedule (cut, block size, double buffering, active CPEs, SIMD)
with its vectorised analysis and simulated time, ``search`` proposes configs to measure.
"""
