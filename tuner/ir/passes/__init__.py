"""The Relax reader's lowering passes, one job each; tuner.ir.relax_reader.PIPELINE runs them in order.

A pass is a ``LoweringPass`` (tuner.ir.passes.lowering_pass): rules for the Relax operators it lowers
itself (LegalizeOps keeps those), a rewrite tried on each legalized operator, a mark on each generic step,
or a rewrite of the finished step list. What they share -- reading a Relax type's static shape and adding
a step the way TVM lowers an operator -- is tuner.ir.passes.emit.
"""
