"""Measurement backends that build kernels: the athread emulator (swemu) and Sunway nodes (bsub), and
the registry of every backend by name (the simulator, tuner.measure.simulator, among them).

Owns: building one config of a workload into a program, running it, checking its output, and turning
that into a MeasureResult (failures as data). A kind's own build (a CPE kernel's compiled program)
comes through tuner.task_kind.
"""
