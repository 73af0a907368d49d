"""Type checks of tables (:class:`TableChecker`, a part of :class:`.typecheck.Checker`): keys
and their match kinds, the actions list (arguments bound there), properties (``size``,
``default_action``, ``implementation``, counters, meters), ``entries`` and ``const entries``
with their keysets and priorities' checks."""
from __future__ import annotations

from . import ir
from .scope import Scope, Sym, error, unsupported
from .exprs import expr_text
from .types import Bits, Bool, EnumT, ExternT, ObjT


class TableChecker:
    """Tables' checks; the rest of the checker (expressions, calls) is
    :class:`.typecheck.Checker`'s."""

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
            d.key_types.append(kt)
        d.action_decls = []
        for ref in d.actions:
            sym = scope.lookup(ref.name)
            if sym is None or sym.kind != "action":
                raise error(ref, f"{ref.name}: no such action")
            if ref.args:
                # arguments of the directional parameters, evaluated when the table runs the
                # action (P4_16 14.2.1.2); the entries give the directionless ones
                dparams = [p for p in sym.decl.params if p.direction]
                if len(ref.args) != len(dparams):
                    raise error(ref, f"action {ref.name}: {len(dparams)} directional arguments "
                                     f"expected in the actions list, got {len(ref.args)}")
                call = ir.Call(ir.Path(ref.name, span=ref.span), ref.args, span=ref.span)
                self.check_call_args(call, dparams, ref.args, scope, f"action {ref.name}")
            d.action_decls.append(sym)
        for name, (expr, is_const, span) in d.props.items():
            if name == "default_action":
                self.check_action_call(expr, scope, d)
            elif name == "size":
                self.check_expr(expr, scope)
                if not isinstance(getattr(expr, "const", None), int):
                    raise error(expr, "size must be a constant numeric expression")
            elif name in ("counters", "meters"):
                self.check_expr(expr, scope)
            elif name == "implementation":
                self.check_implementation(d, expr, scope)
            elif name == "support_timeout":
                raise unsupported(expr, f"table property {name}")
            else:
                self.check_expr(expr, scope)
        if (any(k.match_kind == "selector" for k in d.keys) and "implementation" not in d.props
                and d.entries):
            # p4c: "unknown key match type 'selector' for key 8w2" (it drops such keys)
            e = d.entries[0]
            items = e.keyset.items if isinstance(e.keyset, ir.TupleKs) else [e.keyset]
            at = next((x for x, k in zip(items, d.keys) if k.match_kind == "selector"), e.keyset)
            raise error(at, f"unknown key match type 'selector' for key {expr_text(at)} (table "
                            f"{d.name} has no implementation)")
        # selector keys without an implementation: p4c-bm2-ss drops them (from BMv2's JSON and
        # P4Info), as does the code generator (programs/selector_key_no_implementation)
        if d.entries is not None:
            for e in d.entries:
                if e.priority is not None:
                    if d.entries_const:
                        # p4c: "Table with 'const' entries cannot have priorities"
                        raise error(e.keyset, "a table with const entries cannot have priorities")
                    self.const_int(e.priority, scope)
                items = e.keyset.items if isinstance(e.keyset, ir.TupleKs) else [e.keyset]
                if len(items) != len(d.keys) and not (len(items) == 1 and isinstance(items[0], ir.DefaultKs)):
                    raise error(e.keyset, f"entry has {len(items)} keys, table {d.name} has {len(d.keys)}")
                self.check_keyset(e.keyset, d.key_types, scope)
                call = ir.Call(ir.Path(e.action.name, span=e.action.span), e.action.args or [],
                               span=e.action.span)
                self.check_action_call(call, scope, d)
                e.call = call

    def check_implementation(self, d: ir.TableDecl, expr: ir.Expr, scope: Scope) -> None:
        """``implementation = p;``: an ``action_profile`` or ``action_selector`` instance."""
        if not isinstance(expr, ir.Path):
            raise unsupported(expr, "an implementation other than an action_profile or "
                                    "action_selector instance's name")
        self.check_expr(expr, scope)
        t = getattr(expr.sym, "type", None) if getattr(expr, "sym", None) else None
        if not (isinstance(t, ExternT) and t.name in ("action_profile", "action_selector")):
            raise error(expr, f"{expr.name}: expected a reference to an instance (of "
                              "action_profile or action_selector)")
        if getattr(expr.sym.decl, "anonymous_implementation_of", None) is d:
            # p4c: "Table 'T' has an anonymous table property 'implementation' with no name
            # annotation, which is not supported by P4Runtime" (it names no line)
            raise error(expr, f"table {d.name} has an anonymous table property 'implementation' "
                              "with no name annotation, which is not supported by P4Runtime "
                              "(write @name(\"...\") before it)")
        # entries (const or not) in such a table: p4c-bm2-ss accepts them, keeps them in P4Info
        # (is_const_table, has_initial_entries) and writes none into BMv2's JSON; the code
        # generator drops them likewise (programs/action_profile_entries)

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
