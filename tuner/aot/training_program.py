"""The main() of a compiled training step: N steps over a data file, checkpointed atomically.

The step function (tuner.ir.training) takes the batch inputs, then the carried state (parameters and
optimizer state), and returns the loss, then the new carried state in the same order. The driver runs

    model weights.bin data.bin state.bin STEPS losses.bin final_state.bin [checkpoint.bin EVERY]

(``mpirun -np R model_emu_mpi ...``, built by ``make emu-mpi``: R ranks, each taking its slice of
every global batch: rows ``[r*b, (r+1)*b)`` of each batch input, ``b`` the step's batch; the step's
``allreduce`` nodes average the gradients; rank 0 prints, checkpoints and writes the outputs.)

* ``data.bin``: whole batches one after another, each the batch inputs in order (raw, the model's
  type); step ``s`` takes batch ``s mod (number of batches)``;
* ``state.bin``: the initial carried state; ``final_state.bin`` receives it after the last step and
  ``losses.bin`` the loss of every step (``SWTUNE_LOSS <step> <value>`` is printed as each ends);
* a checkpoint (every ``EVERY`` steps) holds a header (magic, the model's fingerprint, the step, the
  sizes, an FNV-1a checksum of the payload), the carried state and the losses so far. It is written
  to ``<checkpoint>.tmp``, flushed, then renamed over the checkpoint, whose former version becomes
  ``<checkpoint>.prev``: a run killed at any moment leaves a whole checkpoint. A run that finds the
  checkpoint resumes after its step; a checkpoint that is corrupt, truncated or of another model is
  refused with a clear message (exit 3) and left as it is, with the previous one beside it.

Dropout masks (inputs after the batch, one per dropout of the model: tuner.ir.train_modules) are drawn
by the program before each step from a counter-based generator: element ``i`` of mask ``k`` at step
``s`` is kept when ``mix(mix(seed ^ mix(s)) ^ k) ^ i`` mixed once more, as a fraction of 2^64, is at
least ``p`` (``mix`` is SplitMix64's finaliser), and is then ``1 / (1 - p)``. :func:`dropout_mask`
draws the same masks in numpy, so a check can apply them in torch; a resumed run draws the masks
of the steps it runs, as the uninterrupted run did.

The fingerprint hashes the carried state's shapes and the model's name, not the kernels, so a program
rebuilt with better schedules resumes from the checkpoint of the program it replaces.
"""

from __future__ import annotations

import numpy as np

from tuner.aot.host import Driver, c_var, output_decls
from tuner.aot.memory import MemoryPlan
from tuner.ir.graph import AotError, Graph
from tuner.ir.train_modules import Dropout

MAGIC = "SWTCKPT1"


def fingerprint(model: str, carried: list[tuple[int, ...]], dtype: str) -> int:
    """FNV-1a (64 bit) of what a checkpoint must agree on."""
    h = 0xCBF29CE484222325
    for byte in f"{model}|{dtype}|{carried}".encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


_M64 = 0xFFFFFFFFFFFFFFFF


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's step on uint64 arrays (wrapping arithmetic, as in C)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def dropout_mask(seed: int, step: int, index: int, shape: tuple[int, ...], p: float, dtype: str) -> np.ndarray:
    """The mask the program draws for dropout ``index`` at ``step`` (see the module doc)."""
    with np.errstate(over="ignore"):
        key = _mix(_mix(np.array([seed & _M64], np.uint64) ^ _mix(np.array([step], np.uint64)))
                   ^ np.uint64(index))
        u = _mix(key ^ np.arange(int(np.prod(shape)), dtype=np.uint64))
    keep = (u >> np.uint64(11)).astype(np.float64) * 2.0 ** -53 >= p
    return np.where(keep, np.array(1.0 / (1.0 - p)).astype(dtype), np.array(0, dtype)).reshape(shape)


def training_main(model: str, n_data: int, dropouts: list[Dropout] | None = None, seed: int = 0) -> Driver:
    """The driver of a step whose first ``n_data`` inputs are the batch, followed by one mask input
    per dropout (drawn from ``seed``), then the carried state."""
    dropouts = dropouts or []

    def driver(graph: Graph, plan: MemoryPlan, ty: str, hz: float) -> str:
        n_masks = len(dropouts)
        carried = graph.inputs[n_data + n_masks:]
        if len(graph.outputs) != 1 + len(carried) or graph.outputs[0].size != 1:
            raise AotError(f"a training step returns the loss and the {len(carried)} carried tensors; this one "
                           f"returns {len(graph.outputs)} tensors")
        for t, out in zip(carried, graph.outputs[1:]):
            if t.shape != out.shape:
                raise AotError(f"carried tensor {t.name}: the step takes {list(t.shape)} and returns "
                               f"{list(out.shape)}")
        batch = sum(t.size for t in graph.inputs[:n_data])
        state = sum(t.size for t in carried)
        fp = fingerprint(model, [t.shape for t in carried], graph.dtype)
        copy_back = "\n".join(
            f"    memmove(inputs[{n_data + n_masks + i}], {c_var(o)}, sizeof({ty}) * {o.size}L);"
            for i, o in enumerate(graph.outputs[1:]))
        draw = "\n".join(
            f"    draw_mask(inputs[{n_data + k}], {graph.inputs[n_data + k].size}L, "
            f"rank * {graph.inputs[n_data + k].size}L, s, {k}, {d.p!r});"
            for k, d in enumerate(dropouts))
        return _MAIN.format(
            ty=ty, hz=repr(hz), n_data=n_data, n_carried_from=n_data + n_masks, seed=seed & _M64, draw=draw,
            batch=batch, state=state, fp=fp, magic=MAGIC,
            in_elems=", ".join(f"{t.size}L" for t in graph.inputs),
            out_decls="\n".join("  " + line for line in output_decls(graph, plan, ty)),
            loss=c_var(graph.outputs[0]), copy_back=copy_back)

    return driver


# The C text; {{ }} are literal braces (str.format).
_MAIN = r"""
#define SWTUNE_N_DATA {n_data}
#define SWTUNE_BATCH_ELEMS {batch}L
#define SWTUNE_STATE_ELEMS {state}L
#define SWTUNE_FINGERPRINT {fp}ULL
#define SWTUNE_CARRIED_FROM {n_carried_from}
#define SWTUNE_DROPOUT_SEED {seed}ULL

static unsigned long long mix64(unsigned long long z) {{
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}}

/* dropout mask k of step s: 0 or 1 / (1 - p) per element (tuner.aot.training_program.dropout_mask);
   element i of this rank's slice is element first + i of the global batch's mask */
static void draw_mask({ty} *mask, long n, long first, long s, unsigned long long k, double p) {{
  const unsigned long long key = mix64(mix64(SWTUNE_DROPOUT_SEED ^ mix64((unsigned long long)s)) ^ k);
  const {ty} scale = ({ty})(1.0 / (1.0 - p));
  for (long i = 0; i < n; i++)
    mask[i] = (double)(mix64(key ^ (unsigned long long)(first + i)) >> 11) * 0x1p-53 >= p ? scale : ({ty})0;
}}

typedef struct {{
  char magic[8];
  unsigned long long fingerprint;
  long step, state_elems, elem_bytes;
  unsigned long long checksum;
}} swtune_checkpoint_header;

static unsigned long long fnv1a(unsigned long long h, const void *p, size_t n) {{
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ULL;
  return h;
}}

/* The carried state lives in the step's carried inputs; gather/scatter it as one payload. */
static void carried_copy({ty} *const *inputs, {ty} *flat, int to_flat) {{
  static const long elems[SWTUNE_N_INPUTS] = {{ {in_elems} }};
  for (int i = SWTUNE_CARRIED_FROM; i < SWTUNE_N_INPUTS; i++) {{
    if (to_flat) memcpy(flat, inputs[i], sizeof({ty}) * elems[i]);
    else memcpy(inputs[i], flat, sizeof({ty}) * elems[i]);
    flat += elems[i];
  }}
}}

static int write_checkpoint(const char *path, long step, const {ty} *state, const {ty} *losses) {{
  char tmp[4096], prev[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  snprintf(prev, sizeof prev, "%s.prev", path);
  swtune_checkpoint_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, "{magic}", 8);
  h.fingerprint = SWTUNE_FINGERPRINT;
  h.step = step;
  h.state_elems = SWTUNE_STATE_ELEMS;
  h.elem_bytes = sizeof({ty});
  h.checksum = fnv1a(fnv1a(0xCBF29CE484222325ULL, state, sizeof({ty}) * SWTUNE_STATE_ELEMS),
                     losses, sizeof({ty}) * step);
  FILE *f = fopen(tmp, "wb");
  if (!f) {{ fprintf(stderr, "cannot write checkpoint %s\n", tmp); return 0; }}
  int ok = fwrite(&h, sizeof h, 1, f) == 1
           && fwrite(state, sizeof({ty}), SWTUNE_STATE_ELEMS, f) == (size_t)SWTUNE_STATE_ELEMS
           && fwrite(losses, sizeof({ty}), step, f) == (size_t)step;
  ok = (fflush(f) == 0) && ok;
  ok = (fclose(f) == 0) && ok;
  if (!ok) {{ fprintf(stderr, "cannot write checkpoint %s\n", tmp); remove(tmp); return 0; }}
  rename(path, prev);  /* the last whole checkpoint stays beside the new one */
  if (rename(tmp, path) != 0) {{ fprintf(stderr, "cannot rename %s to %s\n", tmp, path); return 0; }}
  return 1;
}}

/* 0: no checkpoint; 1: loaded (step, state, losses); exits 3 on a checkpoint it cannot trust. */
static int read_checkpoint(const char *path, long steps, long *step, {ty} *state, {ty} *losses) {{
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  swtune_checkpoint_header h;
  const char *why = NULL;
  if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, "{magic}", 8) != 0) why = "not a swtune checkpoint";
  else if (h.fingerprint != SWTUNE_FINGERPRINT || h.state_elems != SWTUNE_STATE_ELEMS
           || h.elem_bytes != (long)sizeof({ty})) why = "it is a checkpoint of another model";
  else if (h.step < 0 || h.step > steps) why = "its step is outside this run";
  else if (fread(state, sizeof({ty}), SWTUNE_STATE_ELEMS, f) != (size_t)SWTUNE_STATE_ELEMS
           || fread(losses, sizeof({ty}), h.step, f) != (size_t)h.step || fgetc(f) != EOF) why = "it is truncated";
  else if (fnv1a(fnv1a(0xCBF29CE484222325ULL, state, sizeof({ty}) * SWTUNE_STATE_ELEMS),
                 losses, sizeof({ty}) * h.step) != h.checksum) why = "its checksum does not match (corrupt)";
  fclose(f);
  if (why) {{
    fprintf(stderr, "checkpoint %s: %s; it is left as it is (the previous one, if any, is %s.prev)\n",
            path, why, path);
    exit(3);
  }}
  *step = h.step;
  return 1;
}}

static long file_bytes(const char *path) {{
  FILE *f = fopen(path, "rb");
  if (!f) {{ fprintf(stderr, "cannot open %s\n", path); exit(2); }}
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}}

static void write_all(const char *path, const void *p, size_t bytes) {{
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f) != 0) {{
    fprintf(stderr, "cannot write %s\n", path);
    exit(2);
  }}
}}

int main(int argc, char **argv) {{
  int rank = 0, ranks = 1;  /* data parallel over MPI: each rank a slice of every global batch */
#ifdef SWTUNE_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
#endif
  if (argc != 7 && argc != 9) {{
    fprintf(stderr, "usage: %s weights.bin data.bin state.bin STEPS losses.bin final_state.bin "
                    "[checkpoint.bin EVERY]\n", argv[0]);
    return 2;
  }}
  const long steps = atol(argv[4]);
  const long every = argc == 9 ? atol(argv[8]) : 0;
  if (steps <= 0 || (argc == 9 && every <= 0)) {{ fprintf(stderr, "STEPS and EVERY must be positive\n"); return 2; }}
  static const long in_elems[SWTUNE_N_INPUTS] = {{ {in_elems} }};
  {ty} *W = sw_alloc(SWTUNE_WEIGHTS_BYTES);
  sw_read(argv[1], W, SWTUNE_WEIGHTS_BYTES);
  const long data_bytes = file_bytes(argv[2]);
  const long batch_bytes = (long)sizeof({ty}) * SWTUNE_BATCH_ELEMS * ranks;
  if (data_bytes <= 0 || data_bytes % batch_bytes != 0) {{
    fprintf(stderr, "%s: %ld bytes is not a whole number of batches of %ld bytes\n", argv[2], data_bytes, batch_bytes);
    return 2;
  }}
  const long batches = data_bytes / batch_bytes;
  {ty} *data = sw_alloc(data_bytes);
  sw_read(argv[2], data, data_bytes);
  {ty} *inputs[SWTUNE_N_INPUTS];
  for (int i = 0; i < SWTUNE_N_INPUTS; i++) inputs[i] = sw_alloc(sizeof({ty}) * in_elems[i]);
  {ty} *state = sw_alloc(sizeof({ty}) * SWTUNE_STATE_ELEMS);
  {ty} *losses = sw_alloc(sizeof({ty}) * steps);
  long first = 0;
  if (!(argc == 9 && read_checkpoint(argv[7], steps, &first, state, losses)))
    sw_read(argv[3], state, sizeof({ty}) * SWTUNE_STATE_ELEMS);
  else if (rank == 0)
    printf("SWTUNE_RESUMED %ld\n", first);
  carried_copy(inputs, state, 0);
  {ty} *slots[SWTUNE_N_SLOTS];
  for (int i = 0; i < SWTUNE_N_SLOTS; i++) slots[i] = sw_alloc(sizeof({ty}) * slot_elems[i]);
{out_decls}
  athread_init();
  unsigned long cycles = 0;
  for (long s = first; s < steps; s++) {{
    const {ty} *batch = data + (s % batches) * SWTUNE_BATCH_ELEMS * ranks;
    for (int i = 0; i < SWTUNE_N_DATA; i++) {{  /* input i of the global batch, this rank's rows */
      memcpy(inputs[i], batch + rank * in_elems[i], sizeof({ty}) * in_elems[i]);
      batch += ranks * in_elems[i];
    }}
{draw}
    const unsigned long t0 = sw_cycles();
    swtune_run(inputs, W, slots);
    cycles += sw_cycles() - t0;
    losses[s] = {loss}[0];
    if (rank == 0) {{
      printf("SWTUNE_LOSS %ld %.9e\n", s, (double)losses[s]);
      fflush(stdout);
    }}
{copy_back}
    if (rank == 0 && every && (s + 1) % every == 0) {{
      carried_copy(inputs, state, 1);
      if (!write_checkpoint(argv[7], s + 1, state, losses)) return 2;
    }}
  }}
  athread_halt();
  if (rank != 0) {{
#ifdef SWTUNE_MPI
    MPI_Finalize();
#endif
    return 0;
  }}
  if (steps > first) printf("SWTUNE_STEP_SECONDS=%.9e\n", (double)cycles / {hz} / (double)(steps - first));
  if (getenv("SWTUNE_PROFILE"))
    for (int i = 0; i < SWTUNE_N_STEPS; i++)
      printf("SWTUNE_STEP %3d %.9e %s\n", i, (double)step_cycles[i] / {hz} / (double)(steps - first), step_names[i]);
  carried_copy(inputs, state, 1);
  write_all(argv[5], losses, sizeof({ty}) * steps);
  write_all(argv[6], state, sizeof({ty}) * SWTUNE_STATE_ELEMS);
#ifdef SWTUNE_MPI
  MPI_Finalize();
#endif
  return 0;
}}
"""
