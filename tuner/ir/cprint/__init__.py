"""The one C printer: TIR -> C for the GEMM-like and expression kernels and for the legalized operators.

Shared by both kinds of C: dtypes (the C type of a dtype), functions (math function names), expr (the
expression printer and its two dialects), vector (the SIMD emitter: Sunway vector types and
instructions). The legalized operators (any Relax operator after TVM's legalization, printed as one C
function for the MPE or a CPE kernel's body): legalized (the scalar printer and the work it counts),
legalized_simd (its vector loops), prim_func (the entry point), epilogue (an element-wise operator as
scalar statements to fuse). The scheduled kernels' compute loops: lanes (how an operand moves along a
vector loop's lanes), kernel_loop (an innermost loop as vectors) with expr_vector (an expression body
as vectors), register_block (the register-block micro-kernel). The slave file around them (DMA,
the CPE mapping) is tuner.codegen.printer. It is in the ir layer because the Relax reader and the CPE
cut plans print C too.
"""
