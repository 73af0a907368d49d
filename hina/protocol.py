"""HINA wire protocol constants: the single Python definition of the switch's numbers.

Every number that both the P4 program (``p4/include/*.p4``) and Python (workers, controller,
scapy layers, tests) need is defined here once. The P4 side writes the same values as
``#define``s in ``p4/include/config.p4`` and ``p4/include/types.p4``;
``bmv2_tests/test_protocol_parity.py`` reads those files and fails on any difference.

Frame layout (see ``docs/protocol.md``)::

    Ethernet (14) | IPv4 (20, no options) | UDP (8, dst port in [UDP_PORT_BASE, +UDP_PORT_COUNT))
    | HINA header (HEADER_BYTES) | payload

Payloads by message type and lane operation:

* ``AGGREGATE`` with op ``SUM``, ``MAX`` or ``OR``: ``words`` -- ``WORDS`` big-endian 32-bit lanes.
* ``AGGREGATE`` with op ``BLOCK_SUM`` (block-sparse): a block header (block u32, next u32,
  BLOCK_HEADER_BYTES), then ``WORDS`` big-endian 32-bit lanes; with op ``BLOCK_SKIP``: the block
  header alone (the sender's block is zero). Their RESULT (op ``BLOCK_SUM``): the block header
  (the block summed, the next block to aggregate or BLOCK_END) and ``words``.
* ``AGGREGATE`` with op ``LUT_SUM`` (THC): ``WORDS`` bytes, two 4-bit table indices per byte,
  first coordinate in the high nibble. The RESULT carries ``WORDS`` 32-bit words, that is
  ``2 * WORDS`` big-endian 16-bit sums of table values in coordinate order.
* ``RESULT``: ``words``.
* ``PAIRS`` / ``PAIRS_ACK``: ``PAIRS_PER_PACKET`` (index u32, value i32) pairs (value 0 = padding).
* ``HARVEST`` / ``RESET``: a 4-byte harvest header (row, block); ``HARVEST_DATA`` adds ``words``.
* ``NOTICE``: none (the header alone; ``op`` is the :class:`DropReason`, ``generation`` the
  job's current generation).
"""
from __future__ import annotations

import enum
import struct

import numpy as np

# --------------------------------------------------------------------------------------------
# Addressing
# --------------------------------------------------------------------------------------------
#: First UDP destination port that carries HINA (0xBEE0). Workers pick any port of the range.
UDP_PORT_BASE = 0xBEE0
#: Number of ports in the HINA range; a power of two so the parser can match with a mask.
UDP_PORT_COUNT = 16
#: Mask the parser applies to the UDP destination port (``dport & mask == base``).
UDP_PORT_MASK = 0xFFFF & ~(UDP_PORT_COUNT - 1)
#: Protocol version carried in the header; anything else is MALFORMED. Version 2 added the
#: ``generation`` field and the NOTICE message; version 3 made the UDP checksum mandatory;
#: version 4 added block-sparse aggregation (ops BLOCK_SUM and BLOCK_SKIP, the block header,
#: drop reason BAD_BLOCK) (docs/protocol.md, "Changelog").
VERSION = 4
#: A UDP checksum field of 0: the sender computed none (refused since version 3: BAD_CHECKSUM).
UDP_NO_CHECKSUM = 0

# --------------------------------------------------------------------------------------------
# Generations (docs/protocol.md, "Generations")
# --------------------------------------------------------------------------------------------
#: Bits of the header's ``generation`` field (and of the switch's per-copy generation registers).
GENERATION_BITS = 16
#: The generation of a newly created job. 0 is never a job's generation: it is what zeroed slot
#: registers hold, so a copy of a fresh install is reclaimed by the first packet like any other.
FIRST_GENERATION = 1
#: Largest generation; the one after it is FIRST_GENERATION again (see :func:`next_generation`).
MAX_GENERATION = (1 << GENERATION_BITS) - 1

# --------------------------------------------------------------------------------------------
# Sizes (compile-time ``#define``s of the P4 program, defaults)
# --------------------------------------------------------------------------------------------
ETHERNET_BYTES = 14
IPV4_BYTES = 20
UDP_BYTES = 8
#: Bytes of the fixed HINA header (v2: 12 bytes of v1, then generation u16, reserved u16).
HEADER_BYTES = 16
#: Bytes of the harvest header (HARVEST, RESET, HARVEST_DATA).
HARVEST_HEADER_BYTES = 4
#: Bytes of the block header of block-sparse messages (block u32, next u32).
BLOCK_HEADER_BYTES = 8
#: The ``next`` of a block header that says "no further nonzero block" (P4 ``HINA_BLOCK_END``).
BLOCK_END = 0xFFFFFFFF
#: 32-bit payload words per packet (P4 ``HINA_WORDS``; 64, 128 or 256).
WORDS = 128
#: Values of ``HINA_WORDS`` the v1model program (``p4/hina.p4``) compiles with
#: (``p4/include/config.p4``): its packets carry one of these word counts, nothing else.
V1MODEL_WORDS = (64, 128, 256)
#: Words per packet of the TNA program's Tofino 1 build (``p4/tna/hina_tna.p4`` at its default
#: ``TNA_LANES=16``: two blocks of 16 lanes). ``TNA_LANES=32`` makes 64-word packets (the
#: v1model program's smallest), which only a Tofino 2 would hold.
TNA_TOFINO1_WORDS = 32
#: Words per packet a worker (packetizer, transport, codecs) and the controller's jobs speak:
#: the v1model program's :data:`V1MODEL_WORDS` and the Tofino 1 build's
#: :data:`TNA_TOFINO1_WORDS`. The wire format is the same at every one (docs/protocol.md); which
#: one a job uses is the pushed program's (``HINA_WORDS``, or two blocks of ``TNA_LANES``).
WORKER_WORDS = (TNA_TOFINO1_WORDS,) + V1MODEL_WORDS
#: The int32 bounds (min, max) where a saturating switch's SUM words stick (the TNA program; a
#: job's ``sum_saturates``): a result word at either is its overflow signal, which workers and
#: ``hina-ctl state`` read so (a true sum of exactly a bound reads so too).
SATURATED_SUM = (-(1 << 31), (1 << 31) - 1)
#: Bits per THC table index on the wire.
THC_INDEX_BITS = 4
#: Entries of a THC table (2 ** THC_INDEX_BITS).
THC_TABLE_SIZE = 1 << THC_INDEX_BITS
#: The THC table the controller installs and the codec uses unless told otherwise: the output of
#: ``python -m hina.worker.codecs.thc_table`` for b=4, g=30, T=2.1539 (lower expected error than the
#: published THC table, PUBLISHED in ``worker.codecs.thc_table``; a test checks the optimiser
#: still produces it).
THC_DEFAULT_TABLE = (0, 3, 5, 7, 9, 11, 13, 15, 16, 17, 19, 21, 23, 25, 27, 30)
#: Bits of one THC sum lane in results (two lanes per 32-bit word).
THC_SUM_BITS = 16
#: (index, value) pairs per PAIRS packet (P4 ``HINA_PAIRS``).
PAIRS_PER_PACKET = 16
#: Bytes of one (index, value) pair.
PAIR_BYTES = 8
#: Workers per job: the contributor bitmap is 32 bits (P4 ``HINA_MAX_WORKERS``).
MAX_WORKERS = 32
#: Aggregation slots shared by all jobs (P4 ``HINA_SLOT_CAPACITY``); each has two pool copies.
SLOT_CAPACITY = 512
#: Rows of the in-switch count sketch (P4 ``HINA_SKETCH_ROWS``).
SKETCH_ROWS = 3
#: Counters per row shared by all jobs (P4 ``HINA_SKETCH_CAPACITY``).
SKETCH_CAPACITY = 65536
#: Sketch columns of one job at the default ``WORDS``: at least one harvest block (``words``
#: counters), a power of two (:class:`hina.pipeline.JobSpec` checks ``columns >= words``).
SKETCH_MIN_COLUMNS = WORDS
#: Workers per job whose PAIRS sequence numbers the switch tracks (P4 ``HINA_PAIR_STREAMS``).
PAIR_STREAMS = 1024
#: Multicast replica ids: ``rid = job_id * RID_WORKERS + worker + 1`` (so rid 0 means unicast).
RID_WORKERS = 64
#: Largest job id that still gets unique replica ids in 16 bits.
MAX_JOB_ID = (1 << 16) // RID_WORKERS - 1


def payload_bytes(msg_type: "MsgType", op: "Op" = None, words: int = WORDS,
                  pairs: int = PAIRS_PER_PACKET) -> int:
    """Payload bytes after the HINA header for a message.

    Args:
        msg_type: the message type.
        op: the lane operation (needed for AGGREGATE).
        words: ``HINA_WORDS`` of the program.
        pairs: ``HINA_PAIRS`` of the program.

    Returns:
        The number of payload bytes the switch expects or emits.

    Example::
        >>> payload_bytes(MsgType.AGGREGATE, Op.LUT_SUM, words=128)
        128
    """
    msg_type = MsgType(msg_type)
    if msg_type is MsgType.AGGREGATE:
        if op is None:
            raise ValueError("payload_bytes: AGGREGATE needs an op")
        op = Op(op)
        if op is Op.BLOCK_SKIP:
            return BLOCK_HEADER_BYTES
        if op is Op.BLOCK_SUM:
            return BLOCK_HEADER_BYTES + 4 * words
        return words if op is Op.LUT_SUM else 4 * words
    if msg_type is MsgType.RESULT:
        # Block-sparse results carry the block header before the lanes.
        block = op is not None and Op(op) in (Op.BLOCK_SUM, Op.BLOCK_SKIP)
        return (BLOCK_HEADER_BYTES if block else 0) + 4 * words
    if msg_type in (MsgType.PAIRS, MsgType.PAIRS_ACK):
        return pairs * PAIR_BYTES
    if msg_type in (MsgType.HARVEST, MsgType.RESET):
        return HARVEST_HEADER_BYTES
    if msg_type is MsgType.HARVEST_DATA:
        return HARVEST_HEADER_BYTES + 4 * words
    if msg_type is MsgType.NOTICE:
        return 0
    raise ValueError(f"payload_bytes: unknown message type {msg_type!r}")


# --------------------------------------------------------------------------------------------
# The header itself (docs/protocol.md, "HINA header"): field widths in wire order, a struct and
# a numpy dtype of the same 16 bytes. hina.layers' scapy HINA layer is checked against them.
# --------------------------------------------------------------------------------------------
#: (field, bits) of the HINA header, most significant first.
HEADER_FIELDS = (("version", 4), ("msg_type", 4), ("op", 8), ("flags", 8), ("count", 8),
                 ("job_id", 16), ("pool", 1), ("slot", 15), ("seq", 32), ("generation", 16),
                 ("reserved", 16))
_HEADER_STRUCT = struct.Struct("!BBBBHHIHH")
#: The header as a numpy structured dtype (big endian, no padding): packed fields side by side.
HEADER_DTYPE = np.dtype([
    ("ver_type", "u1"),       # version << 4 | msg_type
    ("op", "u1"),             # lane op; NOTICE: the drop reason
    ("flags", "u1"),
    ("count", "u1"),
    ("job_id", ">u2"),
    ("pool_slot", ">u2"),     # pool << 15 | slot
    ("seq", ">u4"),
    ("generation", ">u2"),    # the sender's job generation; replies: the one they belong to
    ("reserved", ">u2"),      # 0
])
assert sum(bits for _, bits in HEADER_FIELDS) == 8 * _HEADER_STRUCT.size == 8 * HEADER_DTYPE.itemsize


def pack_header(msg_type: int, op: int = 0, *, flags: int = 0, count: int = 0, job_id: int = 0,
                pool: int = 0, slot: int = 0, seq: int = 0, generation: int = FIRST_GENERATION,
                reserved: int = 0, version: int = VERSION, wrap: bool = False) -> bytes:
    """The 16-byte HINA header with these fields.

    Args:
        wrap: cut every value to its field's width (fuzzers); otherwise a value that does not
            fit is a ValueError naming the field.

    Example::
        >>> pack_header(MsgType.AGGREGATE, Op.SUM, job_id=3, slot=1, pool=1, seq=5).hex()
        '41010000000380010000000500010000'
    """
    values = dict(version=version, msg_type=msg_type, op=op, flags=flags, count=count,
                  job_id=job_id, pool=pool, slot=slot, seq=seq, generation=generation,
                  reserved=reserved)
    for name, bits in HEADER_FIELDS:
        v = int(values[name])
        if wrap:
            values[name] = v & ((1 << bits) - 1)
        elif not 0 <= v < 1 << bits:
            raise ValueError(f"HINA header {name}={v!r}: must fit {bits} bits")
        else:
            values[name] = v
    return _HEADER_STRUCT.pack((values["version"] << 4) | values["msg_type"], values["op"],
                               values["flags"], values["count"], values["job_id"],
                               (values["pool"] << 15) | values["slot"], values["seq"],
                               values["generation"], values["reserved"])


def unpack_header(message: bytes) -> dict:
    """The fields of the HINA header at the start of ``message`` (names as HEADER_FIELDS).

    Raises:
        ValueError: ``message`` is shorter than a header.
    """
    if len(message) < HEADER_BYTES:
        raise ValueError(f"message of {len(message)} bytes is shorter than the "
                         f"{HEADER_BYTES}-byte HINA header")
    vt, op, flags, count, job_id, ps, seq, generation, reserved = _HEADER_STRUCT.unpack_from(
        message)
    return dict(version=vt >> 4, msg_type=vt & 0xF, op=op, flags=flags, count=count,
                job_id=job_id, pool=ps >> 15, slot=ps & 0x7FFF, seq=seq, generation=generation,
                reserved=reserved)


def ipv4_checksum(header: bytes) -> int:
    """The Internet checksum (RFC 1071) of an IPv4 header whose checksum field is zero."""
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def slot_and_pool(seq: int, n_slots: int) -> tuple[int, int]:
    """Where chunk ``seq`` of a job with ``n_slots`` slots goes: ``(slot, pool)``.

    Chunk ``seq`` uses slot ``seq mod n_slots`` and pool copy ``(seq div n_slots) mod 2``, so
    consecutive uses of a slot alternate copies (docs/protocol.md, "Slot aggregation").

    Example::
        >>> slot_and_pool(5, 4)
        (1, 1)
    """
    if not 0 < n_slots <= SLOT_CAPACITY:
        raise ValueError(f"n_slots={n_slots!r}: must be in [1, {SLOT_CAPACITY}]")
    if seq < 0:
        raise ValueError(f"seq={seq!r}: must be >= 0")
    return seq % n_slots, (seq // n_slots) % 2


def next_generation(generation: int) -> int:
    """The generation after ``generation``: one more, skipping 0 after :data:`MAX_GENERATION`.

    The switch only compares generations for equality (docs/protocol.md, "Generations"), so
    wrapping is harmless as long as no slot copy keeps state across 65535 generations; the
    controller zeroes the job's registers when the count wraps.

    Example::
        >>> next_generation(1), next_generation(MAX_GENERATION)
        (2, 1)
    """
    check_generation(generation)
    return FIRST_GENERATION if generation == MAX_GENERATION else generation + 1


def check_generation(generation: int, what: str = "generation") -> int:
    """``generation`` if it is a job generation, else ValueError naming the range and why."""
    if isinstance(generation, bool) or not isinstance(generation, int) \
            or not FIRST_GENERATION <= generation <= MAX_GENERATION:
        raise ValueError(f"{what}={generation!r}: must be an integer in [{FIRST_GENERATION}, "
                         f"{MAX_GENERATION}] ({GENERATION_BITS}-bit header field; 0 is what "
                         "zeroed switch registers hold)")
    return generation


def _listed(values) -> str:
    return ", ".join(map(str, values[:-1])) + f" or {values[-1]}"


def check_worker_words(words: int, what: str = "words") -> int:
    """``words`` if a worker speaks it (:data:`WORKER_WORDS`), else ValueError saying which do."""
    if isinstance(words, bool) or words not in WORKER_WORDS:
        raise ValueError(f"{what}={words!r}: workers speak {_listed(WORKER_WORDS)} words per "
                         f"packet ({_listed(V1MODEL_WORDS)}: the v1model program's HINA_WORDS; "
                         f"{TNA_TOFINO1_WORDS}: the TNA program's Tofino 1 build, "
                         f"TNA_LANES={TNA_TOFINO1_WORDS // 2})")
    return words


def check_v1model_words(words: int, what: str = "words") -> int:
    """``words`` if the v1model program (``p4/hina.p4``) compiles with it, else ValueError
    saying why not and what does work.

    Example::
        >>> check_v1model_words(64)
        64
    """
    if isinstance(words, bool) or words not in V1MODEL_WORDS:
        tna = (f"; {TNA_TOFINO1_WORDS} words per packet is the TNA program's Tofino 1 build "
               f"(p4/tna/hina_tna.p4, TNA_LANES={TNA_TOFINO1_WORDS // 2}), not this one"
               if words == TNA_TOFINO1_WORDS else "")
        raise ValueError(f"{what}={words!r}: the v1model program (p4/hina.p4) is compiled with "
                         f"HINA_WORDS {_listed(V1MODEL_WORDS)} (p4/include/config.p4){tna}: "
                         f"use {_listed(V1MODEL_WORDS)} words on a v1model target")
    return words


# --------------------------------------------------------------------------------------------
# Header field values
# --------------------------------------------------------------------------------------------
class MsgType(enum.IntEnum):
    """The 4-bit ``msg_type`` field."""
    AGGREGATE = 1      # worker -> switch: one contribution to a slot
    RESULT = 2         # switch -> workers: multicast on completion, unicast on retransmission
    PAIRS = 3          # worker -> switch: sparse (index, value) pairs for the in-switch sketch
    PAIRS_ACK = 4      # switch -> worker: pairs accepted (or already accepted), seq echoed
    HARVEST = 5        # worker -> switch: read one block of one sketch row
    HARVEST_DATA = 6   # switch -> worker: the block's counters (unicast to the requester)
    RESET = 7          # worker -> switch: zero one block of one sketch row; answered by RESET
    NOTICE = 8         # switch -> worker: header only; op = the DropReason, generation = the
                       # job's current one (answers a packet of another generation)


class Op(enum.IntEnum):
    """The 8-bit ``op`` field: the lane operation of an AGGREGATE (and its RESULT)."""
    SUM = 1            # signed 32-bit integer sum, overflow flagged
    LUT_SUM = 2        # THC: 4-bit indices -> controller-installed table values, 16-bit sums
    MAX = 3            # unsigned 32-bit maximum (non-negative float32 bits order as integers)
    OR = 4             # bitwise OR (sketch index bitmaps)
    BLOCK_SUM = 5      # block-sparse: one nonzero block (block header + lanes), SUM as op SUM
    BLOCK_SKIP = 6     # block-sparse: the sender's block is zero (block header only); RESULTs
                       # of block-sparse rounds always carry op BLOCK_SUM


class Flag(enum.IntFlag):
    """The 8-bit ``flags`` field."""
    OVERFLOW = 0x01    # a SUM lane of this slot overflowed 32-bit signed (result not usable)
    RETRANSMIT = 0x02  # worker: this is a retransmission; switch: this result answers one


class DropReason(enum.IntEnum):
    """Index into the ``HinaIngress.reason_counter`` counter array (P4 ``REASON_*``).

    OVERFLOW and DUPLICATE packets are counted but not dropped for an error: an overflow is
    flagged in the result; a duplicate into a filling slot is absorbed by design.
    """
    UNKNOWN_WORKER = 1   # job exists, (source IPv4, source port) is not one of its workers
    BAD_JOB = 2          # job id not installed, or its LUT is missing
    BAD_SLOT = 3         # slot (or harvest block / row) out of the job's range
    MALFORMED = 4        # wrong version, truncated, unknown type/op, switch-only message type
    STALE_POOL = 5       # an old round's packet for a pool copy that has moved on
    OVERFLOW = 6         # a SUM lane or sketch counter overflowed (flagged, not dropped)
    DUPLICATE = 7        # retransmission into a slot that is still filling (ignored)
    OUT_OF_ORDER = 8     # PAIRS packet ahead of the stream's next sequence number
    WRONG_PORT = 9       # a worker's (source IPv4, source port) on another switch port or with
                         # another source MAC than installed: a forged (or miswired) frame
    STALE_GENERATION = 10  # admitted sender, but not the job's current generation (NOTICE sent)
    BAD_CHECKSUM = 11    # UDP checksum missing (0) or wrong: the frame was corrupted after the
                         # FCS (a NIC, host memory), or its sender computed none
    BAD_BLOCK = 12       # block-sparse: the block index is not the one the slot copy's current
                         # round aggregates (a worker out of step with the others)


#: Size of the reason counter array (P4 ``HINA_REASONS``): reasons are 1..REASONS-1.
REASONS = 16

#: P4 names the tests and the controller use (``@name`` of the top-level controls).
INGRESS = "HinaIngress"
EGRESS = "HinaEgress"
REASON_COUNTER = f"{INGRESS}.reason_counter"
#: Packets and bytes admitted per job id (P4 ``HINA_MAX_JOBS`` cells, ``MAX_JOB_ID + 1``).
JOB_COUNTER = f"{INGRESS}.job_counter"
