"""Generic (type-parameterised) header, struct and union types and functions, as p4c has them:
``header H<T> { T f; }`` is a type per list of type arguments (``H<bit<16>>``, named so in
messages); ``T f<T>(in T a)`` is checked, and generated, once per list of type arguments its
calls give or imply (inferred from the arguments as p4c's type inference does, for parameters
of type ``T`` or of a generic type of ``T``)."""
from __future__ import annotations

import copy

from . import ir
from .scope import Scope, Sym, error
from .types import InfInt, ObjT, P4Type, StructT, TypeVar


class GenericChecker:
    """Generics of :class:`.typecheck.Checker`."""

    def specialize_type(self, tr: ir.TypeRef, d: ir.StructLike, args: list) -> StructT:
        if len(args) != len(d.type_params):
            raise error(tr, f"{d.name} expects {len(d.type_params)} type arguments, got {len(args)}")
        name = f"{d.name}<{', '.join(map(str, args))}>"
        t = self.types.get(name)
        if t is not None:
            return t
        t = StructT(d.kind, name, [], d.annotations)
        t.generic = (d.name, list(args))
        tvars = dict(zip(d.type_params, args))
        if any(_has_typevar(a) for a in args):
            # in a generic function's parameters or body: its fields' types as far as known,
            # nothing generated from it
            t.fields = [(f.name, self.resolve_type(f.type_ref, tvars)) for f in d.fields]
            return t
        self.types[name] = t        # its own class in the generated code
        self.declare_fields(d, t, tvars)
        return t

    def check_generic_body(self, d: ir.FunctionDecl, scope: Scope) -> None:
        """Check a generic function's body once with its type parameters opaque, as p4c does
        (``(bit<8>) a`` or ``a + 1`` with ``a`` of type ``T`` are errors whatever the calls)."""
        probe = copy.deepcopy(d)
        probe.type_params = []
        saved = self.type_env, getattr(self, "in_generic_body", False)
        self.type_env = {tp: TypeVar(tp) for tp in d.type_params}
        self.in_generic_body = True
        try:
            self.check_function(probe, Scope(scope))
        finally:
            self.type_env, self.in_generic_body = saved

    def call_generic_function(self, e: ir.Call, d: ir.FunctionDecl, scope: Scope) -> P4Type:
        what = f"function {d.name}"
        self.order_named_args_of_call(e, d.params, e.args, what)
        tv: dict = {tp: TypeVar(tp) for tp in d.type_params}
        if e.type_args:
            if len(e.type_args) != len(d.type_params):
                raise error(e, f"{what}: expected {len(d.type_params)} type arguments, got "
                               f"{len(e.type_args)}")
            for tp, ta in zip(d.type_params, e.type_args):
                tv[tp] = self.resolve_type(ta)
        if len(e.args) != len(d.params):
            raise error(e, f"{what}: expected {len(d.params)} arguments, got {len(e.args)}")
        for a, p in zip(e.args, d.params):
            pt = self.resolve_type(p.type_ref, tv)
            if _has_typevar(pt):
                self._unify(pt, self.check_expr(a, scope), tv, a)
        if getattr(self, "in_generic_body", False):
            # a call in a generic body checked with opaque types: nothing is generated from it
            self.check_call_args(e, d.params, e.args, scope, what, tv)
            e.call_kind = ("function",)
            return self.resolve_type(d.ret, tv)
        for tp in d.type_params:
            t = tv[tp]
            if isinstance(t, TypeVar):
                raise error(e, f"{what}: cannot infer type argument {tp}")
            if isinstance(t, InfInt):
                raise error(e, f"{what}: type argument {tp} is an integer of unknown width "
                               "(give it: a width on the literal or a type argument)")
        spec = self.specialize_function(e, d, [tv[tp] for tp in d.type_params])
        e.func.sym = Sym("function", spec.name, ObjT("function", spec), spec)
        e.func.type = ObjT("function", spec)
        self.check_call_args(e, spec.params, e.args, scope, what, dict(spec.type_bindings))
        e.call_kind = ("function",)
        return spec.ret_resolved

    def specialize_function(self, node: ir.Node, d: ir.FunctionDecl, args: list):
        key = (d.name, tuple(map(str, args)))
        specs = self.__dict__.setdefault("_function_specs", {})
        if key in specs:
            if specs[key] is None:
                raise error(node, f"{d.name}: a function cannot call itself")
            return specs[key]
        specs[key] = None
        spec = copy.deepcopy(d)
        spec.name = f"{d.name}__{len(specs)}"
        spec.base_name = d.name
        spec.type_params = []
        spec.type_bindings = dict(zip(d.type_params, args))
        saved, self.type_env = self.type_env, dict(spec.type_bindings)
        try:
            self.check_function(spec, Scope(self.top))
        finally:
            self.type_env = saved
        specs[key] = spec
        self.generic_functions.append(spec)
        return spec

    def _unify(self, pt: P4Type, at: P4Type, tv: dict, node: ir.Expr) -> None:
        """Bind the type variables of parameter type ``pt`` from argument type ``at``."""
        if isinstance(pt, TypeVar):
            bound = tv.get(pt.name)
            if bound is None or isinstance(bound, TypeVar):
                tv[pt.name] = at
            elif isinstance(bound, InfInt):
                tv[pt.name] = at
            else:
                self.assignable(node, at, bound)
            return
        pg, ag = getattr(pt, "generic", None), getattr(at, "generic", None)
        if pg and ag and pg[0] == ag[0]:
            for x, y in zip(pg[1], ag[1]):
                self._unify(x, y, tv, node)
            return
        raise error(node, f"cannot pass a value of type {at} for a parameter of type {pt}")


def _has_typevar(t) -> bool:
    if isinstance(t, TypeVar):
        return True
    g = getattr(t, "generic", None)
    return bool(g) and any(_has_typevar(a) for a in g[1])
