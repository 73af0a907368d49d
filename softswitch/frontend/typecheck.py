"""Name resolution, type checking and constant folding over the IR.

The checker annotates the IR in place: every expression gets ``.type`` (a
:mod:`softswitch.frontend.types` object), every :class:`ir.Path` gets ``.sym`` (a :class:`Sym`),
compile-time constants get ``.const`` (their value). It rejects what p4c rejects for the
supported subset (unknown names, width and signedness mismatches, wrong argument counts,
duplicate declarations) with :class:`P4CompileError` located at the offending node, and raises
:class:`P4UnsupportedError` for valid constructs the target does not implement.
"""
from __future__ import annotations

from typing import Any, Optional

from ..api import P4CompileError
from . import ir
from .ctors import CtorChecker
from .tables_check import TableChecker
from .generics import GenericChecker
from .varbit import VarbitChecker
from .exprs import BITS_PER_BYTE, ExprChecker, expr_text, struct_const, wrap
from .scope import Scope, Sym, error, unsupported
from .types import (Bits, Bool, DontCareT, EnumT, ErrorT, ExternT, InfInt, ListT, MatchKindT,
                    ObjT, P4Type, StackT, StringT, StructT, TypeVar, Varbit, Void)


V1MODEL_PACKAGE = "V1Switch"


class Checker(ExprChecker, CtorChecker, VarbitChecker, GenericChecker, TableChecker):
    """Type checks a whole program; results are stored on the IR nodes."""

    def __init__(self, program: ir.Program):
        self.program = program
        self.types: dict = {}            # name -> P4Type (or ir decl for parser/control/package)
        self.top = Scope()
        self.errors_list: list = []      # error member names in order
        self.match_kinds: list = []
        self._uid = 0
        self.main: Optional[ir.Instantiation] = None
        self.controls: dict = {}
        self.parsers: dict = {}
        self.in_parser = False           # a stack's next and last are for parsers only
        self.specialized: list = []      # copies of controls/parsers with constructor arguments
        self.type_env: dict = {}         # type parameter -> type, in a generic function's copy
        self.generic_functions: list = []   # copies of generic functions, one per type list

    # ------------------------------------------------------------------------------ helpers
    def uid(self) -> int:
        self._uid += 1
        return self._uid

    def resolve_type(self, tr: ir.TypeRef, tvars: Optional[dict] = None) -> P4Type:
        k = tr.kind
        if k in ("bit", "int"):
            w = self.const_int(tr.width, self.top)
            if w <= 0 and k == "int" or w < 0:
                raise error(tr, f"invalid width {w} for {k}<>")
            return Bits(w, k == "int")
        if k == "varbit":
            return Varbit(self.const_int(tr.width, self.top))
        if k == "bool":
            return Bool()
        if k == "error":
            return ErrorT()
        if k == "string":
            return StringT()
        if k == "infint":
            return InfInt()
        if k == "void":
            return Void()
        if k == "match_kind":
            return MatchKindT()
        if k == "dontcare":
            return DontCareT()
        if k == "stack":
            elem = self.resolve_type(tr.elem, tvars)
            if not isinstance(elem, StructT) or elem.kind not in ("header", "header_union"):
                raise error(tr, f"header stack element type {elem} is not a header")
            return StackT(elem, self.const_int(tr.size, self.top))
        if k == "tuple":
            return ListT([self.resolve_type(a, tvars) for a in tr.args])
        if k == "named":
            tvars = self.type_env if tvars is None else tvars
            if tvars and tr.name in tvars:
                return tvars[tr.name]
            t = self.types.get(tr.name)
            if t is None:
                raise error(tr, f"{tr.name}: no such type")
            if isinstance(t, ObjT) and t.kind == "generic_type":
                return self.specialize_type(tr, t.decl, [self.resolve_type(a, tvars)
                                                         for a in tr.args])
            if isinstance(t, ExternT) and tr.args:
                return ExternT(t.name, t.decl, [self.resolve_type(a, tvars) for a in tr.args])
            return t
        raise unsupported(tr, f"type {k}")

    def const_int(self, e: ir.Expr, scope: Scope) -> int:
        self.check_expr(e, scope)
        v = getattr(e, "const", None)
        if not isinstance(v, int) or isinstance(v, bool):
            raise error(e, "expected a compile-time constant integer")
        return v

    # ------------------------------------------------------------------------------ program
    def check(self) -> None:
        for d in self.program.decls:
            self.declare_top(d)
        if self.main is None:
            raise P4CompileError("no 'main' package instantiation (V1Switch(...) main;)",
                                 self.program.span.file, self.program.span.line, self.program.span.col)
        self.number_ctor_temporaries([getattr(a, "decl", None) for a in self.main.args
                                      if getattr(a, "decl", None) is not None])

    def declare_top(self, d: ir.Node) -> None:
        if isinstance(d, ir.ErrorDecl):
            for m in d.members:
                if m in self.errors_list:
                    raise error(d, f"error.{m}: duplicate declaration")
                self.errors_list.append(m)
        elif isinstance(d, ir.MatchKindDecl):
            self.match_kinds.extend(d.members)
        elif isinstance(d, ir.Typedef):
            self.declare_type(d, d.name, self.resolve_type(d.type_ref))
        elif isinstance(d, ir.StructLike):
            if d.type_params:       # a type per list of type arguments (generics.py)
                self.declare_type(d, d.name, ObjT("generic_type", d))
                return
            t = StructT(d.kind, d.name, [], d.annotations)
            self.declare_type(d, d.name, t)
            self.declare_fields(d, t, None)
        elif isinstance(d, ir.EnumDecl):
            base = self.resolve_type(d.base) if d.base is not None else None
            if base is not None and not isinstance(base, Bits):
                raise error(d, f"enum {d.name}: underlying type {base} is not bit<> or int<>")
            t = EnumT(d.name, list(d.members), base)
            if d.values:
                for m, v in zip(d.members, d.values):
                    t.values[m] = self.const_int(v, self.top) & base.mask
            else:
                t.values = {m: i for i, m in enumerate(d.members)}
            self.declare_type(d, d.name, t)
        elif isinstance(d, ir.ExternDecl):
            self.declare_type(d, d.name, ExternT(d.name, d))
        elif isinstance(d, ir.ExternFuncDecl):
            self.top.declare(Sym("extern_func", d.name, None, d), d, allow_overload=True)
        elif isinstance(d, ir.TypeDeclOnly):
            self.declare_type(d, d.name, ObjT(d.kind + "_type", d))
        elif isinstance(d, ir.ConstDecl):
            self.check_const(d, self.top)
        elif isinstance(d, ir.ActionDecl):
            self.declare_action(d, self.top)
            self.check_action(d, self.top)
        elif isinstance(d, ir.FunctionDecl):
            self.check_function(d, self.top)
        elif isinstance(d, ir.ParserDecl):
            self.declare_type(d, d.name, ObjT("parser_type", d))
            self.parsers[d.name] = d
            self.check_parser(d)
        elif isinstance(d, ir.ControlDecl):
            self.declare_type(d, d.name, ObjT("control_type", d))
            self.controls[d.name] = d
            self.check_control(d)
        elif isinstance(d, ir.Instantiation):
            self.check_instantiation(d, self.top)
            if d.name == "main":
                self.main = d
        else:
            raise unsupported(d, f"top-level {type(d).__name__}")

    def declare_fields(self, d: ir.StructLike, t: StructT, tvars: Optional[dict]) -> None:
        """The fields of ``t``, declared by ``d`` (``tvars``: its type arguments, for a
        generic type)."""
        seen = set()
        for f in d.fields:
            if f.name in seen:
                raise error(f, f"{f.name}: duplicate field in {d.name}")
            seen.add(f.name)
            ft = self.resolve_type(f.type_ref, tvars)
            if d.kind == "header" and not isinstance(ft, (Bits, Varbit, Bool, EnumT)):
                raise error(f, f"field {f.name} of header {d.name}: type {ft} is not allowed in a header")
            if d.kind == "header_union" and not (isinstance(ft, StructT)
                                                 and ft.kind == "header"):
                raise error(f, f"field {f.name} of header_union {d.name}: type {ft} is not "
                               "a header")
            if isinstance(ft, Varbit):
                self.check_varbit_field(d, f, ft, t)
            if d.kind == "header" and isinstance(ft, EnumT) and ft.base is None:
                raise error(f, f"field {f.name}: enum {ft} without an underlying type in a header")
            t.fields.append((f.name, ft))
            t.field_annotations[f.name] = f.annotations
        if d.kind == "header" and t.width % BITS_PER_BYTE:
            raise error(d, f"header {d.name} is {t.width} bits long, not a multiple of 8 "
                           f"(BMv2 requires byte-aligned headers)")

    def declare_type(self, node: ir.Node, name: str, t: Any) -> None:
        if name in self.types:
            raise error(node, f"{name}: duplicate declaration")
        self.types[name] = t

    def check_const(self, d: ir.ConstDecl, scope: Scope) -> None:
        t = self.resolve_type(d.type_ref)
        vt = self.check_expr(d.value, scope, t)
        self.assignable(d.value, vt, t)
        c = getattr(d.value, "const", None)
        if c is None and isinstance(t, StructT):
            c = struct_const(d.value, t)
        if c is None:
            raise error(d.value, f"{d.name}: initializer is not a compile-time constant")
        if isinstance(t, Bits) and isinstance(c, int) and not isinstance(c, bool):
            c = wrap(c, t)
        scope.declare(Sym("const", d.name, t, d, const=c, owner=scope.owner, uid=self.uid()), d)

    # ------------------------------------------------------------------------------ parameters
    def declare_params(self, params: list, scope: Scope, tvars: Optional[dict] = None) -> None:
        for p in params:
            t = self.resolve_type(p.type_ref, tvars)
            p.resolved = t
            scope.declare(Sym("param", p.name, t, p, direction=p.direction, owner=scope.owner,
                              uid=self.uid()), p)

    # ------------------------------------------------------------------------------ parser
    def check_parser(self, d: ir.ParserDecl, outer: Optional[Scope] = None) -> None:
        if d.ctor_params:
            return          # checked for each instantiation (ctors.CtorChecker.specialize)
        scope = Scope(outer or self.top, owner=d)
        self.declare_params(d.params, scope)
        self.in_parser = True
        try:
            self._check_parser_body(d, scope)
        finally:
            self.in_parser = False

    def _check_parser_body(self, d: ir.ParserDecl, scope: Scope) -> None:
        for loc in list(d.locals):      # (ctors.hoist_ctor_arg may declare temporaries)
            self.check_local(loc, scope)
        names = {s.name for s in d.states}
        if "start" not in names:
            raise error(d, f"parser {d.name} has no start state")
        seen = set()
        for st in d.states:
            if st.name in seen:
                raise error(st, f"state {st.name}: duplicate declaration")
            seen.add(st.name)
        for st in d.states:
            s_scope = Scope(scope)
            for stmt in st.stmts:
                self.check_stmt(stmt, s_scope, ctx="parser")
            tr = st.transition
            if tr is None:
                raise error(st, f"state {st.name} has no transition")
            targets = [tr.target] if tr.target else [c[1] for c in tr.cases]
            for tgt in targets:
                if tgt not in names and tgt not in ("accept", "reject"):
                    raise error(tr, f"{tgt}: no such parser state")
            if tr.select:
                sel_types = [self.check_expr(e, s_scope) for e in tr.select]
                for ks, _, span in tr.cases:
                    self.check_keyset(ks, sel_types, s_scope)

    def check_keyset(self, ks: ir.Expr, sel_types: list, scope: Scope) -> None:
        if isinstance(ks, ir.DefaultKs) or self._value_set_keyset(ks, sel_types, scope):
            return
        items = ks.items if isinstance(ks, ir.TupleKs) else [ks]
        if len(items) != len(sel_types):
            if len(items) == 1 and isinstance(items[0], ir.DefaultKs):
                return
            raise error(ks, f"keyset has {len(items)} elements, select has {len(sel_types)}")
        for item, t in zip(items, sel_types):
            parts = []
            if isinstance(item, ir.DefaultKs):
                continue
            if isinstance(item, ir.Mask):
                parts = [item.value, item.mask]
            elif isinstance(item, ir.RangeKs):
                parts = [item.lo, item.hi]
            else:
                parts = [item]
            for p in parts:
                pt = self.check_expr(p, scope, t)
                self.assignable(p, pt, t)
                if getattr(p, "const", None) is None and not isinstance(t, (Bool,)):
                    raise error(p, "keyset expression is not a compile-time constant")

    # ------------------------------------------------------------------------------ control
    def check_control(self, d: ir.ControlDecl, outer: Optional[Scope] = None) -> None:
        if d.ctor_params:
            return          # checked for each instantiation (ctors.CtorChecker.specialize)
        scope = Scope(outer or self.top, owner=d)
        self.declare_params(d.params, scope)
        for loc in list(d.locals):      # (ctors.hoist_ctor_arg may declare temporaries)
            self.check_local(loc, scope)
        self.check_stmt(d.body, Scope(scope), ctx="control")
        _tables_applied(d.body, frozenset())


    def check_local(self, loc: ir.Node, scope: Scope) -> None:
        saved, self.current_local = getattr(self, "current_local", None), loc
        try:
            self._check_local(loc, scope)
        finally:
            self.current_local = saved

    def _check_local(self, loc: ir.Node, scope: Scope) -> None:
        if isinstance(loc, ir.ConstDecl):
            self.check_const(loc, scope)
        elif isinstance(loc, ir.VarDecl):
            self.check_var(loc, scope)
        elif isinstance(loc, ir.Instantiation):
            self.check_instantiation(loc, scope)
        elif isinstance(loc, ir.ActionDecl):
            self.declare_action(loc, scope)
            self.check_action(loc, scope)
        elif isinstance(loc, ir.TableDecl):
            self.check_table(loc, scope)
        elif isinstance(loc, ir.ValueSetDecl):
            self.check_value_set(loc, scope)
        else:
            raise unsupported(loc, type(loc).__name__)

    # ------------------------------------------------------------------------------ value sets
    def check_value_set(self, d: ir.ValueSetDecl, scope: Scope) -> None:
        """``value_set<T>(size) name;`` in a parser: T is ``bit<W>``/``int<W>`` or a struct of
        them (one match field each), size a positive constant."""
        t = self.resolve_type(d.elem)
        members = [("", t)] if isinstance(t, Bits) else (
            list(t.fields) if isinstance(t, StructT) and t.kind == "struct" else None)
        if not members or not all(isinstance(ft, Bits) for _, ft in members):
            raise error(d.elem, f"value_set {d.name}: element type {t} must be bit<>, int<> or "
                                "a struct of them")
        size = self.const_int(d.size, scope)
        if size <= 0:
            raise error(d.size, f"value_set {d.name}: size {size} must be positive")
        d.match_kinds = {}
        if isinstance(t, StructT):
            for fname, anns in t.field_annotations.items():
                a = ir.find_annotation(anns, "match")
                if a is None:
                    continue
                kind = a.args[0].name if len(a.args) == 1 and isinstance(a.args[0], ir.Path) else None
                if kind not in self.match_kinds:
                    # p4c: "tarnery: declaration not found"
                    what = kind or (expr_text(a.args[0]) if a.args else "@match()")
                    raise error(a, f"{what}: declaration not found (@match on value_set member "
                                   f"{fname} expects a match kind)")
                # p4c-bm2-ss writes the match type into P4Info and warns that BMv2 ignores it:
                # its value sets (and so this target's) match every field exactly
                d.match_kinds[fname] = kind
        d.resolved, d.members, d.size_value = t, members, size
        scope.declare(Sym("value_set", d.name, t, d, owner=scope.owner, uid=self.uid()), d)

    def _value_set_keyset(self, ks: ir.Expr, sel_types: list, scope: Scope) -> bool:
        """A select case naming a value set: the set's members have the select's types."""
        if not isinstance(ks, ir.Path):
            return False
        sym = scope.lookup(ks.name)
        if sym is None or sym.kind != "value_set":
            return False
        ks.sym, ks.type = sym, sym.type
        members = sym.decl.members
        widths = [(ft.width, ft.signed) for _, ft in members]
        want = [(st.width, st.signed) if isinstance(st, Bits) else None for st in sel_types]
        if widths != want:
            raise error(ks, f"'match' case label '{ks.name}' has type '{sym.type}' which does "
                            f"not match the expected type "
                            f"'{', '.join(map(str, sel_types))}'")
        return True

    def check_var(self, d: ir.VarDecl, scope: Scope) -> None:
        t = self.resolve_type(d.type_ref)
        if isinstance(t, (ObjT, ExternT)):
            raise error(d, f"{d.name}: cannot declare a variable of type {t}")
        if d.init is not None:
            vt = self.check_expr(d.init, scope, t)
            self.assignable(d.init, vt, t)
        d.resolved = t
        scope.declare(Sym("var", d.name, t, d, owner=scope.owner, uid=self.uid()), d)

    def declare_action(self, d: ir.ActionDecl, scope: Scope) -> None:
        scope.declare(Sym("action", d.name, ObjT("action", d), d, owner=scope.owner), d)

    def check_action(self, d: ir.ActionDecl, scope: Scope) -> None:
        a_scope = Scope(scope)
        seen_cp = False
        for p in d.params:
            if p.direction == "" :
                seen_cp = True
            elif seen_cp:
                raise error(p, f"{p.name}: directional parameters must precede control-plane parameters")
        self.declare_params(d.params, a_scope)
        for p in d.params:
            if p.direction == "" and not isinstance(p.resolved, (Bits, Bool, EnumT)):
                raise unsupported(p, f"action parameter {p.name} of type {p.resolved}")
        self.check_stmt(d.body, a_scope, ctx="action")

    def check_function(self, d: ir.FunctionDecl, scope: Scope) -> None:
        if d.type_params:           # checked for each list of type arguments (generics.py)
            self.check_generic_body(d, scope)
            scope.declare(Sym("function", d.name, ObjT("function", d), d, owner=scope.owner), d)
            return
        f_scope = Scope(scope)
        self.declare_params(d.params, f_scope)
        d.ret_resolved = self.resolve_type(d.ret)
        # the function's own name is declared after its body: P4_16 names are declared before
        # use, so a function cannot call itself (p4c: "f: declaration not found")
        self.check_stmt(d.body, f_scope, ctx="function", ret=d.ret_resolved)
        if not isinstance(d.ret_resolved, Void) and _falls_through(d.body):
            raise error(d, f"function {d.name} does not return a value on all paths")
        scope.declare(Sym("function", d.name, ObjT("function", d), d, owner=scope.owner), d)

    def check_instantiation(self, d: ir.Instantiation, scope: Scope) -> None:
        t = self.resolve_type(d.type_ref)
        if isinstance(t, ExternT):
            ctors = [m for m in t.decl.methods if m.ret is None]
            ctor = self.pick_overload(d, ctors, d.args, f"constructor of {t.name}")
            tv = self.extern_tvars(t, d)
            for a, p in zip(d.args, ctor.params):
                pt = self.resolve_type(p.type_ref, tv)
                at = self.check_expr(a, scope, pt)
                self.assignable(a, at, pt)
            d.resolved = t
            self.check_initializer(d, t, tv, scope)
            scope.declare(Sym("instance", d.name, t, d, owner=scope.owner), d)
        elif isinstance(t, ObjT) and t.kind in ("control_type", "parser_type", "package_type"):
            decl = t.decl
            if scope is self.top and t.kind != "package_type":
                # p4c: parsers and controls are instantiated in a parser, a control or a
                # package's arguments
                raise error(d, f"{d.name}: cannot instantiate at top-level")
            if isinstance(decl, ir.TypeDeclOnly):
                self.order_named_args(d, decl.params, f"{decl.name}")
            if isinstance(decl, ir.TypeDeclOnly) and decl.kind != "package":
                raise error(d, f"cannot instantiate {decl.kind} type {decl.name}")
            if not isinstance(decl, ir.TypeDeclOnly) and (d.args or decl.ctor_params):
                decl = self.specialize(d, decl, d.args, scope)
                t = ObjT(t.kind, decl)
            for a in d.args:
                if a.type is None:
                    self.check_expr(a, scope)
            if isinstance(decl, ir.TypeDeclOnly) and len(d.args) != len(decl.params):
                raise error(d, f"{decl.name} expects {len(decl.params)} arguments, got {len(d.args)}")
            d.resolved = t
            scope.declare(Sym("instance", d.name, ObjT(t.kind[:-5], decl), d, owner=scope.owner), d)
        else:
            raise error(d, f"{t} cannot be instantiated")

    def check_initializer(self, d: ir.Instantiation, t: ExternT, tv: dict, scope: Scope) -> None:
        """An instance's initializer block implements its extern's abstract methods (p4c: every
        abstract method, with the declared parameter types once the type arguments are bound);
        its methods see the enclosing control's names."""
        abstract = {m.name: m for m in t.decl.methods if m.abstract}
        given = {f.name: f for f in d.initializer}
        for name, m in abstract.items():
            if name not in given:
                raise error(d, f"{d.name}: {t.name} instance must implement abstract method {name}")
        for f in d.initializer:
            m = abstract.get(f.name)
            if m is None:
                raise error(f, f"{f.name}: {t.name} has no abstract method {f.name}")
            need = len([p for p in m.params if ir.find_annotation(p.annotations, "optional") is None])
            if not need <= len(f.params) <= len(m.params):
                raise error(f, f"{f.name}: expected {len(m.params)} parameters, got {len(f.params)}")
            for fp, mp in zip(f.params, m.params):      # the signature first, then the body
                want, have = self.resolve_type(mp.type_ref, tv), self.resolve_type(fp.type_ref)
                if fp.direction != mp.direction or (
                        not isinstance(want, TypeVar) and str(have) != str(want)):
                    raise error(fp, f"{fp.name}: expected {mp.direction} {want}, as {t.name}."
                                    f"{m.name} declares it")
            f_scope = Scope(scope)      # ``this``: the instance (this.predicate(...) in apply)
            f_scope.declare(Sym("instance", "this", t, d, owner=scope.owner), d)
            self.check_function(f, f_scope)

    def extern_tvars(self, t: ExternT, node: ir.Node) -> dict:
        tp = t.decl.type_params
        if t.type_args and len(t.type_args) != len(tp):
            if len(t.type_args) < len(tp):
                # register<T> with the index type defaulted (v1model's I is bit<32>)
                args = list(t.type_args) + [Bits(32)] * (len(tp) - len(t.type_args))
                return dict(zip(tp, args))
            raise error(node, f"{t.name} expects {len(tp)} type arguments")
        if not t.type_args:
            return {p: TypeVar(p) for p in tp}
        return dict(zip(tp, t.type_args))

    def pick_overload(self, node, candidates, args, what):
        for c in candidates:
            required = [p for p in c.params if p.default is None
                        and ir.find_annotation(p.annotations, "optional") is None]
            if len(required) <= len(args) <= len(c.params):
                return c
        counts = sorted({len(c.params) for c in candidates})
        raise error(node, f"{what}: wrong number of arguments ({len(args)}; expected "
                          f"{' or '.join(map(str, counts)) or 0})")

    # ------------------------------------------------------------------------------ tables
    # ------------------------------------------------------------------------------ statements
    def check_stmt(self, s: ir.Stmt, scope: Scope, ctx: str, ret: Any = None) -> None:
        if isinstance(s, ir.Block):
            inner = Scope(scope)
            for x in s.stmts:
                self.check_stmt(x, inner, ctx, ret)
        elif isinstance(s, ir.Assign):
            tt = self.check_expr(s.target, scope)
            self.check_lvalue(s.target, scope)
            vt = self.check_expr(s.value, scope, tt)
            self.assignable(s.value, vt, tt)
        elif isinstance(s, ir.CallStmt):
            self.check_expr(s.call, scope)
        elif isinstance(s, ir.If):
            ct = self.check_expr(s.cond, scope, Bool())
            if not isinstance(ct, Bool):
                raise error(s.cond, f"if condition has type {ct}, expected bool")
            self.check_stmt(s.then, scope, ctx, ret)
            if s.other is not None:
                self.check_stmt(s.other, scope, ctx, ret)
        elif isinstance(s, ir.Switch):
            t = self.check_expr(s.expr, scope)
            if isinstance(t, Bool):
                raise error(s.expr, "switch expression has type bool (switch takes bit<>, int<>, "
                                    "an enum or action_run)")
            labels = set()
            for c in s.cases:
                if c.label is not None:
                    if isinstance(t, ObjT) and t.kind == "action_run":
                        if not isinstance(c.label, ir.Path):
                            raise error(c.label, "switch label must be an action name")
                        table = t.decl
                        if c.label.name not in [a.name for a in table.action_decls]:
                            raise error(c.label, f"{c.label.name} is not an action of table {table.name}")
                        c.label.type = t
                        key = c.label.name
                    else:
                        lt = self.check_expr(c.label, scope, t)
                        self.assignable(c.label, lt, t)
                        key = getattr(c.label, "const", None)
                    if key in labels:
                        raise error(c.label, "duplicate switch label")
                    labels.add(key)
                if c.body is not None:
                    self.check_stmt(c.body, scope, ctx, ret)
        elif isinstance(s, ir.VarDecl):
            self.check_var(s, scope)
        elif isinstance(s, ir.ConstDecl):
            self.check_const(s, scope)
        elif isinstance(s, ir.Exit):
            if ctx == "parser":
                raise error(s, "exit is not allowed in a parser")
            if ctx == "function":
                raise error(s, "exit is not allowed in a function")
        elif isinstance(s, ir.Return):
            if ctx == "parser":
                raise error(s, "return is not allowed in a parser")
            if s.value is not None:
                if ret is None or isinstance(ret, Void):
                    raise error(s, "return with a value outside a function returning a value")
                vt = self.check_expr(s.value, scope, ret)
                self.assignable(s.value, vt, ret)
                s.ret_type = ret            # code generation makes an initializer a value of it
        elif isinstance(s, ir.EmptyStmt):
            pass
        else:
            raise unsupported(s, type(s).__name__)

    def check_lvalue(self, e: ir.Expr, scope: Scope) -> None:
        if isinstance(e, ir.Path):
            sym = e.sym
            if sym.kind == "var" or (sym.kind == "param" and sym.direction in ("out", "inout")):
                return
            if sym.kind == "param":
                raise error(e, f"{e.name}: cannot assign to a read-only parameter")
            raise error(e, f"{e.name} is not an l-value")
        if isinstance(e, (ir.Member, ir.Slice, ir.Index)):
            if isinstance(e, ir.Member) and isinstance(e.expr.type, StackT) and e.member != "next":
                raise error(e, f"{e.member} of a header stack is not an l-value")
            return self.check_lvalue(e.expr, scope)
        raise error(e, "expression is not an l-value")

    # ------------------------------------------------------------------------------ types
    def assignable(self, node: ir.Expr, src: P4Type, dst: P4Type) -> None:
        if isinstance(dst, (TypeVar, DontCareT)) or isinstance(src, DontCareT):
            return
        if isinstance(src, InfInt):
            if isinstance(dst, (Bits, InfInt)):
                return
            raise error(node, f"cannot convert an integer to {dst}")
        if isinstance(src, ListT) and isinstance(dst, StructT):
            if len(src.items) != len(dst.fields):
                raise error(node, f"{dst}: expected {len(dst.fields)} fields, got {len(src.items)}")
            for item, (_, ft), expr in zip(src.items, dst.fields, node.items):
                self.assignable(expr, item, ft)
            return
        if isinstance(src, StructT) and isinstance(dst, StructT) and src.name == "" :
            return
        if isinstance(src, ListT) and isinstance(dst, ListT):
            if len(src.items) != len(dst.items):
                raise error(node, f"{dst}: expected {len(dst.items)} elements, got {len(src.items)}")
            exprs = node.items if isinstance(node, ir.ListExpr) else [node] * len(src.items)
            for item, dt, expr in zip(src.items, dst.items, exprs):
                self.assignable(expr, item, dt)
            return
        if isinstance(src, StackT) and isinstance(dst, StackT):
            if src.size == dst.size and src.elem.name == dst.elem.name:
                return
        if src == dst or src is dst:
            return
        if isinstance(src, StructT) and isinstance(dst, StructT) and src.name == dst.name:
            return
        if isinstance(src, EnumT) and (isinstance(dst, EnumT) and src.name == dst.name
                                       or src.base is not None and src.base == dst):
            return      # P4_16 8.11.2: a serializable enum casts implicitly to its type
        if isinstance(src, ExternT) and isinstance(dst, ExternT) and src.decl is dst.decl and (
                not dst.type_args or len(src.type_args) == len(dst.type_args) and all(
                    isinstance(b, (TypeVar, DontCareT)) or str(a) == str(b)
                    for a, b in zip(src.type_args, dst.type_args))):
            return      # an extern instance passed to a constructor (RegisterAction(reg))
        raise error(node, f"cannot assign a value of type {src} to {dst}")

    def unify_int(self, e: ir.Expr, t: P4Type) -> None:
        """Give an untyped integer expression the type ``t`` (P4 implicit cast)."""
        if isinstance(e.type, InfInt) and isinstance(t, Bits):
            e.type = t
            if getattr(e, "const", None) is not None:
                e.const = wrap(e.const, t)


def _falls_through(s: ir.Stmt) -> bool:
    """Whether control can reach the end of ``s`` (a function body missing a return)."""
    if isinstance(s, (ir.Return, ir.Exit)):
        return False
    if isinstance(s, ir.Block):
        return all(_falls_through(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return s.other is None or _falls_through(s.then) or _falls_through(s.other)
    if isinstance(s, ir.Switch):
        has_default = any(c.label is None for c in s.cases)
        return not has_default or any(c.body is not None and _falls_through(c.body)
                                      for c in s.cases)
    return True


def _table_applies(node: Any):
    """The tables an expression applies (``t.apply()`` calls), in source order."""
    if isinstance(node, ir.Call) and getattr(node, "call_kind", None) == ("table_apply",):
        yield node
    if isinstance(node, ir.Node):
        for name in node.__dataclass_fields__:
            if name != "span":
                yield from _table_applies(getattr(node, name))
    elif isinstance(node, (list, tuple)):
        for x in node:
            yield from _table_applies(x)


def _apply_table(call: ir.Call, before: frozenset) -> frozenset:
    table = call.func.expr.type.decl
    if id(table) in before:
        # p4c-bm2-ss lays tables out as a graph without cycles
        raise error(table, "Program can not be implemented on this target since it contains a "
                           f"path from table {table.name} back to itself")
    return before | {id(table)}


def _tables_applied(s: ir.Stmt, before: frozenset) -> Optional[frozenset]:
    """The tables (their ids) that may have been applied when control leaves ``s`` normally (``None``: it
    never does: exit or return), given those applied before; a table that may be applied a
    second time on one path is an error (BMv2's pipelines are acyclic graphs of tables)."""
    if isinstance(s, (ir.Exit, ir.Return)):
        return None
    if isinstance(s, ir.Block):
        for x in s.stmts:
            before = _tables_applied(x, before)
            if before is None:
                return None
        return before
    if isinstance(s, ir.If):
        for call in _table_applies(s.cond):
            before = _apply_table(call, before)
        ends = [_tables_applied(s.then, before),
                before if s.other is None else _tables_applied(s.other, before)]
    elif isinstance(s, ir.Switch):
        for call in _table_applies(s.expr):
            before = _apply_table(call, before)
        ends, into = [], None
        for c in s.cases:
            into = before if into is None else into
            if c.body is None:
                continue                  # falls into the next case's body
            ends.append(_tables_applied(c.body, into))
            into = None
        if not any(c.label is None for c in s.cases):
            ends.append(before)
    else:
        for call in _table_applies(s):
            before = _apply_table(call, before)
        return before
    live = [e for e in ends if e is not None]
    return frozenset().union(*live) if live else None
