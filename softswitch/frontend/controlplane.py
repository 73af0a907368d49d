"""The control-plane view of a checked program: what p4c's P4Info lists, and in which order.

p4c writes P4Info (``p4c-bm2-ss --p4runtime-files``) from the program its front and mid end
leave, and those passes decide what the control plane sees:

* Declarations nothing uses are removed (``RemoveAllUnusedDeclarations``): a table never
  applied; a control instance never applied, with its tables, actions and externs; an action
  that no remaining table lists and no ``apply`` block calls. Statements under a condition that
  folds to a constant are removed first (``SimplifyControlFlow``): ``if (false) { t.apply(); }``
  uses nothing. Extern instances (registers, counters, meters) stay even when unused.
* Control instances are inlined (``Inline``): an applied instance's locals take the place of its
  declaration among the caller's locals, named with the instance's path (``Ingress.sub.t``).
* Actions called from actions are inlined (``InlineActions``): such a call uses nothing.
* Top-level actions are copied into each control block that uses them (``LocalizeAllActions``),
  in front of its locals, in the order of first use: the remaining tables in declaration order,
  each's action list then default action (``NoAction`` when none is given), then the ``apply``
  block.
* An action only ever called directly from an ``apply`` block has its arguments bound at the
  call: P4Info lists it without parameters.

P4Info then lists the control blocks in ``V1Switch`` order; in each, the actions and the tables
in the order of its (inlined) locals. An action already listed is not listed again (a top-level
action used by two blocks: the first block's copy, parameters included or not, is the one).
``@hidden`` objects stay in the view: they are P4Runtime symbols (they get ids and count for
aliases), and :func:`softswitch.p4info.build_p4info` leaves them out of the lists.

Like p4c, constants are not propagated through local variables: ``bool b = false; if (b) a();``
keeps ``a``. Not modelled: the hidden tables and actions p4c's mid end synthesises for ``apply``
block statements (they only matter through aliases and id collisions with their names).

Example (``tests/softswitch/programs/p4info_view.p4`` shows each case)::

    >>> from softswitch.compiler import compile_file
    >>> info = compile_file("tests/softswitch/programs/p4info_view.p4").info
    >>> [(a.name, [p.name for p in a.params]) for a in info.actions][5:8]
    [('MyIngress.forward', ['port']), ('MyIngress.direct_only', []), ('MyIngress.both_ways', ['v'])]
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Iterator, Optional

from . import ir
from .types import ExternT

__all__ = ["ActionUse", "ControlPlaneView", "control_plane_view", "local_name", "qualified_name"]


@dataclass(frozen=True)
class ActionUse:
    """An action P4Info lists: its fully qualified name, and whether a table lists it (then P4Info
    gives its directionless parameters; an action only called directly gets none)."""
    name: str
    table_bound: bool


@dataclass(frozen=True)
class ControlPlaneView:
    """The P4Runtime objects of a program, as p4c's P4Info has them.

    Attributes:
        tables: fully qualified names of the tables, in P4Info order.
        actions: the actions, in P4Info order, each once.
        externs: fully qualified names of the extern instances (register, counter, meter,
            direct_counter, direct_meter) that remain; a direct resource also needs a remaining
            table that uses it.
        extern_calls: whether a remaining apply block or action calls an extern function
            (``mark_to_drop``, ``hash``, ...): p4c's P4Info then has ``type_info``.
    """
    tables: tuple[str, ...] = ()
    actions: tuple[ActionUse, ...] = ()
    externs: frozenset[str] = frozenset()
    extern_calls: bool = False


def local_name(decl, default: str) -> str:
    """p4c's name for a declaration: its ``@name`` annotation, else its own name."""
    a = ir.find_annotation(getattr(decl, "annotations", []), "name")
    if a and a.args and isinstance(a.args[0], ir.StringLit):
        return a.args[0].value
    return default


def qualified_name(local: str, prefix: Optional[str]) -> str:
    """The control-plane name of an object called ``local`` (see :func:`local_name`) declared in
    the control instance named ``prefix`` (``None``: at top level). A leading dot makes the name
    absolute: ``@name(".x")`` is ``x`` wherever it is declared."""
    if local.startswith("."):
        return local[1:]
    return local if prefix is None else f"{prefix}.{local}"


def control_plane_view(checker) -> ControlPlaneView:
    """The control-plane view of the program ``checker`` has checked (see the module docstring).

    Args:
        checker: a :class:`softswitch.frontend.typecheck.Checker` after ``check()``; its program
            instantiates ``main`` with constructor calls of its parser and controls.

    Returns:
        the :class:`ControlPlaneView`. Control blocks are named after their type, and instances
        inside them ``<block>.<instance>``, as the code generator names them.
    """
    program = checker.program
    top_actions = {id(d) for d in program.decls if isinstance(d, ir.ActionDecl)}
    no_action = checker.top.lookup("NoAction")
    scanner = _ControlScanner(top_actions, no_action.decl if no_action is not None else None)
    tables: dict[str, None] = {}
    actions: dict[str, ActionUse] = {}
    extern_calls = False
    externs = {qualified_name(local_name(d, d.name), None) for d in program.decls
               if isinstance(d, ir.Instantiation) and isinstance(d.resolved, ExternT)}
    for arg in main_blocks(checker.main):
        decl = getattr(arg, "decl", None) if isinstance(arg, ir.CtorCall) else None
        if isinstance(decl, ir.ParserDecl):     # no tables, no actions; extern instances
            externs.update(_parser_externs(decl, block_name(arg)))
            continue
        if decl is None:                 # unsupported
            continue
        block = scanner.control(decl, block_name(arg))
        for use in block.block_actions():
            actions.setdefault(use.name, use)
        tables.update(dict.fromkeys(block.tables))
        externs.update(block.externs)
        extern_calls = extern_calls or block.extern_calls
    return ControlPlaneView(tuple(tables), tuple(actions.values()), frozenset(externs),
                            extern_calls)


def main_blocks(main) -> list:
    """The blocks ``main`` instantiates: V1Switch's arguments, or for TNA's ``Switch(pipe)``
    those of its Pipeline (an instance declared before, or a constructor call)."""
    if main is None:
        return []
    args = list(main.args)
    if main.type_ref.name == "Switch" and len(args) == 1:
        pipe = args[0]
        if isinstance(pipe, ir.Path) and isinstance(getattr(pipe.sym, "decl", None),
                                                    ir.Instantiation):
            pipe = pipe.sym.decl
        if isinstance(pipe, (ir.CtorCall, ir.Instantiation)):
            return list(pipe.args)
    return args


def block_name(arg: ir.CtorCall) -> str:
    """The name of a ``V1Switch`` block: its type's, ``Name_0`` where p4c specialised it for
    constructor arguments (``MyIngress(3)``)."""
    return arg.type_ref.name + ("_0" if hasattr(arg.decl, "base_name") else "")


def _parser_externs(decl: ir.ParserDecl, prefix: str) -> list:
    """The extern instances declared in a parser instance, its sub-parsers' included."""
    out = []
    for loc in decl.locals:
        if isinstance(loc, ir.Instantiation) and isinstance(loc.resolved, ExternT):
            out.append(qualified_name(local_name(loc, loc.name), prefix))
        elif isinstance(loc, ir.Instantiation) and isinstance(loc.resolved.decl, ir.ParserDecl):
            out += _parser_externs(loc.resolved.decl, f"{prefix}.{loc.name}")
    return out


# --------------------------------------------------------------------------------------------
# one control instance, as p4c inlines it
# --------------------------------------------------------------------------------------------
@dataclass
class _Control:
    """What one applied control instance contributes, its applied sub-instances included."""
    tables: list = field(default_factory=list)            # qualified names, locals' order
    local_actions: list = field(default_factory=list)     # ActionUse, locals' order
    externs: list = field(default_factory=list)           # qualified names
    globals_in_locals: list = field(default_factory=list)  # top-level ActionDecls, first use
    globals_in_body: list = field(default_factory=list)
    table_globals: set = field(default_factory=set)       # ids of top-level actions tables list
    extern_calls: bool = False                            # an extern function is called

    def block_actions(self) -> list[ActionUse]:
        """The P4Info actions of this instance as a ``V1Switch`` block: the top-level actions it
        uses (localized in front), then its own in declaration order."""
        seen: dict[int, ir.ActionDecl] = {}
        for decl in self.globals_in_locals + self.globals_in_body:
            seen.setdefault(id(decl), decl)
        localized = [ActionUse(qualified_name(local_name(d, d.name), None),
                               id(d) in self.table_globals) for d in seen.values()]
        return localized + self.local_actions


class _ControlScanner:
    """Scans control instances of one program (``top_actions``: ids of its top-level action
    declarations; ``no_action``: the default action of tables that give none)."""

    def __init__(self, top_actions: set, no_action: Optional[ir.ActionDecl]):
        self.top_actions = top_actions
        self.no_action = no_action

    def control(self, decl: ir.ControlDecl, prefix: str) -> _Control:
        """The contribution of an applied instance of ``decl`` named ``prefix``."""
        events: list = []
        _scan_stmt(decl.body, events)
        applied = {id(d) for kind, d in events if kind in ("table", "control")}
        called = {id(d) for kind, d in events if kind == "action"}
        remaining_tables = [d for d in decl.locals
                            if isinstance(d, ir.TableDecl) and id(d) in applied]
        used_actions = [a for t in remaining_tables for a in self._table_actions(t)]
        bound = {id(a) for a in used_actions}
        out = _Control()
        in_actions: list = []                    # what remaining actions call counts too
        for action in used_actions + [d for kind, d in events if kind == "action"]:
            _scan_stmt(action.body, in_actions)
        out.extern_calls = any(kind == "extern_func" for kind, _ in events + in_actions)
        children: dict[int, _Control] = {}
        for loc in decl.locals:
            if isinstance(loc, ir.TableDecl) and id(loc) in applied:
                out.tables.append(qualified_name(local_name(loc, loc.name), prefix))
                for action in self._table_actions(loc):
                    if id(action) in self.top_actions:
                        out.globals_in_locals.append(action)
                        out.table_globals.add(id(action))
            elif isinstance(loc, ir.ActionDecl):
                if id(loc) in bound or id(loc) in called:
                    out.local_actions.append(ActionUse(
                        qualified_name(local_name(loc, loc.name), prefix), id(loc) in bound))
            elif isinstance(loc, ir.Instantiation) and isinstance(loc.resolved, ExternT):
                out.externs.append(qualified_name(local_name(loc, loc.name), prefix))
            elif isinstance(loc, ir.Instantiation) and id(loc) in applied:
                # a control instance; the code generator names it by its declared name
                child = self.control(loc.resolved.decl, f"{prefix}.{loc.name}")
                children[id(loc)] = child
                out.tables += child.tables
                out.local_actions += child.local_actions
                out.externs += child.externs
                out.globals_in_locals += child.globals_in_locals
                out.table_globals |= child.table_globals
                out.extern_calls = out.extern_calls or child.extern_calls
        for kind, d in events:
            if kind == "action" and id(d) in self.top_actions:
                out.globals_in_body.append(d)
            elif kind == "control" and id(d) in children:
                out.globals_in_body += children[id(d)].globals_in_body
        return out

    def _table_actions(self, table: ir.TableDecl) -> list:
        """The actions a table uses: its action list, then its default action."""
        used = [sym.decl for sym in table.action_decls]
        default = table.props.get("default_action")
        if default is not None:
            expr = default[0]
            sym = (expr.func if isinstance(expr, ir.Call) else expr).sym
            used.append(sym.decl)
        elif self.no_action is not None:
            used.append(self.no_action)
        return used


# --------------------------------------------------------------------------------------------
# what an apply block uses, in order
# --------------------------------------------------------------------------------------------
def _constant(e) -> Optional[bool]:
    c = getattr(e, "const", None)
    return c if isinstance(c, bool) else None


def _scan_stmt(s, events: list) -> None:
    """Append ``(kind, decl)`` for what statement ``s`` uses, in order: ``("table", TableDecl)``
    applied, ``("control", Instantiation)`` applied, ``("action", ActionDecl)`` called,
    ``("extern_func", name)`` an extern function called. Branches
    under a constant condition that are never taken use nothing."""
    if isinstance(s, ir.Block):
        for x in s.stmts:
            _scan_stmt(x, events)
    elif isinstance(s, ir.If):
        taken = _constant(s.cond)
        if taken is None:
            _scan_expr(s.cond, events)
        if taken is not False:
            _scan_stmt(s.then, events)
        if taken is not True and s.other is not None:
            _scan_stmt(s.other, events)
    elif isinstance(s, ir.Switch):
        _scan_expr(s.expr, events)
        for case in s.cases:
            if case.body is not None:
                _scan_stmt(case.body, events)
    elif isinstance(s, ir.CallStmt):
        _scan_expr(s.call, events)
    elif isinstance(s, ir.Assign):
        _scan_expr(s.target, events)
        _scan_expr(s.value, events)
    elif isinstance(s, ir.VarDecl):
        _scan_expr(s.init, events)
    elif isinstance(s, ir.Return):
        _scan_expr(s.value, events)


def _scan_expr(e, events: list) -> None:
    if not isinstance(e, ir.Expr):
        return
    if isinstance(e, ir.Cond) and _constant(e.cond) is not None:
        _scan_expr(e.then if e.cond.const else e.other, events)
        return
    for child in _children(e):
        _scan_expr(child, events)
    kind = getattr(e, "call_kind", None) if isinstance(e, ir.Call) else None
    if kind == ("table_apply",):
        events.append(("table", e.func.expr.sym.decl))
    elif kind == ("control_apply",):
        events.append(("control", e.func.expr.sym.decl))
    elif kind == ("action",) and isinstance(e.func.sym.decl, ir.ActionDecl):
        events.append(("action", e.func.sym.decl))
    elif kind is not None and kind[0] == "extern_func":
        events.append(("extern_func", kind[1]))


def _children(e: ir.Expr) -> Iterator[ir.Expr]:
    """The sub-expressions of ``e`` (arguments before the call they belong to)."""
    for f in fields(e):
        value = getattr(e, f.name)
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, ir.Expr):
                yield item
