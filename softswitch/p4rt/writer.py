"""``Write``: applies the updates of one request to the dataplane, undoing them all on
failure when the request asks for atomicity."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Optional

import grpc
from p4.v1 import p4runtime_pb2

from .. import api
from .codec import Codec
from .digests import check_config
from .errors import P4RuntimeError, invalid, not_found, unimplemented
from .pipeline import Pipeline, Table, decode_bytes, enum_name

log = logging.getLogger("softswitch.p4runtime")
Update = p4runtime_pb2.Update
#: Multicast group ids a client may use: 1 .. 32767. BMv2's P4Runtime server (PI) keeps the
#: ids from 32768 up for the groups behind clone sessions and answers OUT_OF_RANGE; the same
#: limit here keeps a controller from relying on ids BMv2 refuses.
FIRST_RESERVED_GROUP_ID = 1 << 15
#: Clone session ids: 1 .. 32767 (PI: INVALID_ARGUMENT "Clone session id out-of-range").
CLONE_SESSION_ID_END = 1 << 15

if TYPE_CHECKING:
    from ..p4runtime_server import P4RuntimeServicer


class Writer(Codec):
    """Applies one Update to the dataplane; raises P4RuntimeError/ControlError on refusal.

    Every change that succeeds records its inverse, so :meth:`rollback` can undo a batch
    (ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC). A meter that had no config before cannot be returned
    to that state (the dataplane API has no meter reset) and keeps its new config.
    """

    def __init__(self, server: "P4RuntimeServicer", pipeline: Pipeline, dp: api.Dataplane,
                 undoable: bool = False):
        super().__init__(server, pipeline, dp)
        self.undoable = undoable         # record inverses (costs a read per change)
        self._undo: list[Callable[[], None]] = []

    def _remember(self, undo: Callable[[], None]) -> None:
        if self.undoable:
            self._undo.append(undo)

    def rollback(self) -> None:
        """Undo every change this writer made, newest first."""
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception:   # the dataplane refused its own previous state: a bug
                log.exception("rolling back a Write update failed; dataplane state may be "
                              "partly updated")

    def _existing(self, table: Table, entry: api.TableEntry) -> Optional[api.TableEntry]:
        for old in self.dp.table_entries(table.info.name):
            if (old.matches, old.priority) == (entry.matches, entry.priority):
                return old
        return None

    def apply(self, update) -> None:
        if update.type not in (Update.INSERT, Update.MODIFY, Update.DELETE):
            raise invalid(f"update type {enum_name(Update.Type, update.type)} is not "
                           "valid: use INSERT, MODIFY or DELETE")
        entity = update.entity
        kind = entity.WhichOneof("entity")
        handler = getattr(self, f"_write_{kind}", None)
        if handler is None:
            raise unimplemented(f"writing {kind or 'an empty entity'} is not supported")
        handler(update.type, getattr(entity, kind))

    @staticmethod
    def _modify_only(kind: int, what: str) -> None:
        if kind != Update.MODIFY:
            raise invalid(f"{what} can only be modified (got {enum_name(Update.Type, kind)})")

    def _write_table_entry(self, kind: int, msg) -> None:
        table = self.pipeline.table(msg.table_id)
        name = table.info.name
        if msg.HasField("meter_config") or msg.HasField("meter_counter_data"):
            raise unimplemented(f"table {name!r}: direct meter config in table entries is "
                                 "not supported")
        if msg.is_default_action:
            self._write_default_entry(kind, table, msg)
            return
        if table.info.is_const:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"table {name!r} has const entries: it cannot be written")
        entry = self.table_entry(table, msg, need_action=kind != Update.DELETE)
        counts = None
        if msg.HasField("counter_data") and table.info.direct_counter and kind != Update.DELETE:
            counts = self.counter_data(msg.counter_data, f"direct counter of table {name!r}")
        old = None
        if self.undoable and kind != Update.INSERT:
            old = self._existing(table, entry)
        old_counts = None
        if old is not None and table.info.direct_counter:
            old_counts = self.dp.direct_counter_read(name, old)
        if kind == Update.INSERT:
            self.dp.table_insert(entry)
            self._remember(lambda: self.dp.table_delete(entry))
        elif kind == Update.MODIFY:
            self.dp.table_modify(entry)
            self._remember(lambda: self._restore_entry(table, old, old_counts, modify=True))
        else:
            self.dp.table_delete(entry)
            self._remember(lambda: self._restore_entry(table, old, old_counts, modify=False))
            return
        if counts is not None:
            self.dp.direct_counter_write(name, entry, *counts)

    def _restore_entry(self, table: Table, old: api.TableEntry,
                       counts: Optional[tuple[int, int]], modify: bool) -> None:
        (self.dp.table_modify if modify else self.dp.table_insert)(old)
        if counts is not None:
            self.dp.direct_counter_write(table.info.name, old, *counts)

    def _write_default_entry(self, kind: int, table: Table, msg) -> None:
        name = table.info.name
        self._modify_only(kind, f"the default entry of table {name!r}")
        if msg.match or msg.priority:
            raise invalid(f"the default entry of table {name!r} takes no match or priority")
        if table.info.const_default_action:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"table {name!r} has a const default action "
                                 f"({table.info.const_default_action})")
        old = self.dp.table_get_default(name)
        if msg.HasField("action"):
            self.dp.table_set_default(name, self.action_call(table, msg.action, default=True))
        else:
            self.dp.table_reset_default(name)
        self._remember(lambda: self.dp.table_set_default(name, old))

    def _write_packet_replication_engine_entry(self, kind: int, msg) -> None:
        which = msg.WhichOneof("type")
        if which == "multicast_group_entry":
            group = msg.multicast_group_entry
            group_id = group.multicast_group_id
            what = f"multicast group {group_id}"
            if group_id == 0:
                raise invalid("multicast group id 0 is not valid")
            if group_id >= FIRST_RESERVED_GROUP_ID:
                raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE,
                                     f"{what}: ids from {FIRST_RESERVED_GROUP_ID} up are kept "
                                     "for clone sessions (as on BMv2)")
            old = self.dp.mcast_groups().get(group_id)
            _check_existence(kind, old is not None, what)
            if kind == Update.DELETE:
                self.dp.mcast_group_delete(group_id)
            else:
                self.dp.mcast_group_set(group_id, self.replicas(group.replicas, what))
            self._remember(lambda: self.dp.mcast_group_delete(group_id) if old is None
                              else self.dp.mcast_group_set(group_id, old))
        elif which == "clone_session_entry":
            session = msg.clone_session_entry
            what = f"clone session {session.session_id}"
            if not 0 < session.session_id < CLONE_SESSION_ID_END:
                raise invalid(f"clone session id {session.session_id} is not in "
                              f"1..{CLONE_SESSION_ID_END - 1}")
            session_id = session.session_id
            if kind != Update.DELETE and (session.class_of_service
                                          or session.packet_length_bytes):
                # the dataplane neither queues clones by class nor truncates them (it would
                # keep them whole, silently); BMv2's server refuses both alike
                raise unimplemented(f"{what}: a class of service or a truncation length "
                                    "(packet_length_bytes) is not supported")
            old = self.dp.clone_sessions().get(session_id)
            _check_existence(kind, old is not None, what)
            if kind == Update.DELETE:
                self.dp.clone_session_delete(session_id)
            else:
                self.dp.clone_session_set(api.CloneSession(
                    session_id, self.replicas(session.replicas, what),
                    session.class_of_service, session.packet_length_bytes))
            self._remember(lambda: self.dp.clone_session_delete(session_id) if old is None
                              else self.dp.clone_session_set(old))
        else:
            raise invalid("PacketReplicationEngineEntry has neither a multicast group "
                           "nor a clone session")

    def _write_counter_entry(self, kind: int, msg) -> None:
        counter = self.pipeline.resource("counter", msg.counter_id)
        what = f"counter {counter.name!r}"
        self._modify_only(kind, what)
        counts = self.counter_data(msg.data, what)
        for index in self._indices(msg, counter.info.size, what):
            old = self.dp.counter_read(counter.name, index) if self.undoable else None
            self.dp.counter_write(counter.name, index, *counts)
            self._remember(lambda i=index, old=old: self.dp.counter_write(counter.name, i,
                                                                             *old))

    def _write_direct_counter_entry(self, kind: int, msg) -> None:
        table = self.pipeline.table(msg.table_entry.table_id)
        self._modify_only(kind, f"direct counter of table {table.info.name!r}")
        if not table.info.direct_counter:
            raise invalid(f"table {table.info.name!r} has no direct counter")
        entry = self.table_entry(table, msg.table_entry, need_action=False)
        counts = self.counter_data(msg.data, f"direct counter of table {table.info.name!r}")
        old = self.dp.direct_counter_read(table.info.name, entry) if self.undoable else None
        self.dp.direct_counter_write(table.info.name, entry, *counts)
        self._remember(lambda: self.dp.direct_counter_write(table.info.name, entry, *old))

    def _write_register_entry(self, kind: int, msg) -> None:
        register = self.pipeline.resource("register", msg.register_id)
        what = f"register {register.name!r}"
        self._modify_only(kind, what)
        value = _register_value(msg.data, register.info, what)
        for index in self._indices(msg, register.info.size, what):
            old = self.dp.register_read(register.name, index) if self.undoable else None
            self.dp.register_write(register.name, index, value)
            self._remember(lambda i=index, old=old: self.dp.register_write(register.name, i,
                                                                              old))

    def _write_meter_entry(self, kind: int, msg) -> None:
        meter = self.pipeline.resource("meter", msg.meter_id)
        what = f"meter {meter.name!r}"
        self._modify_only(kind, what)
        if not msg.HasField("config"):
            raise unimplemented(f"{what}: resetting a meter to its default is not supported")
        c = msg.config
        for index in self._indices(msg, meter.info.size, what):
            old = self.dp.meter_get(meter.name, index) if self.undoable else None
            self.dp.meter_set(meter.name, index, c.cir, c.cburst, c.pir, c.pburst)
            if old is not None:
                self._remember(lambda i=index, old=old: self.dp.meter_set(meter.name, i,
                                                                             *old))

    def _write_direct_meter_entry(self, kind: int, msg) -> None:
        table = self.pipeline.table(msg.table_entry.table_id)
        what = f"direct meter of table {table.info.name!r}"
        self._modify_only(kind, what)
        if not table.info.direct_meter:
            raise invalid(f"table {table.info.name!r} has no direct meter")
        if not msg.HasField("config"):
            raise unimplemented(f"{what}: resetting a meter to its default is not supported")
        entry = self.table_entry(table, msg.table_entry, need_action=False)
        c = msg.config
        old = self.dp.direct_meter_get(table.info.name, entry) if self.undoable else None
        self.dp.direct_meter_set(table.info.name, entry, c.cir, c.cburst, c.pir, c.pburst)
        if old is not None:
            self._remember(lambda: self.dp.direct_meter_set(table.info.name, entry, *old))

    def _write_action_profile_member(self, kind: int, msg) -> None:
        profile = self.pipeline.resource("action profile", msg.action_profile_id)
        what = f"member {msg.member_id} of action profile {profile.name!r}"
        old = self.dp.act_prof_members(profile.name).get(msg.member_id)
        _check_existence(kind, old is not None, what)
        if kind == Update.DELETE:
            self.dp.act_prof_member_delete(profile.name, msg.member_id)
            self._remember(lambda: self.dp.act_prof_member_set(profile.name, msg.member_id,
                                                               old))
            return
        if not msg.HasField("action"):
            raise invalid(f"{what} has no action")
        call = self.profile_action(profile, msg.action)
        self.dp.act_prof_member_set(profile.name, msg.member_id, call)
        self._remember(lambda: self.dp.act_prof_member_delete(profile.name, msg.member_id)
                       if old is None else
                       self.dp.act_prof_member_set(profile.name, msg.member_id, old))

    def _write_action_profile_group(self, kind: int, msg) -> None:
        profile = self.pipeline.resource("action profile", msg.action_profile_id)
        what = f"group {msg.group_id} of action profile {profile.name!r}"
        if not profile.info.with_selector:
            raise invalid(f"action profile {profile.name!r} has no selector: it has no groups")
        old = self.dp.act_prof_groups(profile.name).get(msg.group_id)
        _check_existence(kind, old is not None, what)
        if kind == Update.DELETE:
            self.dp.act_prof_group_delete(profile.name, msg.group_id)
            self._remember(lambda: self.dp.act_prof_group_set(profile.name, msg.group_id, old))
            return
        for m in msg.members:
            if m.weight > 1:
                raise unimplemented(f"{what}: member {m.member_id} has weight {m.weight}; "
                                    "weights are not supported (BMv2 has none)")
        if msg.max_size and len(msg.members) > msg.max_size:
            raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 f"{what}: {len(msg.members)} members, max_size {msg.max_size}")
        self.dp.act_prof_group_set(profile.name, msg.group_id,
                                   tuple(m.member_id for m in msg.members))
        self._remember(lambda: self.dp.act_prof_group_delete(profile.name, msg.group_id)
                       if old is None else
                       self.dp.act_prof_group_set(profile.name, msg.group_id, old))

    def _write_value_set_entry(self, kind: int, msg) -> None:
        """P4Runtime: a value set is written whole, by MODIFY; its members replace the old."""
        value_set = self.pipeline.resource("value set", msg.value_set_id)
        self._modify_only(kind, f"value set {value_set.name!r}")
        members = self.value_set_members(value_set, msg.members)
        old = self.dp.value_set_get(value_set.name)
        self.dp.value_set_set(value_set.name, members)
        self._remember(lambda: self.dp.value_set_set(value_set.name, old))

    def _write_digest_entry(self, kind: int, msg) -> None:
        digest = self.pipeline.resource("digest", msg.digest_id)
        streams = self.server.digests
        old = streams.config(digest.id)
        _check_existence(kind, old is not None, f"digest config of {digest.name!r}")
        if kind == Update.DELETE:
            streams.configure(digest.id, None)
        else:
            check_config(msg.config, f"digest {digest.name!r}")
            streams.configure(digest.id, msg.config)
        self._remember(lambda: streams.configure(digest.id, old))


def _register_value(data, info: api.RegisterInfo, what: str) -> api.RegisterValue:
    """The cell value a RegisterEntry's ``data`` gives register ``info``: a bitstring for a
    ``bit<N>`` register; for a register of structs, a ``struct`` of one bitstring per field, in
    order (a tuple of ints). The wrong kind of data, or of members, is INVALID_ARGUMENT."""
    which = data.WhichOneof("data")
    if not info.is_struct:
        if which != "bitstring":
            raise invalid(f"{what}: data must be a bitstring, not {which or 'empty'}")
        return decode_bytes(data.bitstring, info.bitwidth, what)
    shape = ", ".join(f"{f.name}: {'int' if f.signed else 'bit'}<{f.bitwidth}>"
                      for f in info.fields)
    if which != "struct":
        raise invalid(f"{what} holds structs {info.type_name} {{{shape}}}: data must be a "
                      f"struct of {len(info.fields)} bitstrings, not {which or 'empty'}")
    members = data.struct.members
    if len(members) != len(info.fields):
        raise invalid(f"{what} holds structs {info.type_name} {{{shape}}}: data has "
                      f"{len(members)} members, {len(info.fields)} expected")
    values = []
    for member, field in zip(members, info.fields):
        member_what = f"{what}, member {field.name!r}"
        if member.WhichOneof("data") != "bitstring":
            raise invalid(f"{member_what}: must be a bitstring")
        values.append(decode_bytes(member.bitstring, field.bitwidth, member_what))
    return tuple(values)


def _check_existence(kind: int, exists: bool, what: str) -> None:
    if kind == Update.INSERT and exists:
        raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, f"{what} already exists")
    if kind != Update.INSERT and not exists:
        raise not_found(f"{what} does not exist")
