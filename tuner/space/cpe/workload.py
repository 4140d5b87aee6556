"""The identity of a memory-bound CPE kernel: the TVMScript of a one-operator Relax module.

tuner.space.cpe.task makes the text from a model's node (constants as ``const_<k>`` parameters, 0-d
constants and scalars inline). The key is ``cpe-<name>-<sha256 of the text, 16 hex>``: the same
operator at the same shapes gets the same key in any model and process. A worker rebuilds the
operator from the text alone (``from_json`` checks that it parses into exactly one generic step).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from tuner.errors import InvalidWorkloadError
from tuner.workloads import DTYPE_BYTES, MAX_FLOPS, Workload

MAX_SCRIPT_CHARS = 20_000  # a one-operator module prints in a few hundred characters

# read from the text alone (no tvm): `def main(p_0: R.Tensor((1, 64, 56, 56), dtype="float32")) -> R.Tensor(...)`
# and the first `= R.nn.max_pool2d(` of its body
_SIGNATURE = re.compile(r"def main\((?P<params>.*?)\)\s*->\s*(?P<out>R\.Tensor\(.*?\))\s*:", re.S)
_TENSOR = re.compile(r"R\.Tensor\(\((?P<shape>[^)]*)\)")
_CALL = re.compile(r"=\s*R\.(?P<op>[A-Za-z_][\w.]*)\(")


@dataclass(frozen=True)
class CpeKernelWorkload(Workload):
    """A memory-bound operator run block by block on the CPEs."""

    op: ClassVar[str] = "cpe_kernel"  # tuner.kinds.cpe_kernel
    name: str
    script: str
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_BYTES:
            raise InvalidWorkloadError(f"unsupported dtype {self.dtype!r}; expected one of {sorted(DTYPE_BYTES)}")
        if not isinstance(self.script, str) or not self.script.strip() or len(self.script) > MAX_SCRIPT_CHARS:
            raise InvalidWorkloadError(f"a cpe_kernel's script is a non-empty TVMScript text of at most "
                                       f"{MAX_SCRIPT_CHARS} characters")
        if not isinstance(self.name, str) or not self.name.isidentifier() or len(self.name) > 64:
            raise InvalidWorkloadError(f"a cpe_kernel's name is an identifier of at most 64 characters, "
                                       f"got {self.name!r}")

    @property
    def key(self) -> str:
        return f"cpe-{self.name}-{hashlib.sha256(self.script.encode()).hexdigest()[:16]}"

    @property
    def label(self) -> str:
        """``nn.max_pool2d 1x64x56x56 -> 1x64x28x28 float32``: the operator, its tensor parameters'
        shapes, the result's and the dtype, read from the script's text (its name if that fails)."""
        signature, call = _SIGNATURE.search(self.script), _CALL.search(self.script)
        if signature is None:
            return f"{self.name} {self.dtype}"

        def shapes(text: str) -> list[str]:
            return ["x".join(d.strip() for d in m["shape"].split(",") if d.strip()) or "scalar"
                    for m in _TENSOR.finditer(text)]

        op = call["op"] if call else self.name
        return f"{op} {', '.join(shapes(signature['params']))} -> {', '.join(shapes(signature['out']))} {self.dtype}"

    @property
    def flops(self) -> int:
        """Arithmetic and transcendental operations of the whole operator (its legalized C)."""
        from tuner.space.cpe.rebuild import rebuilt

        w = rebuilt(self.script).work
        return int(w.arith + w.transcendental)

    @property
    def bytes_moved(self) -> int:
        from tuner.space.cpe.rebuild import rebuilt

        node = rebuilt(self.script).node
        return sum(t.size for t in {t.root.id: t.root for t in (*node.inputs, *node.outputs)}.values()) \
            * DTYPE_BYTES[self.dtype]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "name": self.name, "script": self.script, "dtype": self.dtype}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> CpeKernelWorkload:
        unknown = set(spec) - {"op", "name", "script", "dtype"}
        if unknown or not isinstance(spec.get("script"), str) or not isinstance(spec.get("name", "op"), str):
            raise InvalidWorkloadError(f"a cpe_kernel workload has string 'name' and 'script' and an optional "
                                       f"'dtype'; unknown fields {sorted(unknown)}")
        from tuner.space.cpe.rebuild import canonical_script, rebuilt

        wl = cls(name=spec.get("name", "op"), script=spec["script"], dtype=spec.get("dtype", "float32"))
        wl = cls(name=wl.name, script=canonical_script(wl.script), dtype=wl.dtype)

        dtype = rebuilt(wl.script).dtype  # raises InvalidWorkloadError naming what is wrong
        if dtype != wl.dtype:
            raise InvalidWorkloadError(f"dtype {wl.dtype!r} does not match the operator's {dtype!r}")
        if wl.flops > MAX_FLOPS:
            raise InvalidWorkloadError(f"{wl.name} has {wl.flops:.3e} operations, above {MAX_FLOPS:.0e}")
        return wl
