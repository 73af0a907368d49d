"""Match-action tables: lookup (exact via dict, lpm by longest prefix, ternary/range/optional by
priority) and control-plane validation with P4Runtime error codes."""
from __future__ import annotations

from typing import Callable, Optional

from ..api import (ActionCall, ControlError, Exact, Lpm, Optional_, Range, TableEntry, TableInfo,
                   Ternary)


class ActionImpl:
    """An action as tables call it: the generated function and its parameter widths."""

    __slots__ = ("name", "fn", "widths")

    def __init__(self, name: str, fn: Callable, widths: tuple):
        self.name, self.fn, self.widths = name, fn, widths


class _Entry:
    __slots__ = ("api", "fn", "args", "name", "checks", "priority", "prefix", "bytes", "packets",
                 "hit", "meter")

    def __init__(self, api: TableEntry, impl: ActionImpl, checks: tuple, priority: int, prefix: int):
        self.api = api
        self.fn, self.args, self.name = impl.fn, api.action.args, impl.name   # (ref: no args)
        self.checks, self.priority, self.prefix = checks, priority, prefix
        self.bytes = self.packets = 0
        self.meter = None                   # its direct meter's cell, once configured
        self.hit = (True, impl.fn)          # what apply() returns on a hit on this entry


def _args(args: tuple) -> str:
    return ", ".join(hex(a) if a > 9 else str(a) for a in args)


def _field_key(m) -> tuple:
    return (type(m).__name__,) + (tuple(vars(m).values()) if m is not None and hasattr(m, "__dict__")
                                  else (repr(m),))


class Table:
    """One table of one dataplane instance."""

    def __init__(self, info: TableInfo, actions: dict, default: ActionCall):
        self.info = info
        self.name = info.name
        self.actions: dict = actions              # name -> ActionImpl
        self.kinds = tuple(f.match_kind for f in info.match_fields)
        self.widths = tuple(f.bitwidth for f in info.match_fields)
        self.exact_only = all(k == "exact" for k in self.kinds)
        # A single lpm key: one dict per prefix length, longest first.
        self.lpm_levels: Optional[list] = [] if self.kinds == ("lpm",) else None
        self.exact: dict = {}                     # key tuple -> _Entry (exact-only tables)
        # What generated code may run itself on a hit, without calling ``apply``: the entries
        # of ``exact`` while the table is plain (exact-only, no direct counter or meter, no
        # action profile, no tracer), else nothing. The same dict object for the table's life
        # (generated code binds its ``get`` once); a miss always goes through ``apply``.
        self.fast: dict = {}
        self.ordered: list = []                   # other tables, best first
        self.by_id: dict = {}                     # identity -> _Entry
        self.initial_default = default
        # entries it holds at most: P4Info's size, or BMv2's max_size where p4c-bm2-ss writes
        # another (a table with entries and no size: the number of entries, see codegen)
        self.capacity = info.size
        self.default_entry = None
        self._tracer = None                       # trace sink (list.append) or None
        # an action profile / selector (``implementation``): entries name its members/groups;
        # ``apply`` gets every key, the selector keys at ``sel_pos`` (not matched on)
        self.direct_meter = None                  # registry.DirectMeter, executed on a hit
        self.profile = None
        self.match_pos: tuple = ()
        self.sel_pos: tuple = ()
        self.sel_widths: tuple = ()
        self.set_default_unchecked(default)

    def set_direct_meter(self, meter) -> None:
        self.direct_meter = meter
        self._specialise()

    def set_profile(self, profile, match_pos: tuple, sel_pos: tuple, sel_widths: tuple) -> None:
        """Make this an indirect table of ``profile`` (see :mod:`.profiles`)."""
        self.profile, self.match_pos = profile, tuple(match_pos)
        self.sel_pos, self.sel_widths = tuple(sel_pos), tuple(sel_widths)
        profile.tables.append(self)
        self._specialise()

    def _apply_indirect(self, key: tuple, length: int = 0):
        """Look the match keys up; on a hit run the entry's member (or the member its group's
        hash of the selector keys picks). A miss runs nothing, as on BMv2."""
        mkey = tuple(key[i] for i in self.match_pos)
        e = None
        for cand in self.ordered if not self.exact_only else ():
            for (kind, a, b), v in zip(cand.checks, mkey):
                if (v & b != a) if kind == 0 else (v < a or v > b):
                    break
            else:
                e = cand
                break
        if self.exact_only:
            e = self.exact.get(mkey)
        dm = self.direct_meter
        if e is None:
            if self._tracer is not None:
                self._tracer(f"table {self.name}: miss (indirect: no default action)")
            if dm is not None:
                dm.last = dm.GREEN
            return False, self.default_entry.fn
        e.bytes += length
        e.packets += 1
        if dm is not None:
            dm.execute(e.meter, length)
        call = self.profile.resolve(e.api.action, tuple(key[i] for i in self.sel_pos),
                                    self.sel_widths)
        if call is None:
            if self._tracer is not None:
                self._tracer(f"table {self.name}: hit, {e.api.action}: empty group")
            return True, None
        impl = self.actions[call.action]
        if self._tracer is not None:
            self._tracer(f"table {self.name}: hit, {e.api.action}: action {call.action}"
                         f"({_args(call.args)})")
        impl.fn(*call.args)
        return True, impl.fn

    # ----------------------------------------------------------------------------- data path
    @property
    def tracer(self):
        return self._tracer

    @tracer.setter
    def tracer(self, sink) -> None:
        self._tracer = sink
        self._specialise()

    def _fast_ok(self) -> bool:
        """Whether a hit may run its entry's action and nothing else (see :attr:`fast`)."""
        return (self.exact_only and self.profile is None and self.direct_meter is None
                and self._tracer is None and self.info.direct_counter is None)

    def _specialise(self) -> None:
        """Bind ``self.apply`` to the fastest lookup for this table's current shape: exact-only
        and single-lpm tables get a closure (no per-packet kind dispatch, no hit counting
        unless the table has a direct counter, preallocated results); tracing and other match
        kinds use :meth:`_apply`. Called whenever the default action or the tracer changes
        (entries are looked up through the live dicts). Also refills :attr:`fast`."""
        d = self.default_entry
        self.fast.clear()
        if self._fast_ok():
            self.fast.update(self.exact)
        if getattr(self, "profile", None) is not None:
            self.apply = self._apply_indirect
            return
        if getattr(self, "direct_meter", None) is not None:
            self.apply = self._apply
            return
        if self._tracer is not None or d is None or not (self.exact_only or self.lpm_levels is not None):
            self.apply = self._apply
            return
        dfn, dargs = d.fn, d.args
        miss = (False, dfn)
        count = self.info.direct_counter is not None
        if self.exact_only:
            get = self.exact.get

            if count:
                def apply(key, length=0):
                    e = get(key)
                    if e is None:
                        dfn(*dargs)
                        return miss
                    e.bytes += length
                    e.packets += 1
                    e.fn(*e.args)
                    return e.hit
            else:
                def apply(key, length=0):
                    e = get(key)
                    if e is None:
                        dfn(*dargs)
                        return miss
                    e.fn(*e.args)
                    return e.hit
        else:
            table = self

            def apply(key, length=0):
                v = key[0]
                for mask, level in table.lpm_levels:
                    e = level.get(v & mask)
                    if e is not None:
                        if count:
                            e.bytes += length
                            e.packets += 1
                        e.fn(*e.args)
                        return e.hit
                dfn(*dargs)
                return miss
        self.apply = apply

    def _apply(self, key: tuple, length: int = 0):
        """Look ``key`` up, run the action; returns (hit, action function run)."""
        if self.exact_only:
            e = self.exact.get(key)
        elif self.lpm_levels is not None:
            e = None
            v = key[0]
            for mask, level in self.lpm_levels:
                e = level.get(v & mask)
                if e is not None:
                    break
        else:
            e = None
            for cand in self.ordered:
                for (kind, a, b), v in zip(cand.checks, key):
                    if kind == 0:                 # (value & mask) == a
                        if v & b != a:
                            break
                    elif v < a or v > b:          # range
                        break
                else:
                    e = cand
                    break
        dm = self.direct_meter
        if e is None:
            d = self.default_entry
            if self._tracer is not None:
                self._tracer(f"table {self.name}: miss, default action {d.name}({_args(d.args)})")
            if dm is not None:          # BMv2 meters the default entry too (unconfigured)
                dm.last = dm.GREEN
            d.fn(*d.args)
            return False, d.fn
        e.bytes += length
        e.packets += 1
        if dm is not None:
            dm.execute(e.meter, length)
        if self._tracer is not None:
            self._tracer(f"table {self.name}: hit, action {e.name}({_args(e.args)})")
        e.fn(*e.args)
        return True, e.fn

    # ----------------------------------------------------------------------------- validation
    def _impl(self, call, for_default: bool) -> ActionImpl:
        if getattr(self, "profile", None) is None and isinstance(call, ActionCall):
            return self.direct_impl(call, for_default)
        if self.profile is None:
            raise ControlError("INVALID_ARGUMENT", f"table {self.name} has no action profile: "
                               f"its entries name an action, not {call}")
        if for_default:
            raise ControlError("INVALID_ARGUMENT", f"table {self.name} is implemented by "
                               f"{self.profile.name}: BMv2 gives it no default action")
        self.profile.check_ref(call, self.name)
        return ActionImpl(str(call), None, ())

    def direct_impl(self, call: ActionCall, for_default: bool) -> ActionImpl:
        """Check that ``call`` is an action of this table (its scope, its arguments)."""
        impl = self.actions.get(call.action)
        if impl is None:
            raise ControlError("INVALID_ARGUMENT" if call.action in self._all_actions
                               else "NOT_FOUND",
                               f"action {call.action!r} is not an action of table {self.name}")
        scope = next((r.scope for r in self.info.action_refs if r.name == call.action), "TABLE_AND_DEFAULT")
        if for_default and scope == "TABLE_ONLY":
            raise ControlError("INVALID_ARGUMENT", f"action {call.action} is @tableonly in {self.name}")
        if not for_default and scope == "DEFAULT_ONLY":
            raise ControlError("INVALID_ARGUMENT", f"action {call.action} is @defaultonly in {self.name}")
        if len(call.args) != len(impl.widths):
            raise ControlError("INVALID_ARGUMENT",
                               f"action {call.action} takes {len(impl.widths)} arguments, got {len(call.args)}")
        for i, (v, w) in enumerate(zip(call.args, impl.widths)):
            if not isinstance(v, int) or v < 0 or v >> w:
                raise ControlError("INVALID_ARGUMENT",
                                   f"argument {i} of action {call.action}: value {v!r} does not fit in {w} bits")
        return impl

    _all_actions: set = set()

    def _compile(self, entry: TableEntry) -> tuple:
        if len(entry.matches) != len(self.kinds):
            raise ControlError("INVALID_ARGUMENT",
                               f"table {self.name} has {len(self.kinds)} match fields, entry gives {len(entry.matches)}")
        checks = []
        prefix = 0
        for i, (m, kind, w) in enumerate(zip(entry.matches, self.kinds, self.widths)):
            full = (1 << w) - 1
            fname = self.info.match_fields[i].name
            if m is None:
                if kind == "exact":
                    raise ControlError("INVALID_ARGUMENT", f"exact field {fname} of {self.name} needs a value")
                checks.append((0, 0, 0))
                continue
            expect = {"exact": Exact, "ternary": Ternary, "lpm": Lpm, "range": Range,
                      "optional": Optional_}[kind]
            if not isinstance(m, expect) and not (kind in ("ternary", "optional") and isinstance(m, Exact)):
                raise ControlError("INVALID_ARGUMENT",
                                   f"field {fname} of {self.name} is {kind}, got {type(m).__name__}")
            vals = [getattr(m, a) for a in ("value", "mask", "low", "high") if hasattr(m, a)]
            for v in vals:
                if not isinstance(v, int) or v < 0 or v >> w:
                    raise ControlError("INVALID_ARGUMENT",
                                       f"field {fname} of {self.name}: value {v!r} does not fit in {w} bits")
            if isinstance(m, (Exact, Optional_)):
                checks.append((0, m.value, full))
            elif isinstance(m, Ternary):
                if m.value & ~m.mask:
                    raise ControlError("INVALID_ARGUMENT",
                                       f"field {fname} of {self.name}: value {m.value:#x} has bits outside mask {m.mask:#x}")
                checks.append((0, m.value, m.mask))
            elif isinstance(m, Lpm):
                if not 0 <= m.prefix_len <= w:
                    raise ControlError("INVALID_ARGUMENT",
                                       f"field {fname} of {self.name}: prefix length {m.prefix_len} not in 0..{w}")
                mask = full ^ ((1 << (w - m.prefix_len)) - 1)
                if m.value & ~mask:
                    raise ControlError("INVALID_ARGUMENT",
                                       f"field {fname} of {self.name}: value {m.value:#x} has bits beyond /{m.prefix_len}")
                checks.append((0, m.value, mask))
                prefix = m.prefix_len
            elif isinstance(m, Range):
                if m.low > m.high:
                    raise ControlError("INVALID_ARGUMENT", f"field {fname} of {self.name}: empty range")
                checks.append((1, m.low, m.high))
        if self.info.needs_priority and entry.priority <= 0:
            raise ControlError("INVALID_ARGUMENT", f"table {self.name} needs a priority > 0 in each entry")
        if not self.info.needs_priority and entry.priority:
            raise ControlError("INVALID_ARGUMENT", f"table {self.name} takes no priority")
        return tuple(checks), prefix

    @staticmethod
    def identity(entry: TableEntry) -> tuple:
        return (tuple(_field_key(m) for m in entry.matches), entry.priority)

    def _check_writable(self, entry: TableEntry) -> None:
        if self.info.is_const and not entry.is_const:
            raise ControlError("PERMISSION_DENIED", f"table {self.name} has const entries: it is read-only")

    # ----------------------------------------------------------------------------- control plane
    def insert(self, entry: TableEntry, from_program: bool = False) -> None:
        """Add an entry. ``from_program``: an entry of the program's ``entries`` list (not
        subject to the read-only and size rules that bind the control plane)."""
        if not from_program:
            self._check_writable(entry)
        checks, prefix = self._compile(entry)
        impl = self._impl(entry.action, for_default=False)
        ident = self.identity(entry)
        if ident in self.by_id:
            raise ControlError("ALREADY_EXISTS", f"the entry already exists in {self.name}")
        if len(self.by_id) >= self.capacity and not from_program:
            raise ControlError("RESOURCE_EXHAUSTED", f"table {self.name} is full ({self.capacity} entries)")
        e = _Entry(entry, impl, checks, entry.priority, prefix)
        if entry.counter_data is not None:
            e.bytes, e.packets = entry.counter_data
        self._add(ident, e)

    def _add(self, ident, e: _Entry) -> None:
        self.by_id[ident] = e
        if self.exact_only:
            key = tuple(c[1] for c in e.checks)
            self.exact[key] = e
            if self._fast_ok():
                self.fast[key] = e
        else:
            self.ordered.append(e)
            if self.info.needs_priority:
                self.ordered.sort(key=lambda x: -x.priority)
            else:
                self.ordered.sort(key=lambda x: -x.prefix)
            self._index_lpm()

    def _index_lpm(self) -> None:
        if self.lpm_levels is None:
            return
        levels: dict = {}
        for e in self.ordered:
            _, value, mask = e.checks[0]
            levels.setdefault(mask, {})[value] = e
        self.lpm_levels = sorted(levels.items(), key=lambda kv: -kv[0])

    def _find(self, entry: TableEntry) -> tuple:
        self._compile(entry)
        ident = self.identity(entry)
        e = self.by_id.get(ident)
        if e is None:
            raise ControlError("NOT_FOUND", f"no such entry in {self.name}")
        return ident, e

    def modify(self, entry: TableEntry) -> None:
        self._check_writable(entry)
        ident, old = self._find(entry)
        impl = self._impl(entry.action, for_default=False)
        new = _Entry(entry, impl, old.checks, old.priority, old.prefix)
        new.bytes, new.packets = (entry.counter_data if entry.counter_data is not None
                                  else (old.bytes, old.packets))
        new.meter = old.meter
        self._remove(ident, old)
        self._add(ident, new)

    def _remove(self, ident, e: _Entry) -> None:
        del self.by_id[ident]
        if self.exact_only:
            key = tuple(c[1] for c in e.checks)
            self.exact.pop(key, None)
            self.fast.pop(key, None)
        else:
            self.ordered.remove(e)
            self._index_lpm()

    def delete(self, entry: TableEntry) -> None:
        self._check_writable(entry)
        ident, e = self._find(entry)
        self._remove(ident, e)

    def entries(self) -> list:
        out = []
        for e in self.by_id.values():
            a = e.api
            out.append(TableEntry(a.table, a.matches, a.action, a.priority, a.is_const,
                                  (e.bytes, e.packets) if self.info.direct_counter else None))
        return out

    def clear(self) -> None:
        for ident, e in list(self.by_id.items()):
            if not e.api.is_const:
                self._remove(ident, e)

    def set_default_unchecked(self, call: ActionCall) -> None:
        impl = self.actions[call.action]
        self.default_entry = _Entry(TableEntry(self.name, (), call), impl, (), 0, 0)
        self._specialise()

    def set_default(self, call: ActionCall) -> None:
        if self.info.const_default_action is not None:
            raise ControlError("PERMISSION_DENIED", f"the default action of {self.name} is const")
        self._impl(call, for_default=True)
        self.set_default_unchecked(call)

    def get_default(self) -> ActionCall:
        return self.default_entry.api.action

    def counter(self, entry: TableEntry, kind: str = "counter") -> _Entry:
        """The entry a direct counter (or meter) cell belongs to."""
        if kind == "counter" and self.info.direct_counter is None:
            raise ControlError("NOT_FOUND", f"table {self.name} has no direct counter")
        return self._find(entry)[1]
