"""Name resolution, type checking and constant folding over the IR.

The checker annotates the IR in place: every expression gets ``.type`` (a
:mod:`softswitch.frontend.types` object), every :class:`ir.Path` gets ``.sym`` (a :class:`Sym`),
compile-time constants get ``.const`` (their value). It rejects what p4c rejects for the
supported subset (unknown names, width and signedness mismatches, wrong argument counts,
duplicate declarations) with :class:`P4CompileError` located at the offending node, and raises
:class:`P4UnsupportedError` for valid constructs the target does not implement.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..api import P4CompileError, P4UnsupportedError
from . import ir
from .types import (Bits, Bool, DontCareT, EnumT, ErrorT, ExternT, InfInt, ListT, MatchKindT,
                    ObjT, P4Type, StackT, StringT, StructT, TypeVar, Varbit, Void, width_of)


def error(node: ir.Node, message: str) -> P4CompileError:
    s = node.span
    return P4CompileError(message, s.file, s.line, s.col)


def unsupported(node: ir.Node, what: str) -> P4UnsupportedError:
    s = node.span
    return P4UnsupportedError(what, s.file, s.line, s.col)


@dataclass(eq=False)
class Sym:
    """A named value: kind is var, param, const, action, table, instance, extern_func, function,
    ctor (a parser/control/extern/package type used as a constructor), state."""
    kind: str
    name: str
    type: Any
    decl: Any = None
    const: Any = None
    direction: str = ""
    owner: Any = None           # the control/parser declaring it (None: top level)
    uid: int = 0


class Scope:
    def __init__(self, parent: Optional["Scope"] = None, owner: Any = None):
        self.parent = parent
        self.values: dict = {}
        self.owner = owner if owner is not None else (parent.owner if parent else None)

    def lookup(self, name: str) -> Optional[Sym]:
        s: Optional[Scope] = self
        while s is not None:
            if name in s.values:
                return s.values[name]
            s = s.parent
        return None

    def declare(self, sym: Sym, node: ir.Node, allow_overload: bool = False) -> None:
        old = self.values.get(sym.name)
        if old is not None and not allow_overload:
            raise error(node, f"{sym.name}: duplicate declaration")
        if old is not None and allow_overload:
            overloads = old.const if isinstance(old.const, list) else [old.decl]
            old.const = overloads + [sym.decl]
            return
        self.values[sym.name] = sym


V1MODEL_PACKAGE = "V1Switch"
BITS_PER_BYTE = 8
# Size methods of headers and structs (fixed-size types: minimum == actual size).
SIZE_METHODS = ("minSizeInBits", "minSizeInBytes", "sizeInBits", "sizeInBytes")


class Checker:
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
            if tvars and tr.name in tvars:
                return tvars[tr.name]
            t = self.types.get(tr.name)
            if t is None:
                raise error(tr, f"{tr.name}: no such type")
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
            if d.kind == "header_union":
                raise unsupported(d, "header_union")
            if d.type_params:
                raise unsupported(d, f"generic {d.kind} types")
            t = StructT(d.kind, d.name, [], d.annotations)
            self.declare_type(d, d.name, t)
            seen = set()
            for f in d.fields:
                if f.name in seen:
                    raise error(f, f"{f.name}: duplicate field in {d.name}")
                seen.add(f.name)
                ft = self.resolve_type(f.type_ref, {p: TypeVar(p) for p in d.type_params})
                if d.kind == "header" and not isinstance(ft, (Bits, Varbit, Bool, EnumT)):
                    raise error(f, f"field {f.name} of header {d.name}: type {ft} is not allowed in a header")
                if isinstance(ft, Varbit):
                    raise unsupported(f, "varbit header fields")
                if d.kind == "header" and isinstance(ft, EnumT) and ft.base is None:
                    raise error(f, f"field {f.name}: enum {ft} without an underlying type in a header")
                t.fields.append((f.name, ft))
                t.field_annotations[f.name] = f.annotations
            if d.kind == "header" and t.width % BITS_PER_BYTE:
                raise error(d, f"header {d.name} is {t.width} bits long, not a multiple of 8 "
                               f"(BMv2 requires byte-aligned headers)")
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

    def declare_type(self, node: ir.Node, name: str, t: Any) -> None:
        if name in self.types:
            raise error(node, f"{name}: duplicate declaration")
        self.types[name] = t

    def check_const(self, d: ir.ConstDecl, scope: Scope) -> None:
        t = self.resolve_type(d.type_ref)
        vt = self.check_expr(d.value, scope, t)
        self.assignable(d.value, vt, t)
        c = getattr(d.value, "const", None)
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
    def check_parser(self, d: ir.ParserDecl) -> None:
        if d.ctor_params:
            raise unsupported(d, "parser constructor parameters")
        scope = Scope(self.top, owner=d)
        self.declare_params(d.params, scope)
        for loc in d.locals:
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
        if isinstance(ks, ir.DefaultKs):
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
    def check_control(self, d: ir.ControlDecl) -> None:
        if d.ctor_params:
            raise unsupported(d, "control constructor parameters")
        scope = Scope(self.top, owner=d)
        self.declare_params(d.params, scope)
        for loc in d.locals:
            self.check_local(loc, scope)
        self.check_stmt(d.body, Scope(scope), ctx="control")

    def check_local(self, loc: ir.Node, scope: Scope) -> None:
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
        elif isinstance(loc, ir.FunctionDecl):
            self.check_function(loc, scope)
        else:
            raise unsupported(loc, type(loc).__name__)

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
        if d.type_params:
            raise unsupported(d, "generic functions")
        scope.declare(Sym("function", d.name, ObjT("function", d), d, owner=scope.owner), d)
        f_scope = Scope(scope)
        self.declare_params(d.params, f_scope)
        d.ret_resolved = self.resolve_type(d.ret)
        self.check_stmt(d.body, f_scope, ctx="function", ret=d.ret_resolved)

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
            scope.declare(Sym("instance", d.name, t, d, owner=scope.owner), d)
        elif isinstance(t, ObjT) and t.kind in ("control_type", "parser_type", "package_type"):
            decl = t.decl
            if isinstance(decl, ir.TypeDeclOnly) and decl.kind != "package":
                raise error(d, f"cannot instantiate {decl.kind} type {decl.name}")
            for a in d.args:
                self.check_expr(a, scope)
            if isinstance(decl, ir.TypeDeclOnly) and len(d.args) != len(decl.params):
                raise error(d, f"{decl.name} expects {len(decl.params)} arguments, got {len(d.args)}")
            if d.args and not isinstance(decl, ir.TypeDeclOnly):
                raise unsupported(d, "constructor arguments for controls and parsers")
            d.resolved = t
            scope.declare(Sym("instance", d.name, ObjT(t.kind[:-5], decl), d, owner=scope.owner), d)
        else:
            raise error(d, f"{t} cannot be instantiated")

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
            required = [p for p in c.params if p.default is None]
            if len(required) <= len(args) <= len(c.params):
                return c
        counts = sorted({len(c.params) for c in candidates})
        raise error(node, f"{what}: wrong number of arguments ({len(args)}; expected "
                          f"{' or '.join(map(str, counts)) or 0})")

    # ------------------------------------------------------------------------------ tables
    def check_table(self, d: ir.TableDecl, scope: Scope) -> None:
        scope.declare(Sym("table", d.name, ObjT("table", d), d, owner=scope.owner), d)
        d.key_types = []
        for k in d.keys:
            kt = self.check_expr(k.expr, scope)
            if isinstance(kt, Bool):
                pass
            elif isinstance(kt, EnumT) and kt.base is not None:
                pass
            elif not isinstance(kt, Bits):
                raise error(k.expr, f"table key of type {kt} is not supported")
            if k.match_kind not in self.match_kinds:
                raise error(k, f"{k.match_kind}: unknown match kind")
            if k.match_kind == "selector":
                raise unsupported(k, "action selectors")
            d.key_types.append(kt)
        d.action_decls = []
        for ref in d.actions:
            sym = scope.lookup(ref.name)
            if sym is None or sym.kind != "action":
                raise error(ref, f"{ref.name}: no such action")
            if ref.args:
                raise unsupported(ref, "action arguments bound in a table's action list")
            d.action_decls.append(sym)
        for name, (expr, is_const, span) in d.props.items():
            if name == "default_action":
                self.check_action_call(expr, scope, d)
            elif name == "size":
                self.check_expr(expr, scope)
            elif name in ("counters", "meters"):
                self.check_expr(expr, scope)
            elif name in ("implementation", "support_timeout"):
                raise unsupported(expr, f"table property {name}")
            else:
                self.check_expr(expr, scope)
        if d.entries is not None:
            for e in d.entries:
                if e.priority is not None:
                    self.const_int(e.priority, scope)
                items = e.keyset.items if isinstance(e.keyset, ir.TupleKs) else [e.keyset]
                if len(items) != len(d.keys) and not (len(items) == 1 and isinstance(items[0], ir.DefaultKs)):
                    raise error(e.keyset, f"entry has {len(items)} keys, table {d.name} has {len(d.keys)}")
                self.check_keyset(e.keyset, d.key_types, scope)
                call = ir.Call(ir.Path(e.action.name, span=e.action.span), e.action.args or [],
                               span=e.action.span)
                self.check_action_call(call, scope, d)
                e.call = call

    def check_action_call(self, expr: ir.Expr, scope: Scope, table: ir.TableDecl) -> None:
        if isinstance(expr, ir.Path):
            expr = ir.Call(expr, [], span=expr.span)
        if not isinstance(expr, ir.Call) or not isinstance(expr.func, ir.Path):
            raise error(expr, "expected an action call")
        sym = scope.lookup(expr.func.name)
        if sym is None or sym.kind != "action":
            raise error(expr, f"{expr.func.name}: no such action")
        expr.func.sym = sym
        expr.func.type = ObjT("action", sym.decl)
        expr.call_kind = ("action",)
        if not any(s is sym for s in table.action_decls):
            raise error(expr, f"{expr.func.name} is not in the actions of table {table.name}")
        self.check_call_args(expr, sym.decl.params, expr.args, scope, f"action {sym.name}")
        for a in expr.args:
            if getattr(a, "const", None) is None:
                raise error(a, "action argument in a table declaration must be a compile-time constant")

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
        elif isinstance(s, ir.Return):
            if ctx == "parser":
                raise error(s, "return is not allowed in a parser")
            if s.value is not None:
                if ret is None or isinstance(ret, Void):
                    raise error(s, "return with a value outside a function returning a value")
                vt = self.check_expr(s.value, scope, ret)
                self.assignable(s.value, vt, ret)
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
        if src == dst or src is dst:
            return
        if isinstance(src, StructT) and isinstance(dst, StructT) and src.name == dst.name:
            return
        if isinstance(src, EnumT) and isinstance(dst, EnumT) and src.name == dst.name:
            return
        raise error(node, f"cannot assign a value of type {src} to {dst}")

    def unify_int(self, e: ir.Expr, t: P4Type) -> None:
        """Give an untyped integer expression the type ``t`` (P4 implicit cast)."""
        if isinstance(e.type, InfInt) and isinstance(t, Bits):
            e.type = t
            if getattr(e, "const", None) is not None:
                e.const = wrap(e.const, t)

    # ------------------------------------------------------------------------------ expressions
    def check_expr(self, e: ir.Expr, scope: Scope, expected: Optional[P4Type] = None) -> P4Type:
        t = self._check_expr(e, scope, expected)
        e.type = t
        if expected is not None and isinstance(t, InfInt) and isinstance(expected, Bits):
            self.unify_int(e, expected)
        if not hasattr(e, "const"):
            e.const = None
        return e.type

    def _check_expr(self, e: ir.Expr, scope: Scope, expected) -> P4Type:
        if isinstance(e, ir.IntLit):
            if e.width is not None:
                t = Bits(e.width, e.signed)
                if e.width == 0:
                    raise error(e, "zero-width integer literal")
                if e.value > t.mask:
                    raise error(e, f"value {e.value} does not fit in {t}")
                e.const = wrap(e.value, t)
                return t
            e.const = e.value
            return InfInt()
        if isinstance(e, ir.BoolLit):
            e.const = e.value
            return Bool()
        if isinstance(e, ir.StringLit):
            e.const = e.value
            return StringT()
        if isinstance(e, ir.Path):
            sym = (self.top if e.top else scope).lookup(e.name)
            if sym is None:
                raise error(e, f"{e.name}: undeclared identifier")
            e.sym = sym
            if sym.kind == "const":
                e.const = sym.const
            if sym.kind in ("var", "param", "const", "instance"):
                return sym.type
            return ObjT(sym.kind, sym.decl)
        if isinstance(e, ir.TypeMember):
            if e.type_name == "error":
                if e.member not in self.errors_list:
                    raise error(e, f"error.{e.member}: no such error")
                e.const = self.errors_list.index(e.member)
                return ErrorT()
            t = self.types.get(e.type_name)
            if isinstance(t, EnumT):
                if e.member not in t.members:
                    raise error(e, f"{e.type_name}.{e.member}: no such enum member")
                e.const = t.values[e.member]
                return t
            raise error(e, f"{e.type_name}.{e.member}: not an enum member")
        if isinstance(e, ir.Member):
            return self.check_member(e, scope)
        if isinstance(e, ir.Index):
            bt = self.check_expr(e.expr, scope)
            it = self.check_expr(e.index, scope)
            if not isinstance(bt, StackT):
                raise error(e, f"cannot index a value of type {bt}")
            if not isinstance(it, (Bits, InfInt)):
                raise error(e.index, f"index of type {it} is not an integer")
            if e.index.const is not None and not (0 <= e.index.const < bt.size):
                raise error(e.index, f"index {e.index.const} out of bounds for {bt}")
            return bt.elem
        if isinstance(e, ir.Slice):
            bt = self.check_expr(e.expr, scope)
            if not isinstance(bt, Bits):
                raise error(e, f"cannot slice a value of type {bt}")
            hi, lo = self.const_int(e.hi, scope), self.const_int(e.lo, scope)
            if not (0 <= lo <= hi < bt.width):
                raise error(e, f"slice [{hi}:{lo}] out of range for {bt}")
            e.hi_v, e.lo_v = hi, lo
            if e.expr.const is not None:
                e.const = (e.expr.const >> lo) & ((1 << (hi - lo + 1)) - 1)
            return Bits(hi - lo + 1)
        if isinstance(e, ir.Call):
            return self.check_call(e, scope, expected)
        if isinstance(e, ir.CtorCall):
            t = self.resolve_type(e.type_ref)
            if isinstance(t, ObjT) and t.kind in ("control_type", "parser_type") \
                    and not isinstance(t.decl, ir.TypeDeclOnly):
                if e.args:
                    raise unsupported(e, "constructor arguments for controls and parsers")
                return ObjT(t.kind[:-5], t.decl)
            raise unsupported(e, f"constructor call of {t} in an expression")
        if isinstance(e, ir.Unary):
            return self.check_unary(e, scope, expected)
        if isinstance(e, ir.Binary):
            return self.check_binary(e, scope, expected)
        if isinstance(e, ir.Cond):
            ct = self.check_expr(e.cond, scope, Bool())
            if not isinstance(ct, Bool):
                raise error(e.cond, f"condition has type {ct}, expected bool")
            a = self.check_expr(e.then, scope, expected)
            b = self.check_expr(e.other, scope, expected)
            t = self.join(e, a, b)
            self.unify_int(e.then, t)
            self.unify_int(e.other, t)
            if e.cond.const is not None and e.then.const is not None and e.other.const is not None:
                e.const = e.then.const if e.cond.const else e.other.const
            return t
        if isinstance(e, ir.Cast):
            return self.check_cast(e, scope)
        if isinstance(e, ir.ListExpr):
            exp_items = None
            if isinstance(expected, StructT) and len(expected.fields) == len(e.items):
                exp_items = [ft for _, ft in expected.fields]
            ts = [self.check_expr(x, scope, exp_items[i] if exp_items else None) for i, x in enumerate(e.items)]
            return ListT(ts)
        if isinstance(e, ir.StructExpr):
            if isinstance(expected, StructT):
                names = [n for n, _ in expected.fields]
                if sorted(names) != sorted(e.names):
                    raise error(e, f"struct initializer fields {e.names} do not match {expected}")
                for n, v in zip(e.names, e.values):
                    ft = expected.field_type(n)
                    vt = self.check_expr(v, scope, ft)
                    self.assignable(v, vt, ft)
                return expected
            fields = [(n, self.check_expr(v, scope)) for n, v in zip(e.names, e.values)]
            return StructT("struct", "", fields)
        if isinstance(e, ir.DontCare):
            return DontCareT()
        raise unsupported(e, f"expression {type(e).__name__}")

    def join(self, node, a: P4Type, b: P4Type) -> P4Type:
        if isinstance(a, InfInt):
            return b
        if isinstance(b, InfInt):
            return a
        if a == b:
            return a
        if isinstance(a, EnumT) and isinstance(b, EnumT) and a.name == b.name:
            return a
        if isinstance(a, StructT) and isinstance(b, StructT) and a.name == b.name:
            return a
        raise error(node, f"operands have different types: {a} and {b}")

    def check_member(self, e: ir.Member, scope: Scope) -> P4Type:
        bt = self.check_expr(e.expr, scope)
        if isinstance(bt, StructT):
            ft = bt.field_type(e.member)
            if ft is None:
                if bt.kind in ("header", "header_union") and e.member in ("isValid", "setValid", "setInvalid"):
                    return ObjT("method", (bt, e.member))
                if e.member in SIZE_METHODS:
                    return ObjT("method", (bt, e.member))
                raise error(e, f"{e.member}: no such field in {bt.kind} {bt.name or 'struct'}")
            return ft
        if isinstance(bt, StackT):
            if e.member in ("next", "last"):
                return bt.elem
            if e.member in ("size", "lastIndex", "nextIndex"):
                if e.member == "size":
                    e.const = bt.size
                return Bits(32)
            if e.member in ("push_front", "pop_front"):
                return ObjT("method", (bt, e.member))
            raise error(e, f"{e.member}: no such member of header stack")
        if isinstance(bt, ExternT):
            ms = [m for m in bt.decl.methods if m.ret is not None and m.name == e.member]
            if not ms:
                raise error(e, f"{e.member}: no such method of extern {bt.name}")
            return ObjT("method", (bt, e.member))
        if isinstance(bt, ObjT):
            if bt.kind == "table" and e.member == "apply":
                return ObjT("method", (bt, "apply"))
            if bt.kind in ("control", "parser") and e.member == "apply":
                return ObjT("method", (bt, "apply"))
            if bt.kind == "apply_result":
                if e.member in ("hit", "miss"):
                    return Bool()
                if e.member == "action_run":
                    return ObjT("action_run", bt.decl)
            raise error(e, f"{e.member}: no such member of {bt.kind}")
        if isinstance(bt, EnumT):
            raise error(e, f"{e.member}: use {bt.name}.{e.member} for enum members")
        raise error(e, f"{e.member}: a value of type {bt} has no members")

    def check_unary(self, e: ir.Unary, scope: Scope, expected) -> P4Type:
        t = self.check_expr(e.expr, scope, expected if e.op != "!" else None)
        c = e.expr.const
        if e.op == "!":
            if not isinstance(t, Bool):
                raise error(e, f"operator ! expects bool, got {t}")
            e.const = (not c) if c is not None else None
            return t
        if not isinstance(t, (Bits, InfInt)):
            raise error(e, f"operator {e.op} expects an integer, got {t}")
        if e.op == "~" and isinstance(t, InfInt):
            raise error(e, "operator ~ on an integer of unknown width")
        if c is not None:
            v = {"-": -c, "+": c, "~": ~c}[e.op]
            e.const = wrap(v, t) if isinstance(t, Bits) else v
        return t

    ARITH = ("+", "-", "*", "/", "%", "|+|", "|-|")
    BITWISE = ("&", "|", "^")
    COMPARE = ("==", "!=", "<", ">", "<=", ">=")

    def check_binary(self, e: ir.Binary, scope: Scope, expected) -> P4Type:
        op = e.op
        if op in ("&&", "||"):
            for side in (e.left, e.right):
                st = self.check_expr(side, scope, Bool())
                if not isinstance(st, Bool):
                    raise error(side, f"operator {op} expects bool, got {st}")
            if e.left.const is not None and e.right.const is not None:
                e.const = (e.left.const and e.right.const) if op == "&&" else (e.left.const or e.right.const)
            return Bool()
        if op in ("<<", ">>"):
            lt = self.check_expr(e.left, scope, expected)
            rt = self.check_expr(e.right, scope)
            if not isinstance(lt, (Bits, InfInt)):
                raise error(e.left, f"operator {op} expects an integer, got {lt}")
            if isinstance(rt, Bits) and rt.signed:
                raise error(e.right, f"shift amount must be unsigned, got {rt}")
            if not isinstance(rt, (Bits, InfInt)):
                raise error(e.right, f"shift amount must be an integer, got {rt}")
            if isinstance(rt, InfInt) and e.right.const is not None and e.right.const < 0:
                raise error(e.right, "negative shift amount")
            if isinstance(lt, InfInt) and e.right.const is None:
                raise error(e, "shift of an integer of unknown width by a run-time amount")
            if e.left.const is not None and e.right.const is not None:
                v = e.left.const << e.right.const if op == "<<" else e.left.const >> e.right.const
                e.const = wrap(v, lt) if isinstance(lt, Bits) else v
            return lt
        if op == "++":
            lt = self.check_expr(e.left, scope)
            rt = self.check_expr(e.right, scope)
            for side, st in ((e.left, lt), (e.right, rt)):
                if not isinstance(st, Bits):
                    raise error(side, f"operator ++ expects bit<> or int<> operands, got {st}")
            t = Bits(lt.width + rt.width, lt.signed)
            if e.left.const is not None and e.right.const is not None:
                e.const = wrap(((e.left.const & lt.mask) << rt.width) | (e.right.const & rt.mask), t)
            return t
        hint = expected if op not in self.COMPARE else None
        lt = self.check_expr(e.left, scope, hint)
        rt = self.check_expr(e.right, scope, lt if isinstance(lt, Bits) else hint)
        if isinstance(lt, InfInt) and isinstance(rt, Bits):
            self.unify_int(e.left, rt)
            lt = rt
        if op in self.COMPARE and op in ("==", "!="):
            t = self.join(e, lt, rt)
            if isinstance(t, (StructT, StackT)):
                raise unsupported(e, f"comparison of {t} values")
            self.unify_int(e.left, t)
            self.unify_int(e.right, t)
            if e.left.const is not None and e.right.const is not None:
                e.const = (e.left.const == e.right.const) == (op == "==")
            return Bool()
        for side, st in ((e.left, lt), (e.right, rt)):
            if not isinstance(st, (Bits, InfInt)):
                raise error(side, f"operator {op} expects integer operands, got {st}")
        if isinstance(lt, Bits) and isinstance(rt, Bits) and lt != rt:
            raise error(e, f"operator {op}: operands have different types {lt} and {rt}; use a cast")
        t = lt if isinstance(lt, Bits) else rt
        self.unify_int(e.right, t)
        if op in ("/", "%"):
            if isinstance(t, Bits) and t.signed:
                raise error(e, f"operator {op} is not defined on signed values")
            if e.right.const == 0:
                raise error(e.right, "division by zero")
        if op in ("|+|", "|-|") and isinstance(t, InfInt):
            raise error(e, f"saturating operator {op} needs a fixed-width type")
        lc, rc = e.left.const, e.right.const
        if lc is not None and rc is not None:
            if op in self.COMPARE:
                e.const = {"<": lc < rc, ">": lc > rc, "<=": lc <= rc, ">=": lc >= rc}[op]
            else:
                e.const = fold(op, lc, rc, t)
        if op in self.COMPARE:
            return Bool()
        return t

    def check_cast(self, e: ir.Cast, scope: Scope) -> P4Type:
        to = self.resolve_type(e.to)
        src = self.check_expr(e.expr, scope, to if isinstance(to, Bits) else None)
        ok = False
        if isinstance(to, Bits) and isinstance(src, (Bits, InfInt)):
            ok = True
        elif isinstance(to, Bits) and isinstance(src, Bool) and to.width == 1 and not to.signed:
            ok = True
        elif isinstance(to, Bool) and isinstance(src, Bits) and src.width == 1:
            ok = True
        elif isinstance(to, Bits) and isinstance(src, EnumT) and src.base is not None:
            ok = True
        elif isinstance(to, EnumT) and to.base is not None and isinstance(src, (Bits, InfInt)):
            ok = True
        elif src == to or (isinstance(src, StructT) and isinstance(to, StructT) and src.name == to.name):
            ok = True
        if not ok:
            raise error(e, f"cannot cast {src} to {to}")
        c = e.expr.const
        if c is not None and isinstance(to, Bits):
            e.const = wrap(int(c), to)
        elif c is not None and isinstance(to, Bool):
            e.const = bool(c)
        elif c is not None and isinstance(to, EnumT):
            e.const = c & to.base.mask
        return to

    # ------------------------------------------------------------------------------ calls
    def check_call_args(self, call: ir.Call, params: list, args: list, scope: Scope, what: str,
                        tvars: Optional[dict] = None, skip_ctl_params: bool = False) -> None:
        names = getattr(call, "arg_names", None) or []
        if any(names):
            if not all(names):
                raise error(call, f"{what}: cannot mix named and positional arguments")
            by_name = {p.name: p for p in params}
            for n in names:
                if n not in by_name:
                    raise error(call, f"{what}: no parameter named {n}")
            order = {n: i for i, n in enumerate(names)}
            ordered = [args[order[p.name]] for p in params if p.name in order]
            if len(ordered) != len(params) and any(p.default is None and p.name not in order for p in params):
                raise error(call, f"{what}: missing arguments")
            call.args[:] = ordered
            call.arg_names = [""] * len(ordered)
            args = call.args
        required = [p for p in params if p.default is None]
        if not (len(required) <= len(args) <= len(params)):
            raise error(call, f"{what}: expected {len(params)} arguments, got {len(args)}")
        tvars = {} if tvars is None else tvars
        for a, p in zip(args, params):
            pt = self.resolve_type(p.type_ref, tvars) if p.type_ref.kind != "named" or p.type_ref.name not in tvars or not isinstance(tvars.get(p.type_ref.name), TypeVar) else TypeVar(p.type_ref.name)
            at = self.check_expr(a, scope, pt if not isinstance(pt, TypeVar) else None)
            if isinstance(pt, TypeVar):
                if pt.name in tvars and not isinstance(tvars[pt.name], TypeVar):
                    self.assignable(a, at, tvars[pt.name])
                else:
                    tvars[pt.name] = at
            else:
                self.assignable(a, at, pt)
            if p.direction in ("out", "inout") and not isinstance(a, ir.DontCare):
                self.check_lvalue(a, scope)

    def check_call(self, e: ir.Call, scope: Scope, expected) -> P4Type:
        f = e.func
        ft = self.check_expr(f, scope)
        e.call_kind = None
        if isinstance(ft, ObjT) and ft.kind == "method":
            base, name = ft.decl
            if isinstance(base, StructT):        # header methods
                if e.args:
                    raise error(e, f"{name} takes no arguments")
                if name in SIZE_METHODS:
                    bits = width_of(base)
                    e.const = bits if name.endswith("Bits") else (bits + BITS_PER_BYTE - 1) // BITS_PER_BYTE
                    e.call_kind = ("const",)
                    return InfInt()
                e.call_kind = ("header", name)
                return Bool() if name == "isValid" else Void()
            if isinstance(base, StackT):
                if len(e.args) != 1:
                    raise error(e, f"{name} takes one argument")
                self.const_int(e.args[0], scope)
                e.call_kind = ("stack", name)
                return Void()
            if isinstance(base, ExternT):
                ms = [m for m in base.decl.methods if m.ret is not None and m.name == name]
                m = self.pick_overload(e, ms, e.args, f"{base.name}.{name}")
                tv = self.extern_tvars(base, e)
                for tp, ta in zip(m.type_params, e.type_args):
                    tv[tp] = self.resolve_type(ta)
                for tp in m.type_params:
                    tv.setdefault(tp, TypeVar(tp))
                self.check_call_args(e, m.params, e.args, scope, f"{base.name}.{name}", tv)
                e.call_kind = ("extern_method", base.name, name)
                e.method = m
                rt = self.resolve_type(m.ret, tv) if m.ret.kind != "void" else Void()
                if isinstance(rt, TypeVar):
                    if name == "lookahead" and e.type_args:
                        return self.resolve_type(e.type_args[0])
                    raise error(e, f"cannot infer the type of {base.name}.{name}")
                return rt
            if isinstance(base, ObjT) and base.kind == "table":
                if e.args:
                    raise error(e, "apply takes no arguments")
                e.call_kind = ("table_apply",)
                return ObjT("apply_result", base.decl)
            if isinstance(base, ObjT) and base.kind in ("control", "parser"):
                decl = base.decl
                self.check_call_args(e, decl.params, e.args, scope, f"{decl.name}.apply")
                e.call_kind = ("control_apply",)
                return Void()
        if isinstance(ft, ObjT) and ft.kind == "action":
            d = ft.decl
            dir_params = [p for p in d.params if p.direction]
            if len(e.args) != len(d.params):
                if len(e.args) == len(dir_params):
                    raise error(e, f"action {d.name}: control-plane arguments are missing in a direct call")
            self.check_call_args(e, d.params, e.args, scope, f"action {d.name}")
            e.call_kind = ("action",)
            return Void()
        if isinstance(ft, ObjT) and ft.kind == "function":
            d = ft.decl
            self.check_call_args(e, d.params, e.args, scope, f"function {d.name}")
            e.call_kind = ("function",)
            return d.ret_resolved
        if isinstance(ft, ObjT) and ft.kind == "extern_func":
            sym = f.sym
            cands = sym.const if isinstance(sym.const, list) else [sym.decl]
            d = self.pick_overload(e, cands, e.args, sym.name)
            tv = {tp: TypeVar(tp) for tp in d.type_params}
            for tp, ta in zip(d.type_params, e.type_args):
                tv[tp] = self.resolve_type(ta)
            self.check_call_args(e, d.params, e.args, scope, sym.name, tv)
            e.tvars = tv
            e.call_kind = ("extern_func", sym.name)
            e.method = d
            return self.resolve_type(d.ret, tv) if d.ret.kind != "void" else Void()
        raise error(e, f"{_expr_text(f)} is not callable")


def wrap(v: int, t: P4Type) -> int:
    """Reduce ``v`` to the range of ``t`` (two's complement for int<N>)."""
    if isinstance(v, bool):
        return v
    if not isinstance(t, Bits):
        return v
    v &= t.mask
    if t.signed and v >> (t.width - 1):
        v -= 1 << t.width
    return v


def fold(op: str, a: int, b: int, t: P4Type) -> int:
    if op == "+":
        v = a + b
    elif op == "-":
        v = a - b
    elif op == "*":
        v = a * b
    elif op == "/":
        v = a // b if (a >= 0 and b > 0) or not isinstance(t, InfInt) else int(a / b)
    elif op == "%":
        v = a % b
    elif op == "&":
        v = a & b
    elif op == "|":
        v = a | b
    elif op == "^":
        v = a ^ b
    elif op in ("|+|", "|-|"):
        v = a + b if op == "|+|" else a - b
        if isinstance(t, Bits):
            lo, hi = (-(1 << (t.width - 1)), (1 << (t.width - 1)) - 1) if t.signed else (0, t.mask)
            return max(lo, min(hi, v))
    else:
        raise ValueError(op)
    return wrap(v, t) if isinstance(t, Bits) else v


def _expr_text(e: ir.Expr) -> str:
    return expr_text(e)


def expr_text(e: ir.Expr) -> str:
    """Source-like text of an expression (p4c's names for table keys)."""
    if isinstance(e, ir.Path):
        return ("." if e.top else "") + e.name
    if isinstance(e, ir.Member):
        return f"{expr_text(e.expr)}.{e.member}"
    if isinstance(e, ir.Index):
        return f"{expr_text(e.expr)}[{expr_text(e.index)}]"
    if isinstance(e, ir.Slice):
        return f"{expr_text(e.expr)}[{expr_text(e.hi)}:{expr_text(e.lo)}]"
    if isinstance(e, ir.IntLit):
        return e.text or str(e.value)
    if isinstance(e, ir.Call):
        return f"{expr_text(e.func)}()"
    if isinstance(e, ir.TypeMember):
        return f"{e.type_name}.{e.member}"
    return type(e).__name__
