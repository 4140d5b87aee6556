"""Measurement: the protocol every backend implements and the calibrated simulator of a core group.

Owns: base (``MeasureBackend``, ``MeasureResult``, the ``Status`` and ``Source`` enums,
``InfrastructureError``), simulator (the model's time of a GEMM-like config; a kind's own simulated
time comes through tuner.task_kind), noise (the default measurement noise), calibration (the DMA
model's fit to measured tables). The backends that build programs
(emulator, Sunway) are in tuner.backends, above codegen.
"""
