"""Code generation of statements and calls, with the hoisting of field reads a body
cannot change (:meth:`StmtGen.body_with_hoisting`)."""
from __future__ import annotations

from typing import Optional

from ..frontend import ir
from ..frontend.exprs import expr_text
from ..frontend.scope import unsupported
from ..frontend.types import Bits, Bool, EnumT, ObjT, StackT, StructT
from .gen_base import decl_of, has_return, may_exit, operands_of, pyfield


class StmtGen:
    """Statements of :class:`.codegen.CodeGen`."""

    # ------------------------------------------------------------------------------ hoisting
    def body_with_hoisting(self, body: ir.Stmt) -> None:
        """Generate an action body, first loading into locals the scalar fields it reads more
        than once and never writes (``meta.alu_mode`` read by every lane of an ALU action).
        Only for bodies whose effects are all visible here: no calls of (non-inlined) actions,
        functions, tables, controls or header methods, no switch, no header stacks. Loading a
        struct field early cannot fail, and nothing in the body changes it, so every read sees
        the same value as before."""
        reads, written = {}, set()
        if not self._scan_stmt(body, reads, written):
            self.stmt(body)
            return
        saved = self.hoisted
        self.hoisted = dict(saved)
        for text, (count, names) in reads.items():
            if count >= 2 and text not in self.hoisted and not (names & written):
                h = self.fresh("h")
                self.out.line(f"{h} = {text}")
                self.hoisted[text] = h
        try:
            self.stmt(body)
        finally:
            self.hoisted = saved

    def _chain(self, e) -> Optional[tuple]:
        """(text, names) of a field chain ``base.f1...fn`` rooted at an already named variable
        through structs/headers only, else None."""
        names = []
        x = e
        while isinstance(x, ir.Member):
            if not isinstance(x.expr.type, StructT):
                return None
            names.append(x.member)
            x = x.expr
        if not isinstance(x, ir.Path) or x.sym not in self.names or x is e:
            return None
        base = self.names[x.sym]
        if not base.startswith(("p_", "c_")):    # parameters and control variables only
            return None
        names.append(base)
        text = base + "".join("." + pyfield(n) for n in reversed(names[:-1]))
        return text, frozenset(names)

    def _scan_expr(self, e, reads: dict) -> bool:
        if e is None or getattr(e, "const", None) is not None:
            return True
        if isinstance(e, ir.Member):
            c = self._chain(e)
            if c is not None:
                if isinstance(e.type, (Bits, Bool, EnumT)):
                    n, _ = reads.get(c[0], (0, None))
                    reads[c[0]] = (n + 1, c[1])
                return True
            if isinstance(e.expr.type, StackT):
                return False
            return self._scan_expr(e.expr, reads)
        if isinstance(e, (ir.IntLit, ir.BoolLit, ir.StringLit, ir.Path, ir.TypeMember)):
            return True
        operands = operands_of(e)
        if operands is not None:
            return all(self._scan_expr(x, reads) for x in operands)
        if isinstance(e, ir.StructExpr):
            return all(self._scan_expr(x, reads) for x in e.values)
        if isinstance(e, ir.Call):
            k = getattr(e, "call_kind", None)
            return bool(k) and k[0] == "header" and k[1] == "isValid"
        return False

    def _scan_table_apply(self, e, reads: dict, written: set) -> bool:
        """A table apply: its keys are read; any of its actions may run (their writes count)."""
        table = e.func.expr.sym.decl
        if not isinstance(table, ir.TableDecl):
            return False
        if not all(self._scan_expr(k.expr, reads) for k in table.keys):
            return False
        for sym in table.action_decls:
            d = getattr(sym, "decl", None)
            if not isinstance(d, ir.ActionDecl) or not self._scan_stmt(d.body, {}, written):
                return False
            for p in d.params:          # an action's parameters are its own locals
                written.add(f"p_{p.name}")
                written.add(p.name)
        for ref, sym in zip(table.actions, table.action_decls):
            # arguments bound in the actions list: read, and written back for out/inout
            dparams = [p for p in sym.decl.params if p.direction]
            for a, p in zip(ref.args or [], dparams):
                if p.direction in ("out", "inout"):
                    if not self._scan_target(a, reads, written):
                        return False
                elif not self._scan_expr(a, reads):
                    return False
        return True

    def _scan_target(self, t, reads: dict, written: set) -> bool:
        while isinstance(t, ir.Slice):
            t = t.expr
        if isinstance(t, ir.DontCare):
            return True
        x = t
        while isinstance(x, ir.Member):
            if isinstance(x.expr.type, StackT):
                return False
            written.add(x.member)
            x = x.expr
        if not isinstance(x, ir.Path):
            return False
        if x is t:                  # the whole variable assigned
            written.add(self.names.get(x.sym, x.name))
            written.add(x.name)
        return True

    def _scan_stmt(self, s, reads: dict, written: set) -> bool:
        if isinstance(s, ir.Block):
            return all(self._scan_stmt(x, reads, written) for x in s.stmts)
        if isinstance(s, ir.Assign):
            return self._scan_expr(s.value, reads) and self._scan_target(s.target, reads, written)
        if isinstance(s, ir.VarDecl):
            return self._scan_expr(s.init, reads)
        if isinstance(s, (ir.ConstDecl, ir.EmptyStmt, ir.Exit, ir.Return)):
            return s.value is None if isinstance(s, ir.Return) else True
        if isinstance(s, ir.If):
            return (self._scan_expr(s.cond, reads) and self._scan_stmt(s.then, reads, written)
                    and (s.other is None or self._scan_stmt(s.other, reads, written)))
        if isinstance(s, ir.CallStmt):
            e = s.call
            k = getattr(e, "call_kind", None)
            if not k or isinstance(e, ir.CtorCall):
                return False
            if k[0] == "extern_method" and k[1] == "register" and k[2] in ("read", "write"):
                if not isinstance(e.func.expr, ir.Path) or self.names.get(e.func.expr.sym) is None:
                    return False
                if k[2] == "read":
                    return self._scan_expr(e.args[1], reads) and \
                        self._scan_target(e.args[0], reads, written)
                return all(self._scan_expr(a, reads) for a in e.args)
            if k[0] == "extern_method" and k[1] == "counter":
                return all(self._scan_expr(a, reads) for a in e.args)
            if k[0] == "table_apply":
                return self._scan_table_apply(e, reads, written)
            if k[0] == "extern_func" and k[1] == "hash" and len(e.args) == 5:
                return all(self._scan_expr(a, reads) for a in e.args[1:]) and \
                    self._scan_target(e.args[0], reads, written)
            if k[0] == "header" and k[1] in ("setValid", "setInvalid"):
                t = e.func.expr.type        # set_valid() zeroes the fields: all are written
                if not isinstance(t, StructT) or not self._scan_expr(e.func.expr, reads):
                    return False
                written.update(n for n, _ in t.fields)
                return True
            if k[0] == "action" and isinstance(e.func.sym.decl, ir.ActionDecl) \
                    and not e.func.sym.decl.params and not has_return(e.func.sym.decl.body):
                return self._scan_stmt(e.func.sym.decl.body, reads, written)   # inlined
            return False
        return False

    # ------------------------------------------------------------------------------ statements
    @staticmethod
    def _assigned_next(decl: ir.VarDecl, nxt) -> bool:
        """Whether ``nxt`` (the statement after ``decl``) sets the whole declared scalar
        without reading it first (its default value is then never seen)."""
        if not isinstance(decl.resolved, (Bits, Bool)) or nxt is None:
            return False
        if isinstance(nxt, ir.CallStmt):
            k = getattr(nxt.call, "call_kind", None)
            if k and k[0] == "extern_method" and k[1] == "register" and k[2] == "read":
                t = nxt.call.args[0]
                return isinstance(t, ir.Path) and decl_of(t) is decl and \
                    not StmtGen._mentions(nxt.call.args[1], decl)
            if k and k[0] == "extern_func" and k[1] == "hash" and len(nxt.call.args) == 5:
                t = nxt.call.args[0]
                return isinstance(t, ir.Path) and decl_of(t) is decl and \
                    not any(StmtGen._mentions(a, decl) for a in nxt.call.args[1:])
        return False

    @staticmethod
    def _mentions(e, decl) -> bool:
        """Whether expression ``e`` may refer to ``decl`` (conservative: True when unsure)."""
        if isinstance(e, ir.Path):
            return decl_of(e) is decl or decl_of(e) is None
        if getattr(e, "const", None) is not None or isinstance(e, (ir.IntLit, ir.BoolLit,
                                                                     ir.TypeMember)):
            return False
        if isinstance(e, ir.Member):
            return StmtGen._mentions(e.expr, decl)
        operands = operands_of(e)
        if operands is not None:
            return any(StmtGen._mentions(x, decl) for x in operands)
        return True

    def stmt(self, s: ir.Stmt) -> None:
        o = self.out
        if isinstance(s, ir.Block):
            n = len(o.lines)
            stmts = s.stmts
            for i, x in enumerate(stmts):
                if isinstance(x, ir.VarDecl) and x.init is None and \
                        self._assigned_next(x, stmts[i + 1] if i + 1 < len(stmts) else None):
                    # `bit<32> old; r.read(old, i);`: only name the local, no default store
                    self.names[self._find_sym(x)] = self.fresh(f"v_{x.name}_")
                    continue
                self.stmt(x)
            if len(o.lines) == n:
                o.line("pass")
        elif isinstance(s, ir.Assign):
            if _is_initializer(s.value):
                self.count_header_made_valid(s.target)
            self.assign(s.target, self.value_for(s.value, s.target.type), s.value.type)
            if isinstance(s.target, ir.Member) and isinstance(s.target.expr.type, StructT) \
                    and s.target.expr.type.kind == "header_union":
                # a union member assigned a valid header: the other members become invalid
                o.line(f"if {self.g(s.target)}._v:")
                o.indent()
                self.union_siblings_invalid(s.target)
                o.dedent()
        elif isinstance(s, ir.VarDecl):
            name = self.fresh(f"v_{s.name}_")
            sym = self._find_sym(s)
            self.names[sym] = name
            hl = self.local_header_redeclared(s)
            if s.init is not None:
                val = self.value_for(s.init, s.resolved)
                if _is_initializer(s.init) and isinstance(s.resolved, StructT) \
                        and s.resolved.kind == "header" and self.counts_packet_length():
                    o.line(f"C.plen += {(s.resolved.width + 7) // 8}")   # p4c: add_header
                if isinstance(s.resolved, (StructT, StackT)) and not isinstance(s.init, (ir.ListExpr, ir.StructExpr)):
                    val += ".copy()"
                o.line(f"{name} = {val}")
            else:
                o.line(f"{name} = {self.default_value(s.resolved)}")
            if hl is not None:
                o.line(f"{hl[0]}[{hl[1]}] = {name}")
        elif isinstance(s, ir.ConstDecl):
            pass
        elif isinstance(s, ir.CallStmt):
            self.call_stmt(s.call)
        elif isinstance(s, ir.If):
            o.line(f"if {self.g(s.cond)}:")
            o.indent()
            self.stmt(s.then)
            o.dedent()
            if s.other is not None:
                o.line("else:")
                o.indent()
                self.stmt(s.other)
                o.dedent()
        elif isinstance(s, ir.Switch):
            self.switch(s)
        elif isinstance(s, ir.Exit):
            o.line("raise RT.ExitControl()")
        elif isinstance(s, ir.Return):
            if s.value is not None:
                # return { 1, 2 } from a function returning a header or struct: a value of it
                o.line(f"return {self.value_for(s.value, getattr(s, 'ret_type', None))}")
            else:
                o.line("return")
        elif isinstance(s, ir.EmptyStmt):
            o.line("pass")
        else:
            raise unsupported(s, type(s).__name__)

    def switch(self, s: ir.Switch) -> None:
        o = self.out
        t = s.expr.type
        v = self.fresh("sw")
        if isinstance(t, ObjT) and t.kind == "action_run":
            o.line(f"{v} = {self.g(s.expr)}")
            labels = lambda c: self.action_full_name(t.decl, c.label.name)
        else:
            o.line(f"{v} = {self.g(s.expr)}")
            labels = lambda c: self.g(c.label)
        pending: list = []
        first = True
        default_body = None
        for c in s.cases:
            if c.label is None:
                if c.body is None:
                    continue
                default_body = c.body
                pending = []
                continue
            pending.append(labels(c))
            if c.body is None:
                continue
            o.line(f"{'if' if first else 'elif'} {v} in ({', '.join(pending)},):")
            first = False
            o.indent()
            self.stmt(c.body)
            o.dedent()
            pending = []
        if default_body is not None:
            if first:
                self.stmt(default_body)
            else:
                o.line("else:")
                o.indent()
                self.stmt(default_body)
                o.dedent()

    def action_full_name(self, table: ir.TableDecl, action: str) -> str:
        """Python name of the generated action function (tables report the function run)."""
        for sym in table.action_decls:
            if sym.name == action:
                return self.bound_fns.get((id(table), action), self.names[sym])
        return action

    def out_args(self, e: ir.Call, params: list) -> tuple:
        """(argument texts, [(index of out param, target expr)], [(temporary, target expr)]).
        Structs and stacks go by reference, but a header (or union) bound to an ``out``
        parameter: P4_16 6.8 starts it invalid, so the callee gets a new, invalid one (made
        here, before the call) that the caller copies back (:meth:`copy_back_fresh`), as p4c's
        temporary for it in BMv2 (programs/out_header_param)."""
        args, outs, fresh = [], [], []
        for i, (a, p) in enumerate(zip(e.args, params)):
            if p.direction == "out" and isinstance(p.resolved, StructT) \
                    and p.resolved.kind in ("header", "header_union"):
                t = self.fresh("o")
                self.out.line(f"{t} = {self.default_value(p.resolved)}")
                args.append(t)
                fresh.append((t, a))
            elif p.direction == "out":
                # a scalar out parameter starts as what an uninitialised variable holds (BMv2's
                # temporary for it: 0), not None: the callee may read it before writing it
                args.append(self.default_value(p.resolved)
                            if not isinstance(p.resolved, (StructT, StackT)) else self.g(a))
            else:
                args.append(self.value_for(a, p.resolved))
            if p.direction in ("out", "inout") and not isinstance(p.resolved, (StructT, StackT)):
                outs.append((i, a))
        return args, outs, fresh

    def copy_back_fresh(self, fresh: list) -> None:
        """The new headers given to ``out`` parameters (:meth:`out_args`) into their arguments."""
        for t, a in fresh:
            self.assign(a, t)

    def call_with_outs(self, e: ir.Call, callee, params: list) -> None:
        """Call ``callee`` (an action, function or control instance), then copy what it
        returns for its out/inout parameters back into the arguments."""
        args, outs, fresh = self.out_args(e, params)
        if self.keyed_top_action(getattr(callee, "decl", None)):
            site = self.top_action_site(e)
            if site is not None:
                args = args + [f"_hk={site}"]
        call = f"{self.names[callee]}({', '.join(args)})"
        if not outs and not fresh:
            self.out.line(call)
            return
        r = self.fresh("r")
        # a function returning a value returns (value, outs...)
        first = 1 if _returns_value(callee) else 0
        if _is_parser(callee):
            # a sub-parser that ends in reject or an error still copies its outs back
            self.call_copying_back_on_exit(f"{r} = {call}", outs,
                                           catch="(RT.ParserError, RT.ParserReject)", fresh=fresh)
        elif _callee_may_exit(callee):
            self.call_copying_back_on_exit(f"{r} = {call}", outs, fresh=fresh)
        else:
            self.out.line(f"{r} = {call}")
        for j, (_, a) in enumerate(outs):
            self.assign(a, f"{r}[{first + j}]")
        self.copy_back_fresh(fresh)

    def union_siblings_invalid(self, header: ir.Expr) -> None:
        """After ``header`` became valid: if it is a member of a header_union, the union's
        other members become invalid (P4_16: at most one member of a union is valid)."""
        if not isinstance(header, ir.Member):
            return
        union = header.expr.type
        if not (isinstance(union, StructT) and union.kind == "header_union"):
            return
        u = self.g(header.expr)
        for name, _ in union.fields:
            if name != header.member:
                self.out.line(f"{u}.{pyfield(name)}._v = False")

    # ------------------------------------------------------------------------------ packet length
    def counts_packet_length(self) -> bool:
        """v1model (BMv2): the packet's length follows setValid/setInvalid (``C.plen``, what
        egress reads as ``standard_metadata.packet_length``); TNA has no such length."""
        return self.ck.main is None or self.ck.main.type_ref.name != "Switch"

    def set_validity_counted(self, header: ir.Expr, h: str, valid: bool) -> None:
        """``setValid()``/``setInvalid()`` as BMv2's ``add_header``/``remove_header`` (p4c's
        primitives for them): when the header's validity changes, the packet's length
        (``C.plen``) grows or shrinks by the header's size; a header already valid (invalid)
        changes nothing. A union member made valid leaves the length of the member it makes
        invalid counted, as BMv2 does (``tests/conformance/programs/packet_length_*``)."""
        o = self.out
        if "(" in h:                  # a run-time stack index: evaluated once
            t = self.fresh("hv")
            o.line(f"{t} = {h}")
            h = t
        size = self.header_size_text(header.type, h)
        if valid:
            o.line(f"if not {h}._v:")
            o.indent()
            o.line(f"{h}.set_valid()")
            o.line(f"C.plen += {size}")
            o.dedent()
            self.union_siblings_invalid(header)
        else:
            o.line(f"if {h}._v:")
            o.indent()
            o.line(f"C.plen -= {size}")
            o.line(f"{h}._v = False")
            o.dedent()

    def local_header_redeclared(self, s: ir.VarDecl):
        """A local header declared: p4c-bm2-ss keeps one header per declaration (per control
        instance) for the whole packet and emits ``remove_header`` at the declaration, so a
        declaration run again while the header from the last run is still valid takes its size
        off BMv2's length (``programs/packet_length_local_redeclared``). Emits that check and
        returns ``(dict, key)`` under which the new header is to be remembered, or None."""
        t = s.resolved
        if not (isinstance(t, StructT) and t.kind == "header" and self.counts_packet_length()):
            return None
        if getattr(self, "in_function", False):
            return None     # p4c inlines a function per call, with locals of its own each time
        o = self.out
        # one key per declaration (an action's body is inlined at each direct call), per
        # control instance where the code runs in a control's or parser's factory
        keys = self.__dict__.setdefault("local_header_keys", {})
        n = keys.setdefault(s.span, len(keys) + 1)
        site = getattr(self, "hdr_site", None)
        if site is not None and getattr(self, "in_top_action", False):
            # an action declared at top level: p4c's LocalizeAllActions gives each control,
            # and each call and table in it, a copy of its own (top_action_site)
            key = f"({site}, {n})"
        else:
            key = f"(prefix, {n})" if getattr(self, "in_factory", False) else str(n)
        hl, prev = self.fresh("hl"), self.fresh("hp")
        o.line(f"{hl} = C.hdr_locals")
        o.line(f"if {hl} is None: {hl} = C.hdr_locals = {{}}")
        o.line(f"{prev} = {hl}.get({key})")
        o.line(f"if {prev} is not None and {prev}._v: C.plen -= "
               f"{self.header_size_text(t, prev)}")
        return hl, key

    def keyed_top_action(self, decl) -> bool:
        """Whether ``decl`` is an action declared at top level that declares a local header, or
        an action that calls one (directly or through another), on v1model: p4c's
        LocalizeAllActions copies an action declared at top level into each control using it,
        and its FindRepeatedActionUses copies each action once more for each call and each table
        using it (an action's calls of actions inlined before, by InlineActions); inlining a
        control makes a copy per instance. So such a local header is one per control instance
        and use (``programs/action_local_header_two_controls``): the generated function takes
        the use as ``_hk``. (The local headers of an action declared in a control p4c's
        MoveDeclarations has made the control's before: one for all its uses.)"""
        if not isinstance(decl, ir.ActionDecl) or not self.counts_packet_length():
            return False
        cache = self.__dict__.setdefault("_keyed_top_actions", {})
        if id(decl) not in cache:
            cache[id(decl)] = False
            top = self.top_level_action(decl)
            cache[id(decl)] = _declares_header_local(decl.body, self.keyed_top_action,
                                                     own=top)
        return cache[id(decl)]

    def top_level_action(self, decl) -> bool:
        return any(d is decl for d in self.ck.program.decls)

    def top_action_site(self, node: ir.Node, what: str = "call"):
        """The ``_hk`` expression for a use (a direct call, a table: ``what``) of a keyed
        action at ``node``: under the enclosing use for a use inside such an action, else under
        the control instance (``prefix``) where the code runs in a control's factory; None
        elsewhere."""
        sites = self.__dict__.setdefault("top_action_sites", {})
        n = sites.setdefault((what, node.span), len(sites) + 1)
        base = getattr(self, "hdr_site", None)
        if base is not None:
            return f"({base}, {n})"
        if getattr(self, "in_factory", False):
            return f"(prefix, {n})"
        return None

    @staticmethod
    def header_size_text(t, h: str) -> str:
        """The bytes header ``h`` (of type ``t``) takes in the packet: its size, or with a
        varbit field the size its current length gives."""
        if isinstance(t, StructT) and t.varbit is not None:
            return f"{h}.bits()[1]"
        return str((t.width + 7) // 8)

    def count_header_made_valid(self, target: ir.Expr) -> None:
        """A list or struct expression assigned to a header: p4c emits ``add_header`` for it,
        so the packet's length grows by the header's size when the header was invalid."""
        t = target.type
        if not (isinstance(t, StructT) and t.kind == "header" and self.counts_packet_length()):
            return
        h = self.g(target)
        self.out.line(f"if not {h}._v: C.plen += {self.header_size_text(t, h)}")

    def call_stmt(self, e) -> None:
        o = self.out
        if isinstance(e, ir.CtorCall):
            raise unsupported(e, "constructor call as a statement")
        kind = e.call_kind
        k0 = kind[0]
        if k0 == "const":           # static_assert (checked when compiling): nothing to run
            return
        if k0 == "header":
            h = self.g(e.func.expr)
            if kind[1] in ("setValid", "setInvalid") and self.counts_packet_length():
                self.set_validity_counted(e.func.expr, h, kind[1] == "setValid")
            elif kind[1] == "setValid":
                o.line(f"{h}.set_valid()")
                self.union_siblings_invalid(e.func.expr)
            elif kind[1] == "setInvalid":
                o.line(f"{h}._v = False")
            else:
                o.line(f"{h}._v")
            return
        if k0 == "stack":
            o.line(f"{self.g(e.func.expr)}.{kind[1]}({self.g(e.args[0])})")
            return
        if k0 == "table_apply":
            fast = self.fast_tables.get(id(e.func.expr.sym.decl))
            if fast is None:
                o.line(self.table_apply(e))
            else:
                self.table_apply_fast(e, *fast)
            return
        if k0 == "action" and isinstance(e.func.sym.decl, ir.ActionDecl) \
                and not e.func.sym.decl.params and not has_return(e.func.sym.decl.body):
            # A direct call of a parameterless action: its body inlined (it only touches the
            # enclosing control's closure cells and its own fresh locals), saving a call per
            # action per packet. Tables still call the action function.
            n = len(o.lines)
            saved = getattr(self, "hdr_site", None), getattr(self, "in_top_action", False)
            if self.keyed_top_action(e.func.sym.decl):
                self.hdr_site = self.top_action_site(e)
                self.in_top_action = self.top_level_action(e.func.sym.decl)
            try:
                self.body_with_hoisting(e.func.sym.decl.body)
            finally:
                self.hdr_site, self.in_top_action = saved
            if len(o.lines) == n:
                o.line("pass")
            return
        if k0 in ("action", "function"):
            self.call_with_outs(e, e.func.sym, e.func.sym.decl.params)
            return
        if k0 == "control_apply":
            inst = e.func.expr.sym
            self.call_with_outs(e, inst, inst.type.decl.params)
            return
        if k0 == "extern_method":
            self.extern_method(e, kind[1], kind[2])
            return
        if k0 == "extern_func":
            self.extern_func(e, kind[1])
            return
        raise unsupported(e, f"call {expr_text(e.func)}")


    def table_apply_fast(self, e: ir.Call, getter: str, inline) -> None:
        """``t.apply();`` of an exact table without direct counter, meter or profile: a hit
        found in the table's ``fast`` dict (filled only while a hit does nothing but run the
        entry's action, see ``tables.Table.fast``) runs the entry's action here, its body
        inlined when it is the table's one entry action (``inline``: (function name,
        declaration)), its parameters bound to the entry's arguments; anything else (a miss,
        a table being traced) goes through ``apply`` as before. Saves the calls of ``apply``
        and of the action per hit."""
        o = self.out
        table = e.func.expr.sym.decl
        tname = self.names[e.func.expr.sym]
        k, en = self.fresh("k"), self.fresh("e")
        o.line(f"{k} = (" + "".join(self.key_expr(x) + ", " for x in table.keys) + ")")
        o.line(f"{en} = {getter}({k})")
        o.line(f"if {en} is None:")
        o.indent()
        o.line(f"{tname}.apply({k})")
        o.dedent()
        if inline is not None:
            fn, decl = inline
            o.line(f"elif {en}.fn is {fn}:")
            o.indent()
            syms = [self._param_sym(p) for p in decl.params]
            saved = [self.names.get(s) for s in syms]
            pns = [self.fresh("p") for _ in syms]
            if pns:
                o.line(f"{', '.join(pns)}, = {en}.args")
            for s, pn in zip(syms, pns):
                self.names[s] = pn
            n = len(o.lines)
            try:
                self.body_with_hoisting(decl.body)
            finally:
                for s, old in zip(syms, saved):
                    self.names[s] = old
            if len(o.lines) == n:
                o.line("pass")
            o.dedent()
        o.line("else:")
        o.indent()
        o.line(f"{en}.fn(*{en}.args)")
        o.dedent()


def _declares_header_local(node, keyed, own: bool = True) -> bool:
    """Whether statement ``node`` declares a local header (``own``: counts), or calls an
    action ``keyed`` says does."""
    for x in ir.walk(node):
        if own and isinstance(x, ir.VarDecl):
            t = getattr(x, "resolved", None)
            if isinstance(t, StructT) and t.kind == "header":
                return True
        if isinstance(x, ir.Call) and getattr(x, "call_kind", None) == ("action",):
            d = getattr(getattr(x.func, "sym", None), "decl", None)
            if isinstance(d, ir.ActionDecl) and keyed(d):
                return True
    return False


def _callee_may_exit(callee) -> bool:
    """Whether an action or control instance ``callee`` may execute ``exit``."""
    decl = getattr(callee, "decl", None)
    if isinstance(decl, ir.ActionDecl):
        return may_exit(decl.body)
    decl = getattr(getattr(callee, "type", None), "decl", None)
    return isinstance(decl, ir.ControlDecl) and may_exit(decl.body)


def _returns_value(callee) -> bool:
    decl = getattr(callee, "decl", None)
    return isinstance(decl, ir.FunctionDecl) and decl.ret.kind != "void"


def _is_parser(callee) -> bool:
    t = getattr(callee, "type", None)
    return getattr(t, "kind", None) == "parser"


def _is_initializer(e) -> bool:
    """A list or struct expression (``{1, 2}``, ``{a = 1}``, ``(H){1, 2}``): assigned to a
    header, p4c-bm2-ss emits ``add_header`` for it (it makes the header valid)."""
    if isinstance(e, ir.Cast):
        e = e.expr
    return isinstance(e, (ir.ListExpr, ir.StructExpr))
