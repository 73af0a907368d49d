"""Code generation for the TNA externs (``softswitch/p4include/tna.p4``): ``Register``,
``RegisterAction`` (its initializer's ``apply`` becomes a nested function), ``Counter`` and
``Hash``. The TNA package itself (``Pipeline``/``Switch``) is wired in ``codegen.ProgramGen``;
``runtime_tna.TnaDataplane`` runs it. Semantics assumed without a Tofino model are listed in
docs/dataplane.md, "TNA on the embedded target"."""
from __future__ import annotations

from ..frontend import ir
from ..frontend.scope import unsupported
from ..frontend.types import Bits, EnumT, StructT
from .externs import HASH_ALGOS

# TNA HashAlgorithm_t members -> the engine's algorithm (externs.HASH_ALGOS); the others refused
TNA_HASH = {"IDENTITY": "identity", "CRC16": "crc16", "CRC32": "crc32"}
TNA_XOR = {"XOR8": 8, "XOR16": 16, "XOR32": 32}
TNA_EXTERNS = ("Register", "RegisterAction", "Counter", "Hash", "Checksum")


class TnaExternGen:
    """Mixin of codegen.CodeGen for TNA extern instances and their method calls."""

    def gen_tna_instance(self, d: ir.Instantiation, vn: str, full: str) -> None:
        o = self.out
        t = d.resolved
        args = d.args
        if t.name == "Register":
            et = t.type_args[0]
            if not isinstance(et, (Bits, StructT)) or (
                    isinstance(et, StructT) and not all(isinstance(ft, Bits) for _, ft in et.fields)):
                raise unsupported(d, f"Register of {et} (bit<N> or a struct of bit<N> fields)")
            size = self.g(args[0])
            from .codegen import copied_annotations     # (codegen imports this module)
            annotations = copied_annotations(d.annotations)
            if isinstance(et, Bits):
                init = self.g(args[1]) if len(args) > 1 else "0"
                o.line(f"{vn} = REG.register({full}, {size}, {et.width}, {et.signed}, "
                       f"{annotations!r})")
                if init != "0":
                    o.line(f"{vn}.initial = {init}")
                    o.line(f"{vn}.reset()")
            else:
                cls = self.class_of(et)
                init = self.value_for(args[1], et) if len(args) > 1 else None
                mk = f"{init}" if init else f"{cls}()"
                # a P4Runtime register too (P4Info: a struct type_spec), as bf-p4c's
                # --p4runtime-force-std-externs has it
                fields = tuple((n, ft.width, ft.signed) for n, ft in et.fields)
                o.line(f"{vn} = REG.struct_register({full}, {size}, lambda: {mk}, {fields!r}, "
                       f"{et.name!r}, {annotations!r})")
        elif t.name == "RegisterAction":
            self.gen_register_action(d, vn)
        elif t.name == "Checksum":
            o.line(f"{vn} = RT.TnaChecksum()")
            o.line(f"REG.tna_checksums.append({vn})")
        elif t.name == "Counter":
            kind = getattr(args[1], "const", None)
            if not isinstance(kind, int) or isinstance(kind, bool):
                raise unsupported(d, "Counter with a non-constant CounterType_t")
            # CounterType_t lists its members in v1model's CounterType order
            o.line(f"{vn} = REG.counter({full}, {self.g(args[0])}, {kind})")
        elif t.name == "Hash":
            algo = getattr(args[0], "const", None)
            members = list(args[0].type.members) if isinstance(args[0].type, EnumT) else []
            name = members[algo] if isinstance(algo, int) and 0 <= algo < len(members) else None
            if name in TNA_XOR:
                o.line(f"{vn} = {-TNA_XOR[name]}        # XOR{TNA_XOR[name]}")
            elif name in TNA_HASH:
                o.line(f"{vn} = {HASH_ALGOS.index(TNA_HASH[name])}")
            else:
                raise unsupported(d, f"Hash with algorithm {name or '(not constant)'} "
                                     f"(supported: {', '.join(list(TNA_HASH) + list(TNA_XOR))})")
        else:
            raise unsupported(d, f"extern {t.name}")

    def gen_register_action(self, d: ir.Instantiation, vn: str) -> None:
        o = self.out
        t = d.resolved
        reg = d.args[0]
        if not isinstance(reg, ir.Path) or reg.sym is None or self.names.get(reg.sym) is None:
            raise unsupported(d, "RegisterAction of something other than a Register declared "
                                 "before it")
        rv = self.names[reg.sym]
        vt, ut = t.type_args[0], t.type_args[2]
        if not isinstance(ut, Bits):
            raise unsupported(d, f"RegisterAction returning {ut} (only bit<N>)")
        (f,) = d.initializer
        fname = f"{vn}_apply"
        self.gen_function(f, fname)
        o.line(f"def {vn}(i):")
        o.indent()
        # An index out of the register's range: the action does not run and returns 0 (the
        # engine's register semantics; Tofino would use the index's low bits, an assumption).
        o.line(f"if not 0 <= i < {rv}.size: return 0")
        has_rv = len(f.params) > 1          # rv is @optional
        rv_arg, rv_out = (", 0", ", r") if has_rv else ("", "")
        if isinstance(vt, Bits):
            o.line(f"v = {rv}.values")
            o.line(f"v[i]{rv_out} = {fname}(v[i]{rv_arg})" if has_rv else
                   f"(v[i],) = {fname}(v[i])")
        elif has_rv:                # a struct cell: updated in place, the function returns rv
            o.line(f"(r,) = {fname}({rv}.values[i], 0)")
        else:
            o.line(f"{fname}({rv}.values[i])")
        o.line("return r" if has_rv else "return 0")
        o.dedent()

    def tna_method_value(self, e: ir.Call, ext: str, method: str) -> str:
        """The value of a TNA extern method call (``execute``, ``get``, ``read``)."""
        base = e.func.expr
        if ext == "RegisterAction" and method == "predicate":
            lo = f"(1 if {self.g(e.args[0])} else 0)" if e.args else "0"
            hi = f"(2 if {self.g(e.args[1])} else 0)" if len(e.args) > 1 else "0"
            return f"(1 << ({lo} + {hi}))"
        inst = self.names.get(base.sym) if isinstance(base, ir.Path) else None
        if inst is None:
            raise unsupported(e, f"{ext}.{method} on this object")
        if ext == "RegisterAction" and method == "execute":
            return f"{inst}({self.g(e.args[0])})"
        if ext == "Hash" and method == "get":
            data = self.packed_field_list(e.args[0])
            # the instance holds the engine's algorithm number, or -w for XOR<w>
            return (f"(RT.tna_xor(*{data}, -{inst}, {hex(e.type.mask)}) if {inst} < 0 else "
                    f"RT.hash_packed({inst}, 0, *{data}, 0, {hex(e.type.mask)}))")
        if ext == "Checksum":
            if method in ("verify", "get"):
                return f"{inst}.{method}()"
            zeros_as_ones = ""          # update's @optional second argument
            if method == "update" and len(e.args) > 1:
                zeros_as_ones = f", {self.g(e.args[1])}"
            return f"{inst}.{method}(*{self.packed_field_list(e.args[0])}{zeros_as_ones})"
        if ext == "Register" and method == "read" and isinstance(e.type, Bits):
            return f"{inst}.read({self.g(e.args[0])})"
        raise unsupported(e, f"{ext}.{method}")

    def tna_method_stmt(self, e: ir.Call, ext: str, method: str) -> None:
        if ext == "Counter" and method == "count":
            base = e.func.expr
            self.out.line(f"{self.names[base.sym]}.count({self.g(e.args[0])}, C.length)")
        elif ext == "Register" and method == "write" and isinstance(e.args[1].type, Bits):
            self.out.line(f"{self.names[e.func.expr.sym]}.write({self.g(e.args[0])}, "
                          f"{self.g(e.args[1])})")
        else:
            self.out.line(self.tna_method_value(e, ext, method))
