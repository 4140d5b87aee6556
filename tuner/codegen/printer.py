"""Lowered TIR of a scheduled op -> Sunway athread C: the slave (CPE) file.

The printer walks the lowered PrimFunc (tuner.ir.tir.lower): the loop annotated ``swtune.cpe``
becomes the CPE prologue (logical CPE from _ROW/_COL or _MYID), other loops become C loops, copy nests
between global and ``local.ldm`` buffers become DMA requests (tuner.codegen.boxes), everything else
(the zeroing and the compute nest) is printed statement by statement with LDM indices flattened by the
pitches of the box that filled the buffer. Knobs the TIR cannot express are applied where the schedule
annotated them: double buffering (a prefetch of the next iteration of the copy's loop into a second
LDM copy; ``db_c``: two output copies behind the ``C_ldm`` pointer, the put asynchronous and waited on
before its copy is reused two tiles later), sharing (bcast: round-robin requests in row-broadcast mode
for ``a``; ``b`` over a column by column broadcast DMA on SW26010-Pro or by register communication on
SW26010), and line-padded puts. An operand a vector loop reads strided along its lanes is repacked after
each fetch into ``{R}_pk`` with the lanes' dimension innermost (the packing the analysis charges), and
an ``acc = "reg"`` register block is printed as a micro-kernel. The compute statements, their
expressions and vector loops are printed by the one C printer (tuner.ir.cprint).
"""

from __future__ import annotations

from typing import Any

from tuner.codegen.boxes import LDM_SCOPE, BoxC, CopyNest, box_c, match_copy
from tuner.codegen.schedule import Scheduled
from tuner.codegen.te_ops import role_group
from tuner.ir.cprint.dtypes import ctype
from tuner.ir.cprint.expr import cexpr
from tuner.ir.cprint.kernel_loop import vector_loop
from tuner.ir.cprint.lanes import gathered_dims
from tuner.ir.cprint.lines import Ctx, for_line
from tuner.ir.cprint.register_block import microkernel
from tuner.ir.tir import const_int, kind, lower
from tuner.space.choices import Order, Pack, Share
from tuner.targets import Family

KERNEL = "swtune_kernel"
LINE = 128
RLC_MSG = 32  # bytes of one register-communication message: a 256-bit vector register (SW26010)


def _cname(name: str) -> str:
    return name.replace(".", "_")


class SlavePrinter:
    def __init__(self, s: Scheduled, func: Any | None = None) -> None:
        self.s = s
        self.func = func if func is not None else lower(s.sch.mod)
        self.pro = s.target.family is Family.SW26010_PRO  # CRTS DMA API and RMA sharing
        self.ds = s.workload.dtype_bytes
        self.ty = ctype(s.workload.dtype)
        self.line_elems = LINE // self.ds
        self.ldm: dict[str, Any] = {}  # role -> LDM buffer var
        self.roles: dict[str, str] = {}
        self.inputs = s.roles  # input roles: a, b for the built-ins; a, a1, b, ... for expressions
        db_group = {"a": bool(s.config["db_a"]), "b": bool(s.config["db_b"]), "c": bool(s.config.get("db_c", 0))}
        self.db = {r: db_group[role_group(r)] for r in (*self.inputs, "c")}
        self.shared = {r: s.shared(r) for r in (*self.inputs, "c")}
        self.dma_mode = s.config["dma"]
        self.put_lines = bool(s.config["put_lines"])
        self.ndims: dict[str, int] = {}
        self.full: dict[str, list[int]] = {}
        self.cpe_var = ""
        self.row_round = self.col_round = ""
        self.mesh = s.config["share"] == Share.MESH.label
        self.chunk_var: str | None = None
        self._collect(self.func.body)
        # operands a vector loop reads strided along its lanes -> the box dimension the lanes run
        # along; each is repacked into {R}_pk with that dimension innermost after every fetch
        self.pack = gathered_dims(self.func.body, self.roles)
        self.lanes = max(1, int(s.config.get("simd", 1)))

    # ---- pre-pass: the LDM buffers and their roles -----------------------------------------
    def _collect(self, node: Any) -> None:
        k = kind(node)
        if k == "AllocBuffer":
            buf = node.buffer
            if buf.scope() == LDM_SCOPE:
                role = self.s.ldm_roles.get(buf.name)
                assert role is not None, f"LDM buffer {buf.name} is no stage of the schedule"
                self.ldm[role] = buf
                self.roles[buf.name] = role
        elif k == "SeqStmt":
            for x in node.seq:
                self._collect(x)
        elif k in ("For",):
            self._collect(node.body)
        elif k == "IfThenElse":
            self._collect(node.then_case)
            if node.else_case is not None:
                self._collect(node.else_case)
        elif k in ("AttrStmt", "LetStmt", "DeclBuffer"):
            self._collect(node.body)

    def _box(self, nest: CopyNest, env: dict[str, str]) -> BoxC:
        pl = self.put_lines and nest.role == "c"
        # host.py stores b tiled
        packed = role_group(nest.role) == "b" and self.s.config.get("pack", Pack.NONE.label) == Pack.B.label
        box = box_c(nest, env, self.ds, nest.role, put_lines=pl, line_elems=self.line_elems, packed=packed)
        self.ndims[nest.role] = len(box.bases)
        self.full[nest.role] = box.full
        return box

    # ---- expressions -----------------------------------------------------------------------
    def ldm_ref(self, buf: Any, indices: list, env: dict[str, str] | None = None) -> str:
        role = self.roles[buf.name]
        slot = f"{role}_s"
        # a dimension TVM allocated with extent 1 holds one point per tile: its local index is 0 (TVM
        # writes it rebased, ``start - start``, so subtracting the box origin again would be wrong)
        flat = " + ".join(f"({cexpr(i, env or {})} - {role}_o[{slot}][{d}]) * {role}_p[{slot}][{d}]"
                          for d, i in enumerate(indices) if not _is_one(buf.shape[d])) or "0"
        return f"{role.upper()}_ldm[{slot}][{flat}]"

    def ldm_shape(self, buf: Any) -> list[int]:
        """The extents of ``buf``'s LDM tile as the vector loops see them. A line-padded output's rows
        are whole lines (boxes.py box_c), never one element, so its last dimension is not a unit one
        that the lanes could skip: along any other dimension the output tile is strided."""
        shape = [const_int(e) for e in buf.shape]
        if self.put_lines and self.roles.get(buf.name) == "c":
            shape[-1] = self.line_elems
        return shape

    def pk_ref(self, e: Any, env: dict[str, str] | None = None) -> str:
        """An element of the packed copy of a gathered operand (its lanes' dimension innermost)."""
        role = self.roles[e.source.name]
        slot = f"{role}_s"
        flat = " + ".join(f"({cexpr(i, env or {})} - {role}_o[{slot}][{d}]) * {role}_q[{d}]"
                          for d, i in enumerate(e.indices))
        return f"{role.upper()}_pk[{flat}]"

    def pack_aligned(self, role: str) -> bool:
        """Every row of ``role``'s repacked copy starts on a whole vector (its full box's lanes
        dimension is a multiple of the lanes)."""
        return self.full[role][self.pack[role]] % self.lanes == 0

    def _pack_copy(self, role: str, slot: str, ctx: Ctx) -> None:
        """Repack LDM copy ``slot`` of a gathered operand: the lanes' dimension innermost, other
        dimensions in box order -- a scalar load and store per element on P1, the packing
        tuner/space/analysis.py charges (pack_elems). When the full box's lanes dimension is whole
        vectors, a ragged tile's rows are padded to whole vectors too (within the full box's size), so
        every row starts on a vector and the register block's aligned loads hold; otherwise rows are
        dense (the loads are unaligned anyway: the loop has a scalar tail) and the copy is exactly the
        box, the LDM the analysis charges."""
        d0, nd, w = self.pack[role], self.ndims[role], self.lanes
        order = [d for d in range(nd) if d != d0] + [d0]
        n = lambda d: f"{role}_n[{slot}][{d}]"  # noqa: E731
        ctx.emit(f"{role}_q[{d0}] = 1;")
        prev = f"((({n(d0)}) + {w - 1}) / {w} * {w})" if self.pack_aligned(role) else n(d0)
        for d in reversed(order[:-1]):
            ctx.emit(f"{role}_q[{d}] = {prev};")
            prev = f"{role}_q[{d}] * {n(d)}"
        for d in order:
            ctx.emit(f"for (int _k{d} = 0; _k{d} < {n(d)}; _k{d}++)")
        src = " + ".join(f"_k{d} * {role}_p[{slot}][{d}]" for d in range(nd))
        dst = " + ".join(f"_k{d} * {role}_q[{d}]" for d in range(nd))
        ctx.emit(f"  {role.upper()}_pk[{dst}] = {role.upper()}_ldm[{slot}][{src}];")

    def load(self, e: Any, env: dict[str, str] | None = None) -> str:
        src = e.source
        if src.scope() != LDM_SCOPE:
            raise NotImplementedError(f"compute reads global buffer {src.name}")
        return self.ldm_ref(src, list(e.indices), env)

    # ---- statements ------------------------------------------------------------------------
    def stmt(self, node: Any, ctx: Ctx, guard: str | None) -> None:
        k = kind(node)
        if k == "SeqStmt":
            for x in node.seq:
                self.stmt(x, ctx, guard)
            return
        if k == "AllocBuffer":
            return
        if k in ("AttrStmt", "DeclBuffer", "LetStmt"):
            self.stmt(node.body, ctx, guard)
            return
        nest = match_copy(node, self.roles)
        if nest is not None:
            self.copy(nest, ctx, guard, {})
            return
        if k == "For":
            self.loop(node, ctx, guard)
            return
        self.leaf(node, ctx, guard)

    def leaf(self, node: Any, ctx: Ctx, guard: str | None) -> None:
        if guard:
            ctx.emit(f"if ({guard}) {{")
            ctx.depth += 1
        self.plain(node, ctx)
        if guard:
            ctx.depth -= 1
            ctx.emit("}")

    def plain(self, node: Any, ctx: Ctx, block: bool = True) -> None:
        """Print a compute statement; ``block``: an acc = "reg" register block becomes the micro-kernel."""
        k = kind(node)
        if k == "SeqStmt":
            for x in node.seq:
                self.plain(x, ctx)
        elif k == "For":
            v = node.loop_var.name
            ann = dict(node.annotations)
            if block and microkernel(self, node, ctx):
                return
            w = int(ann.get("swtune.simd", 1))
            if w > 1 and vector_loop(self, node, ctx, w):
                return
            unroll = int(ann.get("swtune.unroll", 1))
            if unroll > 1:
                ctx.emit(f"SW_UNROLL({unroll})")
            ctx.emit(for_line("int", v, None, cexpr(node.extent, {}), f"{v}++"))
            ctx.depth += 1
            self.plain(node.body, ctx)
            ctx.depth -= 1
            ctx.emit("}")
        elif k == "IfThenElse":
            ctx.emit(f"if ({cexpr(node.condition, {})}) {{")
            ctx.depth += 1
            self.plain(node.then_case, ctx, block)
            ctx.depth -= 1
            if node.else_case is not None:
                ctx.emit("} else {")
                ctx.depth += 1
                self.plain(node.else_case, ctx, block)
                ctx.depth -= 1
            ctx.emit("}")
        elif k == "BufferStore":
            if node.buffer.scope() != LDM_SCOPE:
                raise NotImplementedError(f"compute writes global buffer {node.buffer.name}")
            lhs = self.ldm_ref(node.buffer, list(node.indices))
            ctx.emit(f"{lhs} = {cexpr(node.value, {}, self.load)};")
        else:
            raise NotImplementedError(f"cannot print statement {k}")

    def _copies_in(self, node: Any) -> list[CopyNest]:
        k = kind(node)
        if k == "SeqStmt":
            out = []
            for x in node.seq:
                out += self._copies_in(x)
            return out
        nest = match_copy(node, self.roles)
        if nest is not None:
            return [nest]
        if k == "For":
            return self._copies_in(node.body)
        if k in ("AttrStmt", "DeclBuffer", "LetStmt"):
            return self._copies_in(node.body)
        return []

    def loop(self, node: Any, ctx: Ctx, guard: str | None) -> None:
        ann = dict(node.annotations)
        v = node.loop_var.name
        ext = const_int(node.extent)
        if "swtune.cpe" in ann:
            self.cpe_prologue(v, ctx)
            self.stmt(node.body, ctx, guard)
            return
        if not self._copies_in(node) and "swtune.rounds" not in ann:
            self.leaf(node, ctx, guard)
            return
        rounds = ann.get("swtune.rounds")
        if "swtune.chunks" in ann:
            self.chunk_var = v
        row_first = self.s.config["tile_order"] == Order.ROW.label
        if rounds == "outer":
            if row_first:
                self.row_round = v
            else:
                self.col_round = v
        elif rounds == "inner":
            if row_first:
                self.col_round = v
            else:
                self.row_round = v
        # copies directly in this loop's body that are double-buffered: prologue fetch
        direct = [n for n in self._direct_copies(node.body) if n.direction == "get"]
        for nest in direct:
            if self.db[nest.role]:
                self.fetch(nest, ctx, self._copy_guard(nest, guard, {v: "0"}), {v: "0"}, "0")
        ctx.emit(for_line("int", v, None, str(ext), f"{v}++"))
        ctx.depth += 1
        inner_guard = guard
        if rounds == "inner":
            pc = self.s.pc
            ctx.emit(f"const int _rt = {self.row_round} * {self.s.pr} + {self.cpe_var} / {pc};")
            ctx.emit(f"const int _ct = {self.col_round} * {pc} + {self.cpe_var} % {pc};")
            ctx.emit(f"const int _tile_ok = _rt < {self.s.rows_total} && _ct < {self.s.cols_total};")
            inner_guard = "_tile_ok"
            put = [n for n in self._direct_copies(node.body) if n.direction == "put"]
            for nest in put:
                box = self._box(nest, {})
                if self.db["c"]:
                    # db_c: this tile fills the other output copy; the put issued from it two tiles
                    # ago must have drained it first. C_ldm points at the copy, so the tile's code
                    # (and an AOT epilogue before the put) reads C_ldm[0] either way.
                    ctx.emit("c_slot ^= 1; C_ldm = &C_buf[c_slot];",
                             "SW_WAIT(&c_reply[c_slot], c_exp[c_slot]);")
                ctx.emit(*box.setup("0"))
        self.stmt_body(node.body, ctx, inner_guard, v, ext)
        ctx.depth -= 1
        ctx.emit("}")
        if "swtune.chunks" in ann:
            self.chunk_var = None

    def _direct_copies(self, body: Any) -> list[CopyNest]:
        items = body.seq if kind(body) == "SeqStmt" else [body]
        out = []
        for x in items:
            n = match_copy(x, self.roles)
            if n is not None:
                out.append(n)
        return out

    def stmt_body(self, body: Any, ctx: Ctx, guard: str | None, var: str, ext: int) -> None:
        items = body.seq if kind(body) == "SeqStmt" else [body]
        for x in items:
            nest = match_copy(x, self.roles)
            if nest is not None and nest.direction == "get" and self.db[nest.role]:
                self.wait(nest, ctx, self._copy_guard(nest, guard, {}), f"({var} & 1)")
                ctx.emit(f"if ({var} + 1 < {ext}) {{")
                ctx.depth += 1
                nxt = {var: f"({var} + 1)"}
                self.fetch(nest, ctx, self._copy_guard(nest, guard, nxt), nxt, f"(({var} + 1) & 1)")
                ctx.depth -= 1
                ctx.emit("}")
                continue
            self.stmt(x, ctx, guard)

    # ---- CPE mapping -----------------------------------------------------------------------
    def cpe_prologue(self, var: str, ctx: Ctx) -> None:
        pr, pc = self.s.pr, self.s.pc
        self.cpe_var = var
        if pr <= 8 and pc <= 8:
            ctx.emit(f"if (_ROW >= {pr} || _COL >= {pc}) return;",
                     f"const int {var} = _ROW * {pc} + _COL;")
        else:
            ctx.emit(f"const int {var} = _MYID;")
        ctx.emit(f"const int _ci = {var} / {pc}, _cj = {var} % {pc};")

    # ---- copies ----------------------------------------------------------------------------
    def _copy_guard(self, nest: CopyNest, guard: str | None, env: dict[str, str]) -> str | None:
        """When a CPE issues a copy: only for tiles that exist. TVM may simplify a row tile's
        coordinates modulo the axis (e.g. a batch of 1), so a missing tile is not always an empty
        box. Shared copies are guarded only by what the whole mesh row (column) has in common."""
        s = self.s
        if guard:  # inside the inner rounds loop: this CPE's (row tile, col tile)
            if self.shared[nest.role]:
                return f"_rt < {s.rows_total}" if role_group(nest.role) == "a" else f"_ct < {s.cols_total}"
            return guard
        # a reused operand fetched in the outer rounds loop
        if role_group(nest.role) == "a":
            rr = env.get(self.row_round, self.row_round)
            g = f"({rr}) * {s.pr} + _ci < {s.rows_total}"
            return g if self.shared[nest.role] else f"{g} && _cj < {s.cols_total}"
        cr = env.get(self.col_round, self.col_round)
        g = f"({cr}) * {s.pc} + _cj < {s.cols_total}"
        return g if self.shared[nest.role] else f"{g} && _ci < {s.rows_total}"

    def copy(self, nest: CopyNest, ctx: Ctx, guard: str | None, env: dict[str, str]) -> None:
        if nest.direction == "put":
            self.put(nest, ctx, guard)
            return
        g = self._copy_guard(nest, guard, env)
        self.fetch(nest, ctx, g, env, "0")
        self.wait(nest, ctx, g, "0")

    def _open(self, ctx: Ctx, guard: str | None) -> None:
        ctx.emit(f"if ({guard}) {{" if guard else "{")
        ctx.depth += 1

    def _close(self, ctx: Ctx) -> None:
        ctx.depth -= 1
        ctx.emit("}")

    def _sync(self, role: str) -> str:
        if role_group(role) == "a":
            mask = (1 << self.s.pc) - 1
            return f"SW_SYNC_ROW({mask});"
        mask = (1 << self.s.pr) - 1
        return f"SW_SYNC_COL({mask});"

    def fetch(self, nest: CopyNest, ctx: Ctx, guard: str | None, env: dict[str, str], slot: str) -> None:
        """Issue the gets of one box into LDM copy ``slot``."""
        r = nest.role
        box = self._box(nest, env)
        self._open(ctx, guard)
        ctx.emit(f"const int _sl = {slot};")
        if self.shared[r]:
            ctx.emit(self._sync(r))
        ctx.emit(*box.setup("_sl"))
        ctx.emit(f"if ({r}_ok[_sl]) {{")
        ctx.depth += 1
        dst = f"{r.upper()}_ldm[_sl]"
        mem = f"_arg_{r}"
        if self.shared[r] and self.mesh:  # the owner of this k tile fetches; wait() sends it
            owner = self._owner(r, env)
            act = lambda mo, lo, ln, bs, gp: [  # noqa: E731
                f"SW_GET({mem} + {mo}, &{dst}[{lo}], {ln}, {bs}, {gp}, &{r}_reply[_sl]); {r}_exp[_sl]++;"]
            ctx.emit(f"if ({owner}) {{")
            ctx.depth += 1
            ctx.emit(*box.requests("_sl", self.dma_mode, act))
            ctx.depth -= 1
            ctx.emit("}")
        elif not self.shared[r]:
            act = lambda mo, lo, ln, bs, gp: [  # noqa: E731
                f"SW_GET({mem} + {mo}, &{dst}[{lo}], {ln}, {bs}, {gp}, &{r}_reply[_sl]); {r}_exp[_sl]++;"]
            ctx.emit(*box.requests("_sl", self.dma_mode, act))
        elif role_group(r) == "a" or self.pro:
            me, p = ("_cj", self.s.pc) if role_group(r) == "a" else ("_ci", self.s.pr)
            macro = "SW_GET_ROWBC" if role_group(r) == "a" else "SW_GET_COLBC"
            count = "_rq_all" if self.pro else f"{r}_exp[_sl]"
            act = lambda mo, lo, ln, bs, gp: [  # noqa: E731
                f"if (_rq % {p} == {me}) {{ {macro}({mem} + {mo}, &{dst}[{lo}], {ln}, {bs}, {gp}, "
                f"&{r}_reply[_sl]); {'' if self.pro else count + '++;'} }}",
                *([f"{r}_exp[_sl]++;"] if self.pro else [])]
            ctx.emit(*box.requests("_sl", self.dma_mode, act))
        else:  # b over the column on SW26010: own share by DMA, then register communication
            p = self.s.pr
            act = lambda mo, lo, ln, bs, gp: [  # noqa: E731
                f"if (_rq % {p} == _ci) {{ SW_GET({mem} + {mo}, &{dst}[{lo}], {ln}, {bs}, {gp}, "
                f"&{r}_reply[_sl]); {r}_exp[_sl]++; }}"]
            ctx.emit(*box.requests("_sl", self.dma_mode, act))
            ctx.emit(f"SW_WAIT(&{r}_reply[_sl], {r}_exp[_sl]);")
            ctx.emit(f"for (int _own = 0; _own < {p}; _own++) {{")
            ctx.depth += 1
            act2 = lambda mo, lo, ln, bs, gp: [  # noqa: E731
                f"if (_rq % {p} == _own) sw_rlc_col_span((char *)&{dst}[{lo}], ({ln}), _own, _ci, {p});"]
            ctx.emit(*box.requests("_sl", self.dma_mode, act2))
            ctx.emit(self._sync(r))
            ctx.depth -= 1
            ctx.emit("}")
        ctx.depth -= 1
        ctx.emit("}")
        self._close(ctx)

    def _owner(self, role: str, env: dict[str, str]) -> str:
        """mesh: CPE column (a) / row (b) that fetches the current k tile."""
        kt = env.get(self.chunk_var, self.chunk_var) if self.chunk_var else "0"
        me = "_cj" if role_group(role) == "a" else "_ci"
        return f"{me} == ({kt}) % {self.s.pr}"

    def wait(self, nest: CopyNest, ctx: Ctx, guard: str | None, slot: str) -> None:
        r = nest.role
        self._open(ctx, guard)
        ctx.emit(f"SW_WAIT(&{r}_reply[{slot}], {r}_exp[{slot}]);")
        if self.shared[r] and self.mesh:
            p = self.s.pr
            owner = self._owner(r, {})
            me = "_cj" if role_group(r) == "a" else "_ci"
            nbytes = " * ".join(f"{r}_n[{slot}][{d}]" for d in range(self.ndims[r])) + f" * {self.ds}"
            buf = f"{r.upper()}_ldm[{slot}]"
            ctx.emit(f"if ({r}_ok[{slot}]) {{")
            ctx.depth += 1
            if self.pro:
                call = "athread_rma_row_ibcast" if role_group(r) == "a" else "athread_rma_col_ibcast"
                ctx.emit(f"if ({owner}) {call}({buf}, {buf}, {nbytes}, &{r}_lrply, &{r}_rrply[{slot}]);",
                         f"{r}_rexp[{slot}]++;",
                         f"athread_rma_wait_value(&{r}_rrply[{slot}], {r}_rexp[{slot}]);")
            else:
                fn = "sw_rlc_row" if role_group(r) == "a" else "sw_rlc_col"
                ctx.emit(f"sw_kt_owner = ({owner.split(' == ')[1]});",
                         f"{fn}((char *){buf}, {nbytes}, sw_kt_owner, {me}, {p});")
            ctx.depth -= 1
            ctx.emit("}")
        elif self.shared[r] and not self.pro:
            ctx.emit(self._sync(r))
        ctx.emit(f"{r}_s = {slot};")
        if r in self.pack:
            ctx.emit(f"if ({r}_ok[{slot}]) {{")
            ctx.depth += 1
            self._pack_copy(r, slot, ctx)
            ctx.depth -= 1
            ctx.emit("}")
        self._close(ctx)

    def put(self, nest: CopyNest, ctx: Ctx, guard: str | None) -> None:
        box = self._box(nest, {})
        self._open(ctx, guard)
        ctx.emit("if (c_ok[0]) {")
        ctx.depth += 1
        rp = "c_slot" if self.db["c"] else "0"
        act = lambda mo, lo, ln, bs, gp: [  # noqa: E731
            f"SW_PUT(&C_ldm[0][{lo}], _arg_c + {mo}, {ln}, {bs}, {gp}, &c_reply[{rp}]); c_exp[{rp}]++;"]
        ctx.emit(*box.requests("0", self.dma_mode, act))
        if not self.db["c"]:  # db_c: asynchronous, waited on before this copy is reused
            ctx.emit("SW_WAIT(&c_reply[0], c_exp[0]);")
        ctx.depth -= 1
        ctx.emit("}")
        self._close(ctx)

    # ---- file ------------------------------------------------------------------------------
    def ldm_elems(self, role: str) -> int:
        n = 1
        for e in self.full[role]:
            n *= e
        return n

    def slot_elems(self, role: str) -> int:
        """Elements of one declared LDM copy: the tile, padded to whole 32-B vectors for an operand
        sw_rlc_row/col send over the mesh, so that every copy starts 32-B aligned and each message,
        the last one too, is one aligned vector load / store inside the buffer."""
        n = self.ldm_elems(role)
        if not (self.mesh and self.shared[role] and not self.pro and role != "c"):
            return n
        assert RLC_MSG % self.ds == 0, f"{self.ds}-byte elements do not tile a {RLC_MSG}-B message"
        per = RLC_MSG // self.ds
        return -(-n // per) * per

    def render(self) -> str:
        body = Ctx()
        self.stmt(self.func.body, body, None)
        ty = self.ty
        decl = []
        for role in (*self.inputs, "c"):
            slots = 2 if self.db[role] else 1
            nd = self.ndims[role]
            if role == "c" and self.db["c"]:  # two copies behind the C_ldm pointer, one box
                decl += [
                    f"__thread_local {ty} C_buf[2][{self.ldm_elems(role)}] __attribute__((aligned(64)));",
                    f"__thread_local long c_o[1][{nd}];",
                    f"__thread_local int c_n[1][{nd}], c_p[1][{nd}], c_ok[1];",
                    "__thread_local volatile SW_REPLY_T c_reply[2];",
                    "__thread_local long c_exp[2];",
                ]
                continue
            decl += [
                f"__thread_local {ty} {role.upper()}_ldm[{slots}][{self.slot_elems(role)}] "
                "__attribute__((aligned(64)));",
                f"__thread_local long {role}_o[{slots}][{nd}];",
                f"__thread_local int {role}_n[{slots}][{nd}], {role}_p[{slots}][{nd}], {role}_ok[{slots}];",
                f"__thread_local volatile SW_REPLY_T {role}_reply[{slots}];",
                f"__thread_local long {role}_exp[{slots}];",
            ]
            if role in self.pack:  # the repacked copy: one box, lanes' dimension innermost (_pack_copy)
                elems = 1
                for e in self.full[role]:
                    elems *= e
                decl += [f"__thread_local {ty} {role.upper()}_pk[{elems}] __attribute__((aligned(64)));",
                         f"__thread_local int {role}_q[{nd}];"]
            if self.mesh and role != "c" and self.pro:
                decl += [f"__thread_local volatile SW_REPLY_T {role}_rrply[{slots}], {role}_lrply;",
                         f"__thread_local long {role}_rexp[{slots}];"]
        head = [
            f"/* swtune slave kernel: {self.s.workload.key} on {self.s.target.name}",
            f" * config: {self.s.config} */",
            *SLAVE_INCLUDES,
            "",
            *decl,
            "",
            SW_RLC_HELPER,
            f"void {KERNEL}(swtune_args *_arg) {{",
            f"  {ty} " + ", ".join(f"*const _arg_{r} = _arg->{r}" for r in (*self.inputs, "c")) + ";",
            "  int " + ", ".join(f"{r}_s = 0" for r in (*self.inputs, "c")) + ";",
            *(f"  for (int _x = 0; _x < 2 && _x < (int)(sizeof {r}_exp / sizeof {r}_exp[0]); _x++) "
              f"{{ {r}_reply[_x] = 0; {r}_exp[_x] = 0; }}" for r in self.inputs),
            *(["  c_reply[0] = 0; c_exp[0] = 0; c_reply[1] = 0; c_exp[1] = 0;",
               f"  {ty} (*C_ldm)[{self.ldm_elems('c')}] = &C_buf[0]; int c_slot = 0;"]
              if self.db["c"] else ["  c_reply[0] = 0; c_exp[0] = 0;"]),
            "  int sw_kt_owner = 0; (void)sw_kt_owner;",
        ]
        if self.mesh and self.pro:
            for r in self.inputs:
                head.append(f"  for (int _x = 0; _x < {2 if self.db[r] else 1}; _x++) {{ {r}_rrply[_x] = 0; "
                            f"{r}_rexp[_x] = 0; }} {r}_lrply = 0;")
            head.append("  athread_ssync_array();  /* every reply word is reset before any RMA arrives */")
        tail = ["  " + " ".join(f"(void){r}_s;" for r in (*self.inputs, "c")), "}", ""]
        if self.db["c"]:  # the last puts of both copies complete before the kernel returns
            tail = ["  SW_WAIT(&c_reply[0], c_exp[0]); SW_WAIT(&c_reply[1], c_exp[1]);", *tail]
        return "\n".join(head + body.lines + tail)


# Headers every slave file starts with (one kernel here, a whole model's kernels in tuner.aot).
SLAVE_INCLUDES = ('#include "swtune_kernel.h"', "#include <slave.h>", "#include <string.h>", "#include <math.h>",
                  "#include <simd.h>",
                  '#include "swtune_slave_api.h"')

# sw_rlc_row and sw_rlc_col are one loop nest on the row bus (putr/getr, peers = cols) and on the
# column bus (putc/getc, peers = rows)
_RLC_BUS = r"""static void sw_rlc_{bus}(char *p, long len, int owner, int me, int {peers}) {{
  doublev4 v;
  long off;
  if (me != owner) {{
    for (off = 0; off < len; off += 32) {{ v = simd_get{x}(v); simd_store(v, (double *)(p + off)); }}
  }} else if ({peers} == 8) {{  /* one {busname} broadcast reaches the 7 others */
    for (off = 0; off < len; off += 32) {{ simd_load(v, (double *)(p + off)); simd_put{x}(v, 8); }}
  }} else {{
    for (off = 0; off < len; off += 32) {{
      simd_load(v, (double *)(p + off));
      for (int {i} = 0; {i} < {peers}; {i}++) if ({i} != me) simd_put{x}(v, {i});
    }}
  }}
}}
"""

_RLC_HEAD = r"""#ifndef SWTUNE_PRO
/* Register communication, as tuner/space/analysis.py charges it: each 32-B message is one vector load
   + putr (putc) on the owner -- one broadcast over a whole row (column) of 8, a send to each other CPE
   over a partial one -- and getr (getc) + one vector store on every receiver.
   sw_rlc_row / sw_rlc_col: `p` is 32-B aligned and the 32-B multiple at or above `len` stays inside
   its buffer (the printer pads such buffers' copies to whole vectors), so every message, the last
   one too, is one aligned simd_load / simd_store. */
"""
_RLC_SPAN = r"""/* Column register communication of one DMA request's region of any alignment and length (bcast's b
   on SW26010): whole messages by unaligned vector loads / stores, then the ragged tail (< 32 B) as
   one more message copied byte by byte, outside the loop; the bytes past the region are not touched. */
static void sw_rlc_col_span(char *p, long len, int owner, int me, int rows) {
  doublev4 v;
  long off, whole = len & ~31L, tail = len - whole;
  if (me != owner) {
    for (off = 0; off < whole; off += 32) { v = simd_getc(v); simd_storeu(v, (double *)(p + off)); }
    if (tail) { v = simd_getc(v); memcpy(p + whole, &v, tail); }
  } else {
    for (off = 0; off < whole; off += 32) {
      simd_loadu(v, (double *)(p + off));
      if (rows == 8) simd_putc(v, 8);
      else for (int r = 0; r < rows; r++) if (r != me) simd_putc(v, r);
    }
    if (tail) {
      v = simd_set_doublev4(0.0, 0.0, 0.0, 0.0);
      memcpy(&v, p + whole, tail);
      if (rows == 8) simd_putc(v, 8);
      else for (int r = 0; r < rows; r++) if (r != me) simd_putc(v, r);
    }
  }
}
#endif
"""
SW_RLC_HELPER = (_RLC_HEAD + _RLC_BUS.format(bus="row", peers="cols", x="r", busname="row", i="c")
                 + _RLC_BUS.format(bus="col", peers="rows", x="c", busname="column", i="r") + _RLC_SPAN)



def _is_one(extent: Any) -> bool:
    return kind(extent) == "IntImm" and int(extent.value) == 1
