"""The TVM bridge: task extraction from real models (PyTorch, ONNX) through TVM Relax.

Like tuner/codegen, this package imports tvm (and torch / onnx) lazily, inside functions.
"""
