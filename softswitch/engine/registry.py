"""What one instance of a generated program registers (tables, actions, externs, value sets,
action profiles) and the :class:`ProgramInfo` derived from it, as the program's control-plane
view says p4c's P4Info has it (:class:`Registry`, ``REG`` in the generated code); the table-bound
direct counters and meters and the parser value sets it holds."""
from __future__ import annotations

import dataclasses
from typing import Optional

from ..api import (ActionCall, ActionInfo, ActionProfileInfo, ActionRefInfo, ControlError, CounterInfo,
                   DigestInfo, DirectCounterInfo, DirectMeterInfo, MatchFieldInfo, MeterInfo,
                   ParamInfo, ProgramInfo, RegisterInfo, SerializableEnumInfo, StructFieldInfo,
                   TableEntry, TableInfo, ValueSetInfo)
from ..frontend.controlplane import ControlPlaneView
from . import externs
from .profiles import ActionProfile
from .tables import ActionImpl, Table

__all__ = ["Registry", "DirectCounter", "DirectMeter", "ValueSet", "COUNTER_UNITS", "METER_UNITS"]

COUNTER_UNITS = ("PACKETS", "BYTES", "BOTH")      # CounterType enum order
METER_UNITS = ("PACKETS", "BYTES")                # MeterType enum order


class DirectCounter:
    def __init__(self, name: str, unit: str):
        self.name, self.unit, self.table = name, unit, None


class DirectMeter:
    """A table's direct meter: its table executes the hit entry's cell (an unconfigured one
    marks GREEN) and leaves the colour in ``last`` for ``read``; a miss marks GREEN (BMv2
    meters the default entry, which has no configuration here)."""

    GREEN = externs.METER_GREEN

    def __init__(self, name: str, unit: str):
        self.name, self.unit, self.table = name, unit, None
        self.last: Optional[int] = None

    def execute(self, cell, length: int) -> None:
        if cell is None:
            self.last = externs.METER_GREEN
        else:
            self.last = cell.execute(length if self.unit == "BYTES" else 1)


class ValueSet:
    """A parser value set: ``members`` (a set of tuples, one value per field) is what a
    ``select`` case naming it matches; ``order`` keeps the control plane's order for reads."""

    def __init__(self, name: str, fields: tuple, size: int, used: bool):
        # fields: (name, width, match kind in P4Info); BMv2 matches every field exactly
        self.name, self.fields, self.size, self.used = name, fields, size, used
        self.members: frozenset = frozenset()
        self.order: tuple = ()


class Registry:
    """Collects what one instance of the generated program creates, and its ProgramInfo facts."""

    def __init__(self):
        self.actions: dict = {}          # fn -> ActionImpl
        self.action_infos: dict = {}     # name -> ActionInfo (declaration order)
        self.tables: dict = {}
        self.registers: dict = {}
        self.counters: dict = {}
        self.meters: dict = {}
        self.direct_counters: dict = {}
        self.direct_meters: dict = {}
        self.value_sets: dict = {}
        self.action_profiles: dict = {}
        self.block_types: dict = {}
        self.classes = None
        self.tna_classes: dict = {}      # TNA: 'ingress'/'egress' -> the control parameters' classes
        self.tna_checksums: list = []    # TNA: Checksum instances, cleared before each parser
        self.field_lists: dict = {}
        self.error_names: tuple = ()
        self.enum_uses: list = []        # (table or action name, SerializableEnumInfo)

    def enum_use(self, user, name, bitwidth, signed, members):
        """Table or action ``user`` has a key or parameter of serializable enum ``name``."""
        self.enum_uses.append((user, SerializableEnumInfo(name, bitwidth, signed,
                                                          tuple(map(tuple, members)))))

    def action(self, name, fn, widths, params, annotations):
        """Register action ``name`` (function ``fn``); ``params``: (name, width, annotations) of
        its directionless parameters."""
        self.actions[fn] = ActionImpl(name, fn, tuple(widths))
        self.action_infos[name] = ActionInfo(
            name, tuple(ParamInfo(n, w, tuple(a)) for n, w, a in params), tuple(annotations))

    def bound_action(self, wrapper, fn):
        """``wrapper`` runs action ``fn`` with arguments a table's actions list binds."""
        impl = self.actions[fn]
        self.actions[wrapper] = ActionImpl(impl.name, wrapper, impl.widths)

    def action_profile(self, name, size, algo=None):
        """An ``action_profile`` (``algo`` None) or ``action_selector`` instance."""
        p = ActionProfile(name, int(size), algo)
        self.action_profiles[name] = p
        return p

    def table(self, name, fields, refs, default, const_default, size, entries, is_const,
              has_entries, dcounter, dmeter, annotations, impl=None, selector=None, capacity=None):
        profile = impl
        """``impl``: its action profile; ``selector``: (match key positions, selector key
        positions, selector key widths) in the key tuple ``apply`` gets."""
        impls = {}
        ref_infos = []
        for fn, scope, anns in refs:
            impl = self.actions[fn]
            impls[impl.name] = impl
            ref_infos.append(ActionRefInfo(impl.name, scope, tuple(anns)))
        d_impl = self.actions[default[0]]
        if d_impl.name not in impls:
            # No default_action given: p4c makes NoAction the default, usable only as default.
            impls[d_impl.name] = d_impl
            ref_infos.append(ActionRefInfo(d_impl.name, "DEFAULT_ONLY", ()))
        info = TableInfo(
            name=name,
            match_fields=tuple(MatchFieldInfo(n, w, k, tuple(a)) for n, w, k, a in fields),
            action_refs=tuple(ref_infos), size=int(size),
            const_default_action=d_impl.name if const_default else None,
            initial_default_action=ActionCall(d_impl.name, tuple(default[1])),
            is_const=bool(is_const), has_initial_entries=bool(has_entries),
            direct_counter=dcounter.name if dcounter else None,
            direct_meter=dmeter.name if dmeter else None, annotations=tuple(annotations),
            implementation=profile.name if profile is not None else None)
        t = Table(info, impls, ActionCall(d_impl.name, tuple(default[1])))
        if capacity is not None:
            t.capacity = int(capacity)
        t._all_actions = set(self.action_infos)
        if profile is not None:
            match_pos, sel_pos, sel_widths = selector or (tuple(range(len(fields))), (), ())
            t.set_profile(profile, match_pos, sel_pos, sel_widths)
        for matches, fn, args, prio in entries:
            impl = self.actions[fn]
            # `const entries` are read-only; plain `entries` (P4_16 1.2.4) may be changed.
            entry = TableEntry(name, tuple(matches), ActionCall(impl.name, tuple(args)),
                               prio if info.needs_priority else 0, is_const=bool(is_const))
            try:
                t.insert(entry, from_program=True)
            except ControlError as exc:
                if exc.code != "ALREADY_EXISTS":
                    raise
        for d in (dcounter, dmeter):
            if d is not None:
                d.table = name
        if dmeter is not None:
            t.set_direct_meter(dmeter)
        self.tables[name] = t
        return t

    def register(self, name, size, width, signed, annotations=()):
        r = externs.Register(name, int(size), width, signed)
        r.annotations = tuple(annotations)
        self.registers[name] = r
        return r

    def struct_register(self, name, size, make, fields, type_name, annotations=()):
        """A TNA ``Register`` of struct cells (``make()``: a fresh initial cell; ``fields``:
        ``(name, width, signed)`` of the struct's fields in order; ``type_name``: its P4 name).
        Listed with the bit<N> registers, in declaration order, so that P4Info has it."""
        r = externs.StructRegister(name, int(size), make, tuple(map(tuple, fields)), type_name)
        r.annotations = tuple(annotations)
        self.registers[name] = r
        return r

    def counter(self, name, size, kind):
        c = externs.Counter(name, int(size), COUNTER_UNITS[kind])
        self.counters[name] = c
        return c

    def meter(self, name, size, kind):
        m = externs.Meter(name, int(size), METER_UNITS[kind])
        self.meters[name] = m
        return m

    def direct_counter(self, name, kind):
        d = DirectCounter(name, COUNTER_UNITS[kind])
        self.direct_counters[name] = d
        return d

    def direct_meter(self, name, kind):
        d = DirectMeter(name, METER_UNITS[kind])
        self.direct_meters[name] = d
        return d

    def value_set(self, name, fields, size, used):
        v = ValueSet(name, tuple(fields), int(size), bool(used))
        self.value_sets[name] = v
        return v

    def program_info(self, digests: dict, controller_headers: tuple,
                     view: ControlPlaneView) -> ProgramInfo:
        """The :class:`ProgramInfo` of what was registered, as ``view`` (the program's
        control-plane view) says p4c's P4Info has it: its tables, actions and extern instances
        only, in its order; a direct counter or meter only with its table."""
        def registered(kind: str, names: dict, name: str):
            if name not in names:      # the view and the generated code name objects alike
                raise RuntimeError(f"internal error: the control-plane view names {kind} "
                                   f"{name!r}, which the program did not register")
            return names[name]

        tables = tuple(registered("table", self.tables, name).info for name in view.tables)
        kept = set(view.tables)
        actions = []
        for use in view.actions:
            action = registered("action", self.action_infos, use.name)
            # An action only called directly has its arguments bound there: no parameters.
            actions.append(action if use.table_bound else dataclasses.replace(action, params=()))
        registers = [r for r in self.registers.values() if r.name in view.externs]
        counters = [c for c in self.counters.values() if c.name in view.externs]
        meters = [m for m in self.meters.values() if m.name in view.externs]
        direct_counters = [d for d in self.direct_counters.values() if d.table in kept]
        direct_meters = [d for d in self.direct_meters.values() if d.table in kept]
        return ProgramInfo(
            tables=tables,
            actions=tuple(actions),
            registers=tuple(_register_info(r) for r in registers),
            counters=tuple(CounterInfo(c.name, c.unit, c.size) for c in counters),
            direct_counters=tuple(DirectCounterInfo(d.name, d.unit, d.table)
                                  for d in direct_counters),
            meters=tuple(MeterInfo(m.name, m.unit, m.size) for m in meters),
            direct_meters=tuple(DirectMeterInfo(d.name, d.unit, d.table) for d in direct_meters),
            digests=tuple(DigestInfo(n, tuple(StructFieldInfo(f, w) for f, w in fields))
                          for n, fields in digests.items()),
            controller_headers=controller_headers,
            calls_extern_functions=view.extern_calls,
            serializable_enums=self._serializable_enums(kept, actions),
            value_sets=tuple(ValueSetInfo(v.name, tuple(MatchFieldInfo(n, w, kind)
                                                        for n, w, kind in v.fields), v.size)
                             for v in self.value_sets.values() if v.used),
            action_profiles=tuple(
                ActionProfileInfo(p.name, tuple(t.name for t in tables
                                                if t.name in {x.name for x in p.tables}),
                                  p.with_selector, p.size)
                for p in self.action_profiles.values()
                if p.name in view.externs and any(t.name in kept for t in p.tables)))

    def _serializable_enums(self, tables: set, actions: list) -> tuple:
        """The serializable enums of listed tables' keys and listed actions' parameters."""
        users = set(tables) | {a.name for a in actions if a.params}
        found = {}
        for user, enum in self.enum_uses:
            if user in users:
                found.setdefault(enum.name, enum)
        return tuple(found[n] for n in sorted(found))


def _register_info(r) -> RegisterInfo:
    """The :class:`RegisterInfo` of a registered ``externs.Register`` or ``StructRegister``."""
    if isinstance(r, externs.StructRegister):
        fields = tuple(StructFieldInfo(n, w, s) for n, w, s in r.fields)
        return RegisterInfo(r.name, sum(f.bitwidth for f in fields), r.size,
                            annotations=r.annotations, fields=fields, type_name=r.type_name)
    return RegisterInfo(r.name, r.width, r.size, r.signed, r.annotations)
