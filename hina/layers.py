"""scapy layers for the HINA wire protocol (``docs/protocol.md``).

One :class:`~scapy.packet.Packet` per header, bound to the HINA UDP port range, so that
``Ether(frame)`` dissects a HINA frame and ``Ether()/IP()/UDP(dport=UDP_PORT_BASE)/HINA(...)``
builds one. Payload layers do not hard-code the program's ``HINA_WORDS``: they take whatever
length the frame has.

Example::

    >>> from scapy.all import Ether, IP, UDP, raw
    >>> from hina.protocol import UDP_PORT_BASE
    >>> p = (Ether() / IP() / UDP(sport=40000, dport=UDP_PORT_BASE)
    ...      / HINA(job_id=3, op="SUM") / HINAWords(words=[1, -2]))
    >>> Ether(raw(p))[HINAWords].words
    [1, -2]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scapy.fields import (BitEnumField, BitField, ByteEnumField, ByteField, FieldListField,
                          FlagsField, IntField, PacketListField, ShortField, SignedIntField,
                          StrField, XIntField)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from . import protocol as P

__all__ = ["HINA", "HINABlock", "HINAWords", "HINAThc", "HINAPair", "HINAPairs", "HINAHarvest",
           "pack_nibbles", "unpack_nibbles"]

_MSG_NAMES = {m.value: m.name for m in P.MsgType}
_OP_NAMES = {o.value: o.name for o in P.Op}
_REASON_NAMES = {r.value: r.name for r in P.DropReason}
_FLAG_NAMES = ["OVERFLOW", "RETRANSMIT", "bit2", "bit3", "bit4", "bit5", "bit6", "bit7"]


def pack_nibbles(indices: Sequence[int]) -> bytes:
    """Pack 4-bit THC table indices two per byte, the first of each pair in the high nibble.

    Raises:
        ValueError: for an odd count or an index outside [0, 15].
    """
    idx = np.asarray(indices, dtype=np.int64)
    if idx.ndim != 1 or idx.size % 2:
        raise ValueError(f"pack_nibbles: need an even number of indices, got shape {idx.shape}")
    if idx.size and (idx.min() < 0 or idx.max() >= P.THC_TABLE_SIZE):
        raise ValueError(f"pack_nibbles: indices must lie in [0, {P.THC_TABLE_SIZE - 1}]")
    return ((idx[0::2] << P.THC_INDEX_BITS) | idx[1::2]).astype(np.uint8).tobytes()


def unpack_nibbles(data: bytes) -> np.ndarray:
    """Inverse of :func:`pack_nibbles`: uint8 array of 2 * len(data) indices."""
    b = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(2 * b.size, dtype=np.uint8)
    out[0::2], out[1::2] = b >> P.THC_INDEX_BITS, b & (P.THC_TABLE_SIZE - 1)
    return out


class HINA(Packet):
    """The fixed 16-byte HINA header (``hina.protocol.HEADER_FIELDS``). In a NOTICE, ``op`` is
    the drop reason."""
    name = "HINA"
    fields_desc = [
        BitField("version", P.VERSION, 4),
        BitEnumField("msg_type", P.MsgType.AGGREGATE, 4, _MSG_NAMES),
        ByteEnumField("op", 0, _OP_NAMES),
        FlagsField("flags", 0, 8, _FLAG_NAMES),
        ByteField("count", 0),
        ShortField("job_id", 0),
        BitField("pool", 0, 1),
        BitField("slot", 0, 15),
        IntField("seq", 0),
        ShortField("generation", P.FIRST_GENERATION),
        ShortField("reserved", 0),
    ]

    def mysummary(self):
        msg = _MSG_NAMES.get(self.msg_type, self.msg_type)
        if self.msg_type == P.MsgType.NOTICE:
            op = _REASON_NAMES.get(self.op, self.op)
        else:
            op = _OP_NAMES.get(self.op, self.op)
        return self.sprintf(f"HINA v%version% {msg} op={op} job=%job_id% gen=%generation% "
                            f"slot=%slot%/pool%pool% seq=%seq% flags=%flags%")

    def guess_payload_class(self, payload):
        t = self.msg_type
        if t in (P.MsgType.AGGREGATE, P.MsgType.RESULT) and self.op in _BLOCK_OPS:
            return HINABlock
        if t == P.MsgType.AGGREGATE:
            return HINAThc if self.op == P.Op.LUT_SUM else HINAWords
        if t == P.MsgType.RESULT:
            return HINAWords
        if t in (P.MsgType.PAIRS, P.MsgType.PAIRS_ACK):
            return HINAPairs
        if t in (P.MsgType.HARVEST, P.MsgType.RESET, P.MsgType.HARVEST_DATA):
            return HINAHarvest
        return Packet.guess_payload_class(self, payload)


class HINABlock(Packet):
    """The block header of block-sparse messages (``BLOCK_SUM``, ``BLOCK_SKIP`` and their
    RESULT): the block aggregated and the next block (the sender's next nonzero block; in a
    RESULT, the next block to aggregate), ``BLOCK_END`` for none."""
    name = "HINA block"
    fields_desc = [IntField("block", 0), XIntField("next", P.BLOCK_END)]

    def mysummary(self):
        nxt = "END" if self.next == P.BLOCK_END else self.next
        return f"HINA block {self.block} next={nxt}"

    def guess_payload_class(self, payload):
        return HINAWords if payload else Packet.guess_payload_class(self, payload)


_BLOCK_OPS = (P.Op.BLOCK_SUM, P.Op.BLOCK_SKIP)


class HINAWords(Packet):
    """32-bit words: SUM/MAX/OR contributions and every RESULT (signed view)."""
    name = "HINA words"
    fields_desc = [FieldListField("words", [], SignedIntField("w", 0))]

    def mysummary(self):
        return f"HINA words ({len(self.words)})"

    def as_array(self, dtype=">i4") -> np.ndarray:
        """The words as a numpy array; ``dtype='>u2'`` gives the THC 16-bit sums in order."""
        return np.frombuffer(bytes(self)[:4 * len(self.words)], dtype=dtype)


class HINAThc(Packet):
    """THC contribution: 4-bit table indices, two per byte (see :func:`pack_nibbles`)."""
    name = "HINA THC indices"
    fields_desc = [StrField("data", b"")]

    @classmethod
    def from_indices(cls, indices: Sequence[int]) -> "HINAThc":
        return cls(data=pack_nibbles(indices))

    def indices(self) -> np.ndarray:
        return unpack_nibbles(self.data)

    def mysummary(self):
        return f"HINA THC ({2 * len(self.data)} indices)"


class HINAPair(Packet):
    """One (index, value) pair of the in-switch sketch."""
    name = "HINA pair"
    fields_desc = [XIntField("index", 0), SignedIntField("value", 0)]

    def extract_padding(self, s):
        return b"", s


class HINAPairs(Packet):
    """PAIRS payload (value 0 pads a packet to the program's HINA_PAIRS)."""
    name = "HINA pairs"
    fields_desc = [PacketListField("pairs", [], HINAPair)]

    def mysummary(self):
        return f"HINA pairs ({len(self.pairs)})"


class HINAHarvest(Packet):
    """Which block of which in-switch sketch row (HARVEST, RESET, HARVEST_DATA)."""
    name = "HINA harvest"
    fields_desc = [ByteField("row", 0), ByteField("reserved", 0), ShortField("block", 0)]

    def mysummary(self):
        return self.sprintf("HINA harvest row=%row% block=%block%")

    def guess_payload_class(self, payload):
        return HINAWords if payload else Packet.guess_payload_class(self, payload)


for _port in range(P.UDP_PORT_BASE, P.UDP_PORT_BASE + P.UDP_PORT_COUNT):
    bind_layers(UDP, HINA, dport=_port)
    bind_layers(UDP, HINA, sport=_port)
