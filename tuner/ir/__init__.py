"""The model front end: a Relax module read into swtune's graph IR, and TIR bodies printed as C.

Owns: the graph IR (graph: tensors, nodes, the MPE/CPE steps), the Relax reader (relax_reader) and its
lowering passes (passes: one job each), the readers of single Relax operators into workloads
(relax_ops: conv2d, matmul, expressions), and the TIR -> C printer that also counts a body's work
(cprint). It is below the spaces because a memory-bound CPE kernel's space is planned on a rebuilt
Relax operator. It imports tvm.
"""
