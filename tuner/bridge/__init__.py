"""The TVM bridge: task extraction from real models (PyTorch, ONNX) through TVM Relax, and a
MetaSchedule database over the tuning log.

Owns: the list of a model's tuning tasks and their weights (extract), the MetaSchedule adapter
(ms_database; its module equality modes, record rules and stores: ms_equality, ms_rules, ms_store).
May import aot (extraction lists the tasks of the graph the compiler builds), ir, space and the
domain; imports tvm (and torch / onnx) lazily, inside functions.
"""
