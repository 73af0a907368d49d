"""v1model externs, bit-exact with BMv2 simple_switch where the golden vectors pin them down.

Hashes: ``crc32`` is zlib's CRC-32; ``crc16`` is CRC-16/ARC (poly 0x8005 reflected, init 0,
xorout 0); ``csum16`` is the Internet checksum; ``xor16`` folds 16-bit words with XOR;
``identity`` is the field list itself. The field list is serialised as its fields' bits
concatenated big-endian, padded with zero bits at the end to a whole byte. v1model's
``identity`` is BMv2's (:func:`identity_bmv2`): those bytes read big-endian, padding included,
the first 8 only.
"""
from __future__ import annotations

import random as _random
import time
import zlib

# v1model HashAlgorithm member order (enum values in our v1model.p4).
HASH_ALGOS = ("crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16",
              "xor16")
METER_GREEN, METER_YELLOW, METER_RED = 0, 1, 2
BITS_PER_BYTE = 8


def _crc16_table() -> list:
    poly = 0xA001             # 0x8005 reflected
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC16_TABLE = _crc16_table()


def crc16_arc(data: bytes) -> int:
    crc = 0
    for b in data:
        crc = (crc >> 8) ^ _CRC16_TABLE[(crc ^ b) & 0xFF]
    return crc


def csum16(data: bytes) -> int:
    """Internet checksum (RFC 1071) of ``data`` (odd length: padded with a zero byte)."""
    if len(data) % 2:
        data += b"\0"
    return csum16_int(int.from_bytes(data, "big"))


def csum16_int(s: int) -> int:
    """Internet checksum of the 16-bit words of ``s``: folding the high part into the low part
    until 16 bits remain is the ones' complement sum with end-around carry. Folding keeps ``s``
    modulo 0xFFFF (2**16 = 1 mod 0xFFFF) and ends in 1..0xFFFF for ``s > 0``, so the folded
    sum is ``(s - 1) % 0xFFFF + 1`` (one C-level division instead of a Python loop)."""
    if s:
        s = (s - 1) % 0xFFFF + 1
    return (~s) & 0xFFFF


def xor16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    x = 0
    for i in range(0, len(data), 2):
        x ^= int.from_bytes(data[i:i + 2], "big")
    return x


def serialize_fields(values: tuple, widths: tuple) -> bytes:
    """Concatenate fields big-endian, then pad with zero bits to a whole number of bytes."""
    acc, total = 0, 0
    for v, w in zip(values, widths):
        acc = (acc << w) | (v & ((1 << w) - 1))
        total += w
    pad = (-total) % BITS_PER_BYTE
    acc <<= pad
    return acc.to_bytes((total + pad) // BITS_PER_BYTE, "big")


IDENTITY = HASH_ALGOS.index("identity")
#: BMv2's identity reads this many bytes of the field list at most (a uint64_t)
IDENTITY_BYTES = 8


def identity_bmv2(packed: int, nbits: int) -> int:
    """BMv2's ``identity`` of a field list packed into ``nbits`` bits: its serialised bytes
    (zero bits of padding at the end) read big-endian, the first :data:`IDENTITY_BYTES` only.
    So ``{bit<3> a, bit<8> b}`` is ``(a ++ b) << 5``, and of ``{bit<64> a, bit<8> b}`` only
    ``a`` counts (the random differential test, seed 2043, found the first)."""
    pad = (-nbits) % BITS_PER_BYTE
    nbytes = (nbits + pad) // BITS_PER_BYTE
    value = packed << pad
    if nbytes > IDENTITY_BYTES:
        value >>= BITS_PER_BYTE * (nbytes - IDENTITY_BYTES)
    return value


def compute_hash(algo: int, values: tuple, widths: tuple) -> int:
    """v1model's hash of a field list (action selectors)."""
    name = HASH_ALGOS[algo] if 0 <= algo < len(HASH_ALGOS) else "crc32"
    if name == "identity":
        acc = 0
        for v, w in zip(values, widths):
            acc = (acc << w) | (v & ((1 << w) - 1))
        return identity_bmv2(acc, sum(widths))
    data = serialize_fields(values, widths)
    if name in ("crc32", "crc32_custom"):
        return zlib.crc32(data)
    if name in ("crc16", "crc16_custom"):
        return crc16_arc(data)
    if name == "csum16":
        return csum16(data)
    if name == "xor16":
        return xor16(data)
    return _random.getrandbits(32)


def packed_data(packed: int, nbits: int) -> bytes:
    """The bytes of a field list already packed into one int of ``nbits`` bits."""
    pad = (-nbits) % BITS_PER_BYTE
    return (packed << pad).to_bytes((nbits + pad) // BITS_PER_BYTE, "big")


def compute_hash_packed(algo: int, packed: int, nbits: int) -> int:
    """:func:`compute_hash` of a field list packed into one int (what generated code passes)."""
    name = HASH_ALGOS[algo] if 0 <= algo < len(HASH_ALGOS) else "crc32"
    if name == "identity":
        return packed
    if name == "csum16":
        pad = (-nbits) % (2 * BITS_PER_BYTE)
        return csum16_int(packed << pad)
    data = packed_data(packed, nbits)
    if name in ("crc32", "crc32_custom"):
        return zlib.crc32(data)
    if name in ("crc16", "crc16_custom"):
        return crc16_arc(data)
    if name == "xor16":
        return xor16(data)
    return _random.getrandbits(32)


def crc32_packed(packed: int, nbits: int) -> int:
    """``compute_hash_packed`` for crc32 / crc32_custom (what generated code calls when the
    algorithm is a compile-time constant)."""
    pad = (-nbits) % BITS_PER_BYTE
    return zlib.crc32((packed << pad).to_bytes((nbits + pad) // BITS_PER_BYTE, "big"))


def csum16_packed(packed: int, nbits: int) -> int:
    """``compute_hash_packed`` for csum16."""
    return csum16_int(packed << ((-nbits) % (2 * BITS_PER_BYTE)))


def hash_crc32(base: int, packed: int, nbits: int, max_: int, out_mask: int) -> int:
    """:func:`hash_packed` with the algorithm crc32 or crc32_custom."""
    pad = (-nbits) % BITS_PER_BYTE
    h = zlib.crc32((packed << pad).to_bytes((nbits + pad) // BITS_PER_BYTE, "big"))
    return (base + (h % max_ if max_ > 0 else h)) & out_mask


def hash_csum16(base: int, packed: int, nbits: int, max_: int, out_mask: int) -> int:
    """:func:`hash_packed` with the algorithm csum16."""
    h = csum16_int(packed << ((-nbits) % (2 * BITS_PER_BYTE)))
    return (base + (h % max_ if max_ > 0 else h)) & out_mask


def csum16_parts(parts: tuple) -> int:
    """The ones' sum of a field list given as ``(valid, residue, width)`` parts, for
    :func:`csum16_int`: invalid parts are left out (BMv2), and each part's residue -- its fields
    weighed by their bit position mod 16, see ``CodeGen.csum16_sum`` -- is weighed by where the
    part ends in the padded concatenation. Congruent to the concatenated value mod 0xFFFF, and 0
    exactly when every field is 0, which is all :func:`csum16_int` needs."""
    pos = -sum(width for valid, _, width in parts if valid)     # the pad, mod 16
    acc = 0
    for valid, residue, width in reversed(parts):
        if valid:
            acc += residue << (pos % 16)
            pos += width
    return acc


def hash_csum16_sum(base: int, acc: int, max_: int, out_mask: int) -> int:
    """:func:`hash_csum16` from the ones' sum of the field list (``csum16_parts``)."""
    h = csum16_int(acc)
    return (base + (h % max_ if max_ > 0 else h)) & out_mask


# Specialised entry points by algorithm number (HASH_ALGOS order), for constant algorithms.
HASH_BY_ALGO = {HASH_ALGOS.index("crc32"): "hash_crc32",
                HASH_ALGOS.index("crc32_custom"): "hash_crc32",
                HASH_ALGOS.index("csum16"): "hash_csum16"}
CHECKSUM_BY_ALGO = {HASH_ALGOS.index("crc32"): "crc32_packed",
                    HASH_ALGOS.index("crc32_custom"): "crc32_packed",
                    HASH_ALGOS.index("csum16"): "csum16_packed"}


def hash_packed(algo: int, base: int, packed: int, nbits: int, max_: int, out_mask: int) -> int:
    """``base + (h % max)`` of a packed field list, truncated to the output (``identity``: the
    field list itself, as TNA's Hash takes it; v1model's is :func:`hash_v1model`)."""
    h = compute_hash_packed(algo, packed, nbits)
    return (base + (h % max_ if max_ > 0 else h)) & out_mask


def compute_hash_v1model(algo: int, packed: int, nbits: int) -> int:
    """v1model's hash of a packed field list (:func:`compute_hash` of the fields):
    :func:`compute_hash_packed`, ``identity`` as BMv2 computes it (:func:`identity_bmv2`)."""
    if algo == IDENTITY:
        return identity_bmv2(packed, nbits)
    return compute_hash_packed(algo, packed, nbits)


def hash_v1model(algo: int, base: int, packed: int, nbits: int, max_: int, out_mask: int) -> int:
    """v1model ``hash`` on a packed field list: ``base + (h % max)`` of
    :func:`compute_hash_v1model`, truncated to the output."""
    h = compute_hash_v1model(algo, packed, nbits)
    return (base + (h % max_ if max_ > 0 else h)) & out_mask


def hash_extern(algo: int, base: int, values: tuple, widths: tuple, max_: int, out_mask: int) -> int:
    """v1model ``hash``: ``base + (h % max)``, truncated to the output width."""
    h = compute_hash(algo, values, widths)
    if max_ > 0:
        h = base + (h % max_)
    else:
        h = base + h
    return h & out_mask


class Register:
    """``register<T>(size)``: reads out of range give 0, writes out of range are ignored."""

    def __init__(self, name: str, size: int, width: int, signed: bool = False, initial: int = 0):
        self.name, self.size, self.width, self.signed = name, size, width, signed
        self.initial = initial          # TNA Register(size, initial_value); v1model: 0
        self.values = [initial] * size

    def read(self, index: int) -> int:
        if 0 <= index < self.size:
            return self.values[index]
        return 0

    def write(self, index: int, value: int) -> None:
        if 0 <= index < self.size:
            self.values[index] = value

    def reset(self) -> None:
        # In place: generated code holds a reference to this list.
        self.values[:] = [self.initial] * self.size


def tna_xor(packed: int, nbits: int, w: int, out_mask: int) -> int:
    """TNA Hash XOR8/16/32: the data cut into ``w``-bit words (padded with zeros at the end, an
    assumption), XORed together."""
    packed <<= (-nbits) % w
    h, m = 0, (1 << w) - 1
    while packed:
        h ^= packed & m
        packed >>= w
    return h & out_mask


class TnaChecksum:
    """TNA ``Checksum`` (16-bit ones' complement): ``add``/``subtract`` accumulate (per packet:
    the TNA dataplane clears every instance before each parser), ``verify`` is true when the
    checksum is WRONG (the accumulated sum is not 0xFFFF, or nothing was added), as bf-p4c
    compiles it: the parser checksum unit's error bit, which its v1model translation ORs into
    ``parser_err``'s checksum bit (tna.p4's comment reads the other way; the compiler is the
    judge). ``get`` gives the checksum of what was accumulated, ``update`` the checksum of its
    argument alone (the deparser's use; ``zeros_as_ones``: 0 as 0xFFFF)."""

    __slots__ = ("acc",)

    def __init__(self):
        self.acc = 0

    @staticmethod
    def _words(packed: int, nbits: int) -> int:
        return packed << ((-nbits) % (2 * BITS_PER_BYTE))

    def add(self, packed: int, nbits: int) -> None:
        self.acc += self._words(packed, nbits)

    def subtract(self, packed: int, nbits: int) -> None:
        self.acc += 0xFFFF - (self._words(packed, nbits) % 0xFFFF)

    def verify(self) -> bool:
        return self.acc == 0 or csum16_int(self.acc) != 0

    def get(self) -> int:
        return csum16_int(self.acc)

    @staticmethod
    def update(packed: int, nbits: int, zeros_as_ones: bool = False) -> int:
        value = csum16_packed(packed, nbits)
        return 0xFFFF if zeros_as_ones and value == 0 else value


class StructRegister:
    """TNA ``Register<S, I>`` of a struct ``S`` of ``bit<N>``/``int<N>`` fields: one struct object
    per cell (``make()`` gives a fresh initial value), which RegisterActions update in place.

    ``fields`` is ``((name, width, signed), ...)`` in ``S``'s order, ``type_name`` ``S``'s P4
    name. The control plane sees a cell as a tuple of unsigned ints, one per field
    (:meth:`read`, :meth:`write`); the dataplane runtime checks what it writes.
    """

    def __init__(self, name: str, size: int, make, fields: tuple = (), type_name: str = ""):
        self.name, self.size, self.make = name, size, make
        self.fields, self.type_name = tuple(fields), type_name
        self.values = [make() for _ in range(size)]
        # the generated struct class: builds a cell from field values (``of``)
        self.cls = type(self.values[0]) if self.values else type(make())

    def read(self, index: int) -> tuple:
        """Cell ``index`` as unsigned field values (signed fields are stored negative)."""
        return tuple(v & ((1 << w) - 1)
                     for v, (_, w, _) in zip(self.values[index].values(), self.fields))

    def write(self, index: int, values: tuple) -> None:
        """Set cell ``index`` from unsigned field values that fit their widths."""
        self.values[index] = self.cls.of(*(
            v - (1 << w) if signed and v >> (w - 1) else v
            for v, (_, w, signed) in zip(values, self.fields)))

    def reset(self) -> None:
        # In place: generated code holds a reference to this list.
        self.values[:] = [self.make() for _ in range(self.size)]


class Counter:
    """Indexed ``counter`` (v1model): (bytes, packets) per cell."""

    def __init__(self, name: str, size: int, unit: str):
        self.name, self.size, self.unit = name, size, unit
        self.bytes = [0] * size
        self.packets = [0] * size

    def count(self, index: int, length: int) -> None:
        if 0 <= index < self.size:
            self.bytes[index] += length
            self.packets[index] += 1


class MeterCell:
    """A two-rate three-colour marker (RFC 2698) as BMv2 implements it."""

    __slots__ = ("cir", "cburst", "pir", "pburst", "tc", "tp", "last")

    def __init__(self, cir: int, cburst: int, pir: int, pburst: int):
        self.cir, self.cburst, self.pir, self.pburst = cir, cburst, pir, pburst
        self.tc, self.tp = cburst, pburst
        self.last = time.monotonic()

    def execute(self, amount: int) -> int:
        now = time.monotonic()
        dt = now - self.last
        self.last = now
        self.tc = min(self.cburst, self.tc + dt * self.cir)
        self.tp = min(self.pburst, self.tp + dt * self.pir)
        if self.tp < amount:
            return METER_RED
        if self.tc < amount:
            self.tp -= amount
            return METER_YELLOW
        self.tp -= amount
        self.tc -= amount
        return METER_GREEN


class Meter:
    """Indexed ``meter``; unconfigured cells return GREEN. Rates are units per second."""

    def __init__(self, name: str, size: int, unit: str):
        self.name, self.size, self.unit = name, size, unit
        self.cells: dict = {}

    def execute(self, index: int, length: int) -> int:
        cell = self.cells.get(index)
        if cell is None:
            return METER_GREEN
        return cell.execute(length if self.unit == "BYTES" else 1)
