"""host.c and model.h of a compiled model: the MPE program that runs every step in order.

``model weights.bin input0.bin [input1.bin ...] output.bin``: reads the weights and the inputs
(raw little-endian arrays), runs the steps (a tuned kernel: athread_spawn + athread_join on the
core group; anything else: plain C on the MPE), prints ``SWTUNE_MODEL_SECONDS=<s>`` and writes the
outputs one after another. ``SWTUNE_PROFILE=1`` prints the seconds of every step.
"""

from __future__ import annotations

from collections.abc import Callable

from tuner.aot.kernels import Kernel
from tuner.aot.memory import MemoryPlan
from tuner.aot.mpe import Ref, describe, emit_mpe
from tuner.aot.weights import WeightsLayout, weights_header_lines
from tuner.codegen.host import HOST_HELPERS
from tuner.ir.cprint.dtypes import INPUT_FILE_TYPES
from tuner.ir.cprint.legalized import PRELUDE
from tuner.ir.graph import Graph, Node, Tensor
from tuner.targets import get_target

Driver = Callable[[Graph, MemoryPlan, str, float], str]  # (graph, memory plan, C type, MPE Hz) -> main()


def c_var(t: Tensor) -> str:
    r = t.root
    return {"input": f"in{r.index}", "const": f"w{r.id}", "temp": f"t{r.id}"}[r.kind]


def model_header(graph: Graph, layout: WeightsLayout, plan: MemoryPlan, model: str, target: str) -> str:
    lines = [f"/* swtune AOT: {model} on {target}: sizes, weight offsets (elements into weights.bin) */",
             "#ifndef SWTUNE_MODEL_H", "#define SWTUNE_MODEL_H",
             f"#define SWTUNE_N_INPUTS {len(graph.inputs)}", f"#define SWTUNE_N_OUTPUTS {len(graph.outputs)}",
             f"#define SWTUNE_N_SLOTS {len(plan.slot_elems)}"]
    for i, t in enumerate(graph.inputs):
        lines.append(f"#define SWTUNE_INPUT{i}_ELEMS {t.size}L  /* {t.name} {list(t.shape)} {t.dtype} */")
    for i, t in enumerate(graph.outputs):
        lines.append(f"#define SWTUNE_OUTPUT{i}_ELEMS {t.size}L  /* {list(t.shape)} {t.dtype} */")
    lines += weights_header_lines(graph, layout)
    lines += ["#endif", ""]
    return "\n".join(lines)


def _args(n: Node, ref: Ref) -> str:
    """The ``swtune_args`` initializer of a CPE step."""
    if n.op == "kernel":
        from tuner.aot.fusion import RESIDUAL_SLOT

        k: Kernel = n.attrs["kernel"]
        # the operands by role (a, b and an expression's further roles), the output as c; after them
        # a fused epilogue's per-channel constants, and last a fused residual add's operand
        operands, vectors = n.inputs[:len(k.roles)], n.inputs[len(k.roles):]
        fields = [f".{r} = {ref(t)}" for r, t in zip((*k.roles, "c"), [*operands, n.output])]
        ptrs = [ref(v) for v in vectors]
        ep = n.attrs.get("epilogue")
        if ep is not None and ep.residual:
            ptrs = [*ptrs[:-1], f"[{RESIDUAL_SLOT}] = {ptrs[-1]}"]
        if ptrs:
            fields.append(f".p = {{ {', '.join(ptrs)} }}")
        return "{ " + ", ".join(fields) + " }"
    return f"{{ .p = {{ {', '.join(ref(t) for t in [*n.inputs, *n.outputs])} }} }}"  # a memory-bound step


def _cpe_call(n: Node, ref: Ref) -> list[str]:
    """One spawn: of the step's kernel, or (first phase of a group) of the group running its phases."""
    from tuner.aot.launch_groups import kernel_name

    group = n.attrs.get("group")
    if group is None:
        return [f"  {{ swtune_args args = {_args(n, ref)};",
                f"    athread_spawn({kernel_name(n)}, &args);",
                "    athread_join(); }"]
    if n.attrs["phase"] > 0:
        return [f"  /* ran in {group.name} (phase {n.attrs['phase']}) */"]
    inits = ",\n      ".join(_args(m, ref) for m in group.nodes)
    return [f"  {{ swtune_args args[{len(group.nodes)}] = {{\n      {inits} }};",
            f"    athread_spawn({group.name}, args);",
            "    athread_join(); }"]


def step_label(n: Node) -> str:
    if n.op == "cpe":
        op = n.attrs["cpe"]
        return f"{n.source}: {n.relax_op} -> CPE {op.name} ({op.blocks} blocks)"
    if n.op == "kernel":
        k: Kernel = n.attrs["kernel"]
        return f"{n.source}: {k.name} {k.workload.key} ({k.status})"
    return f"{n.source}: {n.relax_op} -> MPE {describe(n)}"


def host_file(graph: Graph, kernels: list[Kernel], plan: MemoryPlan, model: str, target: str, ty: str,
              driver: Driver | None = None) -> str:
    """host.c: the run function (every step in order) and ``driver``'s main (by default one
    inference: ``inference_main``)."""
    driver = driver or inference_main
    nodes = graph.nodes
    hz = get_target(target).mpe_clock_hz
    decls = []
    for t in graph.inputs:
        decls.append(f"  {ty} *const {c_var(t)} = inputs[{t.index}];")
    seen: set[int] = set()
    for n in nodes:
        for t in [*n.inputs, *n.outputs]:
            r = t.root
            if r.id in seen or r.kind == "input":
                continue
            seen.add(r.id)
            if r.kind == "const":
                decls.append(f"  {ty} *const {c_var(r)} = W + SWTUNE_W{_const_index(graph, r)};")
            else:
                decls.append(f"  {ty} *const {c_var(r)} = slots[{plan.slot_of[r.id]}];  /* {r.name} {list(r.shape)} */")
    body = []
    for i, n in enumerate(nodes):
        body.append(f"  /* [{i}] {step_label(n)} */")
        body.append("  t0 = sw_cycles();")
        code = _cpe_call(n, c_var) if n.op in ("kernel", "cpe") else emit_mpe(n, c_var, ty)
        body += code
        body.append(f"  step_cycles[{i}] += sw_cycles() - t0;")
    cpe_ops = {n.attrs["cpe"].index: n.attrs["cpe"] for n in nodes if n.op == "cpe"}
    externs = [f"extern void SLAVE_FUN({k.name})(swtune_args *);" for k in kernels]
    externs += [f"extern void SLAVE_FUN({op.name})(swtune_args *);" for _, op in sorted(cpe_ops.items())]
    groups = {n.attrs["group"].index: n.attrs["group"] for n in nodes if n.attrs.get("group") is not None}
    externs += [f"extern void SLAVE_FUN({g.name})(swtune_args *);" for _, g in sorted(groups.items())]
    on_mpe = {n.attrs["function"] for n in nodes if n.op == "tir"}
    used = [f.code for name, f in graph.functions.items() if name in on_mpe]
    generic = [PRELUDE, *used] if used else []
    labels = ",\n".join(f'  "{step_label(n)}"' for n in nodes) or '  ""'
    return f"""/* swtune AOT host program: {model} on {target} ({graph.dtype}). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <athread.h>
#ifdef SWTUNE_MPI
#include <mpi.h>
#endif
#include "swtune_kernel.h"
#include "model.h"

{chr(10).join(externs)}

#define SWTUNE_N_STEPS {len(nodes)}
static const char *const step_names[SWTUNE_N_STEPS > 0 ? SWTUNE_N_STEPS : 1] = {{
{labels}
}};
static unsigned long step_cycles[SWTUNE_N_STEPS > 0 ? SWTUNE_N_STEPS : 1];
static const long slot_elems[SWTUNE_N_SLOTS] = {{ {", ".join(f"{x}L" for x in plan.slot_elems)} }};

{HOST_HELPERS}

{chr(10).join(generic)}

/* The model: every step in order. */
static void swtune_run({ty} *const *inputs, {ty} *const W, {ty} *const *slots) {{
  unsigned long t0;
{chr(10).join(decls)}
{chr(10).join(body)}
  (void)t0; (void)W; (void)slots; (void)inputs;
}}

{driver(graph, plan, ty, hz)}
"""


def read_inputs(graph: Graph, ty: str) -> str:
    """Each input file read into its buffer of the model's type: as it is, or element by element from
    its own dtype (token ids, masks: ``INPUT_FILE_TYPES``)."""
    lines = []
    for i, t in enumerate(graph.inputs):
        raw = INPUT_FILE_TYPES.get(t.dtype) if t.dtype != graph.dtype else None
        if raw is None:
            lines.append(f"  sw_read(argv[{2 + i}], inputs[{i}], sizeof({ty}) * in_elems[{i}]);")
        else:
            lines += [f"  {{ {raw} *raw = sw_alloc(sizeof({raw}) * in_elems[{i}]);  /* {t.dtype} {t.name} */",
                      f"    sw_read(argv[{2 + i}], raw, sizeof({raw}) * in_elems[{i}]);",
                      f"    for (long q = 0; q < in_elems[{i}]; q++) inputs[{i}][q] = ({ty})raw[q];",
                      "    free(raw); }"]
    return "\n".join(lines)


def inference_main(graph: Graph, plan: MemoryPlan, ty: str, hz: float) -> str:
    """``model weights.bin input0.bin [input1.bin ...] output.bin``: one run of the model."""
    outputs = "\n".join(
        f"  if (fwrite({c_var(t)}, sizeof({ty}), SWTUNE_OUTPUT{i}_ELEMS, f) != (size_t)SWTUNE_OUTPUT{i}_ELEMS) "
        f"{{ fprintf(stderr, \"cannot write %s\\n\", argv[argc - 1]); return 2; }}"
        for i, t in enumerate(graph.outputs))
    out_decls = "\n".join(output_decls(graph, plan, ty))
    return f"""int main(int argc, char **argv) {{
  if (argc != SWTUNE_N_INPUTS + 3) {{
    fprintf(stderr, "usage: %s weights.bin input0.bin [...] output.bin  (%d input file(s))\\n",
            argv[0], SWTUNE_N_INPUTS);
    return 2;
  }}
  static const long in_elems[SWTUNE_N_INPUTS] = {{
    {", ".join(f"SWTUNE_INPUT{i}_ELEMS" for i in range(len(graph.inputs)))} }};
  {ty} *W = sw_alloc(SWTUNE_WEIGHTS_BYTES);
  sw_read(argv[1], W, SWTUNE_WEIGHTS_BYTES);
  {ty} *inputs[SWTUNE_N_INPUTS];
  for (int i = 0; i < SWTUNE_N_INPUTS; i++) inputs[i] = sw_alloc(sizeof({ty}) * in_elems[i]);
{read_inputs(graph, ty)}
  {ty} *slots[SWTUNE_N_SLOTS];
  for (int i = 0; i < SWTUNE_N_SLOTS; i++) slots[i] = sw_alloc(sizeof({ty}) * slot_elems[i]);
  athread_init();
  const unsigned long start = sw_cycles();
  swtune_run(inputs, W, slots);
  const unsigned long stop = sw_cycles();
  athread_halt();
  printf("SWTUNE_MODEL_SECONDS=%.9e\\n", (double)(stop - start) / {hz!r});
  if (getenv("SWTUNE_PROFILE"))
    for (int i = 0; i < SWTUNE_N_STEPS; i++)
      printf("SWTUNE_STEP %3d %.9e %s\\n", i, (double)step_cycles[i] / {hz!r}, step_names[i]);
  FILE *f = fopen(argv[argc - 1], "wb");
  if (!f) {{ fprintf(stderr, "cannot write %s\\n", argv[argc - 1]); return 2; }}
{out_decls}
{outputs}
  fclose(f);
  return 0;
}}
"""


def _const_index(graph: Graph, t: Tensor) -> int:
    for i, c in enumerate(graph.consts()):
        if c.id == t.id:
            return i
    raise KeyError(t.name)


def output_decls(graph: Graph, plan: MemoryPlan, ty: str) -> list[str]:
    """Pointers to the outputs in main (the run function's locals are gone by then)."""
    lines = []
    done: set[int] = set()
    for t in graph.outputs:
        r = t.root
        if r.id in done:
            continue
        done.add(r.id)
        if r.kind == "input":
            lines.append(f"  {ty} *const {c_var(r)} = inputs[{r.index}];")
        elif r.kind == "const":
            lines.append(f"  {ty} *const {c_var(r)} = W + SWTUNE_W{_const_index(graph, r)};")
        else:
            lines.append(f"  {ty} *const {c_var(r)} = slots[{plan.slot_of[r.id]}];")
    return lines
