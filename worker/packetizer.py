"""Turn codec lane streams into HINA messages and results back into lanes, without per-lane loops.

A stream of ``n`` chunks becomes one numpy record array whose rows are the HINA messages
(16-byte header + payload, ``docs/protocol.md``): the header fields are set column-wise and the
payload is a big-endian view of the stream's data. Results are parsed the same way: the payloads
of all chunks land in one buffer whose native-order view is the aggregated stream.

Wire formats per lane operation (``hina.protocol``):

======== ============================== =================================================
op       AGGREGATE payload               RESULT payload
======== ============================== =================================================
SUM      ``words`` x big-endian int32    ``words`` x big-endian int32 (signed sums)
LUT_SUM  ``words`` bytes of two nibbles  ``2 * words`` x big-endian uint16 sums
MAX, OR  ``words`` x big-endian uint32   ``words`` x big-endian uint32
======== ============================== =================================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from hina import protocol as P

__all__ = ["HEADER_DTYPE", "ChunkLayout", "layout_for", "build_aggregates", "parse_header",
           "result_payload_dtype"]

#: The HINA header as a numpy structured dtype (defined with the protocol, hina.protocol).
HEADER_DTYPE = P.HEADER_DTYPE

_POOL_SHIFT = 15
_SLOT_MASK = (1 << _POOL_SHIFT) - 1

# What the codecs hand over per op: (wire dtype up, element count per chunk up,
#                                    wire dtype down, element count per chunk down)
_UP = {P.Op.SUM: ">i4", P.Op.MAX: ">u4", P.Op.OR: ">u4", P.Op.LUT_SUM: "u1"}
_DOWN = {P.Op.SUM: ">i4", P.Op.MAX: ">u4", P.Op.OR: ">u4", P.Op.LUT_SUM: ">u2"}


def result_payload_dtype(op: P.Op) -> np.dtype:
    """Big-endian element dtype of a RESULT payload for lane operation ``op``."""
    return np.dtype(_DOWN[P.Op(op)])


@dataclass(frozen=True)
class ChunkLayout:
    """How a stream of ``elements`` wire elements splits into chunks of one message each.

    Attributes:
        op: the lane operation.
        elements: wire elements of the stream (bytes for LUT_SUM, 32-bit words otherwise).
        per_chunk: wire elements per message (``words`` for every op: a LUT_SUM byte is a word's
            worth of two coordinates in the result's 16-bit lanes).
        chunks: number of messages.
        result_per_chunk: result elements per message (``2 * words`` 16-bit sums for LUT_SUM).
    """
    op: P.Op
    elements: int
    per_chunk: int
    chunks: int
    result_per_chunk: int

    @property
    def up_bytes(self) -> int:
        """Payload bytes of one AGGREGATE message."""
        return self.per_chunk * np.dtype(_UP[self.op]).itemsize

    @property
    def down_bytes(self) -> int:
        """Payload bytes of one RESULT message."""
        return self.result_per_chunk * result_payload_dtype(self.op).itemsize


def layout_for(op: P.Op, elements: int, words: int = P.WORDS) -> ChunkLayout:
    """The chunking of a stream of ``elements`` wire elements for a program of ``words`` words.

    Raises:
        ValueError: ``words`` is not one a worker speaks (``hina.protocol.WORKER_WORDS``: the
            v1model program's HINA_WORDS and the TNA Tofino 1 build's 32), or ``elements`` is
            negative.
    """
    op = P.Op(op)
    P.check_worker_words(words)
    if elements < 0:
        raise ValueError(f"elements={elements}: must be >= 0")
    chunks = -(-elements // words)
    result_per_chunk = 2 * words if op is P.Op.LUT_SUM else words
    return ChunkLayout(op, elements, words, chunks, result_per_chunk)


def build_aggregates(layout: ChunkLayout, data: np.ndarray, job_id: int, first_seq: int,
                     n_slots: int, generation: int = P.FIRST_GENERATION,
                     seqs: Optional[np.ndarray] = None) -> np.ndarray:
    """All AGGREGATE messages of a stream as one ``(chunks, 16 + payload)`` uint8 array.

    Chunk ``k`` carries ``seq = first_seq + k`` (mod 2^32) in ``slot = seq mod n_slots`` of pool
    ``(seq div n_slots) mod 2`` (the protocol's self-clocked numbering).

    Args:
        layout: from :func:`layout_for`.
        data: the stream's wire values (int32 / uint32 / uint8 packed nibbles), 1-D, native order.
        job_id: the job.
        first_seq: sequence number of the first chunk.
        n_slots: the job's slot count.
        generation: the worker's job generation (docs/protocol.md, "Generations").
        seqs: the chunks' sequence numbers, when they are not ``first_seq + k`` (a transport
            lane's, :meth:`worker.transport.Transport.lanes`); slot and pool follow from them.

    Returns:
        A C-contiguous uint8 array; row ``k`` is the UDP payload of chunk ``k``.
    """
    if data.ndim != 1 or data.size != layout.elements:
        raise ValueError(f"data: expected {layout.elements} elements in 1-D, got shape {data.shape}")
    if not 1 <= n_slots <= P.SLOT_CAPACITY:
        raise ValueError(f"n_slots={n_slots}: must be in [1, {P.SLOT_CAPACITY}]")
    n = layout.chunks
    record = np.dtype([("hdr", HEADER_DTYPE), ("payload", _UP[layout.op], (layout.per_chunk,))])
    msgs = np.zeros(n, dtype=record)
    if seqs is None:
        seq = (np.arange(n, dtype=np.uint64) + np.uint64(first_seq)) & np.uint64(0xFFFFFFFF)
    elif len(seqs) != n:
        raise ValueError(f"seqs: {len(seqs)} sequence numbers for {n} chunks")
    else:
        seq = np.asarray(seqs, dtype=np.uint64) & np.uint64(0xFFFFFFFF)
    hdr = msgs["hdr"]
    hdr["ver_type"] = (P.VERSION << 4) | int(P.MsgType.AGGREGATE)
    hdr["op"] = int(layout.op)
    hdr["job_id"] = job_id
    hdr["seq"] = seq
    hdr["generation"] = P.check_generation(generation)
    hdr["pool_slot"] = (((seq // n_slots) & 1) << _POOL_SHIFT) | (seq % n_slots)
    padded = np.zeros(n * layout.per_chunk, dtype=data.dtype)
    padded[:data.size] = data
    msgs["payload"] = padded.reshape(n, layout.per_chunk)   # to big endian, vectorised
    return msgs.view(np.uint8).reshape(n, record.itemsize)


def parse_header(message: bytes) -> np.void:
    """The header of one received message as a numpy record (fields as in HEADER_DTYPE).

    Raises:
        ValueError: the message is shorter than a header.
    """
    if len(message) < P.HEADER_BYTES:
        raise ValueError(f"message of {len(message)} bytes is shorter than the "
                         f"{P.HEADER_BYTES}-byte HINA header")
    return np.frombuffer(message, dtype=HEADER_DTYPE, count=1)[0]


def slot_of(seq: int, n_slots: int) -> tuple[int, int]:
    """(pool, slot) of sequence number ``seq``."""
    return (seq // n_slots) & 1, seq % n_slots
