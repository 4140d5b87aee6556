"""Operators written as TVM tensor expressions: their derived geometry, schedule space and identity.

Only ``tuner.expr.parse`` imports tvm (lazily, from functions); the rest works on the pure-Python
description (``tuner.expr.expr``) so spaces, analysis and workloads stay TVM-free at import time.
"""
