"""``Read``: one snapshot of the requested entities, copied under the switch lock and
encoded in batches after it is released; bounded in size and in the work it may cause."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional, Sequence

import grpc
from p4.v1 import p4runtime_pb2

from .. import api
from ..api import ActionCall
from .codec import Codec
from .errors import P4RuntimeError, invalid, unimplemented
from .pipeline import Pipeline, Resource, Table, encode_bytes

if TYPE_CHECKING:
    from ..p4runtime_server import P4RuntimeServicer


READ_BATCH_SIZE = 100            # entities per ReadResponse
# Entities one Read request may return. A wildcard RegisterEntry of p4/hina.p4 (every cell of
# every register) is 269,312 entities at 64 words: about a minute of pure-Python protobuf
# encoding and decoding, which no client deadline waits for. Every single register of hina.p4
# (at most 65,536 cells, a sketch row) still reads in one request.
MAX_READ_ENTITIES = 1 << 16
# Requested entities, tables, table entries and cells one Read request may look at, as a
# multiple of its answer's limit: a read by match scans its table, a wildcard every table, and
# a request of many such entities would otherwise hold the switch lock as long as its size
# allows.
READ_SCAN_FACTOR = 16


class Reader(Codec):
    """Answers one Read request in two steps, so that its cost is bounded and the dataplane
    waits only for a copy.

    :meth:`snapshot` runs under the switch lock: it expands each (possibly wildcard) entity,
    checks it, and copies the values the answer needs as plain Python values (no protobuf:
    building messages in Python costs tens of microseconds each). The work is bounded: once
    the answer would hold more than ``limit`` entities, or the request would look at more than
    ``limit * READ_SCAN_FACTOR`` entities, tables, table entries and cells, it is refused with
    RESOURCE_EXHAUSTED before anything more is copied. :meth:`responses` then encodes the copy
    into ReadResponses of :data:`READ_BATCH_SIZE` entities, one batch at a time, outside the
    lock (the caller stops iterating when the client is gone). The answer is still one
    consistent snapshot.
    """

    def __init__(self, server: P4RuntimeServicer, pipeline: Pipeline, dp: api.Dataplane,
                 limit: int):
        super().__init__(server, pipeline, dp)
        self.limit = limit
        self._items: list[tuple] = []      # (fill, *args): fill(Entity message, *args)
        self._scanned = 0                  # entities, table entries and cells looked at

    def __len__(self) -> int:
        return len(self._items)

    def snapshot(self, entity) -> None:
        """Check one requested entity and copy what answers it."""
        self._scan(1, "the requested entities")
        kind = entity.WhichOneof("entity")
        handler = getattr(self, f"_read_{kind}", None)
        if handler is None:
            raise unimplemented(f"reading {kind or 'an empty entity'} is not supported")
        handler(getattr(entity, kind))

    def responses(self) -> Iterable[p4runtime_pb2.ReadResponse]:
        """The ReadResponses of the snapshot (one, empty, when nothing matched)."""
        items = self._items
        for start in range(0, max(len(items), 1), READ_BATCH_SIZE):
            response = p4runtime_pb2.ReadResponse()
            add = response.entities.add
            for fill, *args in items[start:start + READ_BATCH_SIZE]:
                fill(add(), *args)
            yield response

    def _reserve(self, count: int, what: str) -> None:
        """Make room for ``count`` more entities of the answer, or refuse the request."""
        total = len(self._items) + count
        if total > self.limit:
            raise P4RuntimeError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Read: the answer would hold at least {total} entities ({what}: {count}); "
                f"this target answers at most {self.limit} per Read request: ask for fewer "
                "in each request (one register, counter or table per entity, or an index)")

    def _scan(self, count: int, what: str) -> None:
        """Count ``count`` more things looked at (requested entities, tables, resources, table
        entries, cells), or refuse the request."""
        self._scanned += count
        budget = self.limit * READ_SCAN_FACTOR
        if self._scanned > budget:
            raise P4RuntimeError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Read: the request looks at more than {budget} entities, tables, table entries "
                f"and cells (at {what}); this target looks at most {budget} per Read request: "
                "split it into smaller requests")

    # -- table entries ---------------------------------------------------------------------
    def _tables(self, table_id: int) -> list[Table]:
        if table_id == 0:
            self._scan(len(self.pipeline.tables), "the tables")
            return list(self.pipeline.tables.values())
        return [self.pipeline.table(table_id)]

    def _read_table_entry(self, msg) -> None:
        for table in self._tables(msg.table_id):
            name = table.info.name
            if msg.is_default_action:
                self._reserve(1, f"default entry of table {name!r}")
                self._items.append((self._fill_default, table, self.dp.table_get_default(name)))
                continue
            wanted = None
            if msg.match:
                wanted = (self.matches(table, msg.match), msg.priority)
            entries = self.dp.table_entries(name)
            self._scan(len(entries), f"entries of table {name!r}")
            entries = [entry for entry in entries
                       if (wanted is None or (entry.matches, entry.priority) == wanted)
                       and (not msg.priority or entry.priority == msg.priority)]
            self._reserve(len(entries), f"entries of table {name!r}")
            with_counter = msg.HasField("counter_data") and table.info.direct_counter
            for entry in entries:
                counter = self.dp.direct_counter_read(name, entry) if with_counter else None
                self._items.append((self._fill_table_entry, table, entry, counter))

    def _fill_default(self, entity, table: Table, call: ActionCall) -> None:
        entity.table_entry.table_id = table.id
        entity.table_entry.is_default_action = True
        entity.table_entry.action.CopyFrom(self.encode_action(call))

    def _fill_table_entry(self, entity, table: Table, entry: api.TableEntry,
                          counter: Optional[tuple[int, int]]) -> None:
        self.fill_entry(entity.table_entry, table, entry, counter)

    # -- packet replication engine -----------------------------------------------------------
    def _read_packet_replication_engine_entry(self, msg) -> None:
        which = msg.WhichOneof("type")
        if which == "multicast_group_entry":
            wanted = msg.multicast_group_entry.multicast_group_id
            every = self.dp.mcast_groups()
            self._scan(len(every), "multicast groups")
            groups = [(group_id, replicas) for group_id, replicas in sorted(every.items())
                      if wanted in (0, group_id)]
            self._reserve(len(groups), "multicast groups")
            self._items.extend((self._fill_group, group_id, replicas)
                               for group_id, replicas in groups)
        elif which == "clone_session_entry":
            wanted = msg.clone_session_entry.session_id
            every = self.dp.clone_sessions()
            self._scan(len(every), "clone sessions")
            sessions = [session for session_id, session in sorted(every.items())
                        if wanted in (0, session_id)]
            self._reserve(len(sessions), "clone sessions")
            self._items.extend((self._fill_clone_session, session) for session in sessions)
        else:
            raise invalid("PacketReplicationEngineEntry has neither a multicast group "
                           "nor a clone session")

    def _fill_group(self, entity, group_id: int, replicas) -> None:
        group = entity.packet_replication_engine_entry.multicast_group_entry
        group.multicast_group_id = group_id
        self.encode_replicas(group.replicas, replicas)

    def _fill_clone_session(self, entity, session: api.CloneSession) -> None:
        clone = entity.packet_replication_engine_entry.clone_session_entry
        clone.session_id = session.session_id
        self.encode_replicas(clone.replicas, session.replicas)
        clone.class_of_service = session.class_of_service
        clone.packet_length_bytes = session.packet_length_bytes

    # -- indexed externs ---------------------------------------------------------------------
    def _resources(self, kind: str, resource_id: int) -> list[Resource]:
        if resource_id == 0:
            every = getattr(self.pipeline, kind.replace(" ", "_") + "s")
            self._scan(len(every), f"the {kind}s")
            return list(every.values())
        return [self.pipeline.resource(kind, resource_id)]

    def _cells(self, msg, resource: Resource, kind: str) -> Sequence[int]:
        """The indices a (wildcard) entity names in ``resource``, with room reserved for them."""
        what = f"{kind} {resource.name!r}"
        indices = self._indices(msg, resource.info.size, what)
        self._scan(len(indices), f"cells of {what}")
        self._reserve(len(indices), f"cells of {what}")
        return indices

    def _read_counter_entry(self, msg) -> None:
        for counter in self._resources("counter", msg.counter_id):
            read = self.dp.counter_read
            self._items.extend((_fill_counter, counter.id, index, *read(counter.name, index))
                               for index in self._cells(msg, counter, "counter"))

    def _read_direct_entries(self, msg, what: str, has, read, fill) -> None:
        """Direct counter or meter cells (``what``) of the entries ``msg.table_entry`` selects:
        every entry of its table (or of every table with one), or the one its match names."""
        request = msg.table_entry
        for table in self._tables(request.table_id):
            name = table.info.name
            if not has(table.info):
                if request.table_id:
                    raise invalid(f"table {name!r} has no {what}")
                continue
            wanted = self.matches(table, request.match) if request.match else None
            entries = self.dp.table_entries(name)
            self._scan(len(entries), f"entries of table {name!r}")
            entries = [entry for entry in entries
                       if wanted is None or (entry.matches == wanted
                                             and entry.priority == request.priority)]
            self._reserve(len(entries), f"{what} cells of table {name!r}")
            self._items.extend((fill, table, entry, read(name, entry)) for entry in entries)

    def _read_direct_counter_entry(self, msg) -> None:
        self._read_direct_entries(msg, "direct counter", lambda info: info.direct_counter,
                                  self.dp.direct_counter_read, self._fill_direct_counter)

    def _fill_direct_counter(self, entity, table: Table, entry: api.TableEntry,
                             counter: tuple[int, int]) -> None:
        self.fill_entry(entity.direct_counter_entry.table_entry, table, entry)
        data = entity.direct_counter_entry.data
        data.byte_count, data.packet_count = counter

    def _read_direct_meter_entry(self, msg) -> None:
        self._read_direct_entries(msg, "direct meter", lambda info: info.direct_meter,
                                  self.dp.direct_meter_get, self._fill_direct_meter)

    def _fill_direct_meter(self, entity, table: Table, entry: api.TableEntry, config) -> None:
        self.fill_entry(entity.direct_meter_entry.table_entry, table, entry)
        if config is not None:
            c = entity.direct_meter_entry.config
            c.cir, c.cburst, c.pir, c.pburst = config

    def _read_register_entry(self, msg) -> None:
        for register in self._resources("register", msg.register_id):
            read = self.dp.register_read
            self._items.extend((_fill_register, register.id, index, read(register.name, index))
                               for index in self._cells(msg, register, "register"))

    def _read_meter_entry(self, msg) -> None:
        for meter in self._resources("meter", msg.meter_id):
            get = self.dp.meter_get
            self._items.extend((_fill_meter, meter.id, index, get(meter.name, index))
                               for index in self._cells(msg, meter, "meter"))

    def _read_action_profile_member(self, msg) -> None:
        for profile in self._resources("action profile", msg.action_profile_id):
            members = self.dp.act_prof_members(profile.name)
            self._scan(len(members), f"members of action profile {profile.name!r}")
            found = [(m, call) for m, call in members.items() if msg.member_id in (0, m)]
            self._reserve(len(found), f"members of action profile {profile.name!r}")
            self._items.extend((self._fill_member, profile.id, m, call) for m, call in found)

    def _fill_member(self, entity, profile_id: int, member_id: int, call) -> None:
        member = entity.action_profile_member
        member.action_profile_id, member.member_id = profile_id, member_id
        member.action.CopyFrom(self.encode_action(call).action)

    def _read_action_profile_group(self, msg) -> None:
        for profile in self._resources("action profile", msg.action_profile_id):
            if not profile.info.with_selector:
                continue
            groups = self.dp.act_prof_groups(profile.name)
            self._scan(len(groups), f"groups of action profile {profile.name!r}")
            found = [(g, ids) for g, ids in groups.items() if msg.group_id in (0, g)]
            self._reserve(len(found), f"groups of action profile {profile.name!r}")
            self._items.extend((_fill_group_entry, profile.id, g, ids) for g, ids in found)

    def _read_value_set_entry(self, msg) -> None:
        for value_set in self._resources("value set", msg.value_set_id):
            members = self.dp.value_set_get(value_set.name)
            self._scan(len(members), f"members of value set {value_set.name!r}")
            self._reserve(1, f"value set {value_set.name!r}")
            self._items.append((self.fill_value_set, value_set, members))

    def _read_digest_entry(self, msg) -> None:
        configs = [(digest.id, self.server.digests.config(digest.id))
                   for digest in self._resources("digest", msg.digest_id)]
        configs = [(digest_id, config) for digest_id, config in configs if config is not None]
        self._reserve(len(configs), "digests")
        self._items.extend((_fill_digest, digest_id, config) for digest_id, config in configs)


def _fill_group_entry(entity, profile_id: int, group_id: int, members) -> None:
    group = entity.action_profile_group
    group.action_profile_id, group.group_id = profile_id, group_id
    for m in members:
        group.members.add(member_id=m, weight=1)


def _fill_counter(entity, counter_id: int, index: int, byte_count: int, packet_count: int):
    entry = entity.counter_entry
    entry.counter_id, entry.index.index = counter_id, index
    entry.data.byte_count, entry.data.packet_count = byte_count, packet_count


def _fill_register(entity, register_id: int, index: int, value: api.RegisterValue) -> None:
    """A cell's RegisterEntry: an int as a bitstring; a struct register's tuple as a struct of
    one bitstring per field, in the struct's order (as bf-p4c's standard P4Info declares it)."""
    entry = entity.register_entry
    entry.register_id, entry.index.index = register_id, index
    if isinstance(value, tuple):
        members = entry.data.struct.members
        for v in value:
            members.add().bitstring = encode_bytes(v)
    else:
        entry.data.bitstring = encode_bytes(value)


def _fill_meter(entity, meter_id: int, index: int,
                config: Optional[tuple[int, int, int, int]]) -> None:
    entry = entity.meter_entry
    entry.meter_id, entry.index.index = meter_id, index
    if config is not None:
        entry.config.cir, entry.config.cburst, entry.config.pir, entry.config.pburst = config


def _fill_digest(entity, digest_id: int, config) -> None:
    entity.digest_entry.digest_id = digest_id
    entity.digest_entry.config.CopyFrom(config)
