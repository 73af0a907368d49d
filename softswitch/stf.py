"""Run p4c's STF ("simple test framework") tests in process against the embedded engine.

An STF file is a list of commands, one per line (``#`` starts a comment), as p4c's
``backends/bmv2/run-bmv2-test.py`` feeds them to BMv2. This runner executes them in order on a
fresh :class:`~softswitch.api.Dataplane` and then compares what came out, port by port, with the
``expect`` lines, exactly as ``bmv2stf.py`` does.

Supported commands
------------------
``packet PORT HEX...``
    Send a frame (hex digits, spaces ignored) into PORT; it is processed before the next command.
``expect PORT [HEX...] [$]``
    The next frame expected out of PORT. ``*`` in HEX matches any nibble. Without a trailing
    ``$`` the frame may be longer than HEX (extra bytes are ignored, as in BMv2's STF); with
    ``$`` its length must be exactly that of HEX. ``expect PORT`` alone accepts any number of
    frames on PORT.
``add TABLE [PRIORITY] KEY:VALUE ... ACTION(ARG:VALUE, ...) [= HANDLE]``
    Insert an entry. TABLE, KEY and ACTION may be fully qualified or a unique suffix (``ipv4_lpm``,
    ``dstAddr``, ``ipv4_forward``), resolved like ``bmv2stf.py``. Values are decimal, ``0x``,
    ``0b`` or ``0o`` numbers. Ternary keys: ``0x**0A`` (``*`` digits are wildcards; the mask
    covers the digits written, as bmv2stf builds it), or ``VALUE&&&MASK``; a decimal value is
    an exact match. Lpm keys: ``VALUE/LEN``, or digits with trailing ``*``; a plain value is a
    full-length prefix. Range keys (extension): ``LOW..HIGH``. Keys left out are wildcards
    (exact keys: 0, as in bmv2stf). A larger PRIORITY wins (bmv2stf turns it into BMv2's
    reversed order; P4Runtime's order is the same as STF's); entries without one, in tables
    that need one, get decreasing priorities so that earlier entries win. HANDLE names the
    entry for ``check_counter``.
``setdefault TABLE ACTION(ARG:VALUE, ...)``
    Set the default action.
``remove all``
    Remove every non-const entry of every table.
``mc_mgrp_create GROUP``, ``mc_node_create RID PORT...``, ``mc_node_update HANDLE PORT...``, ``mc_node_associate GROUP HANDLE``
    BMv2's multicast CLI: nodes get handles 0, 1, 2, ... in creation order, and a group's
    replicas are its nodes' ports with their rids, in association order.
``mirroring_add SESSION PORT``, ``mirroring_delete SESSION``, ``mirroring_get SESSION``
    Clone sessions (``mirroring_get`` only logs).
``register_write NAME INDEX VALUE``, ``register_reset NAME``, ``register_read NAME INDEX [OP VALUE]``
    Registers; ``register_read`` only logs unless followed by a comparison (an extension:
    ``register_read r 0 == 5``). OP is one of ``== != < <= > >=``. A TNA register of structs
    (extension) takes one VALUE per field, in the struct's order, where others take one
    (``register_write pairs 0 1 2``, ``register_read pairs 0 == 1 2``; OP ``==`` or ``!=``).
``counter_write NAME INDEX PACKETS BYTES``, ``counter_read NAME INDEX``
    Indexed counters (argument order of ``simple_switch_CLI``; ``counter_read`` only logs).
``check_counter NAME(INDEX|HANDLE) [packets|bytes OP VALUE]``
    Check an indexed counter (INDEX) or the direct counter of the entry added ``= HANDLE``;
    without a condition, checks ``packets == 0``.
``wait``
    Nothing to do: processing is synchronous.
``expect_digest NAME VALUE...`` (HINA extension)
    The next digest of type NAME (P4Info's name for it: the struct type's name, or a unique
    suffix) expected, one VALUE per field in the struct's order (``*``: any value). Values are
    the fields' bits, unsigned (``int<8>`` -1 is ``0xFF``). Digests are compared, per NAME with
    an expectation, with every digest the program sent, in order, after the last command (p4c's
    STF has no digest command; BMv2's come over P4Runtime's stream, see
    ``controller.bmv2_dataplane.Bmv2Dataplane.late_digests``).
``act_prof_create_member PROFILE ID ACTION(ARG:VALUE, ...)``, ``act_prof_modify_member ...``, ``act_prof_delete_member PROFILE ID``, ``act_prof_create_group PROFILE ID``, ``act_prof_delete_group PROFILE ID``, ``act_prof_add_member_to_group PROFILE MEMBER GROUP``, ``act_prof_remove_member_from_group PROFILE MEMBER GROUP`` (HINA extension)
    Action profiles and selectors, after BMv2's runtime CLI, with the member and group ids
    given (P4Runtime ids, not BMv2 handles). An entry of a table with an ``implementation``
    names ``member(ID)`` or ``group(ID)`` where other tables name an action:
    ``add ecmp hdr.k.a:5 group(1)``.
``pvs_add NAME VALUE...``, ``pvs_remove NAME VALUE...``, ``pvs_clear NAME`` (HINA extension)
    Parser value sets, after BMv2's runtime CLI: one VALUE per field of the set's element type
    (a ``bit<W>`` set: one; a struct: one per field, in order). BMv2 value sets match exactly
    (p4c-bm2-ss ignores ``@match``): there are no masks. Adding more members than the set's
    size fails (RESOURCE_EXHAUSTED).

``meter_set_rates NAME INDEX|HANDLE CIR:CBURST PIR:PBURST``
    Configure an indexed meter's cell, or a direct meter's cell of the entry added
    ``= HANDLE``, rates in units (packets or bytes) per microsecond as ``simple_switch_CLI``
    takes them. A rate of 0 never refills: the colours of a packet sequence then depend on the
    bursts only, not on time.

``mirroring_add_mc`` and anything else are reported as failures
("unsupported STF command"), never silently passed.

Only ports named by a ``packet`` or ``expect`` command are checked (BMv2's STF opens an
interface for those ports only); frames sent to other ports are in :attr:`StfResult.outputs`.

Example::

    >>> from softswitch.stf import run_stf                       # doctest: +SKIP
    >>> result = run_stf("tests/softswitch/stf/l3fwd.stf", "tests/softswitch/programs/l3fwd.p4")
    >>> result.passed, result.failures
    (True, [])
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Optional, Union

from .api import (ActionCall, CloneSession, CompiledProgram, ControlError, Dataplane, Digest, Exact,
                  FieldMatch, GroupRef, MemberRef, ProgramInfo, Replica, TableEntry, TableInfo)
from .stf_syntax import (ACTION_CALL, COMPARISONS, EXACT_LENGTH_MARK, WILDCARD, Expectation,
                         StfError, next_word, parse_hex_frame, parse_match, parse_number,
                         resolve_name, stf_field_name)

log = logging.getLogger("softswitch.stf")

#: priority given to the first entry without an explicit one, in a table that needs priorities;
#: later entries get one less each, so that earlier entries win.
AUTO_PRIORITY_BASE = 1 << 24


@dataclass(frozen=True)
class StfFailure:
    """One failed command or check: ``file:line: message`` (line 0, shown as ``file: message``:
    the final comparison of outputs with expectations, which no single line owns)."""
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


@dataclass
class StfResult:
    """What an STF run found.

    Attributes:
        passed: ``True`` when no command failed and every expectation was met.
        failures: every problem, in file order, the output comparison last.
        outputs: every frame the program sent, per egress port, in order.
        log: one line per command and packet, for reading a failure.
    """
    passed: bool
    failures: list[StfFailure] = field(default_factory=list)
    outputs: dict[int, list[bytes]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def report(self) -> str:
        """A human-readable summary: PASS, or FAIL with one failure per line."""
        if self.passed:
            return "PASS"
        return "FAIL\n" + "\n".join(str(f) for f in self.failures)


# ------------------------------------------------------------------------------------------------
# The runner
# ------------------------------------------------------------------------------------------------
class StfRunner:
    """Executes STF commands on one dataplane; :func:`run_stf` is the usual entry point.

    Args:
        dataplane: a fresh instance of the program under test.
        filename: the STF file's name, for messages.
        trace: log the engine's per-packet trace at debug level.
    """

    def __init__(self, dataplane: Dataplane, filename: str = "<stf>", trace: bool = False):
        self.dp = dataplane
        self.info: ProgramInfo = dataplane.info
        self.filename = filename
        self.trace = trace
        self.failures: list[StfFailure] = []
        self.log: list[str] = []
        self.outputs: dict[int, list[bytes]] = {}
        self.expected: dict[int, list[Expectation]] = {}
        self.expect_any: set[int] = set()
        self.digests: list[Digest] = []
        self.expected_digests: dict[str, list[tuple[int, tuple[Optional[int], ...]]]] = {}
        self.ports_seen: set[int] = set()
        self.handles: dict[str, TableEntry] = {}
        self.mc_nodes: list[tuple[int, tuple[int, ...]]] = []       # handle -> (rid, ports)
        self.mc_groups: dict[int, list[int]] = {}                    # group -> node handles
        self.value_sets: dict[str, list[tuple[int, ...]]] = {}       # name -> members
        self._auto_priority: dict[str, int] = {}
        self._line = 0

    # -- driving -----------------------------------------------------------------------------
    def run_text(self, text: str) -> StfResult:
        """Run every command of ``text``, then compare outputs with expectations."""
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            self._line = number
            try:
                self.execute(line)
            except (StfError, ControlError) as exc:
                self.fail(f"{line}: {exc}")
            except Exception as exc:  # an engine bug fails this command, not the whole run
                log.debug("STF %s:%d: %s", self.filename, number, line, exc_info=True)
                self.fail(f"{line}: internal error: {type(exc).__name__}: {exc}")
        self.check_outputs()
        return StfResult(passed=not self.failures, failures=self.failures,
                         outputs=self.outputs, log=self.log)

    def fail(self, message: str, line: Optional[int] = None) -> None:
        self.failures.append(StfFailure(self.filename, self._line if line is None else line,
                                        message))

    def execute(self, line: str) -> None:
        """Run one command (without its comment)."""
        command, rest = next_word(line)
        handler = getattr(self, "cmd_" + command.lower(), None)
        if handler is None:
            raise StfError(f"unsupported STF command {command!r}")
        self.log.append(f"{self._line}: {line}")
        handler(rest.strip())

    # -- packets -----------------------------------------------------------------------------
    def cmd_packet(self, rest: str) -> None:
        port_text, data = next_word(rest)
        port = self._port(port_text)
        frame = parse_hex_frame(data)
        self.ports_seen.add(port)
        result = self.dp.process(port, frame, trace=self.trace)
        if self.trace and result.trace:
            log.debug("packet line %d:\n  %s", self._line, "\n  ".join(result.trace))
        for egress, out in result.outputs:
            self.outputs.setdefault(egress, []).append(out)
            self.log.append(f"    -> port {egress}: {out.hex().upper()}")
        self._add_digests(result.digests)

    def _add_digests(self, digests) -> None:
        for digest in digests:
            self.digests.append(digest)
            self.log.append(f"    -> digest {digest.name} {' '.join(map(hex, digest.values))}")

    def cmd_expect(self, rest: str) -> None:
        port_text, data = next_word(rest)
        port = self._port(port_text)
        self.ports_seen.add(port)
        data = "".join(data.split()).upper()
        exact = data.endswith(EXACT_LENGTH_MARK)
        data = data.rstrip(EXACT_LENGTH_MARK)
        if not data:
            self.expect_any.add(port)
            return
        if len(data) % 2 or any(c not in "0123456789ABCDEF" + WILDCARD for c in data):
            raise StfError(f"expected data {data!r} must be an even number of hex digits or *")
        self.expected.setdefault(port, []).append(Expectation(self._line, data, exact))

    def cmd_wait(self, rest: str) -> None:
        """Processing is synchronous: every earlier packet is already out."""

    def cmd_expect_digest(self, rest: str) -> None:
        name_text, values_text = next_word(rest)
        if not name_text:
            raise StfError("expected: expect_digest NAME VALUE...")
        digest = self.info.digest(resolve_name(name_text, [d.name for d in self.info.digests],
                                               "digest"))
        words = values_text.split()
        if len(words) != len(digest.fields):
            raise StfError(f"digest {digest.name} has {len(digest.fields)} fields "
                           f"({', '.join(f.name for f in digest.fields)}), {len(words)} values "
                           f"given")
        values: list[Optional[int]] = []
        for word, f in zip(words, digest.fields):
            value = None if word == WILDCARD else parse_number(word)
            if value is not None and not 0 <= value < 1 << f.bitwidth:
                raise StfError(f"digest {digest.name} field {f.name}: {word} does not fit "
                               f"bit<{f.bitwidth}> (write a negative value as its bits)")
            values.append(value)
        self.expected_digests.setdefault(digest.name, []).append((self._line, tuple(values)))

    def check_digests(self) -> None:
        """Compare, per digest type with expectations, the digests sent with them."""
        late = getattr(self.dp, "late_digests", None)
        if late is not None and self.expected_digests:
            self._add_digests(late())
        for name, want in self.expected_digests.items():
            got = [d.values for d in self.digests if d.name == name]
            for index, ((line, pattern), values) in enumerate(zip(want, got)):
                if len(values) != len(pattern) or any(
                        p is not None and p != v for p, v in zip(pattern, values)):
                    shown = " ".join("*" if p is None else hex(p) for p in pattern)
                    self.fail(f"digest {name} {index}: expected {shown}, got "
                              f"{' '.join(map(hex, values))}", line=line)
            if len(got) != len(want):
                extra = "".join(f"\n  unexpected {' '.join(map(hex, v))}" for v in got[len(want):])
                missing = "".join(f"\n  missing (line {line})" for line, _ in want[len(got):])
                self.fail(f"digest {name}: expected {len(want)}, got {len(got)}{extra}{missing}",
                          line=0)

    def check_outputs(self) -> None:
        """Compare, per checked port, the frames that came out with the expectations, then
        the digests (:meth:`check_digests`)."""
        self.check_digests()
        for port in sorted(self.ports_seen):
            got = self.outputs.get(port, [])
            want = self.expected.get(port, [])
            if port in self.expect_any:
                if want:
                    self.fail(f"port {port} has both 'expect {port}' (any frames) and expected "
                              f"frames", line=0)
                continue
            for index, (expectation, frame) in enumerate(zip(want, got)):
                problem = expectation.mismatch(frame)
                if problem:
                    self.fail(f"port {port}, frame {index}: {problem}", line=expectation.line)
            if len(got) != len(want):
                extra = "".join(f"\n  unexpected {f.hex().upper()}" for f in got[len(want):])
                missing = "".join(f"\n  missing (line {e.line}) {e.pattern}"
                                  for e in want[len(got):])
                self.fail(f"port {port}: expected {len(want)} frames, got {len(got)}"
                          f"{extra}{missing}", line=0)

    # -- tables ------------------------------------------------------------------------------
    def _table(self, name: str) -> TableInfo:
        return self.info.table(resolve_name(name, [t.name for t in self.info.tables], "table"))

    def _action_call(self, table: TableInfo, name: str, args_text: str) -> ActionCall:
        action_name = resolve_name(name, [ref.name for ref in table.action_refs], "action",
                                   f" in table {table.name}")
        action = self.info.action(action_name)
        given: dict[str, int] = {}
        for item in filter(None, (a.strip() for a in args_text.split(","))):
            arg_name, sep, value = item.partition(":")
            if not sep:
                raise StfError(f"action argument {item!r} must be NAME:VALUE")
            given[arg_name.strip()] = parse_number(value.strip())
        param_names = [p.name for p in action.params]
        unknown = set(given) - set(param_names)
        if unknown:
            raise StfError(f"action {action.name} has no parameter {', '.join(sorted(unknown))}; "
                           f"its parameters: {', '.join(param_names) or 'none'}")
        missing = [n for n in param_names if n not in given]
        if missing:
            raise StfError(f"action {action.name}: missing argument {', '.join(missing)}")
        return ActionCall(action.name, tuple(given[n] for n in param_names))

    def cmd_add(self, rest: str) -> None:
        call = ACTION_CALL.search(rest)
        if call is None:
            raise StfError("expected: add TABLE [PRIORITY] KEY:VALUE ... ACTION(ARG:VALUE, ...)")
        words = rest[:call.start()].split()
        if not words:
            raise StfError("add: missing table name")
        table = self._table(words[0])
        words = words[1:]
        priority: Optional[int] = None
        if words and ":" not in words[0]:
            priority = parse_number(words[0])
            words = words[1:]
        field_names = [m.name for m in table.match_fields]
        matches: list[Optional[FieldMatch]] = [
            Exact(0) if m.match_kind == "exact" else None for m in table.match_fields]
        for word in words:
            key, sep, value = word.partition(":")
            if not sep or not value:
                raise StfError(f"key {word!r} must be FIELD:VALUE")
            name = resolve_name(stf_field_name(key), field_names, "key field",
                                f" of table {table.name}")
            index = field_names.index(name)
            matches[index] = parse_match(value, table.match_fields[index])
        if table.implementation:
            action = self._profile_ref(table, call.group("name"), call.group("args"))
        else:
            action = self._action_call(table, call.group("name"), call.group("args"))
        if priority is None and table.needs_priority:
            priority = self._auto_priority.get(table.name, AUTO_PRIORITY_BASE)
            self._auto_priority[table.name] = priority - 1
        entry = TableEntry(table.name, tuple(matches), action, priority or 0)
        self.dp.table_insert(entry)
        if call.group("handle"):
            self.handles[call.group("handle").lstrip("$")] = entry

    def cmd_setdefault(self, rest: str) -> None:
        table_name, action_text = next_word(rest)
        call = ACTION_CALL.search(action_text)
        if call is None:
            raise StfError("expected: setdefault TABLE ACTION(ARG:VALUE, ...)")
        table = self._table(table_name)
        self.dp.table_set_default(table.name,
                                  self._action_call(table, call.group("name"), call.group("args")))

    def cmd_remove(self, rest: str) -> None:
        if rest.lower() != "all":
            raise StfError("only 'remove all' is supported")
        for table in self.info.tables:
            if not table.is_const:
                self.dp.table_clear(table.name)

    # -- packet replication engine ----------------------------------------------------------------
    def _ints(self, rest: str, at_least: int, usage: str) -> list[int]:
        values = [parse_number(w) for w in rest.split()]
        if len(values) < at_least:
            raise StfError(f"expected {usage}")
        return values

    def _apply_group(self, group: int) -> None:
        replicas = [Replica(port, rid) for handle in self.mc_groups[group]
                    for rid, ports in [self.mc_nodes[handle]] for port in ports]
        self.dp.mcast_group_set(group, replicas)

    def cmd_mc_mgrp_create(self, rest: str) -> None:
        (group,) = self._ints(rest, 1, "mc_mgrp_create GROUP")[:1]
        if group in self.mc_groups:
            raise StfError(f"multicast group {group} already exists")
        self.mc_groups[group] = []
        self._apply_group(group)

    def cmd_mc_node_create(self, rest: str) -> None:
        rid, *ports = self._ints(rest, 1, "mc_node_create RID PORT...")
        self.mc_nodes.append((rid, tuple(ports)))
        self.log.append(f"    node handle {len(self.mc_nodes) - 1}")

    def _node(self, handle: int) -> int:
        if not 0 <= handle < len(self.mc_nodes):
            raise StfError(f"no multicast node with handle {handle} "
                           f"({len(self.mc_nodes)} created)")
        return handle

    def cmd_mc_node_update(self, rest: str) -> None:
        handle, *ports = self._ints(rest, 1, "mc_node_update HANDLE PORT...")
        rid, _ = self.mc_nodes[self._node(handle)]
        self.mc_nodes[handle] = (rid, tuple(ports))
        for group, handles in self.mc_groups.items():
            if handle in handles:
                self._apply_group(group)

    def cmd_mc_node_associate(self, rest: str) -> None:
        group, handle = self._ints(rest, 2, "mc_node_associate GROUP HANDLE")[:2]
        if group not in self.mc_groups:
            raise StfError(f"multicast group {group} was not created (mc_mgrp_create)")
        self.mc_groups[group].append(self._node(handle))
        self._apply_group(group)

    def cmd_mirroring_add(self, rest: str) -> None:
        session, port = self._ints(rest, 2, "mirroring_add SESSION PORT")[:2]
        self.dp.clone_session_set(CloneSession(session, (Replica(port, 0),)))

    def cmd_mirroring_delete(self, rest: str) -> None:
        (session,) = self._ints(rest, 1, "mirroring_delete SESSION")[:1]
        self.dp.clone_session_delete(session)

    def cmd_mirroring_get(self, rest: str) -> None:
        (session,) = self._ints(rest, 1, "mirroring_get SESSION")[:1]
        self.log.append(f"    {self.dp.clone_sessions().get(session)}")

    # -- meters --------------------------------------------------------------------------------
    def cmd_meter_set_rates(self, rest: str) -> None:
        """``meter_set_rates NAME INDEX CIR:CBURST PIR:PBURST``, rates in units per
        microsecond as ``simple_switch_CLI`` takes them (the dataplane API and P4Runtime use
        units per second)."""
        words = rest.split()
        if len(words) != 4 or not all(":" in w for w in words[2:]):
            raise StfError("expected meter_set_rates NAME INDEX CIR:CBURST PIR:PBURST "
                           "(rates in units per microsecond)")
        direct = [m.name for m in self.info.direct_meters]
        name = resolve_name(words[0], [m.name for m in self.info.meters] + direct, "meter")
        rates = []
        for word in words[2:]:
            rate_text, _, burst_text = word.partition(":")
            try:
                rate = float(rate_text)
            except ValueError:
                raise StfError(f"rate {rate_text!r} is not a number") from None
            if rate < 0:
                raise StfError(f"rate {rate_text!r} is negative")
            rates.append((round(rate * 1e6), parse_number(burst_text)))
        (cir, cburst), (pir, pburst) = rates
        if name in direct:
            entry = self.handles.get(words[1].lstrip("$"))
            if entry is None:
                raise StfError(f"{name} is a direct meter: {words[1]!r} must name an entry "
                               f"added with '= HANDLE'")
            table = next(m.table for m in self.info.direct_meters if m.name == name)
            if table != entry.table:
                raise StfError(f"direct meter {name} belongs to table {table}, but entry "
                               f"{words[1]} is in {entry.table}")
            self.dp.direct_meter_set(table, entry, cir, cburst, pir, pburst)
            return
        self.dp.meter_set(name, parse_number(words[1]), cir, cburst, pir, pburst)

    # -- action profiles and selectors (HINA extension) ---------------------------------------
    def _profile_ref(self, table: TableInfo, kind: str, args: str):
        """``member(ID)`` or ``group(ID)``: the action of an entry of an indirect table."""
        if kind not in ("member", "group") or not args.strip():
            raise StfError(f"table {table.name} is implemented by {table.implementation}: its "
                           f"entries take member(ID) or group(ID), not {kind}({args})")
        ident = parse_number(args.strip())
        return MemberRef(ident) if kind == "member" else GroupRef(ident)

    def _profile(self, name: str):
        return self.info.action_profile(resolve_name(
            name, [p.name for p in self.info.action_profiles], "action profile"))

    def _profile_args(self, rest: str, count: int, usage: str):
        words = rest.split()
        if len(words) != count + 1:
            raise StfError(f"expected {usage}")
        return self._profile(words[0]), [parse_number(w) for w in words[1:]]

    def _member_command(self, rest: str, usage: str) -> None:
        match = re.fullmatch(r"(?P<profile>\S+)\s+(?P<id>\S+)\s+(?P<call>.*)", rest)
        call = ACTION_CALL.fullmatch(match.group("call")) if match else None
        if call is None:
            raise StfError(f"expected {usage}")
        profile = self._profile(match.group("profile"))
        table = self.info.table(profile.tables[0])
        self.dp.act_prof_member_set(profile.name, parse_number(match.group("id")),
                                    self._action_call(table, call.group("name"),
                                                      call.group("args")))

    def cmd_act_prof_create_member(self, rest: str) -> None:
        usage = "act_prof_create_member PROFILE MEMBER_ID ACTION(ARG:VALUE, ...)"
        words = rest.split(None, 2)
        if len(words) == 3:
            profile = self._profile(words[0])
            if parse_number(words[1]) in self.dp.act_prof_members(profile.name):
                raise StfError(f"member {words[1]} of {profile.name} already exists")
        self._member_command(rest, usage)

    def cmd_act_prof_modify_member(self, rest: str) -> None:
        usage = "act_prof_modify_member PROFILE MEMBER_ID ACTION(ARG:VALUE, ...)"
        words = rest.split(None, 2)
        if len(words) == 3:
            profile = self._profile(words[0])
            if parse_number(words[1]) not in self.dp.act_prof_members(profile.name):
                raise StfError(f"member {words[1]} of {profile.name} does not exist")
        self._member_command(rest, usage)

    def cmd_act_prof_delete_member(self, rest: str) -> None:
        profile, (member,) = self._profile_args(rest, 1, "act_prof_delete_member PROFILE ID")
        self.dp.act_prof_member_delete(profile.name, member)

    def cmd_act_prof_create_group(self, rest: str) -> None:
        profile, (group,) = self._profile_args(rest, 1, "act_prof_create_group PROFILE ID")
        if group in self.dp.act_prof_groups(profile.name):
            raise StfError(f"group {group} of {profile.name} already exists")
        self.dp.act_prof_group_set(profile.name, group, ())

    def cmd_act_prof_delete_group(self, rest: str) -> None:
        profile, (group,) = self._profile_args(rest, 1, "act_prof_delete_group PROFILE ID")
        self.dp.act_prof_group_delete(profile.name, group)

    def _group_members(self, rest: str, usage: str):
        profile, (member, group) = self._profile_args(rest, 2, usage)
        members = self.dp.act_prof_groups(profile.name).get(group)
        if members is None:
            raise StfError(f"group {group} of {profile.name} was not created "
                           f"(act_prof_create_group)")
        return profile, member, group, members

    def cmd_act_prof_add_member_to_group(self, rest: str) -> None:
        profile, member, group, members = self._group_members(
            rest, "act_prof_add_member_to_group PROFILE MEMBER_ID GROUP_ID")
        self.dp.act_prof_group_set(profile.name, group, tuple(members) + (member,))

    def cmd_act_prof_remove_member_from_group(self, rest: str) -> None:
        profile, member, group, members = self._group_members(
            rest, "act_prof_remove_member_from_group PROFILE MEMBER_ID GROUP_ID")
        if member not in members:
            raise StfError(f"member {member} is not in group {group} of {profile.name}")
        self.dp.act_prof_group_set(profile.name, group, tuple(m for m in members if m != member))

    # -- parser value sets (HINA extension) ---------------------------------------------------
    def _value_set_member(self, rest: str, usage: str) -> tuple[str, tuple[int, ...]]:
        words = rest.split()
        if not words:
            raise StfError(f"expected {usage}")
        name = resolve_name(words[0], [v.name for v in self.info.value_sets], "value set")
        fields = self.info.value_set(name).match_fields
        if len(words) - 1 != len(fields):
            raise StfError(f"value set {name} has {len(fields)} fields "
                           f"({', '.join(f.name or f'bit<{f.bitwidth}>' for f in fields)}): "
                           f"expected {usage}")
        values = tuple(parse_number(w) for w in words[1:])
        for value, f in zip(values, fields):
            if value < 0 or value >> f.bitwidth:
                raise StfError(f"value {value} does not fit in {f.bitwidth} bits "
                               f"(field {f.name or 'of'} value set {name})")
        return name, values

    def _set_value_set(self, name: str, members: list) -> None:
        self.dp.value_set_set(name, members)
        self.value_sets[name] = members

    def cmd_pvs_add(self, rest: str) -> None:
        name, member = self._value_set_member(rest, "pvs_add NAME VALUE...")
        members = self.value_sets.get(name, [])
        if member in members:
            raise StfError(f"value set {name} already has {member}")
        self._set_value_set(name, members + [member])

    def cmd_pvs_remove(self, rest: str) -> None:
        name, member = self._value_set_member(rest, "pvs_remove NAME VALUE...")
        members = self.value_sets.get(name, [])
        if member not in members:
            raise StfError(f"value set {name} has no member {member}")
        self._set_value_set(name, [m for m in members if m != member])

    def cmd_pvs_clear(self, rest: str) -> None:
        name = resolve_name(rest.strip(), [v.name for v in self.info.value_sets], "value set")
        self._set_value_set(name, [])

    # -- externs -----------------------------------------------------------------------------
    def _extern(self, name: str, kind: str) -> str:
        pools = {"register": self.info.registers, "counter": self.info.counters}
        return resolve_name(name, [x.name for x in pools[kind]], kind)

    def _compare(self, what: str, actual: int, op: str, expected_text: str) -> None:
        if op not in COMPARISONS:
            raise StfError(f"comparison {op!r} is not one of {' '.join(COMPARISONS)}")
        expected = parse_number(expected_text)
        if not COMPARISONS[op](actual, expected):
            self.fail(f"{what} is {actual}, expected {op} {expected}")

    def _register_value(self, name: str, words: list):
        """The cell value ``words`` give register ``name``: one number, or for a register of
        structs one per field (a tuple, in the struct's order)."""
        fields = next(r.fields for r in self.info.registers if r.name == name)
        values = tuple(parse_number(w) for w in words)
        if not fields:
            if len(values) != 1:
                raise StfError(f"register {name}: expected one VALUE, got {len(values)}")
            return values[0]
        if len(values) != len(fields):
            raise StfError(f"register {name} holds structs ({', '.join(f.name for f in fields)})"
                           f": expected one VALUE per field, got {len(values)}")
        return values

    def cmd_register_write(self, rest: str) -> None:
        words = rest.split()
        if len(words) < 3:
            raise StfError("expected register_write NAME INDEX VALUE...")
        name = self._extern(words[0], "register")
        self.dp.register_write(name, parse_number(words[1]), self._register_value(name, words[2:]))

    def cmd_register_reset(self, rest: str) -> None:
        self.dp.register_reset(self._extern(rest.strip(), "register"))

    def cmd_register_read(self, rest: str) -> None:
        words = rest.split()
        if len(words) < 2 or len(words) == 3:
            raise StfError("expected register_read NAME INDEX [OP VALUE...]")
        name = self._extern(words[0], "register")
        index = parse_number(words[1])
        value = self.dp.register_read(name, index)
        self.log.append(f"    {name}[{index}] = {value}")
        if len(words) < 4:
            return
        what, op = f"register {name}[{index}]", words[2]
        expected = self._register_value(name, words[3:])
        if not isinstance(expected, tuple):
            self._compare(what, value, op, words[3])
        elif op not in ("==", "!="):
            raise StfError(f"{what} holds a struct: compare it with == or != only")
        elif (value == expected) != (op == "=="):
            self.fail(f"{what} is {value}, expected {op} {expected}")

    def cmd_counter_write(self, rest: str) -> None:
        words = rest.split()
        if len(words) != 4:
            raise StfError("expected counter_write NAME INDEX PACKETS BYTES")
        self.dp.counter_write(self._extern(words[0], "counter"), parse_number(words[1]),
                              bytes_=parse_number(words[3]), packets=parse_number(words[2]))

    def cmd_counter_read(self, rest: str) -> None:
        words = rest.split()
        if len(words) != 2:
            raise StfError("expected counter_read NAME INDEX")
        name = self._extern(words[0], "counter")
        bytes_, packets = self.dp.counter_read(name, parse_number(words[1]))
        self.log.append(f"    {name}[{words[1]}] = {packets} packets, {bytes_} bytes")

    def cmd_check_counter(self, rest: str) -> None:
        match = re.fullmatch(r"(?P<name>[\w.$]+)\s*\(\s*(?P<id>[\w$]+)\s*\)"
                             r"(?:\s+(?P<unit>packets|bytes)\s*(?P<op>[=!<>]=?|<|>)\s*"
                             r"(?P<value>\w+))?", rest)
        if match is None:
            raise StfError("expected check_counter NAME(INDEX|HANDLE) [packets|bytes OP VALUE]")
        unit = match.group("unit") or "packets"
        op, value_text = match.group("op") or "==", match.group("value") or "0"
        ident = match.group("id")
        if ident[0].isdigit():
            name = self._extern(match.group("name"), "counter")
            bytes_, packets = self.dp.counter_read(name, parse_number(ident))
            what = f"counter {name}[{ident}] {unit}"
        else:
            entry = self.handles.get(ident.lstrip("$"))
            if entry is None:
                raise StfError(f"no entry was added with handle {ident!r} (add ... = {ident})")
            direct = resolve_name(match.group("name"),
                                  [c.name for c in self.info.direct_counters], "direct counter")
            table = next(c.table for c in self.info.direct_counters if c.name == direct)
            if table != entry.table:
                raise StfError(f"direct counter {direct} belongs to table {table}, but entry "
                               f"{ident} is in {entry.table}")
            bytes_, packets = self.dp.direct_counter_read(entry.table, entry)
            what = f"direct counter of {entry.table} entry {ident} {unit}"
        self._compare(what, packets if unit == "packets" else bytes_, op, value_text)

    # -- helpers -----------------------------------------------------------------------------
    @staticmethod
    def _port(text: str) -> int:
        if not text.isdigit():
            raise StfError(f"port {text!r} is not a non-negative integer")
        return int(text)


ProgramLike = Union[CompiledProgram, str, "os.PathLike[str]"]


def load_program(program: ProgramLike, include_dirs=(), defines=None) -> CompiledProgram:
    """A :class:`CompiledProgram` as is, or compile the ``.p4`` file it names."""
    if isinstance(program, CompiledProgram):
        return program
    from .compiler import compile_file   # the engine; imported late so STF parsing needs none
    return compile_file(os.fspath(program), include_dirs=include_dirs, defines=defines)


def run_stf(stf_path: Union[str, "os.PathLike[str]"], program: ProgramLike, *,
            trace: bool = False, include_dirs=(), defines=None) -> StfResult:
    """Run an STF test against a program on a fresh dataplane.

    Args:
        stf_path: the ``.stf`` file.
        program: a :class:`CompiledProgram`, or the path of a ``.p4`` file to compile.
        trace: log the per-packet trace of the engine (``softswitch.stf`` logger, debug).
        include_dirs, defines: passed to the compiler when ``program`` is a path.

    Returns:
        The :class:`StfResult`; ``passed`` is ``False`` on any failed command or expectation.

    Raises:
        P4CompileError: ``program`` is a path and does not compile.
        OSError: the STF file cannot be read.
    """
    compiled = load_program(program, include_dirs, defines)
    with open(stf_path, encoding="utf-8") as f:
        text = f.read()
    return run_stf_text(text, compiled, filename=os.fspath(stf_path), trace=trace)


def run_stf_text(text: str, program: CompiledProgram, *, filename: str = "<stf>",
                 trace: bool = False) -> StfResult:
    """Like :func:`run_stf`, for STF commands already in a string.

    Example::

        >>> result = run_stf_text("packet 1 00\\nexpect 1 00", program)   # doctest: +SKIP
        >>> print(result.report())                                      # doctest: +SKIP
        FAIL
        <stf>: port 1: expected 1 frames, got 0
          missing (line 2) 00
    """
    runner = StfRunner(program.instantiate(), filename=filename, trace=trace)
    return runner.run_text(text)
