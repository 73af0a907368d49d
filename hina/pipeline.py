"""Table entries, multicast groups and register ranges of HINA jobs: pure functions.

The controller and the dataplane tests both install jobs with what this module builds, so the
knowledge of the P4 names lives in one place: for the v1model program (``p4/hina.p4``) and for
the TNA program (``p4/tna/hina_tna.p4``), whose tables differ in name, key and parameters. Each
program is a :class:`Layout` (:data:`V1MODEL`, :class:`TnaLayout`; :func:`layout_for` picks one
from a compiled program's tables): every builder takes ``layout=`` and the one job description
(:class:`JobSpec`) gives either program's entries. Nothing here talks to a switch:
each function turns a :class:`JobSpec` (or a THC table) into
:class:`softswitch.api.TableEntry` objects, :class:`softswitch.api.Replica` lists and
``(register, first, count)`` ranges, which a target then writes.

Example::

    >>> job = JobSpec(job_id=1, workers=(WorkerAddress(port=1, mac=0x020000000001,
    ...               ip=0x0A000001, udp_port=40000),), n_slots=4, reg_base=0)
    >>> [e.table for e in job_entries(job)][:2]
    ['HinaIngress.admission.job_config', 'HinaIngress.admission.worker_admission']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from hina.softswitch.api import ActionCall, Exact, Range, Replica, TableEntry, Ternary

from . import protocol as P

__all__ = ["WorkerAddress", "JobSpec", "job_entries", "admission_entries", "lut_entries",
           "multicast_group",
           "register_ranges", "check_isolated", "replica_id", "THC_DEFAULT_TABLE",
           "JOB_CONFIG", "WORKER_ADMISSION", "WORKER_BY_ADDRESS", "REPLICA_REWRITE",
           "lut_table_names",
           "lane_register", "lane_word", "sketch_register",
           "Layout", "TnaLayout", "V1MODEL", "layout_for", "generation_updates"]

# -- P4 names (p4c's fully qualified P4Info names) ------------------------------------------
JOB_CONFIG = f"{P.INGRESS}.admission.job_config"
SET_JOB = f"{P.INGRESS}.admission.set_job"
WORKER_ADMISSION = f"{P.INGRESS}.admission.worker_admission"
ADMIT_WORKER = f"{P.INGRESS}.admission.admit_worker"
WORKER_BY_ADDRESS = f"{P.INGRESS}.admission.worker_by_address"
FLAG_WRONG_PORT = f"{P.INGRESS}.admission.flag_wrong_port"
REPLICA_REWRITE = f"{P.EGRESS}.replica_rewrite.replica_rewrite"
SET_WORKER_ADDRESS = f"{P.EGRESS}.replica_rewrite.set_worker_address"
THC_LUT = f"{P.INGRESS}.thc_lut"
SLOT_GENERATION = f"{P.INGRESS}.slot_state.slot_generation"
SLOT_SEQ = f"{P.INGRESS}.slot_state.slot_seq"
SLOT_BITMAP = f"{P.INGRESS}.slot_state.slot_bitmap"
SLOT_COUNT = f"{P.INGRESS}.slot_state.slot_count"
SLOT_FLAGS = f"{P.INGRESS}.slot_flags.slot_flags"
#: Block-sparse: the block of each slot copy's current round, and the smallest next announced.
BLOCK_INDEX = f"{P.INGRESS}.slot_state.block_index"
BLOCK_NEXT = f"{P.INGRESS}.slot_state.block_next"
PAIR_NEXT_SEQ = f"{P.INGRESS}.sketch_update.pair_next_seq"
PAIR_GENERATION = f"{P.INGRESS}.sketch_update.pair_generation"

#: The default THC table (defined once, in :mod:`hina.protocol`).
THC_DEFAULT_TABLE = P.THC_DEFAULT_TABLE

_U16 = (1 << 16) - 1
#: The highest multicast group id a job may use (BMv2's P4Runtime server refuses 32768 and up,
#: and so does the embedded target's).
MAX_MCAST_GROUP = (1 << 15) - 1
_U32 = (1 << 32) - 1


def lane_register(word: int) -> str:
    """P4 name of the register array holding payload word ``word``.

    One 32-bit array per word, indexed by slot copy (``2 * slot_index + pool``): the program
    updates words ``2p`` and ``2p + 1`` in one action, as SwitchML pairs them, but keeps them in
    separate 32-bit arrays because BMv2's Thrift runtime reads 64-bit cells as signed integers.
    """
    return f"{P.INGRESS}.lane_alu.lanes_{word}"


def lane_word(value: int, word: int) -> int:
    """Payload word ``word`` (unsigned 32-bit) out of the value of its :func:`lane_register`
    cell (the cell is the word: kept for callers written against the layout)."""
    return value & _U32


def sketch_register(row: int) -> str:
    """P4 name of the in-switch sketch register of ``row``."""
    return f"{P.INGRESS}.sketch_update.sketch_row_{row}"


def lut_table_names(word: int) -> tuple[str, str]:
    """(table, action) names of the THC lookups of coordinates 2*word (hi) and 2*word+1 (lo)."""
    return ((f"{THC_LUT}.lut_hi_{word}", f"{THC_LUT}.set_hi_{word}"),
            (f"{THC_LUT}.lut_lo_{word}", f"{THC_LUT}.set_lo_{word}"))


def _check_range(name: str, value: int, low: int, high: int, why: str) -> None:
    if not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name}={value!r}: must be an integer in [{low}, {high}] ({why})")


@dataclass(frozen=True)
class WorkerAddress:
    """Where a worker is: switch port, MAC, IPv4 and UDP source port (all ints).

    The switch admits the worker's frames only on ``port`` with all three source addresses as
    given (``worker_admission``); its results go out of ``port`` to them.
    """
    port: int
    mac: int
    ip: int
    udp_port: int

    def __post_init__(self):
        _check_range("port", self.port, 0, 510, "a v1model port; 511 means drop")
        _check_range("mac", self.mac, 0, (1 << 48) - 1, "48-bit MAC")
        _check_range("ip", self.ip, 0, _U32, "IPv4 address")
        _check_range("udp_port", self.udp_port, 1, _U16, "UDP port")


@dataclass(frozen=True)
class JobSpec:
    """One aggregation job and the switch resources it owns.

    Args:
        job_id: the HINA header's job id, in [0, MAX_JOB_ID] so replica ids stay unique.
        workers: the job's workers in worker-index order (1..MAX_WORKERS of them).
        n_slots: aggregation slots; the job owns slots [reg_base, reg_base + n_slots).
        reg_base: first slot of the job in the shared slot registers.
        mcast_grp: multicast group of the job's results (default: job_id + 1; 0 is invalid).
        lut_id: THC table id (0 = the job does no LUT-SUM; THC packets are then BAD_JOB).
        thc_max_value: largest THC table value the job will use (checks n * g < 2**16).
        sketch_base, sketch_columns, sketch_seed: the job's in-switch sketch columns
            [sketch_base, sketch_base + sketch_columns) of every row and its hash seed
            (sketch_columns = 0: no in-switch sketch).
        pair_stream_base: first PAIRS sequence register; worker w uses pair_stream_base + w.
        words: words per packet of the program the job runs on, one of
            ``hina.protocol.WORKER_WORDS``; whether the program takes it is its
            :class:`Layout`'s to say (:meth:`Layout.check_words`: the v1model program takes
            HINA_WORDS 64, 128 or 256, the TNA program two blocks of its TNA_LANES).
        generation: the job's current generation, written into its admission entries; packets
            of any other generation are STALE_GENERATION (docs/protocol.md, "Generations").
    """
    job_id: int
    workers: tuple[WorkerAddress, ...]
    n_slots: int
    reg_base: int
    mcast_grp: int = 0
    lut_id: int = 0
    thc_max_value: int = THC_DEFAULT_TABLE[-1]
    sketch_base: int = 0
    sketch_columns: int = 0
    sketch_seed: int = 0
    pair_stream_base: int = 0
    words: int = field(default=P.WORDS)
    generation: int = P.FIRST_GENERATION

    def __post_init__(self):
        object.__setattr__(self, "workers", tuple(self.workers))
        _check_range("job_id", self.job_id, 0, P.MAX_JOB_ID,
                     f"replica ids are job_id * {P.RID_WORKERS} + worker + 1 in 16 bits")
        n = len(self.workers)
        _check_range("len(workers)", n, 1, P.MAX_WORKERS, "the contributor bitmap is 32 bits")
        if len({(w.ip, w.udp_port) for w in self.workers}) != n:
            raise ValueError(f"job {self.job_id}: two workers share an (ip, udp_port) address")
        _check_range("n_slots", self.n_slots, 1, P.SLOT_CAPACITY, "slots shared by all jobs")
        _check_range("reg_base", self.reg_base, 0, P.SLOT_CAPACITY - self.n_slots,
                     f"the job's slots must fit in the {P.SLOT_CAPACITY} slot registers")
        if self.mcast_grp == 0:
            object.__setattr__(self, "mcast_grp", self.job_id + 1)
        _check_range("mcast_grp", self.mcast_grp, 1, MAX_MCAST_GROUP,
                     "0 means no multicast; BMv2 keeps 32768 and up for clone sessions")
        _check_range("lut_id", self.lut_id, 0, 255, "8-bit table id")
        _check_range("thc_max_value * len(workers)", self.thc_max_value * n, 0, _U16,
                     "THC sums are 16-bit lanes")
        if self.sketch_columns:
            if self.sketch_columns & (self.sketch_columns - 1) or self.sketch_columns < self.words:
                raise ValueError(f"sketch_columns={self.sketch_columns}: must be a power of two "
                                 f">= {self.words} (the switch masks with columns - 1 and "
                                 "harvests whole blocks of HINA_WORDS counters)")
            _check_range("sketch_base", self.sketch_base, 0,
                         P.SKETCH_CAPACITY - self.sketch_columns, "the sketch must fit its rows")
        _check_range("sketch_seed", self.sketch_seed, 0, _U32, "32-bit hash seed")
        _check_range("pair_stream_base", self.pair_stream_base, 0, P.PAIR_STREAMS - n,
                     f"{P.PAIR_STREAMS} PAIRS streams in the switch")
        P.check_worker_words(self.words)     # which ones a program takes: its Layout
        P.check_generation(self.generation)


def replica_id(job: JobSpec, worker: int) -> int:
    """The multicast replica id (egress_rid) of ``worker`` of ``job`` (never 0)."""
    return job.job_id * P.RID_WORKERS + worker + 1


def job_entries(job: JobSpec, layout: Optional[Layout] = None) -> list[TableEntry]:
    """Entries of job_config, worker_admission, worker_by_address and replica_rewrite for ``job``
    (and, on the TNA program, worker_generation and slot_range: :class:`TnaLayout`).

    A worker is admitted on its switch port with its MAC, IPv4 address and UDP port
    (``worker_admission``: job, ingress port, MAC, IPv4, UDP port); its IPv4 address and UDP
    port alone (``worker_by_address``) only name the reason when a frame claiming them is
    refused (WRONG_PORT rather than UNKNOWN_WORKER).
    """
    return (layout or V1MODEL).job_entries(job)


def admission_entries(job: JobSpec, layout: Optional[Layout] = None) -> list[TableEntry]:
    """The job's entries that carry ``job.generation`` (v1model: worker_admission, one per
    worker; a generation change rewrites exactly these with MODIFY). On the TNA program the
    generation is also part of worker_admission's key: use :func:`generation_updates`."""
    return (layout or V1MODEL).admission_entries(job)


def generation_updates(old: JobSpec, new: JobSpec,
                       layout: Optional[Layout] = None) -> list[tuple[str, TableEntry]]:
    """The P4Runtime updates (``("INSERT"|"MODIFY"|"DELETE", entry)``, in order) that move a
    job from ``old.generation`` to ``new.generation``; no register is touched."""
    return (layout or V1MODEL).generation_updates(old, new)


def multicast_group(job: JobSpec) -> tuple[int, list[Replica]]:
    """(group id, replicas) delivering a job's results to each of its workers."""
    return job.mcast_grp, [Replica(port=a.port, rid=replica_id(job, w))
                           for w, a in enumerate(job.workers)]


def _check_lut(lut_id: int, table: Sequence[int], words: int) -> tuple[int, ...]:
    _check_range("lut_id", lut_id, 1, 255, "8-bit table id; 0 means none")
    table = tuple(table)
    if len(table) != P.THC_TABLE_SIZE:
        raise ValueError(f"THC table has {len(table)} values: need {P.THC_TABLE_SIZE} (b=4)")
    for i, v in enumerate(table):
        _check_range(f"table[{i}]", v, 0, _U16, "16-bit lane values")
    P.check_worker_words(words)
    return table


def lut_entries(lut_id: int, table: Sequence[int] = THC_DEFAULT_TABLE,
                words: int = P.WORDS, layout: Optional[Layout] = None) -> list[TableEntry]:
    """Entries mapping every THC index to its table value, for all 2 * ``words`` coordinates.

    Args:
        lut_id: the table id jobs refer to (1..255; 0 is "no table").
        table: the 2**b integer table values (non-decreasing, in [0, 2**16)).
        words: HINA_WORDS of the program.
        layout: the program (default: the v1model program).
    """
    return (layout or V1MODEL).lut_entries(lut_id, _check_lut(lut_id, table, words), words)


def register_ranges(job: JobSpec, layout: Optional[Layout] = None) -> list[tuple[str, int, int]]:
    """``(register, first index, count)`` the controller zeroes when it (re)installs ``job``."""
    return (layout or V1MODEL).register_ranges(job)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


def check_isolated(jobs: Iterable[JobSpec]) -> None:
    """Refuse jobs that would share an id, a slot, a sketch column, a stream or a group."""
    jobs = list(jobs)
    for i, a in enumerate(jobs):
        for b in jobs[i + 1:]:
            what = None
            if a.job_id == b.job_id:
                what = "job id"
            elif _overlap((a.reg_base, a.n_slots), (b.reg_base, b.n_slots)):
                what = "slots"
            elif a.sketch_columns and b.sketch_columns and _overlap(
                    (a.sketch_base, a.sketch_columns), (b.sketch_base, b.sketch_columns)):
                what = "sketch columns"
            elif _overlap((a.pair_stream_base, len(a.workers)), (b.pair_stream_base, len(b.workers))):
                what = "PAIRS streams"
            elif a.mcast_grp == b.mcast_grp:
                what = "multicast group"
            if what:
                raise ValueError(f"jobs {a.job_id} and {b.job_id} share {what}: jobs must be isolated")


# -- Programs: what each HINA program calls things ---------------------------------------------
class Layout:
    """One HINA program's control-plane view: table, action, register and counter names and the
    shape of its entries. Subclasses: the v1model program (:data:`V1MODEL`) and the TNA program
    (:class:`TnaLayout`). Names given to :meth:`register` and :meth:`counter` are the v1model
    program's (the constants above, :func:`lane_register`, :func:`sketch_register`,
    ``hina.protocol.REASON_COUNTER``); each layout says what they are in its program, or
    ``None`` where its program has no such object."""

    name = "v1model"
    #: message kinds the program's dataplane answers (the TNA program leaves HARVEST and RESET
    #: to the control plane: register reads and writes)
    switch_harvest = True
    #: the program's SUM saturates at the int32 bounds, and stays there, instead of flagging an
    #: overflow (TNA: a stateful ALU has one output), so its jobs' workers read a result word at
    #: a bound as the overflow (``worker.transport_types.JobParams.sum_saturates``)
    sum_saturates = False

    def check_words(self, words: int, what: str = "words") -> int:
        """``words`` if the program's packets carry that many words, else ValueError saying
        why and what does (v1model: HINA_WORDS 64, 128 or 256, never the TNA Tofino 1 build's
        32)."""
        return P.check_v1model_words(words, what)

    def job_entries(self, job: JobSpec) -> list[TableEntry]:
        self.check_words(job.words, f"job {job.job_id}: words")
        mask = job.sketch_columns - 1 if job.sketch_columns else 0
        entries = [TableEntry(JOB_CONFIG, (Exact(job.job_id),),
                              ActionCall(SET_JOB, (job.n_slots, job.lut_id, job.sketch_base, mask,
                                                   job.sketch_seed)))]
        entries += self.admission_entries(job)
        for addr in job.workers:
            entries.append(TableEntry(WORKER_BY_ADDRESS, (Exact(job.job_id), Exact(addr.ip),
                                                          Exact(addr.udp_port)),
                                      ActionCall(FLAG_WRONG_PORT, ())))
        for w, addr in enumerate(job.workers):
            entries.append(TableEntry(REPLICA_REWRITE, (Exact(replica_id(job, w)),),
                                      ActionCall(SET_WORKER_ADDRESS,
                                                 (addr.mac, addr.ip, addr.udp_port))))
        return entries

    def admission_entries(self, job: JobSpec) -> list[TableEntry]:
        n = len(job.workers)
        return [TableEntry(WORKER_ADMISSION, (Exact(job.job_id), Exact(addr.port),
                                              Exact(addr.mac), Exact(addr.ip),
                                              Exact(addr.udp_port)),
                           ActionCall(ADMIT_WORKER, (w, 1 << w, n, job.mcast_grp, job.reg_base,
                                                     job.pair_stream_base + w, job.generation)))
                for w, addr in enumerate(job.workers)]

    def generation_updates(self, old: JobSpec, new: JobSpec) -> list[tuple[str, TableEntry]]:
        return [("MODIFY", e) for e in self.admission_entries(new)]

    def lut_entries(self, lut_id: int, table: tuple[int, ...], words: int) -> list[TableEntry]:
        self.check_words(words)
        entries = []
        for word in range(words):
            for tname, aname in lut_table_names(word):
                for index, value in enumerate(table):
                    entries.append(TableEntry(tname, (Exact(lut_id), Exact(index)),
                                              ActionCall(aname, (value,))))
        return entries

    def register_ranges(self, job: JobSpec) -> list[tuple[str, int, int]]:
        per_copy = (2 * job.reg_base, 2 * job.n_slots)
        streams = (job.pair_stream_base, len(job.workers))
        ranges = [(SLOT_GENERATION, *per_copy), (SLOT_SEQ, *per_copy), (SLOT_COUNT, *per_copy),
                  (SLOT_FLAGS, *per_copy), (SLOT_BITMAP, *per_copy),
                  (BLOCK_INDEX, *per_copy), (BLOCK_NEXT, *per_copy),
                  (PAIR_GENERATION, *streams), (PAIR_NEXT_SEQ, *streams)]
        ranges += [(lane_register(w), *per_copy) for w in range(job.words)]
        if job.sketch_columns:
            ranges += [(sketch_register(r), job.sketch_base, job.sketch_columns)
                       for r in range(P.SKETCH_ROWS)]
        return ranges

    def lane_cell(self, word: int, copy: int) -> tuple[str, int]:
        """(register, index) holding payload word ``word`` of slot copy ``copy``
        (``2 * (reg_base + slot) + pool``)."""
        return lane_register(word), copy

    #: the per-copy slot state registers (indexed by slot copy), v1model names
    slot_registers = (SLOT_GENERATION, SLOT_SEQ, SLOT_BITMAP, SLOT_COUNT)

    def register(self, name: str):
        return name

    def counter(self, name: str):
        return name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


#: The v1model program, p4/hina.p4 (BMv2 and the embedded target).
V1MODEL = Layout()

#: The TNA program's top-level controls (p4/tna/hina_tna.p4).
TNA_INGRESS = "HinaTnaIngress"
TNA_EGRESS = "HinaTnaEgress"


def _tna(name: str) -> str:
    return f"{TNA_INGRESS}.{name}"


class TnaLayout(Layout):
    """The TNA program (p4/tna/hina_tna.p4): its tables take the same job description as the
    v1model program's, shaped as tna_admission.p4 and tna_lanes.p4 say:

    * ``job_config.set_job`` also carries each sketch row's seed ``S + r`` and row offset
      ``(S + r) * 0x9E3779B1`` (a Tofino stage cannot multiply two run-time values);
    * ``worker_admission`` has the generation in its key, and its ``admit_worker`` carries
      ``all_workers`` and the job's first slot three ways (``reg_base``, ``2 * reg_base``,
      ``4 * reg_base``: register indices are formed by XOR, so ``reg_base`` must be aligned to
      a power of two no smaller than ``n_slots``); ``worker_generation`` (the key without the
      generation) names a stale sender; a generation change is INSERT + DELETE + MODIFY;
    * ``slot_range`` (job, range 0..n_slots-1) checks the slot;
    * THC: one table per byte of a block, ``lut_<i>``: (1, lut_id, byte) -> the word
      ``(T[hi] << 16) | T[lo]``; a ternary ``lut_<i>`` takes the byte with a full mask;
    * lanes: ``lanes`` registers, word ``w`` of slot copy ``c`` in ``lane_<w % lanes>`` at
      ``2 * c + w // lanes`` (two blocks per packet, a pass each);
    * block-sparse (the ``TNA_BLOCK_SPARSE=1`` profile only): ``slot_state.block_index`` and
      ``block_next.block_next``, indexed by slot copy as in the v1model program;
    * ``slot_bitmap`` (``SLOT_BITMAP``): a register of pairs, one per slot (index
      ``reg_base + slot``), the bitmaps of copy 0 and copy 1; no ``slot_count``, no
      ``slot_flags`` (:mod:`controller.inspect` reads the state from these).

    Args:
        lanes: TNA_LANES of the compiled program (words per pass; a packet has two blocks).
        lut_kinds: match kind of each ``lut_<i>``'s byte field (``exact`` or ``ternary``).
        rows: sketch rows (HINA_SKETCH_ROWS).
        block_sparse: the program is the block-sparse profile (has the block registers).
    """

    name = "tna"
    switch_harvest = False
    sum_saturates = True
    slot_registers = (SLOT_GENERATION, SLOT_SEQ)

    _NAMES = {SLOT_GENERATION: _tna("slot_state.slot_generation"),
              SLOT_SEQ: _tna("slot_state.slot_seq"),
              PAIR_GENERATION: _tna("pair_stream.pair_generation"),
              PAIR_NEXT_SEQ: _tna("pair_stream.pair_next_seq"),
              BLOCK_INDEX: _tna("slot_state.block_index"),
              BLOCK_NEXT: _tna("block_next.block_next"),
              P.REASON_COUNTER: _tna("reason_counter"),
              P.JOB_COUNTER: _tna("job_counter")}

    def __init__(self, lanes: int, lut_kinds: Sequence[str], rows: int = P.SKETCH_ROWS,
                 block_sparse: bool = False):
        if len(lut_kinds) != lanes:
            raise ValueError(f"TNA program: {len(lut_kinds)} LUT tables for {lanes} lanes")
        self.lanes, self.lut_kinds, self.rows = lanes, tuple(lut_kinds), rows
        self.block_sparse = block_sparse
        self._names = dict(self._NAMES)
        self._names.update({sketch_register(r): f"{TNA_EGRESS}.sketch_rows.sketch_row_{r}"
                            for r in range(rows)})
        # the pair register of both copies' bitmaps (index: the slot, not the copy); the
        # block-sparse profile declares it in its own control, applied after block_index
        self._names[SLOT_BITMAP] = _tna("slot_bitmap.slot_bitmap" if block_sparse
                                        else "slot_state.slot_bitmap")

    @property
    def words(self) -> int:
        return 2 * self.lanes

    def check_words(self, words: int, what: str = "words") -> int:
        if words != self.words:
            raise ValueError(f"{what}={words}, but the TNA program carries {self.words} words "
                             f"per packet (TNA_LANES={self.lanes}, two blocks)")
        return words

    def _check(self, job: JobSpec) -> None:
        self.check_words(job.words, f"job {job.job_id}: words")
        align = 1 << (job.n_slots - 1).bit_length()
        if job.reg_base % align:
            raise ValueError(f"job {job.job_id}: reg_base={job.reg_base} must be a multiple of "
                             f"{align} on the TNA program (n_slots={job.n_slots} rounded up to a "
                             "power of two: its register indices are base XOR slot)")

    def job_entries(self, job: JobSpec) -> list[TableEntry]:
        self._check(job)
        # imported here: hina.hashing needs torch, which hina-ctl (every call a process) and the
        # controller do without (tests/hina/test_packaging.py)
        from .hashing import row_offset
        mask = job.sketch_columns - 1 if job.sketch_columns else 0
        seeds = []
        for r in range(self.rows):
            seed = (job.sketch_seed + r) & _U32
            seeds += [seed, row_offset(seed)]
        entries = [TableEntry(_tna("admission.job_config"), (Exact(job.job_id),),
                              ActionCall(_tna("admission.set_job"),
                                         (job.n_slots, job.lut_id, job.sketch_base, mask,
                                          *seeds)))]
        entries += self._admit(job)
        entries += self._generation(job)
        entries.append(TableEntry(_tna("admission.slot_range"),
                                  (Exact(job.job_id), Range(0, job.n_slots - 1)),
                                  ActionCall("NoAction", ()), priority=1))
        for addr in job.workers:
            entries.append(TableEntry(_tna("reason.worker_by_address"),
                                      (Exact(job.job_id), Exact(addr.ip), Exact(addr.udp_port)),
                                      ActionCall(_tna("reason.flag_wrong_port"), ())))
        for w, addr in enumerate(job.workers):
            entries.append(TableEntry(f"{TNA_EGRESS}.replica_rewrite",
                                      (Exact(replica_id(job, w)),),
                                      ActionCall(f"{TNA_EGRESS}.set_worker_address",
                                                 (addr.mac, addr.ip, addr.udp_port))))
        return entries

    @staticmethod
    def _addresses(job: JobSpec, addr: WorkerAddress) -> tuple:
        return (Exact(job.job_id), Exact(addr.port), Exact(addr.mac), Exact(addr.ip),
                Exact(addr.udp_port))

    def _admit(self, job: JobSpec) -> list[TableEntry]:
        n = len(job.workers)
        everyone = (1 << n) - 1
        b = job.reg_base
        return [TableEntry(_tna("admission.worker_admission"),
                           self._addresses(job, addr) + (Exact(job.generation),),
                           ActionCall(_tna("admission.admit_worker"),
                                      (w, 1 << w, everyone, n, job.mcast_grp, b, 2 * b, 4 * b,
                                       job.pair_stream_base + w, job.generation)))
                for w, addr in enumerate(job.workers)]

    def _generation(self, job: JobSpec) -> list[TableEntry]:
        return [TableEntry(_tna("reason.worker_generation"), self._addresses(job, addr),
                           ActionCall(_tna("reason.stale_generation"), (job.generation,)))
                for addr in job.workers]

    def admission_entries(self, job: JobSpec) -> list[TableEntry]:
        return self._admit(job) + self._generation(job)

    def generation_updates(self, old: JobSpec, new: JobSpec) -> list[tuple[str, TableEntry]]:
        # The new generation's admission goes in before the old one's goes out: no window in
        # which the job's workers are strangers.
        if old.generation == new.generation:
            return [("MODIFY", e) for e in self.admission_entries(new)]
        return ([("INSERT", e) for e in self._admit(new)]
                + [("DELETE", e) for e in self._admit(old)]
                + [("MODIFY", e) for e in self._generation(new)])

    def lut_entries(self, lut_id: int, table: tuple[int, ...], words: int) -> list[TableEntry]:
        self.check_words(words)
        entries = []
        for i, kind in enumerate(self.lut_kinds):
            tname, aname = _tna(f"thc_lut.lut_{i}"), _tna(f"thc_lut.set_word_{i}")
            for byte in range(256):
                value = (table[byte >> 4] << 16) | table[byte & 0xF]
                key = Ternary(byte, 0xFF) if kind == "ternary" else Exact(byte)
                entries.append(TableEntry(tname, (Exact(1), Exact(lut_id), key),
                                          ActionCall(aname, (value,)),
                                          priority=1 if kind == "ternary" else 0))
        return entries

    def register_ranges(self, job: JobSpec) -> list[tuple[str, int, int]]:
        # slot_bitmap (a Register of a pair) is not a P4Runtime register: it needs no zeroing,
        # a copy's next use (seq newer, or another generation) overwrites its bits.
        per_copy = (2 * job.reg_base, 2 * job.n_slots)
        streams = (job.pair_stream_base, len(job.workers))
        ranges = [(self._names[SLOT_GENERATION], *per_copy), (self._names[SLOT_SEQ], *per_copy),
                  (self._names[PAIR_GENERATION], *streams), (self._names[PAIR_NEXT_SEQ], *streams)]
        if self.block_sparse:
            ranges += [(self._names[BLOCK_INDEX], *per_copy), (self._names[BLOCK_NEXT], *per_copy)]
        ranges += [(_tna(f"lanes.lane_{i}"), 4 * job.reg_base, 4 * job.n_slots)
                   for i in range(self.lanes)]
        if job.sketch_columns:
            ranges += [(self._names[sketch_register(r)], job.sketch_base, job.sketch_columns)
                       for r in range(self.rows)]
        return ranges

    def lane_cell(self, word: int, copy: int) -> tuple[str, int]:
        return _tna(f"lanes.lane_{word % self.lanes}"), 2 * copy + word // self.lanes

    def register(self, name: str):
        if name.startswith((TNA_INGRESS + ".", TNA_EGRESS + ".")):
            return name                 # the TNA program's own name
        return self._names.get(name)

    counter = register


def layout_for(tables) -> Layout:
    """The :class:`Layout` of a compiled HINA program, from its tables (``ProgramInfo.tables``
    or any objects with ``name`` and ``match_fields`` whose items have ``name`` and
    ``match_kind``). A P4Info's names may carry the Tofino compiler's pipe prefix (``pipe.``).

    Raises:
        ValueError: the tables are neither HINA program's (the message says what was looked for).
    """
    by_name = {}
    for t in tables:
        name = t.name
        if name.startswith("pipe.") and not name.startswith("pipe." + P.INGRESS):
            name = name[len("pipe."):]
        by_name[name] = t
    if JOB_CONFIG in by_name:
        return V1MODEL
    if _tna("admission.job_config") in by_name:
        kinds = []
        while _tna(f"thc_lut.lut_{len(kinds)}") in by_name:
            fields = by_name[_tna(f"thc_lut.lut_{len(kinds)}")].match_fields
            kinds.append(fields[-1].match_kind)
        return TnaLayout(len(kinds), kinds,
                         block_sparse=_tna("slot_state.block_round") in by_name)
    raise ValueError(f"not a HINA program: neither {JOB_CONFIG} nor "
                     f"{_tna('admission.job_config')} among its {len(by_name)} tables")
