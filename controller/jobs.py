"""Aggregation jobs on a switch: create (all or nothing), list, show, delete, reset, resync,
and move a job to a new generation when its workers restart.

A job's switch state is built by :mod:`hina.pipeline` (pure functions of a
:class:`hina.pipeline.JobSpec`, in the layout of the pushed program: p4/hina.p4 or the TNA
program p4/tna/hina_tna.p4, told apart by the P4Info's tables); this module writes it over
P4Runtime and remembers what it wrote,
so that a delete removes exactly that and a failure part-way through a create removes what the
create had already written (rollback), leaving the switch as it was.

Two levels: :meth:`JobManager.create` installs a :class:`~hina.pipeline.JobSpec` (the switch's
view), :meth:`JobManager.create_job` a :class:`~controller.config.JobConfig` (the operator's
view: codec, worker addresses; it allocates free register ranges and checks the job against the
others first). Jobs installed by an earlier run are taken over with :meth:`JobManager.adopt`.

Example::

    >>> with SwitchConnection("127.0.0.1:9559") as sw:          # doctest: +SKIP
    ...     jobs = JobManager(sw)
    ...     jobs.create(spec, thc_table=DEFAULT_TABLE)
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Sequence

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from hina import codecs as codec_names
from hina import pipeline
from hina import protocol as P
from hina.pipeline import JobSpec
from hina.softswitch.api import Exact, Lpm, MatchFieldInfo, Optional_, Range, TableEntry, Ternary

from .config import ConfigError, JobConfig, allocate
from .inspect import reason_counts as read_reason_counts
from .p4runtime_client import P4InfoIndex, P4RuntimeClientError, SwitchConnection
from .bmv2 import PACKET_HEADROOM
from .target import P4RuntimeRegisters, RegisterAccess

__all__ = ["JobError", "UnknownJobError", "JobRecord", "JobManager", "entry_update"]

log = logging.getLogger("hina.controller")

#: THC lookup table ids the program offers (P4 ``HINA_LUTS``); 0 means "none".
_LUT_IDS = range(1, 16)


class JobError(RuntimeError):
    """A job request that cannot be carried out; ``str()`` is one line for the user."""


class UnknownJobError(JobError):
    """No job with that id."""


def _match_value(m) -> object:
    if isinstance(m, Exact) or isinstance(m, Optional_):
        return m.value
    if isinstance(m, Ternary):
        return (m.value, m.mask)
    if isinstance(m, Lpm):
        return (m.value, m.prefix_len)
    if isinstance(m, Range):
        return (m.low, m.high)
    raise JobError(f"unsupported match {m!r}")


def entry_update(index: P4InfoIndex, kind: str, entry: TableEntry) -> p4runtime_pb2.Update:
    """A P4Runtime Update for a :class:`softswitch.api.TableEntry` built by :mod:`hina.pipeline`.

    Match values are given in the order of the table's match fields in the P4Info.
    """
    table = index.table(entry.table)
    names = [f.name for f in table.match_fields]
    if len(names) != len(entry.matches):
        raise JobError(f"table {entry.table}: {len(entry.matches)} match values for "
                       f"{len(names)} fields")
    match = {n: _match_value(m) for n, m in zip(names, entry.matches) if m is not None}
    action = index.action(entry.action.action)
    params = {p.name: v for p, v in zip(action.params, entry.action.args)}
    msg = index.table_entry(entry.table, match, entry.action.action if kind != "DELETE" else None,
                            params if kind != "DELETE" else {}, entry.priority)
    return SwitchConnection.update(kind, table_entry=msg)


def _program_words(index: P4InfoIndex) -> int:
    """``HINA_WORDS`` of the pushed program: one lane register per word (0: unknown); the TNA
    program's: two blocks of its lanes."""
    layout = program_layout(index)
    if isinstance(layout, pipeline.TnaLayout):
        return layout.words
    prefix = pipeline.lane_register(0).rsplit("_", 1)[0] + "_"
    return sum(1 for name in index.registers if name.startswith(prefix))


class _Table(NamedTuple):
    """What :func:`hina.pipeline.layout_for` reads of a P4Info table."""
    name: str
    match_fields: tuple[MatchFieldInfo, ...]


def program_layout(index: P4InfoIndex) -> pipeline.Layout:
    """The :class:`hina.pipeline.Layout` of the pushed program, from its P4Info's tables.

    Raises:
        JobError: the P4Info is neither HINA program's.
    """
    kind = p4info_pb2.MatchField.MatchType.Name
    # by the program's names: a Tofino compiler's P4Info prefixes them with the pipeline's
    tables = [_Table(index.program_name(t.preamble.name),
                     tuple(MatchFieldInfo(f.name, f.bitwidth, kind(f.match_type).lower())
                           for f in t.match_fields))
              for t in index.p4info.tables]
    try:
        return pipeline.layout_for(tables)
    except ValueError as exc:
        raise JobError(f"the pushed program: {exc}") from None


@dataclass(frozen=True)
class _Held:
    """Resources a job held since the push, as :func:`controller.config.allocate` reads a
    job's (no job is installed on them)."""
    reg_base: int = 0
    n_slots: int = 0
    pair_stream_base: int = 0
    workers: Sequence = ()
    sketch_base: int = 0
    sketch_columns: int = 0


@dataclass
class JobRecord:
    """A job as installed: its spec, its THC table (if any) and the entries written for it."""
    spec: JobSpec
    thc_table: Optional[tuple[int, ...]] = None
    entries: list[TableEntry] = field(default_factory=list)
    config: Optional[JobConfig] = None


class JobManager:
    """Creates and deletes jobs on one switch through a primary :class:`SwitchConnection`.

    Args:
        switch: the connection (a pipeline must be set on the device).
        zero_registers: zero the job's slot/sketch registers on create.
        registers: how registers are written and read (default: P4Runtime RegisterEntry, which
            the embedded target has; for BMv2 pass :class:`controller.target.ThriftRegisters`).
        target: ``embedded`` or ``bmv2``: on BMv2 a THC job whose results would outgrow the
            switch's packet headroom (:data:`controller.bmv2.PACKET_HEADROOM`) is refused.
    """

    def __init__(self, switch: SwitchConnection, zero_registers: bool = True,
                 registers: Optional[RegisterAccess] = None, target: str = "embedded"):
        self.switch = switch
        self.target = target
        self.zero_registers = zero_registers
        self.registers = registers or P4RuntimeRegisters(switch)
        self.jobs: dict[int, JobRecord] = {}

    # -- operator-level jobs ---------------------------------------------------------------
    def configs(self) -> dict[int, JobConfig]:
        """The :class:`JobConfig` of every job created or adopted with one."""
        return {j: r.config for j, r in sorted(self.jobs.items()) if r.config is not None}

    def prepare(self, config: JobConfig) -> JobConfig:
        """``config`` with free resources allocated and checked against the installed jobs.

        Raises:
            JobError: the id is taken, or the job would share slots, streams, sketch columns or
                a multicast group with another job (the message names both jobs).
        """
        if config.job_id in self.jobs:
            raise JobError(f"job {config.job_id} already exists; delete it first")
        try:
            config = allocate(config, [r.spec for r in self.jobs.values()] + self._held())
            spec = config.to_spec()
            pipeline.check_isolated([r.spec for r in self.jobs.values()] + [spec])
        except (ConfigError, ValueError) as exc:
            raise JobError(str(exc)) from None
        if codec_names.lookup(config.codec).lut and config.lut_id == 0:
            config = config.replace(lut_id=self._free_lut_id())
        return config

    def _held(self) -> list:
        """Resources whose registers keep state the register path cannot zero (on a Tofino
        P4Info with extern registers: the cells jobs held since the push,
        :meth:`controller.tofino.TofinoRegisters.unzeroable`): allocated around, as installed
        jobs are (a job given them explicitly is refused when it would zero them)."""
        unzeroable = getattr(self.registers, "unzeroable", None)
        cells = unzeroable() if unzeroable is not None else []
        if not cells:
            return []
        layout = program_layout(self.switch.require_index())
        slots, streams = (layout.register(pipeline.SLOT_GENERATION),
                          layout.register(pipeline.PAIR_GENERATION))
        sketch = layout.register(pipeline.sketch_register(0))
        held = []
        for name, first, count in cells:
            if name == slots:              # per slot copy: 2 * (reg_base + slot) + pool
                held.append(_Held(reg_base=first // 2, n_slots=(count + 1) // 2))
            elif name == streams:
                held.append(_Held(pair_stream_base=first, workers=range(count)))
            elif name == sketch:
                held.append(_Held(sketch_base=first, sketch_columns=count))
        return held

    def create_job(self, config: JobConfig) -> JobConfig:
        """Allocate, check and install ``config`` (all or nothing); returns it as installed.

        Raises:
            JobError: as :meth:`prepare` and :meth:`create`; also a job with block-sparse
                rounds on a TNA build without the block-sparse profile (its parser takes no
                block header: every such packet would be MALFORMED).
        """
        layout = program_layout(self.switch.require_index())
        if isinstance(layout, pipeline.TnaLayout) and not layout.block_sparse \
                and config.uses_blocks:
            what = ("codec block_sparse" if config.codec == "block_sparse"
                    else "codec adaptive with block_sparse among its choices")
            raise JobError(f"job {config.job_id}: {what} needs the TNA program's block-sparse "
                           "profile, which the pushed build is not: push it with -D "
                           "TNA_BLOCK_SPARSE=1 (it fits Tofino 1 at 16 lanes)"
                           + (", or give --adaptive-choices without block_sparse"
                              if config.codec == "adaptive" else ""))
        # a program whose SUM saturates (TNA: no overflow flag): the job service tells the
        # workers, who read a result word at an int32 bound as the overflow
        config = dataclasses.replace(config, sum_saturates=layout.sum_saturates)
        config = self.prepare(config)
        record = self.create(config.to_spec(), thc_table=config.thc_table)
        record.config = config
        return config

    def adopt(self, config: JobConfig) -> JobRecord:
        """Take over a job an earlier run installed (nothing is written)."""
        spec = config.to_spec()
        index = self.switch.index              # the P4Info already fetched, else the switch's
        if index is None:
            try:
                index = self.switch.require_index()
            except P4RuntimeClientError:       # no pipeline (the switch restarted): resync's
                index = None
        layout = program_layout(index) if index is not None else pipeline.V1MODEL
        entries = pipeline.job_entries(spec, layout)
        if config.thc_table is not None:
            entries += pipeline.lut_entries(spec.lut_id, config.thc_table, spec.words, layout)
        record = JobRecord(spec, config.thc_table, entries, config)
        self.jobs[spec.job_id] = record
        return record

    def resync(self, configs: Sequence[JobConfig]) -> list[JobConfig]:
        """Re-install ``configs`` on a switch that lost them (fresh pipeline), as they were.

        Raises:
            JobError: a job could not be installed (the jobs before it stay installed).
        """
        done = []
        for config in configs:
            record = self.create(config.to_spec(), thc_table=config.thc_table)
            record.config = config
            done.append(config)
        return done

    def set_generation(self, job_id: int, generation: int) -> JobRecord:
        """Move the job to ``generation``: rewrite its admission entries (MODIFY), all or nothing.

        Packets of any other generation are then dropped as STALE_GENERATION and answered with
        a NOTICE; the switch reclaims the job's slot copies and PAIRS streams as the new
        generation's packets reach them, so no register is zeroed (docs/protocol.md,
        "Generations"). The record (and its config) carry the new generation afterwards.

        Raises:
            UnknownJobError: no such job.
            JobError: ``generation`` is out of range, or the switch refused an update (the
                entries already rewritten are rewritten back; the message says so).
        """
        record = self.record(job_id)
        try:
            P.check_generation(generation)
        except ValueError as exc:
            raise JobError(f"job {job_id}: {exc}") from None
        spec = dataclasses.replace(record.spec, generation=generation)
        index = self.switch.require_index()
        layout = program_layout(index)
        updates = pipeline.generation_updates(record.spec, spec, layout)
        before = {(e.table, tuple(e.matches)): e
                  for e in pipeline.admission_entries(record.spec, layout)}
        try:
            self.switch.write([entry_update(index, kind, e) for kind, e in updates],
                              f"job {job_id}: generation {generation}")
        except P4RuntimeClientError as exc:
            failed = {i for i, _, _ in exc.errors}
            done = [u for i, u in enumerate(updates) if i not in failed] if failed else updates
            undo = {"INSERT": "DELETE", "DELETE": "INSERT", "MODIFY": "MODIFY"}
            back = [(undo[kind], before.get((e.table, tuple(e.matches)), e) if kind == "MODIFY"
                     else e) for kind, e in reversed(done)]
            try:
                self.switch.write([entry_update(index, kind, e) for kind, e in back],
                                  f"job {job_id}: back to generation {record.spec.generation}")
            except P4RuntimeClientError as back:
                log.error("job %d: rolling back to generation %d failed: %s", job_id,
                          record.spec.generation, back)
                raise JobError(f"job {job_id}: generation {generation} half written and not "
                               f"rolled back ({back}); run it again: {exc}") from None
            raise JobError(f"job {job_id}: generation stays {record.spec.generation} "
                           f"(rolled back): {exc}") from None
        record.entries = [e for e in record.entries
                          if (e.table, tuple(e.matches)) not in before] + \
            pipeline.admission_entries(spec, layout)
        record.spec = spec
        if record.config is not None:
            record.config = record.config.replace(generation=generation)
        log.info("job %d: generation %d", job_id, generation)
        return record

    def bump_generation(self, job_id: int) -> int:
        """Move the job to its next generation (:func:`hina.protocol.next_generation`); returns it.

        When the 16-bit count wraps (to :data:`hina.protocol.FIRST_GENERATION`), the job's
        registers are zeroed too, so no slot copy keeps state across a full cycle of
        generations and mistakes it for the current one.

        Raises:
            UnknownJobError, JobError: as :meth:`set_generation` and :meth:`reset`.
        """
        record = self.record(job_id)
        generation = P.next_generation(record.spec.generation)
        if generation == P.FIRST_GENERATION:
            self.reset(job_id)
        self.set_generation(job_id, generation)
        return generation

    def reset(self, job_id: int) -> None:
        """Zero the job's slot (and sketch) registers: a fresh start for its workers."""
        record = self.record(job_id)
        try:
            layout = program_layout(self.switch.require_index())
            self.registers.zero(pipeline.register_ranges(record.spec, layout))
            self._zero_job_counter(job_id)
        except P4RuntimeClientError as exc:
            raise JobError(f"job {job_id}: reset failed: {exc}") from None

    def _zero_job_counter(self, job_id: int) -> None:
        """Zero the job's cell of ``job_counter`` (a program without it has nothing to zero)."""
        index = self.switch.require_index()
        name = program_layout(index).counter(P.JOB_COUNTER)
        if name in index.counters:   # not a P4Runtime counter in a Tofino P4Info's extern flavour
            self.switch.write([self.switch.counter_update(name, job_id)],
                              f"job {job_id}: zero its packet counter")

    def register_cells(self, job_ids: Sequence[int]) -> list[tuple[str, int, int]]:
        """``(register, first, count)`` cells the jobs ``job_ids`` own in the pushed program
        (what :meth:`reset` zeroes), by the program's names."""
        if not job_ids:
            return []
        layout = program_layout(self.switch.require_index())
        return [cells for j in job_ids
                for cells in pipeline.register_ranges(self.record(j).spec, layout)]

    def record(self, job_id: int) -> JobRecord:
        """The installed job ``job_id``.

        Raises:
            UnknownJobError: no such job.
        """
        record = self.jobs.get(job_id)
        if record is None:
            known = ", ".join(map(str, sorted(self.jobs))) or "none"
            raise UnknownJobError(f"job {job_id} does not exist (jobs: {known})")
        return record

    def _free_lut_id(self) -> int:
        used = {r.spec.lut_id for r in self.jobs.values()}
        for lut_id in _LUT_IDS:
            if lut_id not in used:
                return lut_id
        raise JobError(f"every THC table id of the program ({len(_LUT_IDS)}) is in use")

    def create(self, spec: JobSpec, thc_table: Optional[Sequence[int]] = None) -> JobRecord:
        """Install ``spec`` (and its THC table); on any failure remove what was written.

        Raises:
            JobError: the job conflicts with an installed one, or the switch refused an entry
                (the message names it; the switch is left as before).
        """
        if spec.job_id in self.jobs:
            raise JobError(f"job {spec.job_id} already exists; delete it first")
        index = self.switch.require_index()
        layout = program_layout(index)
        try:           # the program's own word counts first: says why, and what works
            layout.check_words(spec.words, f"job {spec.job_id}: words")
        except ValueError as exc:
            raise JobError(str(exc)) from None
        program_words = _program_words(index)
        if program_words and spec.words != program_words:
            raise JobError(f"job {spec.job_id}: words={spec.words}, but the pushed program has "
                           f"HINA_WORDS={program_words}")
        growth = 3 * spec.words           # LUT-SUM: HINA_WORDS bytes in, 4 x HINA_WORDS out
        if thc_table is not None and self.target == "bmv2" and growth > PACKET_HEADROOM:
            raise JobError(f"job {spec.job_id}: THC at words={spec.words} grows each result by "
                           f"{growth} bytes; BMv2 grows a packet by at most {PACKET_HEADROOM} "
                           "(simple_switch aborts beyond): use HINA_WORDS <= 128 on BMv2")
        try:
            pipeline.check_isolated([r.spec for r in self.jobs.values()] + [spec])
        except ValueError as exc:
            raise JobError(str(exc)) from None
        if thc_table is not None:
            if spec.lut_id == 0:
                spec = dataclasses.replace(spec, lut_id=self._free_lut_id())
            elif any(r.spec.lut_id == spec.lut_id for r in self.jobs.values()):
                raise JobError(f"job {spec.job_id}: THC table id {spec.lut_id} is in use")
        try:
            entries = pipeline.job_entries(spec, layout)
            if thc_table is not None:
                entries += pipeline.lut_entries(spec.lut_id, thc_table, spec.words, layout)
        except ValueError as exc:
            raise JobError(f"job {spec.job_id}: {exc}") from None
        try:         # every entry in this P4Info's terms before anything is written
            updates = [entry_update(index, "INSERT", e) for e in entries]
        except P4RuntimeClientError as exc:
            raise JobError(f"job {spec.job_id} not created (nothing written): {exc}") from None
        record = JobRecord(spec, tuple(thc_table) if thc_table is not None else None)
        group, replicas = pipeline.multicast_group(spec)
        group_written = False
        try:
            if self.zero_registers:
                self.registers.zero(pipeline.register_ranges(spec, layout))
                self._zero_job_counter(spec.job_id)
            self.switch.write([self.switch.multicast_update(
                "INSERT", group, [(r.port, r.rid) for r in replicas])],
                f"job {spec.job_id}: multicast group {group}")
            group_written = True
            self._write_entries(entries, updates, record)
        except (P4RuntimeClientError, JobError) as exc:
            self._rollback(index, record, group if group_written else None)
            raise JobError(f"job {spec.job_id} not created (rolled back): {exc}") from None
        self.jobs[spec.job_id] = record
        log.info("job %d created: %d workers, %d slots, %d entries", spec.job_id,
                 len(spec.workers), spec.n_slots, len(record.entries))
        return record

    def _write_entries(self, entries: list[TableEntry], updates: list[p4runtime_pb2.Update],
                       record: JobRecord) -> None:
        # One batch per table keeps a failure's position exact: everything before it is in.
        batch_size = 512
        for start in range(0, len(entries), batch_size):
            batch = entries[start:start + batch_size]
            try:
                self.switch.write(updates[start:start + batch_size],
                                  f"job {record.spec.job_id}: entries")
            except P4RuntimeClientError as exc:
                failed = {i for i, _, _ in exc.errors}
                record.entries += [e for i, e in enumerate(batch) if i not in failed]
                raise
            record.entries += batch

    def _rollback(self, index: P4InfoIndex, record: JobRecord, group: Optional[int]) -> None:
        steps = [lambda: [entry_update(index, "DELETE", e) for e in record.entries]]
        if group is not None:
            steps.append(lambda: [self.switch.multicast_update("DELETE", group)])
        for updates in steps:          # the group goes even if the entries could not
            try:
                self.switch.write(updates(), f"job {record.spec.job_id}: rollback")
            except P4RuntimeClientError as exc:   # report, but keep the original error visible
                log.error("rollback of job %d incomplete: %s", record.spec.job_id, exc)
        record.entries.clear()

    def delete(self, job_id: int) -> None:
        """Remove everything :meth:`create` installed for ``job_id``.

        Raises:
            JobError: no such job.
        """
        record = self.record(job_id)
        index = self.switch.require_index()
        group, _ = pipeline.multicast_group(record.spec)
        for updates, what in (([entry_update(index, "DELETE", e) for e in record.entries],
                               "delete entries"),
                              ([self.switch.multicast_update("DELETE", group)],
                               "delete multicast group")):
            try:
                self.switch.write(updates, f"job {job_id}: {what}")
            except P4RuntimeClientError as exc:
                # what the switch no longer has (it restarted) is gone already: not an error
                if not exc.errors or any(code != "NOT_FOUND" for _, code, _ in exc.errors):
                    raise
                log.warning("job %d: the switch had already lost part of it (%s)", job_id, exc)
        del self.jobs[job_id]
        log.info("job %d deleted", job_id)

    def reason_counts(self) -> dict[str, int]:
        """Packets per drop/exception reason (``HinaIngress.reason_counter``, by the pushed
        program's name for it)."""
        return read_reason_counts(self.switch, program_layout(self.switch.require_index()))
