"""The memory-bound CPE kernel model: cut plans, block analysis, and the space a task searches.

A generic operator (softmax, layer_norm, gelu, mean, a padded pool, ...) is cut into blocks along
one axis (or a pool's output rows) that the 64 CPEs take round-robin. Owns: the workload
(workload: a one-operator Relax module's TVMScript), the cuts (cuts: legalized sliced bodies, their
meaning checked against the whole operator), one cut's plan and a config's op (plan), the closed-form
analysis of DMA and compute per block (schedule), a node <-> task (task) and the tuning space
(space). The AOT compiler compiles with these plans; the simulator times a config with them; nothing
here imports the compiler or a measurement backend.
"""
