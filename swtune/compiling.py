"""Compiling a whole model ahead of time with the tuning log's best schedules (``compile_model``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swtune.progress import Progress
from swtune.results import Compiled
from swtune.tuning import load_model, model_name
from swtune.tuning_log import DEFAULT_CACHE, active_profile, database_url, db_lookup, program_interval, server_lookup


def compile_model(model: Any, out: str | Path, *, target: str = "sw26010", db: str | None = None,
                  server: str | None = None, token: str | None = None, cache: Path | None = DEFAULT_CACHE,
                  batch: int = 1, width: float = 1.0, image: int = 224,
                  example_inputs: Sequence[Any] | None = None, framework_style: bool = False,
                  progress: Progress | None = None) -> Compiled:
    """Compile ``model`` for ``target`` into the directory ``out`` (created if needed): host C, the tuned
    slave kernels, weights.bin and a Makefile (``make`` for Sunway, ``make emu`` for the x86 emulator).

    ``model``: as ``swtune.load_model`` takes it (a zoo name, an .onnx path, a torch module with
    ``example_inputs``, a Relax module). Schedules come from the service at ``server`` (with ``token``;
    answers kept in the ``cache`` file), else from the tuning log ``db`` (a path or a URL; None:
    ``./swtune.db``); a workload the log does not hold runs a near record or its baseline, and a missing
    log means every workload is untuned (``progress.warning`` says so). The simulated times use the log's
    active simulator profile. ``framework_style``: the reference program, one library call per primitive
    operator, each its own spawn, nothing fused across operators. The compiler's fallbacks are logged
    (logger ``tuner.aot``). Returns a ``Compiled``. Raises ``ValueError`` for an unknown model or a bad
    ``db``, ``tuner.aot.AotError`` for an operator that cannot compile."""
    from tuner.aot import compile_model as aot_compile
    from tuner.aot.framework_style import calls_per_binding
    from tuner.targets import get_target

    progress = progress or Progress()
    tname = get_target(target).name
    url = None if server else database_url(db)  # a bad db is refused before any work
    if server:
        lookup, close = server_lookup(server, token, tname, cache)
    else:
        assert url is not None
        lookup, close = db_lookup(url, tname, progress)
    # simulated times (and the CPE offload decisions they drive) use the tuning log's active profile
    profile = active_profile(tname, server=server, token=token, db_url=url, progress=progress)
    try:
        mod = load_model(model, batch=batch, width=width, image=image, example_inputs=example_inputs)
        calls = calls_per_binding(mod) if framework_style else None
        result = aot_compile(mod, profile.apply(tname) if profile else tname, out, lookup, name=model_name(model),
                             framework_style=calls)
    finally:
        close()
    return Compiled(result, profile, program_interval(profile, result.graph, result.kernels))
