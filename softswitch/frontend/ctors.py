"""Controls and parsers with constructor parameters (``control C(...)(bit<8> k)``), checked as
p4c does: each instantiation (``C(3) c;``, ``C(3)`` in the package) gets its own copy of the
declaration with the constructor parameters bound to the compile-time values of its arguments
(p4c's specialisation), so they may appear wherever a constant may (a ``select`` case, a
table's ``size``). The code generator makes one factory per copy.

Also the checks on extern instances inside a parser: p4c-bm2-ss accepts their declarations
(P4Info lists them) but no method call on them in a parser state.
"""
from __future__ import annotations

import copy
import itertools
import re
from dataclasses import fields

from . import ir
from .exprs import expr_text, struct_const, wrap
from ..api import P4CompileError
from .scope import Scope, Sym, error, unsupported
from .types import Bits, Bool, EnumT, ErrorT, ExternT, InfInt, ListT, StructT, TypeVar

# Externs whose methods p4c-bm2-ss cannot call in a parser ("not supported in parser on this
# target").
NOT_IN_PARSER = ("register", "counter", "meter", "direct_counter", "direct_meter")


class CtorChecker:
    """Constructor parameters of :class:`.typecheck.Checker`."""

    def ctor_values(self, node: ir.Node, decl, args: list, scope: Scope) -> list:
        """Check the constructor arguments of ``decl`` (a control or parser) and return their
        compile-time values, in parameter order."""
        what = f"constructor of {decl.name}"
        call = ir.Call(ir.Path(decl.name, span=node.span), args,
                       arg_names=list(getattr(node, "arg_names", None) or []), span=node.span)
        for a, p in zip(call.args, decl.ctor_params):
            sym = getattr(a, "sym", None) if isinstance(a, ir.Path) else None
            if isinstance(p.resolved, ExternT) and sym is None:
                sym = scope.lookup(a.name) if isinstance(a, ir.Path) else None
            if (isinstance(p.resolved, ExternT) and sym is not None
                    and isinstance(sym.type, ExternT) and str(sym.type) != str(p.resolved)
                    and not any(isinstance(t, TypeVar) for t in p.resolved.type_args)):
                # p4c: "Type of argument 'w' (register<...>) does not match type of parameter"
                raise error(a, f"{what}: type of argument '{a.name}' ({sym.type}) does not match "
                               f"type of parameter '{p.name}' ({p.resolved})")
        self.check_call_args(call, decl.ctor_params, call.args, scope, what)
        values = []
        specialized_by_p4c = all(self.p4c_simple_constant(a, scope) for a in call.args)
        self.last_p4c_specialized = specialized_by_p4c
        for a, p in zip(call.args, decl.ctor_params):
            if isinstance(p.resolved, ExternT) and isinstance(a, ir.CtorCall):
                if specialized_by_p4c:
                    # constructed in the argument list of an instance p4c specialises: the
                    # instance's own, named after the parameter (p4c: MyIngress.cnt.c)
                    values.append(a)
                    continue
                # otherwise p4c's MoveConstructors declares it in the enclosing control or
                # parser as a temporary (MyIngress.tmp, tmp_0, ...): the instance uses it
                values.append(self.hoist_ctor_arg(a, decl, scope, what))
                continue
            if isinstance(p.resolved, ExternT):
                # an extern instance declared outside (p4c: the inner control uses that very
                # object, P4Info lists it once, under its own name)
                sym = getattr(a, "sym", None) if isinstance(a, ir.Path) else None
                if sym is None or sym.kind != "instance" or not isinstance(sym.type, ExternT):
                    raise error(a, f"{what}: argument for {p.name} must be an extern instance "
                                   "or a constructor call")
                values.append(sym)
                continue
            if isinstance(p.resolved, StructT) and p.resolved.kind in ("struct", "header"):
                if isinstance(a, (ir.ListExpr, ir.StructExpr)):
                    # p4c types it as a tuple and refuses the fields' uses in the body
                    raise error(a, f"{what}: argument for {p.name}: an initializer without a "
                                   f"type (p4c: a tuple); cast it: ({p.resolved.name}) {{...}}")
                c = struct_const(a, p.resolved, header_ok=True)
                if c is None:
                    raise error(a, f"{what}: argument for {p.name} is not a compile-time constant")
                values.append(c)
                continue
            if isinstance(p.resolved, ListT):
                # a tuple ({8w3, 8w4}): its elements are constants, indexed by constants
                items = a.items if isinstance(a, ir.ListExpr) else None
                if items is None or len(items) != len(p.resolved.items) or any(
                        getattr(x, "const", None) is None
                        or not isinstance(t, (Bits, Bool, InfInt, EnumT, ErrorT))
                        for x, t in zip(items, p.resolved.items)):
                    raise error(a, f"{what}: argument for {p.name} is not a tuple of "
                                   "compile-time constants")
                values.append(tuple(wrap(x.const, t) if isinstance(t, Bits)
                                    and not isinstance(x.const, bool) else x.const
                                    for x, t in zip(items, p.resolved.items)))
                continue
            if not isinstance(p.resolved, (Bits, Bool, InfInt, EnumT, ErrorT)):
                raise unsupported(p, f"constructor parameter {p.name} of type {p.resolved}")
            if getattr(a, "const", None) is None:
                raise error(a, f"{what}: argument for {p.name} is not a compile-time constant")
            values.append(a.const)
        for p in decl.ctor_params[len(call.args):]:
            values.append(self.const_value(p.default, scope, p.resolved))
        return values

    def p4c_simple_constant(self, a: ir.Expr, scope: Scope) -> bool:
        """Whether p4c's SpecializeAll takes ``a`` for a constant (``isSimpleConstant``, after
        constant folding): an integer, a boolean, an enum member, a list of those, or a
        constructor call whose arguments are. Not an error member, a struct or header value, an
        extern instance named: p4c then does not specialise the instance."""
        if isinstance(a, ir.CtorCall):
            return all(self.p4c_simple_constant(x, scope) for x in a.args)
        if isinstance(a, ir.ListExpr):
            return all(self.p4c_simple_constant(x, scope) for x in a.items)
        if a.type is None:
            # not checked yet (a constructor call's argument): check a copy
            a = copy.deepcopy(a)
            try:
                self.check_expr(a, scope)
            except P4CompileError:
                return False
        if any(not getattr(getattr(x, "sym", None), "ctor_param_of",
                           None).p4c_specialized
               for x in ir.walk(a) if isinstance(x, ir.Path)
               and getattr(getattr(x, "sym", None), "ctor_param_of", None) is not None):
            # a constructor parameter of a declaration p4c does not specialise: not a
            # constant there
            return False
        return getattr(a, "const", None) is not None and isinstance(
            a.type, (Bits, Bool, InfInt, EnumT))

    def hoist_ctor_arg(self, a: ir.CtorCall, decl, scope: Scope, what: str) -> Sym:
        """An extern constructed in the constructor arguments of an instance p4c does not
        specialise: p4c's MoveConstructors declares it just before the instance, in the
        enclosing control or parser, as ``tmp``, ``tmp_0``, ``tmp_1``, ... numbered over the
        whole program in p4c's declaration order, after every name the program already uses (its
        MinimalNameGenerator). :meth:`number_ctor_temporaries` gives the names once the program
        is checked, or refuses the program where it cannot tell p4c's. Refused here at top
        level (p4c-bm2-ss 1.2.5.16 crashes there)."""
        owner = scope.owner
        if owner is None or not isinstance(owner, (ir.ControlDecl, ir.ParserDecl)):
            raise unsupported(a, f"{what}: an extern constructed in the arguments of an instance "
                                 "p4c does not specialise, in a package's arguments at top level "
                                 "(p4c's MoveConstructors leaves it there and p4c-bm2-ss "
                                 "1.2.5.16 crashes with SIGSEGV)")
        hoisted = self.__dict__.setdefault("ctor_temporaries", [])
        name = f"tmp__hoisted{len(hoisted)}"      # renamed by number_ctor_temporaries
        inst = ir.Instantiation(name, a.type_ref, a.args, span=a.span)
        self.check_instantiation(inst, scope)
        owner.locals.insert(owner.locals.index(self.current_local), inst)
        sym = scope.lookup(name)
        hoisted.append((inst, sym, owner, what))
        return sym

    def p4c_unit(self, d):
        """The declaration of p4c's program (after its SpecializeAll) that the embedded
        control or parser ``d`` is, as a hashable key: ``d`` itself for a declaration without
        constructor parameters, the declaration copied for a copy p4c does not specialise (one
        declaration for all its instances), else the copy p4c makes for that instantiation in
        its instantiator (``spec``, the instantiator's unit, the instantiation's place)."""
        base = getattr(d, "ctor_base", None)
        if base is None:
            return ("decl", id(d))
        if not d.p4c_specialized:
            return ("decl", id(base))
        inst = d.ctor_instantiator
        return ("spec", self.p4c_unit(inst) if inst is not None else ("main",),
                d.ctor_site)

    def number_ctor_temporaries(self, roots: list) -> None:
        """Name the externs :meth:`hoist_ctor_arg` declared as p4c does: in the order of p4c's
        program when MoveConstructors runs. p4c's SpecializeAll inserts the copy of a control or
        parser it specialises just before the control or parser (or the ``main`` instance)
        holding the instantiation, in the order of the instantiations, the copies for that copy
        before it; a declaration with constructor parameters some instance does not specialise
        stays where it is, one declaration (one set of names) for all those instances. Controls
        and parsers nothing instantiates are removed before and take no number (``roots``: the
        blocks ``main`` instantiates)."""
        hoisted = getattr(self, "ctor_temporaries", [])
        if not hoisted:
            return
        used, todo = set(), list(roots)
        while todo:
            d = todo.pop()
            if id(d) in used:
                continue
            used.add(id(d))
            for loc in getattr(d, "locals", ()):
                t = getattr(loc, "resolved", None) if isinstance(loc, ir.Instantiation) else None
                if t is not None and getattr(t, "kind", None) in ("control_type", "parser_type"):
                    todo.append(t.decl)
        decls = [d for d in self.program.decls + self.specialized if id(d) in used]
        # the p4c copies each unit holds, in the order of their instantiations
        children: dict = {}
        first_seq: dict = {}
        for d in decls:
            u = self.p4c_unit(d)
            if u[0] == "spec":
                first_seq[u] = min(first_seq.get(u, d.ctor_seq), d.ctor_seq)
                children.setdefault(u[1], set()).add(u)
        order: list = []

        def emit(u) -> None:
            for c in sorted(children.get(u, ()), key=lambda c: first_seq[c]):
                emit(c)
            order.append(u)

        top = [("decl", id(d)) for d in self.program.decls
               if isinstance(d, (ir.ControlDecl, ir.ParserDecl))]
        for u in top:
            emit(u)
        emit(("main",))
        place = {u: i for i, u in enumerate(order)}
        by_unit: dict = {}
        for inst, sym, owner, _ in hoisted:
            if id(owner) not in used:
                continue
            by_unit.setdefault(self.p4c_unit(owner), {}).setdefault(id(owner), []).append(
                (inst, sym))
        live = [h for h in hoisted if id(h[2]) in used]
        if not live:
            return
        first = live[0]
        clash = p4c_temporaries(self.program)
        if clash is None:
            try:
                seo = self.seo_temporaries(used)
            except NotModelled as e:
                clash = (e.node, e.why)
        if clash is not None:
            node, why = clash
            raise unsupported(first[0], f"{first[3]}: an extern constructed in the arguments of "
                                        "an instance p4c does not specialise (a struct, error or "
                                        "extern-instance argument): p4c names it tmp, tmp_0, "
                                        "... after its own temporaries, and this program has "
                                        f"{why} at {node.span}")
        # p4c's MinimalNameGenerator: tmp, then tmp_0, tmp_1, ..., each skipping the names
        # the program has then. SideEffectOrdering's temporaries take the first ones, skipping
        # the constructor parameters SpecializeAll later substitutes away too
        generic = {id(d.ctor_base) for d in self.specialized if id(d) in used}
        unspecialised = {id(d.ctor_base) for d in self.specialized
                         if id(d) in used and not d.p4c_specialized}
        fresh = ("tmp" if n == 0 else f"tmp_{n - 1}" for n in itertools.count())
        before = verbatim_tmp_names(self.program, used | generic, generic)
        seo_names = [next(x for x in fresh if x not in before) for _ in range(seo)]
        taken = verbatim_tmp_names(self.program, used | generic, unspecialised)
        taken.update(seo_names)
        fresh = ("tmp" if n == 0 else f"tmp_{n - 1}" for n in itertools.count())
        for u in sorted(by_unit, key=place.__getitem__):
            names: list = []
            for temps in by_unit[u].values():
                for k, (inst, sym) in enumerate(temps):
                    if k == len(names):
                        names.append(next(x for x in fresh if x not in taken))
                    inst.name = sym.name = names[k]

    def seo_temporaries(self, used: set) -> int:
        """The temporaries p4c's SideEffectOrdering declares in the program (:class:`SeoModel`):
        over the controls and parsers ``main`` uses (``used``: ids of embedded ones; a
        declaration with constructor parameters once, as p4c has it then: one of its checked
        copies), the actions and functions declared at top level."""
        model = SeoModel()
        seen = set()
        for d in self.program.decls + self.specialized:
            if isinstance(d, (ir.ActionDecl, ir.FunctionDecl)) and d in self.program.decls:
                model.decl(d)
                continue
            if id(d) not in used or not isinstance(d, (ir.ControlDecl, ir.ParserDecl)):
                continue
            base = getattr(d, "ctor_base", d)
            if id(base) not in seen:
                seen.add(id(base))
                model.decl(d)
        return model.n

    def const_value(self, e: ir.Expr, scope: Scope, t) -> object:
        vt = self.check_expr(e, scope, t)
        self.assignable(e, vt, t)
        if e.const is None:
            raise error(e, "default value is not a compile-time constant")
        return e.const

    def resolve_ctor_params(self, decl) -> None:
        for p in decl.ctor_params:
            if p.direction:
                raise error(p, f"{p.name}: constructor parameters cannot have a direction")
            p.resolved = self.resolve_type(p.type_ref)

    def specialize(self, node: ir.Node, decl, args: list, scope: Scope):
        """A checked copy of ``decl`` (declared with constructor parameters) for one
        instantiation with ``args``. Its name is unique (``Name__N``); ``base_name`` is the
        declaration's own."""
        self.resolve_ctor_params(decl)
        values = self.ctor_values(node, decl, args, scope)
        spec = copy.deepcopy(decl)
        self.n_specialized = getattr(self, "n_specialized", 0) + 1
        spec.base_name = decl.name
        spec.name = f"{decl.name}__{self.n_specialized}"
        # where p4c's program has it (number_ctor_temporaries)
        spec.ctor_base, spec.ctor_seq = decl, self.n_specialized
        spec.p4c_specialized = self.last_p4c_specialized
        spec.ctor_instantiator = scope.owner
        spec.ctor_site = (node.span.file, node.span.line, node.span.col)
        consts = Scope(self.top, owner=spec)
        spec.extern_ctor_args = []      # (the parameter's Sym, the instance's Sym) for codegen
        for p, v in zip(spec.ctor_params, values):
            t = self.resolve_type(p.type_ref)
            if isinstance(v, ir.CtorCall):
                spec.locals.insert(0, ir.Instantiation(p.name, v.type_ref, v.args, span=v.span))
                continue
            if isinstance(v, Sym):
                psym = Sym("instance", p.name, v.type, p, owner=spec)
                spec.extern_ctor_args.append((psym, v))
                consts.declare(psym, p)
                continue
            csym = Sym("const", p.name, t, p, const=v, owner=spec, uid=self.uid())
            csym.ctor_param_of = spec
            consts.declare(csym, p)
        spec.ctor_params = []
        saved = self.in_parser
        try:
            if isinstance(spec, ir.ParserDecl):
                self.check_parser(spec, consts)
            else:
                self.check_control(spec, consts)
        finally:
            self.in_parser = saved
        self.specialized.append(spec)
        return spec

    @staticmethod
    def order_named_args(node: ir.Node, params: list, what: str) -> None:
        """Put named arguments (``V1Switch(ig = MyIngress(), p = MyParser(), ...)``) in the
        order of ``params``."""
        names = getattr(node, "arg_names", None) or []
        if not any(names):
            return
        if not all(names):
            raise error(node, f"{what}: cannot mix named and positional arguments")
        known = {p.name for p in params}
        for n in names:
            if n not in known:
                raise error(node, f"{what}: no parameter named {n}")
        order = {n: i for i, n in enumerate(names)}
        node.args[:] = [node.args[order[p.name]] for p in params if p.name in order]
        node.arg_names = [""] * len(node.args)

    def check_parser_extern_call(self, e: ir.Call, extern: ExternT) -> None:
        if self.in_parser and extern.name in NOT_IN_PARSER:
            raise error(e, f"{expr_text(e.func)}: not supported in parser on this target "
                           f"(p4c-bm2-ss: no {extern.name} method calls in a parser)")


_TMP_NAME = re.compile(r"tmp(_\d+)?")


def p4c_temporaries(program: ir.Program):
    """The first name in ``program`` that p4c's MoveConstructors would otherwise give an extern
    it moves out of an argument list, where the embedded target cannot tell which names p4c's
    front end leaves, as ``(node, what)``, or None: a name ``tmp``/``tmp_N`` declared other than
    as a field of a struct, header or union or a parameter of a parser or control (those p4c
    keeps as written: :func:`verbatim_tmp_names`; a local variable, action, table or action
    parameter p4c's UniqueNames and UniqueParameters rename, and may drop as unused). The
    temporaries of p4c's SideEffectOrdering: :class:`SeoModel`."""
    cached = getattr(program, "_p4c_temporaries", False)
    if cached is not False:
        return cached
    found = _scan(program)
    program._p4c_temporaries = found
    return found


def verbatim_tmp_names(program: ir.Program, used: set, unspecialised: set) -> set:
    """The names of the form ``tmp``/``tmp_N`` that p4c's program still has, as written, when
    MoveConstructors runs: fields of every struct, header and union (p4c keeps unused types),
    parameters of the parsers and controls still there (``used``: their ids; a declaration
    with constructor parameters p4c copies keeps its parameters in each copy), constructor
    parameters of those some instance does not specialise (``unspecialised``: their ids;
    SpecializeAll substitutes the others away)."""
    names = set()
    for d in program.decls:
        if isinstance(d, ir.StructLike):
            names.update(f.name for f in d.fields if _TMP_NAME.fullmatch(f.name))
        elif isinstance(d, (ir.ControlDecl, ir.ParserDecl)) and id(d) in used:
            names.update(p.name for p in d.params if _TMP_NAME.fullmatch(p.name))
            if id(d) in unspecialised:
                names.update(p.name for p in d.ctor_params if _TMP_NAME.fullmatch(p.name))
    return names


def _scan(node):
    if isinstance(node, list):
        for x in node:
            r = _scan(x)
            if r is not None:
                return r
        return None
    if not isinstance(node, ir.Node) or isinstance(node, (ir.Annotation, ir.TypeRef)):
        return None
    if isinstance(node, ir.StructLike):
        return None                                 # its fields' names p4c keeps
    name = getattr(node, "name", None)
    if isinstance(name, str) and _TMP_NAME.fullmatch(name) and not isinstance(node, ir.Path):
        # a declaration (a reference names a declaration, or a parameter p4c keeps)
        return node, f"the name {name}"
    if isinstance(node, (ir.ControlDecl, ir.ParserDecl)):
        # its parameters' names p4c keeps (verbatim_tmp_names); their default values
        params = node.params + node.ctor_params
        return _scan([p.default for p in params if p.default is not None]) or _scan(
            [getattr(node, f.name, None) for f in fields(node) if f.name not in (
                "span", "type", "decl", "annotations", "params", "ctor_params", "name")])
    for f in fields(node):
        if f.name in ("span", "type", "decl", "annotations"):
            continue
        r = _scan(getattr(node, f.name, None))
        if r is not None:
            return r
    return None


class NotModelled(Exception):
    """A construct for which the embedded target cannot tell how many temporaries p4c's
    SideEffectOrdering declares (``node``, ``why``)."""

    def __init__(self, node, why: str):
        super().__init__(why)
        self.node, self.why = node, why


def _is_call(e) -> bool:
    """A call p4c takes for a side effect: any but ``isValid()``."""
    return isinstance(e, ir.Call) and not (
        isinstance(e.func, ir.Member) and e.func.member == "isValid" and not e.args)


def _has(e, test) -> bool:
    return any(test(x) for x in ir.walk(e))


def _side_effect(e) -> bool:
    return _has(e, _is_call)


def _dismantled(e) -> bool:
    """Whether SideEffectOrdering rewrites ``e`` at all: a call, or a ``?:`` (always)."""
    return _has(e, lambda x: _is_call(x) or isinstance(x, ir.Cond))


def _table_result(e) -> bool:
    """``t.apply().hit``, ``.miss`` or ``.action_run``."""
    return (isinstance(e, ir.Member) and e.member in ("hit", "miss", "action_run")
            and isinstance(e.expr, ir.Call) and isinstance(e.expr.func, ir.Member)
            and e.expr.func.member == "apply" and not e.expr.args)


def _locations(e) -> list:
    """The places ``e`` reads or writes, as paths (``('hdr', 'k', 'a')``); an index makes the
    whole stack the place."""
    found = []

    def chain(x):
        parts = []
        while isinstance(x, (ir.Member, ir.Index, ir.Slice)):
            if isinstance(x, ir.Member):
                parts.append(x.member)
            elif isinstance(x, ir.Index):
                parts.clear()
            x = x.expr
        return (x.name, *reversed(parts)) if isinstance(x, ir.Path) else None

    def visit(x):
        c = chain(x) if isinstance(x, (ir.Path, ir.Member, ir.Index, ir.Slice)) else None
        if c is not None:
            found.append(c)
            if isinstance(x, ir.Index):
                visit(x.index)
            return
        if isinstance(x, list):
            for y in x:
                visit(y)
        elif isinstance(x, ir.Node):
            for f in fields(x):
                if f.name not in ("span", "type", "decl", "annotations", "sym"):
                    visit(getattr(x, f.name, None))

    visit(e)
    return found


def _may_alias(a, b) -> bool:
    return any(x[:len(y)] == y or y[:len(x)] == x for x in _locations(a) for y in _locations(b))


class SeoModel:
    """How many temporaries p4c's SideEffectOrdering (p4c-bm2-ss 1.2.5.16) declares in a
    program, for the constructs whose count was established with ``--p4runtime-files`` (the
    names of the externs MoveConstructors moves come after them).

    1. In an ``if`` condition: one per call but ``isValid()``, per binary operation over a
       call (``&&``/``||`` too), per ``?:``, per left operand (not a constant) of a binary
       operation but ``&&``/``||`` whose right operand has a call (p4c copies it first).
    2. In a ``select`` with any of those in its keys: as in 1, and one more per key; an
       ``if`` in a parser state is such a ``select`` on its condition (RemoveParserIfs).
    3. ``t.apply().hit``/``.miss`` as a whole condition: none.
    4. A call that is a whole statement, right side or initializer: none, but one for an
       ``out``/``inout`` argument that may alias another argument.
    5. A call or ``?:`` inside a right side: as in 1, where the value is surely used
       (:meth:`live_right_side`).

    Anything else that p4c dismantles raises :class:`NotModelled`: a right side whose value may
    be dead (p4c's SimplifyDefUse then drops the temporaries), temporaries in an action or
    function, an index or list over a call, a call in another call's arguments."""

    def __init__(self):
        self.n = 0
        self.in_parser = False
        self.in_control = False
        self.after: list = []       # the statements that follow, block by block

    def decl(self, d) -> None:
        if isinstance(d, ir.ControlDecl):
            for loc in d.locals:
                self.local(loc)
            self.in_control = True
            self.stmt(d.body)
            self.in_control = False
        elif isinstance(d, ir.ParserDecl):
            for loc in d.locals:
                self.local(loc)
            self.in_parser = True
            for st in d.states:
                for s in st.stmts:
                    self.stmt(s)
                tr = st.transition
                if tr is not None and tr.select:
                    self.select(tr.select)
            self.in_parser = False
        elif isinstance(d, (ir.ActionDecl, ir.FunctionDecl)):
            before = self.n
            self.stmt(d.body)
            if self.n != before:
                raise NotModelled(d, f"temporaries p4c's SideEffectOrdering declares in "
                                     f"{'action' if isinstance(d, ir.ActionDecl) else 'function'}"
                                     f" {d.name}")

    def local(self, loc) -> None:
        if isinstance(loc, ir.VarDecl):
            if loc.init is not None:
                self.value(loc.init)
        elif isinstance(loc, ir.ActionDecl):
            self.decl(loc)
        elif isinstance(loc, ir.TableDecl):
            for k in loc.keys:
                self.none(k.expr)
        elif isinstance(loc, ir.Instantiation):
            self.none(loc.args)

    def stmt(self, s) -> None:
        if s is None or isinstance(s, (ir.Exit, ir.EmptyStmt, ir.ConstDecl)):
            return
        if isinstance(s, ir.Block):
            for i, x in enumerate(s.stmts):
                self.after.append(s.stmts[i + 1:])
                try:
                    self.stmt(x)
                finally:
                    self.after.pop()
        elif isinstance(s, ir.Assign):
            self.none(s.target)
            if _is_call(s.value) or not _dismantled(s.value):
                self.value(s.value)
            else:
                self.n += self.live_right_side(s)
        elif isinstance(s, ir.VarDecl):
            if s.init is not None:
                self.value(s.init)
        elif isinstance(s, ir.CallStmt):
            self.call(s.call, used=False)
        elif isinstance(s, ir.If):
            self.cond(s)
            self.stmt(s.then)
            self.stmt(s.other)
        elif isinstance(s, ir.Switch):
            if not _table_result(s.expr):
                self.none(s.expr)
            for c in s.cases:
                self.stmt(c.body)
        else:
            self.none(s)

    def live_right_side(self, s: ir.Assign) -> int:
        """The temporaries of right side ``s.value`` (a call or ``?:`` inside it), which p4c's
        SimplifyDefUse keeps only where the value assigned is used: counted where it surely is,
        a field of a control's ``out``/``inout`` parameter (copied out on exit) that nothing
        after the assignment in the control's body may write (:func:`_may_write`)."""
        root = s.target
        while isinstance(root, (ir.Member, ir.Index, ir.Slice)):
            root = root.expr
        sym = getattr(root, "sym", None)
        if not (self.in_control and isinstance(root, ir.Path) and sym is not None
                and sym.kind == "param" and sym.direction in ("out", "inout")):
            raise NotModelled(s, "a call or ?: inside a right side (p4c keeps its temporaries "
                                 "only where the value is used)")
        for later in (x for block in self.after for x in block):
            w = _may_write(later, s.target)
            if w is not None:
                raise NotModelled(s, "a call or ?: inside a right side whose value p4c may find "
                                     f"dead (written again at {w.span})")
        return self.dis(s.value)

    def none(self, e) -> None:
        """``e`` must make no temporary."""
        for x in ir.walk(e):
            if _is_call(x):
                raise NotModelled(x, "a call inside an expression")
            if isinstance(x, ir.Cond):
                raise NotModelled(x, "a ?: expression")

    def value(self, e) -> None:
        """A whole right side or initializer."""
        if _is_call(e):
            self.call(e, used=False)
        else:
            self.none(e)

    def call(self, e: ir.Call, used: bool) -> None:
        """A call; ``used``: its result is an operand (a temporary holds it)."""
        if isinstance(e.func, ir.Member):
            self.none(e.func.expr)
        self.none(e.args)
        dirs = getattr(e, "param_dirs", None)
        aliased = 0
        for i, a in enumerate(e.args):
            if any(_may_alias(a, b) for j, b in enumerate(e.args) if j != i):
                if dirs is None:
                    raise NotModelled(e, "a call whose arguments may alias")
                aliased += dirs[i] in ("out", "inout")
        if aliased > 1:
            raise NotModelled(e, "a call with several out/inout arguments that may alias")
        self.n += aliased + (1 if used else 0)

    def cond(self, s: ir.If) -> None:
        if _table_result(s.cond) or not _dismantled(s.cond):
            return
        if _empty(s.then) and _empty(s.other):
            raise NotModelled(s, "an if with empty branches over a call or ?:")
        if self.in_parser:
            # p4c's RemoveParserIfs makes it a select on the condition first
            self.select([s.cond])
            return
        self.n += self.dis(s.cond)

    def select(self, keys: list) -> None:
        if any(_dismantled(k) for k in keys):
            self.n += sum(1 + self.dis(k) for k in keys)

    def dis(self, e) -> int:
        """DismantleExpression's temporaries for operand ``e``."""
        if not _dismantled(e):
            return 0
        if isinstance(e, ir.Call) and _is_call(e):
            if isinstance(e.func, ir.Member) and e.func.member == "apply":
                raise NotModelled(e, "a table's apply() inside an expression")
            before = self.n
            self.call(e, used=True)
            n, self.n = self.n - before, before
            return n
        if isinstance(e, ir.Member) and not _table_result(e):
            return self.dis(e.expr)
        if isinstance(e, (ir.Unary, ir.Cast, ir.Slice)):
            return self.dis(e.expr)
        if isinstance(e, ir.Binary):
            if not _side_effect(e):
                raise NotModelled(e, "a ?: inside an operation")
            # the left operand's value is copied before a right operand with a call runs
            # (not for && and ||, whose right operand p4c evaluates in a branch of its own)
            copy = (e.op not in ("&&", "||") and _side_effect(e.right)
                    and getattr(e.left, "const", None) is None)
            return self.dis(e.left) + copy + self.dis(e.right) + 1
        if isinstance(e, ir.Cond):
            if getattr(e.cond, "const", None) is not None:
                raise NotModelled(e, "a ?: over a constant")    # folded by p4c
            if (isinstance(e.then, ir.BoolLit) and isinstance(e.other, ir.BoolLit)
                    and e.then.value != e.other.value):
                return self.dis(e.cond)         # p4c's StrengthReduction: c (or !c)
            return self.dis(e.cond) + 1 + self.dis(e.then) + self.dis(e.other)
        raise NotModelled(e, "a call inside an expression")


def _may_write(stmt, target, seen=None):
    """The first node of statement ``stmt`` that may write ``target``, or None: an assignment
    to it, an ``out``/``inout`` argument over it, a header method on it, an action called or
    a table applied whose actions (their bodies, with the actions they call) may."""
    seen = set() if seen is None else seen
    for x in ir.walk(stmt):
        if isinstance(x, ir.Assign) and _may_alias(x.target, target):
            return x
        if not _is_call(x):
            continue
        kind = getattr(x, "call_kind", None) or ()
        bodies = []
        if kind[:1] == ("action",):
            bodies = [getattr(getattr(x.func, "sym", None), "decl", None)]
        elif kind[:1] == ("table_apply",):
            table = getattr(getattr(x.func.expr, "sym", None), "decl", None)
            bodies = [getattr(a, "decl", None) for a in getattr(table, "action_decls", [None])]
        for d in bodies:
            if not isinstance(d, ir.ActionDecl):
                return x
            if id(d) not in seen:
                seen.add(id(d))
                if _may_write(d.body, target, seen) is not None:
                    return x
        if kind[:1] in (("header",), ("stack",)) and _may_alias(x.func.expr, target):
            return x
        dirs = getattr(x, "param_dirs", None)
        if dirs is None and x.args:
            return x
        if any(d in ("out", "inout") and _may_alias(a, target)
               for a, d in zip(x.args, dirs or ())):
            return x
    return None


def _empty(s) -> bool:
    if s is None or isinstance(s, ir.EmptyStmt):
        return True
    if isinstance(s, ir.Block):
        return all(_empty(x) for x in s.stmts)
    return False
