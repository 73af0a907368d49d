"""The contract between the embedded target's engine and its control plane.

The engine (``softswitch.frontend`` + ``softswitch.engine``) compiles a P4_16 v1model program into
a :class:`CompiledProgram`; ``CompiledProgram.instantiate()`` gives a :class:`Dataplane` that
processes frames and holds all run-time state (tables, PRE, externs). The control plane (P4Info
generation, the P4Runtime server, the STF runner, the CLI) only ever uses what this module
declares: :class:`ProgramInfo` to describe the program, :class:`Dataplane` to drive it.

Conventions
-----------
* Names are p4c's fully qualified P4Info names: ``MyIngress.ipv4_lpm``, ``MyIngress.drop``,
  ``NoAction``, ``MyIngress.packets_seen``; match field names as p4c writes them
  (``hdr.ipv4.dstAddr``, or the ``@name`` annotation when present).
* All values are Python ``int`` (unsigned, already reduced to the field's width); the engine
  checks widths and raises :class:`ControlError` with code ``INVALID_ARGUMENT`` for a value
  wider than its field. A cell of a register of structs (TNA ``Register<S, I>``) is a tuple of
  such ints, one per field of ``S`` (:data:`RegisterValue`).
* Every control-plane method raises :class:`ControlError` (never anything else) on bad input.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol, Sequence, Union


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------
class ControlError(Exception):
    """A control-plane request the dataplane refuses.

    ``code`` is the name of a ``google.rpc.Code`` value (``INVALID_ARGUMENT``, ``NOT_FOUND``,
    ``ALREADY_EXISTS``, ``OUT_OF_RANGE``, ``RESOURCE_EXHAUSTED``, ``FAILED_PRECONDITION``,
    ``UNIMPLEMENTED``, ``PERMISSION_DENIED``); the P4Runtime server maps it onto the gRPC status.
    """

    CODES = ("INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "OUT_OF_RANGE",
             "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "UNIMPLEMENTED", "PERMISSION_DENIED",
             "INTERNAL")

    def __init__(self, code: str, message: str):
        if code not in self.CODES:
            raise ValueError(f"ControlError code {code!r} is not one of {self.CODES}")
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class P4CompileError(Exception):
    """A program p4c would reject. ``str()`` is ``file:line:col: error: message``."""

    def __init__(self, message: str, file: str = "<input>", line: int = 0, col: int = 0):
        super().__init__(f"{file}:{line}:{col}: error: {message}")
        self.file, self.line, self.col, self.message = file, line, col, message


class P4UnsupportedError(P4CompileError):
    """A valid construct the embedded target does not implement.

    ``str()`` is ``unsupported: <what> at file:line``.
    """

    def __init__(self, what: str, file: str = "<input>", line: int = 0, col: int = 0):
        Exception.__init__(self, f"unsupported: {what} at {file}:{line}")
        self.file, self.line, self.col, self.message = file, line, col, what


# --------------------------------------------------------------------------------------------
# Program description (what P4Info is generated from)
# --------------------------------------------------------------------------------------------
MATCH_KINDS = ("exact", "ternary", "lpm", "range", "optional")


@dataclass(frozen=True)
class MatchFieldInfo:
    name: str                 # "hdr.ipv4.dstAddr" (key expression text) or its @name
    bitwidth: int
    match_kind: str           # one of MATCH_KINDS
    annotations: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParamInfo:
    name: str
    bitwidth: int
    annotations: tuple[str, ...] = ()


@dataclass(frozen=True)
class ActionInfo:
    name: str                 # fully qualified: "MyIngress.set_nhop"; top-level: "NoAction"
    params: tuple[ParamInfo, ...] = ()
    # As written, e.g. '@noWarn("unused")'; P4Info generation drops @id, @name, @hidden and
    # turns @brief/@description into documentation, as p4c does.
    annotations: tuple[str, ...] = ()


@dataclass(frozen=True)
class ActionRefInfo:
    name: str
    scope: str = "TABLE_AND_DEFAULT"    # or "TABLE_ONLY" (@tableonly), "DEFAULT_ONLY" (@defaultonly)
    annotations: tuple[str, ...] = ()


@dataclass(frozen=True)
class ActionCall:
    """An action with its control-plane arguments, in declaration order."""
    action: str
    args: tuple[int, ...] = ()


@dataclass(frozen=True)
class TableInfo:
    name: str
    match_fields: tuple[MatchFieldInfo, ...]
    action_refs: tuple[ActionRefInfo, ...]
    size: int = 1024                                  # p4c's default when `size` is absent
    const_default_action: Optional[str] = None        # action name when `const default_action`
    initial_default_action: Optional[ActionCall] = None
    is_const: bool = False                            # `const entries`: control plane may not write
    has_initial_entries: bool = False                 # entries given in the program
    direct_counter: Optional[str] = None              # name of its direct_counter, if any
    direct_meter: Optional[str] = None                # name of its direct_meter, if any
    annotations: tuple[str, ...] = ()
    implementation: Optional[str] = None              # its action profile / selector, if any

    @property
    def needs_priority(self) -> bool:
        """P4Runtime: entries need a priority when a ternary, range or optional field exists."""
        return any(f.match_kind in ("ternary", "range", "optional") for f in self.match_fields)


@dataclass(frozen=True)
class RegisterInfo:
    """A register: v1model ``register<T>(size)`` or TNA ``Register<T, I>(size)``.

    ``T`` is ``bit<N>``/``int<N>`` (``fields`` empty: a cell is an ``int``, ``bitwidth`` N) or,
    on TNA, a struct of such fields (``fields`` its fields in declaration order, ``type_name``
    the struct type's P4 name: a cell is a tuple of ints, one per field; ``bitwidth`` is the sum
    of the fields' widths, the cell's size in bits, and ``signed`` is False).
    """
    name: str
    bitwidth: int
    size: int
    signed: bool = False
    annotations: tuple[str, ...] = ()
    fields: tuple[StructFieldInfo, ...] = ()
    type_name: str = ""

    @property
    def is_struct(self) -> bool:
        """Whether a cell is a struct (a tuple of ints) rather than one int."""
        return bool(self.fields)


@dataclass(frozen=True)
class CounterInfo:
    name: str
    unit: str                 # "PACKETS", "BYTES" or "BOTH" (v1model packets_and_bytes)
    size: int
    annotations: tuple[str, ...] = ()


@dataclass(frozen=True)
class DirectCounterInfo:
    name: str
    unit: str
    table: str


@dataclass(frozen=True)
class MeterInfo:
    name: str
    unit: str                 # "PACKETS" or "BYTES"
    size: int


@dataclass(frozen=True)
class DirectMeterInfo:
    name: str
    unit: str
    table: str


@dataclass(frozen=True)
class ActionProfileInfo:
    """A v1model ``action_profile(size)`` or ``action_selector(algorithm, size, width)`` that
    tables name in their ``implementation`` property. Their entries point to a member (an
    action with its arguments) or, with a selector, to a group of members, one of which the
    hash of the table's ``selector`` keys picks."""
    name: str                 # "MyIngress.sel"
    tables: tuple[str, ...]   # the tables it implements, in P4Info order
    with_selector: bool
    size: int                 # most members


@dataclass(frozen=True)
class ValueSetInfo:
    """A parser ``value_set<T>(size)``: one exact match field per member of T (a ``bit<W>``:
    one field with no name; a struct: its fields, named)."""
    name: str                 # "MyParser.vs"
    match_fields: tuple[MatchFieldInfo, ...]
    size: int


@dataclass(frozen=True)
class StructFieldInfo:
    name: str
    bitwidth: int
    signed: bool = False      # int<N> (P4Info: an ``int`` bitstring); values are still unsigned


@dataclass(frozen=True)
class DigestInfo:
    name: str                 # the struct type name, as p4c names v1model digests
    fields: tuple[StructFieldInfo, ...]


@dataclass(frozen=True)
class SerializableEnumInfo:
    """A serializable enum (``enum bit<8> op_t { ADD = 1 }``) that a listed table's key or a
    listed action's parameter has as its type: p4c's P4Info describes it in ``type_info``."""
    name: str
    bitwidth: int
    signed: bool
    members: tuple[tuple[str, int], ...]      # (name, value) in declaration order


@dataclass(frozen=True)
class ControllerHeaderInfo:
    """A header annotated ``@controller_header("packet_in"|"packet_out")``."""
    name: str                 # "packet_in" or "packet_out"
    type_name: str            # the P4 header type name
    metadata: tuple[StructFieldInfo, ...]   # ids are 1..n in this order


@dataclass(frozen=True)
class ProgramInfo:
    """The program's P4Runtime objects: what p4c's P4Info describes, in its order.

    As p4c's front and mid end leave the program (``softswitch.frontend.controlplane``): tables
    never applied, control instances never applied and actions neither listed by a table nor
    called from an ``apply`` block are not here; an action only called directly has no
    ``params`` (its arguments are bound at the call). Objects annotated ``@hidden`` are here (they
    are P4Runtime symbols) but P4Info does not list them.
    """
    arch: str = "v1model"
    tables: tuple[TableInfo, ...] = ()
    actions: tuple[ActionInfo, ...] = ()
    registers: tuple[RegisterInfo, ...] = ()
    counters: tuple[CounterInfo, ...] = ()
    direct_counters: tuple[DirectCounterInfo, ...] = ()
    meters: tuple[MeterInfo, ...] = ()
    direct_meters: tuple[DirectMeterInfo, ...] = ()
    digests: tuple[DigestInfo, ...] = ()
    controller_headers: tuple[ControllerHeaderInfo, ...] = ()
    # A control calls an extern function (mark_to_drop, hash, clone, ...): p4c's P4Info then
    # has a type_info (its type converter ran), even an empty one.
    calls_extern_functions: bool = False
    serializable_enums: tuple[SerializableEnumInfo, ...] = ()
    value_sets: tuple[ValueSetInfo, ...] = ()
    action_profiles: tuple[ActionProfileInfo, ...] = ()

    def action_profile(self, name: str) -> ActionProfileInfo:
        for p in self.action_profiles:
            if p.name == name:
                return p
        raise ControlError("NOT_FOUND", f"action profile {name!r} is not in the program")

    def value_set(self, name: str) -> ValueSetInfo:
        for v in self.value_sets:
            if v.name == name:
                return v
        raise ControlError("NOT_FOUND", f"value set {name!r} is not in the program")

    def table(self, name: str) -> TableInfo:
        for t in self.tables:
            if t.name == name:
                return t
        raise ControlError("NOT_FOUND", f"table {name!r} is not in the program")

    def action(self, name: str) -> ActionInfo:
        for a in self.actions:
            if a.name == name:
                return a
        raise ControlError("NOT_FOUND", f"action {name!r} is not in the program")

    def digest(self, name: str) -> DigestInfo:
        for d in self.digests:
            if d.name == name:
                return d
        raise ControlError("NOT_FOUND", f"digest {name!r} is not in the program")


# --------------------------------------------------------------------------------------------
# Table entries
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Exact:
    value: int


@dataclass(frozen=True)
class Ternary:
    value: int
    mask: int


@dataclass(frozen=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(frozen=True)
class Range:
    low: int
    high: int


@dataclass(frozen=True)
class Optional_:
    value: int


FieldMatch = Union[Exact, Ternary, Lpm, Range, Optional_]


@dataclass(frozen=True)
class MemberRef:
    """The action of an entry of a table with an action profile: the profile's member."""
    member_id: int
    args = ()


@dataclass(frozen=True)
class GroupRef:
    """The action of an entry of a table with an action selector: a group of members."""
    group_id: int
    args = ()


@dataclass(frozen=True)
class TableEntry:
    """One entry. ``matches`` is aligned with ``TableInfo.match_fields``; ``None`` is a
    wildcard (allowed for ternary, range, optional and lpm fields: lpm ``None`` == /0).

    Identity (for MODIFY/DELETE and ALREADY_EXISTS) is (table, matches, priority), as in
    P4Runtime. Larger ``priority`` wins (P4Runtime convention); const entries in the program
    get priorities so that earlier entries win, as p4c/BMv2 do.
    """
    table: str
    matches: tuple[Optional[FieldMatch], ...]
    action: Union[ActionCall, MemberRef, GroupRef]    # a ref for tables with an action profile
    priority: int = 0
    is_const: bool = False                 # came from `const entries` in the program
    counter_data: Optional[tuple[int, int]] = None   # (bytes, packets) of its direct counter


# --------------------------------------------------------------------------------------------
# Packet replication engine
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Replica:
    port: int
    rid: int                  # egress_rid seen by egress (P4Runtime "instance")


@dataclass(frozen=True)
class CloneSession:
    session_id: int
    replicas: tuple[Replica, ...]
    class_of_service: int = 0
    packet_length_bytes: int = 0     # 0: no truncation


# --------------------------------------------------------------------------------------------
# Register cells
# --------------------------------------------------------------------------------------------
#: A register cell: an int, or for a register of structs a tuple of ints (one per field).
RegisterValue = Union[int, tuple[int, ...]]


# --------------------------------------------------------------------------------------------
# Results of processing a frame
# --------------------------------------------------------------------------------------------
@dataclass
class Digest:
    name: str                 # DigestInfo.name
    values: tuple[int, ...]   # one per field


@dataclass
class ProcessResult:
    """What one input frame produced, in the order BMv2 would emit it."""
    outputs: list[tuple[int, bytes]] = field(default_factory=list)   # (egress port, frame)
    digests: list[Digest] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)   # filled only when tracing is on


class Dataplane(Protocol):
    """A running instance of a compiled program. Not thread-safe: callers serialise."""

    info: ProgramInfo
    cpu_port: Optional[int]    # frames sent to it are PacketIn; set by the host before traffic
    drop_port: int             # 511 on v1model (egress_spec value that means drop)

    # -- packets ---------------------------------------------------------------------------
    def process(self, ingress_port: int, frame: bytes, trace: bool = False) -> ProcessResult:
        """Run one frame through parser..deparser, the PRE, recirculation and resubmission.

        Frames for ``cpu_port`` appear in ``outputs`` with that port; the host turns them into
        PacketIn (the engine already stripped nothing: the ``packet_in`` header is part of the
        frame as the deparser emitted it). Never raises on any frame content.
        """

    # -- tables ----------------------------------------------------------------------------
    def table_insert(self, entry: TableEntry) -> None: ...
    def table_modify(self, entry: TableEntry) -> None: ...
    def table_delete(self, entry: TableEntry) -> None: ...
    def table_entries(self, table: str) -> list[TableEntry]: ...
    def table_clear(self, table: str) -> None:
        """Remove every non-const entry."""
    def table_set_default(self, table: str, action: ActionCall) -> None: ...
    def table_get_default(self, table: str) -> ActionCall: ...
    def table_reset_default(self, table: str) -> None:
        """Back to the program's initial default action."""
    def direct_counter_read(self, table: str, entry: TableEntry) -> tuple[int, int]: ...
    def direct_counter_write(self, table: str, entry: TableEntry,
                             bytes_: int, packets: int) -> None: ...

    # -- packet replication engine ---------------------------------------------------------
    def mcast_group_set(self, group_id: int, replicas: Sequence[Replica]) -> None:
        """Create or replace a multicast group (the server enforces INSERT/MODIFY rules)."""
    def mcast_group_delete(self, group_id: int) -> None: ...
    def mcast_groups(self) -> dict[int, tuple[Replica, ...]]: ...
    def clone_session_set(self, session: CloneSession) -> None: ...
    def clone_session_delete(self, session_id: int) -> None: ...
    def clone_sessions(self) -> dict[int, CloneSession]: ...

    # -- externs ---------------------------------------------------------------------------
    def register_read(self, name: str, index: int) -> RegisterValue:
        """Cell ``index``: an int, or for a struct register (``RegisterInfo.fields``) a tuple
        of ints, one per field in the struct's order, each reduced to its field's width."""
    def register_write(self, name: str, index: int, value: RegisterValue) -> None:
        """Set cell ``index`` to ``value`` (as :meth:`register_read` gives it); a value of the
        wrong shape, or one that does not fit its cell or field, is INVALID_ARGUMENT."""
    def register_reset(self, name: str) -> None:
        """Every cell back to the register's initial value."""
    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """(bytes, packets)."""
    def counter_write(self, name: str, index: int, bytes_: int, packets: int) -> None: ...
    def meter_set(self, name: str, index: int, cir: int, cburst: int,
                  pir: int, pburst: int) -> None: ...
    def meter_get(self, name: str, index: int) -> Optional[tuple[int, int, int, int]]: ...
    def direct_meter_set(self, table: str, entry: TableEntry, cir: int, cburst: int,
                         pir: int, pburst: int) -> None:
        """Configure the direct meter cell of ``entry`` (rates in units per second)."""
    def direct_meter_get(self, table: str,
                         entry: TableEntry) -> Optional[tuple[int, int, int, int]]: ...

    # -- action profiles and selectors --------------------------------------------------------
    def act_prof_member_set(self, profile: str, member_id: int, action: ActionCall) -> None:
        """Create or change member ``member_id`` (an action of every table of the profile)."""
    def act_prof_member_delete(self, profile: str, member_id: int) -> None:
        """FAILED_PRECONDITION while an entry or a group refers to it."""
    def act_prof_members(self, profile: str) -> dict[int, ActionCall]: ...
    def act_prof_group_set(self, profile: str, group_id: int, members: Sequence[int]) -> None:
        """Create or change group ``group_id`` of a selector (its members' ids)."""
    def act_prof_group_delete(self, profile: str, group_id: int) -> None: ...
    def act_prof_groups(self, profile: str) -> dict[int, tuple[int, ...]]: ...

    # -- parser value sets -------------------------------------------------------------------
    def value_set_set(self, name: str, members: Sequence[tuple[int, ...]]) -> None:
        """Replace the members of value set ``name`` (each a tuple, one value per match field;
        at most the set's size: RESOURCE_EXHAUSTED otherwise)."""
    def value_set_get(self, name: str) -> list[tuple[int, ...]]:
        """The members of value set ``name``, in the order they were set."""


@dataclass(frozen=True)
class CompiledProgram:
    """The output of the front end and compiler: immutable, instantiable many times."""
    info: ProgramInfo
    source: str               # preprocessed source (with cpp line markers): the device config
    name: str                 # main file name, for messages
    factory: Callable[[], Dataplane] = dataclasses.field(repr=False, compare=False)

    def instantiate(self) -> Dataplane:
        return self.factory()
