"""The TVM bridge: task extraction from real models (PyTorch, ONNX) through TVM Relax, and a
MetaSchedule database over the tuning log.

Owns: the list of a model's tuning tasks and their weights (extract), the MetaSchedule adapter
(ms_database; its module equality modes, record rules and stores: ms_equality, ms_rules, ms_store).
Extraction lists the tasks of the graph the compiler builds (tuner.aot); tvm, torch and onnx are
imported lazily, inside functions.
"""
