"""Generate Python source for a checked program: one ``build(RT, C)`` function per program.

The generated code uses plain ints (``int<N>`` values kept in two's complement range, ``bit<N>``
values in 0 .. 2**N - 1, an invariant the code relies on to skip redundant masks), one class per
header/struct type (``__slots__``),
and closures per control instance: control parameters and control-level variables are closure
cells, actions are nested functions that tables call with their control-plane arguments.
Nothing walks the IR per packet.

Per-packet fast paths: headers are extracted and emitted with one precompiled ``struct``
format; register reads/writes index the register's list directly; parameterless actions
called directly are inlined; ``t.apply();`` of a plain exact table runs a hit's action itself
(inlined when it is the table's one entry action; see ``StmtGen.table_apply_fast``); scalar
fields an action or control body reads more than once and cannot change (see
:meth:`CodeGen.body_with_hoisting`) are loaded once; hashes and checksums with a constant
algorithm call the algorithm directly.
"""
from __future__ import annotations

from ..frontend import ir
from ..frontend.controlplane import block_name, local_name, qualified_name
from ..frontend.entry_priorities import engine_priorities
from ..frontend.exprs import expr_text
from ..frontend.scope import Sym, error, unsupported
from ..frontend.types import Bits, EnumT, ExternT, ObjT, StackT, StructT, width_of
from .gen_base import Emitter, Names, has_return, may_exit, pyfield
from .gen_exprs import ExprGen
from .gen_externs import ExternGen
from .gen_stmts import StmtGen
from .gen_tna import TNA_EXTERNS, TnaExternGen
from .gen_types import TypesGen
from .gen_varbit import VarbitGen


class CodeGen(TypesGen, ExprGen, StmtGen, ExternGen, VarbitGen, TnaExternGen):
    """Turns the checked IR of a v1model program into Python source."""

    def __init__(self, checker):
        self.ck = checker
        self.out = Emitter()
        self.names = Names()          # declaration -> python expression text
        self.tmp = 0
        self.struct_classes: dict = {}  # type name -> class name
        self.cells: list = []           # closure cell names of the control being generated
        self.reg_sizes: dict = {}       # register instance name -> size literal (inlined access)
        self.hoisted: dict = {}         # field read text -> local holding it (body_with_hoisting)
        self.counted_tables: set = set()  # tables with a direct counter (apply passes C.length)
        # (id of a table, action name) -> the wrapper a table runs for an action whose
        # arguments its actions list binds (switch on action_run compares with it)
        self.bound_fns: dict = {}
        # id of a table -> (name of its ``fast.get``, the (function, decl) of the action its
        # apply statements inline, or None): see :meth:`StmtGen.table_apply_fast`
        self.fast_tables: dict = {}
        self._lazy = 0                  # > 0 while generating an operand that may not run
        self.prefix = ""

    def fresh(self, base: str = "t") -> str:
        self.tmp += 1
        return f"_{base}{self.tmp}"


# ---------------------------------------------------------------------------------- program
V1SWITCH_BLOCKS = ("parser", "verify", "ingress", "egress", "compute", "deparser")
TNA_BLOCKS = ("ig_parser", "ingress", "ig_deparser", "eg_parser", "egress", "eg_deparser")
# Annotations the program description leaves out (p4c represents them otherwise). @hidden stays:
# hidden objects are P4Runtime symbols that P4Info does not list (softswitch.p4info).
_NOT_COPIED_ANNOTATIONS = {"name", "tableonly", "defaultonly"}


# Annotations p4c parses into expressions (its ParseAnnotations, v1model's included): P4Info
# writes their arguments as "a, b". Any other annotation keeps its tokens, which P4Info writes
# separated by spaces: @my_annotation("x", 1) becomes @my_annotation("x" , 1).
_PARSED_ANNOTATIONS = {"name", "id", "noWarn", "brief", "description", "deprecated", "length",
                       "match", "priority", "field_list", "alias", "metadata", "pkginfo",
                       "synchronous", "p4runtime_translation", "atomic", "optional",
                       "tableonly", "defaultonly", "pure", "noSideEffects", "hidden"}


def annotation_text(a: ir.Annotation) -> str:
    def arg(x):
        if isinstance(x, ir.StringLit):
            return '"' + x.value + '"'
        if isinstance(x, ir.IntLit):
            return x.text or str(x.value)
        return expr_text(x)
    sep = ", " if a.name in _PARSED_ANNOTATIONS else " , "
    return f"@{a.name}(" + sep.join(arg(x) for x in a.args) + ")" if a.args else f"@{a.name}"


def copied_annotations(anns: list) -> tuple:
    return tuple(annotation_text(a) for a in anns if a.name not in _NOT_COPIED_ANNOTATIONS)


class ProgramGen(CodeGen):
    """Generates the whole program: types, one factory per control/parser, and ``build``."""

    def __init__(self, checker):
        super().__init__(checker)
        self.digests: dict = {}
        self.top_actions: list = []

    def generate(self) -> str:
        o = self.out
        o.line("# Generated by softswitch.engine.codegen: do not edit.")
        self.gen_types()
        o.line("def build(RT, C, REG):")
        o.indent()
        for d in self.ck.program.decls:
            if isinstance(d, ir.ActionDecl):
                self.gen_action(d, in_control=False)
        for d in self.ck.program.decls + self.ck.generic_functions:
            if isinstance(d, ir.FunctionDecl) and not d.type_params:
                self.gen_function(d)
            elif isinstance(d, ir.Instantiation) and d is not self.ck.main and not (
                    isinstance(d.resolved, ObjT) and d.resolved.kind == "package_type"):
                self.gen_instance(d, None)
        for d in self.ck.program.decls + self.ck.specialized:
            if getattr(d, "ctor_params", None):
                continue        # a factory per instantiation (its specialised copy) instead
            if isinstance(d, ir.ControlDecl):
                self.gen_control(d)
            elif isinstance(d, ir.ParserDecl):
                self.gen_parser(d)
        main = self.ck.main
        if main.type_ref.name == "Switch":
            self.gen_tna_main(main)
            o.line(f"REG.error_names = {tuple(self.ck.errors_list)!r}")
            o.line("return blocks")
            o.dedent()
            return o.source()
        if main.type_ref.name != "V1Switch":
            if "V1Switch" in self.ck.types and "Switch" not in self.ck.types:
                # a v1model program: p4c-bm2-ss 1.2.5.16 says "package P: main package  match
                # the expected model" (sic) at the instantiation
                raise error(main, f"package {main.type_ref.name}: main package does not "
                                  "match the expected model (v1model: V1Switch)")
            raise unsupported(main, f"package {main.type_ref.name} (only V1Switch is supported)")
        if len(main.args) != len(V1SWITCH_BLOCKS):
            raise unsupported(main, "V1Switch with a number of arguments other than 6")
        o.line("blocks = {}")
        for role, arg in zip(V1SWITCH_BLOCKS, main.args):
            if not isinstance(arg, ir.CtorCall):
                raise unsupported(arg, "V1Switch argument that is not a constructor call")
            name = arg.type_ref.name
            decl = getattr(arg, "decl", None)
            if decl is None:
                raise unsupported(arg, f"{name} as a V1Switch block")
            o.line(f"blocks[{role!r}] = make_{decl.name}({block_name(arg)!r}{self._extern_args(decl)})")
            o.line(f"REG.block_types[{role!r}] = {name!r}")
        pdecl = getattr(main.args[0], "decl", None)
        if pdecl is None or len(pdecl.params) != 4:
            raise unsupported(main, "V1Switch whose first block is not a 4-parameter parser")
        h_t, m_t, std_t = (p.resolved for p in pdecl.params[1:])
        for t in (h_t, m_t, std_t):
            if not isinstance(t, StructT):
                raise unsupported(main, f"V1Switch type argument {t} (expected a struct)")
        o.line(f"REG.classes = ({self.class_of(h_t)}, {self.class_of(m_t)}, {self.class_of(std_t)})")
        lists: dict = {}
        self.collect_field_lists(m_t, (), lists)
        o.line(f"REG.field_lists = {lists!r}")
        o.line(f"REG.error_names = {tuple(self.ck.errors_list)!r}")
        o.line("return blocks")
        o.dedent()
        return o.source()

    def gen_tna_main(self, main: ir.Instantiation) -> None:
        """``Switch(Pipeline(...))``: the six blocks, and the classes of the ingress and egress
        controls' parameters (``REG.tna_classes``), for runtime_tna.TnaDataplane."""
        o = self.out
        if len(main.args) != 1:
            raise unsupported(main, "Switch with more than one pipeline")
        pipe = main.args[0]
        if isinstance(pipe, ir.Path) and isinstance(getattr(pipe.sym, "decl", None), ir.Instantiation):
            pipe = pipe.sym.decl
        if not isinstance(pipe, (ir.CtorCall, ir.Instantiation)) or pipe.type_ref.name != "Pipeline":
            raise unsupported(main, "Switch argument that is not a Pipeline")
        if len(pipe.args) != len(TNA_BLOCKS):
            raise unsupported(pipe, "Pipeline with a number of arguments other than 6")
        o.line("blocks = {}")
        decls = []
        for role, arg in zip(TNA_BLOCKS, pipe.args):
            decl = getattr(arg, "decl", None)
            if not isinstance(arg, ir.CtorCall) or decl is None:
                raise unsupported(arg, "Pipeline argument that is not a constructor call")
            o.line(f"blocks[{role!r}] = make_{decl.name}({block_name(arg)!r}{self._extern_args(decl)})")
            o.line(f"REG.block_types[{role!r}] = {arg.type_ref.name!r}")
            decls.append(decl)
        classes = {}
        for role, decl in (("ingress", decls[1]), ("egress", decls[4])):
            if len(decl.params) != 6:
                raise unsupported(decl, f"TNA {role} control without the six parameters")
            for p in decl.params:
                if not isinstance(p.resolved, StructT):
                    raise unsupported(p, f"{role} parameter {p.name} of type {p.resolved}")
            classes[role] = "(" + "".join(self.class_of(p.resolved) + ", " for p in decl.params) + ")"
        o.line("REG.classes = None")
        o.line(f"REG.tna_classes = {{'ingress': {classes['ingress']}, "
               f"'egress': {classes['egress']}}}")
        o.line("REG.field_lists = {}")

    def collect_field_lists(self, t: StructT, path: tuple, out: dict) -> None:
        """Fields of the user metadata annotated @field_list(N...), as attribute paths."""
        for n, ft in t.fields:
            p = path + (pyfield(n),)
            if isinstance(ft, StructT):
                self.collect_field_lists(ft, p, out)
                continue
            a = ir.find_annotation(t.field_annotations.get(n, []), "field_list")
            if a is not None:
                for arg in a.args:
                    out.setdefault(arg.value, []).append(p)

    # ------------------------------------------------------------------------------ decls
    def gen_action(self, d: ir.ActionDecl, in_control: bool) -> None:
        """An action as a nested function; registered under its p4c name (``Control.action``
        inside a control instance, the plain name at top level)."""
        o = self.out
        sym = self._find_sym(d)
        fname = f"a_{d.name}"
        self.names[sym] = fname
        name = local_name(d, d.name)
        if name.startswith(".") or not in_control:
            full = repr(qualified_name(name, None))
        else:
            full = f"prefix + {('.' + name)!r}"
        params = []
        pnames = []
        for p in d.params:
            pn = f"p_{p.name}"
            self.names[self._param_sym(p)] = pn
            params.append(pn)
            pnames.append(pn)
        keyed = self.keyed_top_action(d)
        # (keyed: the use it runs for, a key of its local headers: StmtGen.top_action_site)
        o.line(f"def {fname}({', '.join(params + (['_hk=None'] if keyed else []))}):")
        o.indent()
        # a parameter named like one of the control's (P4 lets it shadow that one: p4c warns)
        # is the action's own, not the control's cell
        cells = [c for c in self.cells if c not in params]
        if cells:
            o.line(f"nonlocal {', '.join(cells)}")
        saved = getattr(self, "hdr_site", None), getattr(self, "in_top_action", False)
        self.hdr_site, self.in_top_action = ("_hk" if keyed else None), not in_control
        try:
            self._body_copying_outs_back(d)
        finally:
            self.hdr_site, self.in_top_action = saved
        o.dedent()
        widths = tuple(width_of(p.resolved) for p in d.params if not p.direction)
        cp_params = tuple((p.name, width_of(p.resolved), copied_annotations(p.annotations))
                          for p in d.params if not p.direction)
        o.line(f"REG.action({full}, {fname}, {widths!r}, {cp_params!r}, "
               f"{copied_annotations(d.annotations)!r})")
        for p in d.params:
            if not p.direction:
                self._enum_use(full, p.resolved)

    def _body_copying_outs_back(self, d) -> None:
        """The body of an action or control ``d`` whose scalar out/inout parameters are copied
        back on return and, where the body may ``exit``, on exit too."""
        o = self.out
        outs = [f"p_{p.name}" for p in d.params if p.direction in ("out", "inout")
                and not isinstance(p.resolved, (StructT, StackT))]
        exits = bool(outs) and may_exit(d.body)
        if exits:
            o.line("try:")
            o.indent()
        self.body_with_hoisting(d.body)
        if exits:
            self._exit_carries_outs(outs)
        if outs:
            self._fix_returns(outs)

    def _exit_carries_outs(self, outs: list) -> None:
        """Close the ``try:`` around an action or control body that may exit: ``exit`` still
        copies the out/inout arguments back (BMv2 does), so the exception carries them to the
        caller (:meth:`call_copying_back_on_exit`)."""
        o = self.out
        o.dedent()
        o.line("except RT.ExitControl as exc:")
        o.indent()
        o.line(f"exc.outs = ({''.join(x + ', ' for x in outs)})")
        o.line("raise")
        o.dedent()

    def _enum_use(self, user: str, t) -> None:
        """Tell the registry that ``user`` (a table or action name expression) has a key or
        parameter of ``t``, when ``t`` is a serializable enum (P4Info's type_info lists it)."""
        if isinstance(t, EnumT) and t.base is not None:
            members = tuple((m, t.values[m]) for m in t.members)
            self.out.line(f"REG.enum_use({user}, {t.name!r}, {t.base.width}, {t.base.signed}, "
                          f"{members!r})")

    def _fix_returns(self, outs: list) -> None:
        """Make a generated function return its out/inout scalars (on every return path)."""
        o = self.out
        ret = "return (" + "".join(x + ", " for x in outs) + ")"
        start = len(o.lines) - 1
        while start >= 0 and not o.lines[start].lstrip().startswith("def "):
            start -= 1
        for i in range(start + 1, len(o.lines)):
            if o.lines[i].strip() == "return":
                o.lines[i] = o.lines[i].replace("return", ret)
        o.line(ret)

    def gen_function(self, d: ir.FunctionDecl, fname: str = "") -> None:
        o = self.out
        sym = self._find_sym(d)
        fname = fname or f"f_{d.name}"
        self.names[sym] = fname
        params = []
        for p in d.params:
            pn = f"p_{p.name}"
            self.names[self._param_sym(p)] = pn
            params.append(pn)
        outs = [f"p_{p.name}" for p in d.params if p.direction in ("out", "inout")
                and not isinstance(p.resolved, (StructT, StackT))]
        o.line(f"def {fname}({', '.join(params)}):")
        o.indent()
        start = len(o.lines)
        saved_function, self.in_function = getattr(self, "in_function", False), True
        try:
            self.stmt(d.body)
        finally:
            self.in_function = saved_function
        if outs and d.ret.kind != "void":
            # returns (value, outs...): every path returns a value (the type checker made sure)
            tail = "".join(", " + x for x in outs)
            for i in range(start, len(o.lines)):
                text = o.lines[i].lstrip()
                if text.startswith("return "):
                    indent = o.lines[i][:len(o.lines[i]) - len(text)]
                    o.lines[i] = f"{indent}return ({text[len('return '):]}{tail})"
        elif outs:                  # called as a statement: returns its outs, as actions do
            self._fix_returns(outs)
        o.dedent()

    def _extern_params(self, d) -> str:
        """The factory parameters of a control or parser specialised with extern instances as
        constructor arguments (``frontend.ctors``): the objects themselves."""
        text = ""
        for psym, _ in getattr(d, "extern_ctor_args", ()):
            self.names[psym] = f"x_{psym.name}"
            text += f", x_{psym.name}"
        return text

    def _extern_args(self, d) -> str:
        """The extern instances a factory call passes (see :meth:`_extern_params`)."""
        return "".join(f", {self.names[isym]}" for _, isym in getattr(d, "extern_ctor_args", ()))

    def _find_sym(self, d) -> Sym:
        sym = self.ck_syms.get(id(d))
        if sym is None:
            sym = Sym("?", d.name, None, d)
            self.ck_syms[id(d)] = sym
        return sym

    def _param_sym(self, p) -> Sym:
        return self._find_sym(p)

    @property
    def ck_syms(self) -> dict:
        if not hasattr(self, "_ck_syms"):
            self._ck_syms = collect_syms(self.ck.program)
        return self._ck_syms

    def _factory_cells(self, d, instances_allowed: bool) -> tuple[list, list]:
        """Declare the closure cells of a control or parser factory: one per parameter (``p_*``)
        and per local variable (``c_*``). Returns the cell names and the variable declarations
        that ``apply`` re-initialises on every call."""
        o = self.out
        cells = []
        for p in d.params:
            pn = f"p_{p.name}"
            self.names[self._find_sym(p)] = pn
            cells.append(pn)
            o.line(f"{pn} = None")
        var_inits = []
        for loc in d.locals:
            if isinstance(loc, ir.VarDecl):
                cn = f"c_{loc.name}"
                self.names[self._find_sym(loc)] = cn
                cells.append(cn)
                o.line(f"{cn} = {self.default_value(loc.resolved)}")
                var_inits.append(loc)
            elif isinstance(loc, ir.Instantiation) and not instances_allowed and not (
                    isinstance(loc.resolved, ObjT) and loc.resolved.kind == "parser_type"
                    or isinstance(loc.resolved, ExternT)):
                raise unsupported(loc, "instantiations inside a parser (other than parsers "
                                       "and externs)")
        return cells, var_inits

    def _apply_prologue(self, d, cells: list, var_inits: list) -> None:
        """Open the factory's ``apply``: bind the arguments to their cells and reset the locals
        (left indented for the body)."""
        o = self.out
        o.line("def apply(" + ", ".join(f"a_{p.name}" for p in d.params) + "):")
        o.indent()
        o.line(f"nonlocal {', '.join(cells)}" if cells else "pass")
        for p in d.params:
            o.line(f"p_{p.name} = a_{p.name}")
        for loc in var_inits:
            init = self.value_for(loc.init, loc.resolved) if loc.init is not None else self.default_value(loc.resolved)
            o.line(f"c_{loc.name} = {init}")

    def gen_control(self, d: ir.ControlDecl) -> None:
        o = self.out
        o.line(f"def make_{d.name}(prefix{self._extern_params(d)}):")
        o.indent()
        saved_factory, self.in_factory = getattr(self, "in_factory", False), True
        saved_cells = self.cells
        cells, var_inits = self._factory_cells(d, instances_allowed=True)
        self.cells = cells
        for loc in d.locals:
            if isinstance(loc, ir.Instantiation):
                self.gen_instance(loc, "prefix")
        for loc in d.locals:
            if isinstance(loc, ir.ActionDecl):
                self.gen_action(loc, in_control=True)
        for loc in d.locals:
            if isinstance(loc, ir.TableDecl):
                self.gen_table(loc)
        self._apply_prologue(d, cells, var_inits)
        self._body_copying_outs_back(d)
        o.dedent()
        if not d.locals and not d.body.stmts:
            o.line("apply.empty = True          # the runtime skips calling it")
        o.line("return apply")
        o.dedent()
        self.cells = saved_cells
        self.in_factory = saved_factory

    def gen_instance(self, d: ir.Instantiation, prefix_var: str) -> None:
        o = self.out
        sym = self._find_sym(d)
        t = d.resolved
        vn = f"x_{d.name}"
        self.names[sym] = vn
        name = local_name(d, d.name)
        if prefix_var is None or name.startswith("."):
            full = repr(qualified_name(name, None))
        else:
            full = f"{prefix_var} + {('.' + name)!r}"
        if isinstance(t, ExternT) and t.name in TNA_EXTERNS:
            self.gen_tna_instance(d, vn, full)
        elif isinstance(t, ExternT):
            args = d.args
            if t.name == "register":
                et = t.type_args[0] if t.type_args else None
                if not isinstance(et, Bits):
                    raise unsupported(d, f"register of {et}")
                size = self.g(args[0])
                o.line(f"{vn} = REG.register({full}, {size}, {et.width}, {et.signed}, "
                       f"{copied_annotations(d.annotations)!r})")
                if size.isdigit():
                    # Register.values is never rebound (reset clears it in place): reads and
                    # writes index the list directly instead of calling read()/write().
                    o.line(f"{vn}_v = {vn}.values")
                    self.reg_sizes[vn] = size
            elif t.name == "counter":
                o.line(f"{vn} = REG.counter({full}, {self.g(args[0])}, {self.g(args[1])})")
            elif t.name == "meter":
                o.line(f"{vn} = REG.meter({full}, {self.g(args[0])}, {self.g(args[1])})")
            elif t.name == "direct_counter":
                o.line(f"{vn} = REG.direct_counter({full}, {self.g(args[0])})")
            elif t.name == "direct_meter":
                o.line(f"{vn} = REG.direct_meter({full}, {self.g(args[0])})")
            elif t.name == "action_profile":
                o.line(f"{vn} = REG.action_profile({full}, {self.g(args[0])})")
            elif t.name == "action_selector":
                # (algorithm, size, outputWidth): BMv2 uses the hash's whole value
                o.line(f"{vn} = REG.action_profile({full}, {self.g(args[1])}, "
                       f"{self.g(args[0])})")
            else:
                raise unsupported(d, f"extern {t.name}")
        elif isinstance(t, ObjT) and t.kind in ("control_type", "parser_type"):
            o.line(f"{vn} = make_{t.decl.name}({prefix_var} + {('.' + d.name)!r}"
                   f"{self._extern_args(t.decl)})")
        else:
            raise unsupported(d, f"instance of {t}")

    def gen_table(self, d: ir.TableDecl) -> None:
        o = self.out
        sym = self._find_sym(d)
        vn = f"t_{d.name}"
        self.names[sym] = vn
        name = local_name(d, d.name)
        full = repr(qualified_name(name, None)) if name.startswith(".") else f"prefix + {('.' + name)!r}"
        fields = []
        match_pos, sel_pos, sel_widths = [], [], []
        for i, k in enumerate(d.keys):
            if k.match_kind == "selector":     # hashed by the selector; not in P4Info
                sel_pos.append(i)
                sel_widths.append(width_of(k.expr.type))
                continue
            match_pos.append(i)
            kname = local_name(k, expr_text(k.expr))
            fields.append((kname, width_of(k.expr.type), k.match_kind, copied_annotations(k.annotations)))
        refs = []
        bound = {}
        for ref, s in zip(d.actions, d.action_decls):
            # an action declared at top level with local headers: the table's own copy
            site = self.top_action_site(d, "table") if self.keyed_top_action(s.decl) else None
            if ref.args or site is not None:
                # the table runs a wrapper that adds the arguments bound in the actions list
                fn = self.names[s]
                w = self.fresh(f"{fn}_bound")
                o.line(f"def {w}(*cp):")
                o.indent()
                if ref.args:
                    self.bound_action_body(fn, ref, s.decl, site)
                else:
                    o.line(f"return {fn}(*cp, _hk={site})")
                o.dedent()
                o.line(f"REG.bound_action({w}, {fn})")
                bound[id(s)] = w
                # switch (t.apply().action_run) compares with the function the table ran
                self.bound_fns[(id(d), s.name)] = w
        for ref, s in zip(d.actions, d.action_decls):
            scope = "TABLE_AND_DEFAULT"
            if ir.find_annotation(ref.annotations, "tableonly"):
                scope = "TABLE_ONLY"
            if ir.find_annotation(ref.annotations, "defaultonly"):
                scope = "DEFAULT_ONLY"
            refs.append((bound.get(id(s), self.names[s]), scope, copied_annotations(
                [a for a in ref.annotations if a.name not in ("tableonly", "defaultonly")])))
        props = d.props
        size = 1024
        if "size" in props:
            size = props["size"][0].const
        default = ("NoAction_fn", ())
        const_default = False
        if "default_action" in props:
            expr, const_default, _ = props["default_action"]
            call = expr if isinstance(expr, ir.Call) else ir.Call(expr, [])
            default = (self.names[call.func.sym], tuple(a.const & ((1 << width_of(a.type)) - 1) for a in call.args))
        else:
            nsym = self.ck.top.lookup("NoAction")
            default = (self.names[nsym], ())
        entries = []
        # a table with an action profile: BMv2 never gets the program's entries (see
        # Checker.check_implementation)
        if d.entries is not None and "implementation" not in props:
            prios = engine_priorities(d)
            for i, e in enumerate(d.entries):
                items = e.keyset.items if isinstance(e.keyset, ir.TupleKs) else [e.keyset]
                if len(items) == 1 and len(d.keys) > 1 and isinstance(items[0], ir.DefaultKs):
                    items = items * len(d.keys)
                matches = []
                for item, k, (_, w, kind, _) in zip(items, d.keys, fields):
                    full_mask = (1 << w) - 1
                    if isinstance(item, ir.DefaultKs):
                        matches.append(None)
                        continue
                    if kind == "exact":
                        matches.append(f"Exact({item.const & full_mask})")
                    elif kind == "ternary":
                        if isinstance(item, ir.Mask):
                            m = item.mask.const & full_mask
                            matches.append(f"Ternary({item.value.const & m}, {m})")
                        else:
                            matches.append(f"Ternary({item.const & full_mask}, {full_mask})")
                    elif kind == "lpm":
                        if isinstance(item, ir.Mask):
                            m = item.mask.const & full_mask
                            plen = bin(m).count("1")
                            matches.append(f"Lpm({item.value.const & m}, {plen})")
                        else:
                            matches.append(f"Lpm({item.const & full_mask}, {w})")
                    elif kind == "range":
                        if isinstance(item, ir.RangeKs):
                            matches.append(f"Range({item.lo.const & full_mask}, {item.hi.const & full_mask})")
                        else:
                            matches.append(f"Range({item.const & full_mask}, {item.const & full_mask})")
                    elif kind == "optional":
                        matches.append(f"Optional_({item.const & full_mask})")
                    else:
                        raise unsupported(item, f"match kind {kind}")
                prio = prios[i]
                call = e.call
                args = tuple(a.const & ((1 << width_of(a.type)) - 1) for a in call.args)
                entries.append(f"(({''.join(m + ', ' if m else 'None, ' for m in matches)}), "
                               f"{self.names[call.func.sym]}, {args!r}, {prio})")
        counters = props.get("counters")
        meters = props.get("meters")
        if counters or meters:          # direct meters of BYTES measure the length too
            self.counted_tables.add(vn)
        for k in d.keys:
            self._enum_use(full, k.expr.type)
        o.line(f"{vn} = REG.table({full}, {fields!r}, [" + ", ".join(
            f"({fn}, {sc!r}, {an!r})" for fn, sc, an in refs) + "], "
               f"({default[0]}, {default[1]!r}), {bool(const_default)}, {size}, "
               f"[{', '.join(entries)}], {bool(d.entries_const)}, {d.entries is not None}, "
               f"{self.names[counters[0].sym] if counters else None}, "
               f"{self.names[meters[0].sym] if meters else None}, {copied_annotations(d.annotations)!r}"
               + (f", impl={self.names[props['implementation'][0].sym]}, "
                  f"selector=({tuple(match_pos)!r}, {tuple(sel_pos)!r}, {tuple(sel_widths)!r})"
                  if "implementation" in props else "")
               # BMv2: a table with entries and no size holds as many as the program gives
               # (p4c-bm2-ss writes that max_size; P4Info keeps 1024)
               + (f", capacity={len(d.entries)}" if d.entries is not None and "size" not in props
                  and self.ck.main.type_ref.name == "V1Switch" else "") + ")")
        if not (counters or meters) and "implementation" not in props \
                and all(k.match_kind == "exact" for k in d.keys):
            # apply statements look hits up in the table's ``fast`` dict themselves
            getter = f"tf_{d.name}"
            o.line(f"{getter} = {vn}.fast.get")
            self.fast_tables[id(d)] = (getter, self._inline_action(d))

    def _inline_action(self, d: ir.TableDecl):
        """The one action entries of table ``d`` can run, as (function name, declaration),
        when its body can be inlined where the table is applied: a plain action (no return,
        no directional parameters, none bound in the actions list). None otherwise."""
        found = []
        for ref, s in zip(d.actions, d.action_decls):
            if ir.find_annotation(ref.annotations, "defaultonly"):
                continue
            decl = getattr(s, "decl", None)
            if ref.args or not isinstance(decl, ir.ActionDecl) or has_return(decl.body) \
                    or any(p.direction for p in decl.params) or self.keyed_top_action(decl):
                return None
            found.append((self.names[s], decl))
        return found[0] if len(found) == 1 else None

    def bound_action_body(self, fn: str, ref: ir.ActionRef, decl: ir.ActionDecl,
                          site=None) -> None:
        """The body of the wrapper a table runs for an action whose directional arguments its
        actions list binds: ``in`` ones read, ``out``/``inout`` ones copied back after the
        action ran (P4_16 6.8 copy-in/copy-out, when the table runs the action). ``site``:
        the table's ``_hk`` for an action declared at top level with local headers."""
        o = self.out
        dparams = [p for p in decl.params if p.direction]
        call = ir.Call(ir.Path(ref.name, span=ref.span), ref.args, span=ref.span)
        args, outs, fresh = self.out_args(call, dparams)     # (fresh: lines using no cell)
        text = f"{fn}({''.join(a + ', ' for a in args)}*cp{f', _hk={site}' if site else ''})"
        if not outs and not fresh:
            o.line(f"return {text}")
            return
        if self.cells:
            o.line(f"nonlocal {', '.join(self.cells)}")
        r = self.fresh("r")
        if may_exit(decl.body):
            self.call_copying_back_on_exit(f"{r} = {text}", outs, fresh=fresh)
        else:
            o.line(f"{r} = {text}")
        for j, (_, a) in enumerate(outs):
            self.assign(a, f"{r}[{j}]")
        self.copy_back_fresh(fresh)

    def call_copying_back_on_exit(self, line: str, outs: list,
                                  catch: str = "RT.ExitControl", fresh: list = ()) -> None:
        """``line`` (a call of an action that may exit), then on ``exit`` the action's
        out/inout arguments (``outs``: [(index, target)]; ``fresh``: the new headers given to
        ``out`` header parameters) copied back before it goes on.
        ``catch``: the exceptions that end the callee early (a sub-parser's reject and parser
        errors carry its outs too)."""
        o = self.out
        o.line("try:")
        o.indent()
        o.line(line)
        o.dedent()
        o.line(f"except {catch} as exc:")
        o.indent()
        for j, (_, a) in enumerate(outs):
            self.assign(a, f"exc.outs[{j}]")
        self.copy_back_fresh(fresh)
        o.line("raise")
        o.dedent()

    def gen_parser(self, d: ir.ParserDecl) -> None:
        o = self.out
        o.line(f"def make_{d.name}(prefix{self._extern_params(d)}):")
        o.indent()
        saved_factory, self.in_factory = getattr(self, "in_factory", False), True
        cells, var_inits = self._factory_cells(d, instances_allowed=False)
        for loc in d.locals:
            if isinstance(loc, ir.Instantiation):           # a sub-parser
                self.gen_instance(loc, "prefix")
            elif isinstance(loc, ir.ValueSetDecl):
                self.gen_value_set(loc, d)
        saved = self.cells
        self.cells = cells
        for st in d.states:
            o.line(f"def s_{st.name}():")
            o.indent()
            o.line(f"nonlocal {', '.join(cells)}")
            o.line(f"if C.trace is not None: C.trace.append('parser state {st.name}')")
            for s in st.stmts:
                self.stmt(s)
            tr = st.transition
            if tr.target:
                o.line(f"return {self.state_ref(tr.target)}")
            else:
                sel = [self.g(x) if not (isinstance(x.type, Bits) and x.type.signed)
                       else f"({self.g(x)} & {hex(x.type.mask)})" for x in tr.select]
                sv = [self.fresh("k") for _ in sel]
                for v, x in zip(sv, sel):
                    o.line(f"{v} = {x}")
                for ks, target, span in tr.cases:
                    cond = self.keyset_cond(ks, sv, tr.select)
                    o.line(f"if {cond}: return {self.state_ref(target)}")
                o.line("raise RT.ParserError(RT.ERR_NO_MATCH)")
            o.dedent()
        self._apply_prologue(d, cells, var_inits)
        outs = [f"p_{p.name}" for p in d.params if p.direction in ("out", "inout")
                and not isinstance(p.resolved, (StructT, StackT))]
        ret = "(" + "".join(x + ", " for x in outs) + ")"
        if outs:
            # a sub-parser returns its scalar outs, as controls do; when it ends in reject or
            # an error they still go back (BMv2 copies them out): the exception carries them
            o.line("try:")
            o.indent()
        o.line("st = s_start")
        o.line("while st is not None:")
        o.indent()
        o.line("st = st()")
        o.dedent()
        if outs:
            o.dedent()
            o.line("except (RT.ParserError, RT.ParserReject) as exc:")
            o.indent()
            o.line(f"exc.outs = {ret}")
            o.line("raise")
            o.dedent()
            o.line(f"return {ret}")
        o.dedent()
        o.line("return apply")
        o.dedent()
        self.cells = saved
        self.in_factory = saved_factory

    def gen_value_set(self, d: ir.ValueSetDecl, parser: ir.ParserDecl) -> None:
        """A parser value set: ``x_<name>.members`` is the set of its member tuples, which the
        control plane replaces; p4c's P4Info lists it only when a ``select`` names it."""
        vn = f"x_{d.name}"
        sym = self._find_sym(d)
        self.names[sym] = vn
        name = local_name(d, d.name)
        full = repr(qualified_name(name, None)) if name.startswith(".") else \
            f"prefix + {('.' + name)!r}"
        used = any(getattr(ks, "sym", None) is sym for st in parser.states
                   if st.transition is not None for ks, _, _ in st.transition.cases)
        fields = [(n, t.width, d.match_kinds.get(n, "exact")) for n, t in d.members]
        self.out.line(f"{vn} = REG.value_set({full}, {fields!r}, {d.size_value}, {used})")

    @staticmethod
    def state_ref(name: str) -> str:
        if name == "accept":
            return "None"
        if name == "reject":
            return "RT.reject()"
        return f"s_{name}"

    def keyset_cond(self, ks, sv: list, sel: list) -> str:
        if isinstance(ks, ir.DefaultKs):
            return "True"
        if isinstance(ks, ir.Path) and getattr(ks, "sym", None) is not None \
                and ks.sym.kind == "value_set":
            return f"({''.join(v + ', ' for v in sv)}) in {self.names[ks.sym]}.members"
        items = ks.items if isinstance(ks, ir.TupleKs) else [ks]
        conds = []
        for item, v, x in zip(items, sv, sel):
            t = x.type
            m = t.mask if isinstance(t, Bits) else 1
            if isinstance(item, ir.DefaultKs):
                continue
            if isinstance(item, ir.Mask):
                mk = item.mask.const & m
                conds.append(f"({v} & {hex(mk)}) == {hex(item.value.const & mk)}")
            elif isinstance(item, ir.RangeKs):
                conds.append(f"{item.lo.const & m} <= {v} <= {item.hi.const & m}")
            else:
                c = item.const
                if isinstance(c, bool):
                    conds.append(f"{v} == {c}")
                else:
                    conds.append(f"{v} == {hex(c & m)}")
        return " and ".join(conds) if conds else "True"


def collect_syms(program: ir.Program) -> dict:
    """Map id(declaration) -> Sym by walking every Path the checker resolved."""
    out: dict = {}

    def visit(x):
        if isinstance(x, ir.Path) and getattr(x, "sym", None) is not None:
            if x.sym.decl is not None:
                out.setdefault(id(x.sym.decl), x.sym)
        if isinstance(x, ir.Node):
            for v in vars(x).values():
                visit(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                visit(v)
        elif isinstance(x, dict):
            for v in x.values():
                visit(v)
    visit(program)
    return out
