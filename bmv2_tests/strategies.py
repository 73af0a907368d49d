"""Hypothesis strategies for differential runs: table contents and frames for any program, and
HINA jobs and traffic for ``p4/hina.p4``.

Generic programs: entries are drawn from the program's own :class:`ProgramInfo` (every
non-const table, every action a table may hold, every match kind), and values for keys, action
arguments and frame fields come in good part from one small pool, so that generated frames do
hit generated entries. Frames are Ethernet / IPv4 / UDP or TCP built from the same pool, mutated
(truncated, bit-flipped, header fields patched, tails added) or plain random bytes: the
malformed-frame cases of ``tests/softswitch/test_frame_fuzz.py`` are among them.
"""
from __future__ import annotations

import struct

from hypothesis import strategies as st

from hina.framing import (FRAME_HEADER_BYTES, checksum_of, ones_sum, parse_frame,
                          udp_header_residue)
from hina.protocol import ipv4_checksum
from hina.testing.p4smith import MIN_FRAME, veth_carries
from hina.softswitch.api import (ActionCall, Exact, Lpm, Optional_, ProgramInfo, Range, TableEntry,
                            Ternary)

#: Values that keys and frames share (each is masked to the width it is drawn for).
POOL = (0, 1, 2, 3, 4, 0x0800, 0x86DD, 0x11, 0x06, 64, 0x0A000001, 0x0A000002, 0x0A000100,
        0x0A000201, 0x020000000001, 0x020000000002, 0xFFFFFFFFFFFF, 40000, 40001, 0x9C40, 255)
#: Linux sends no frame shorter than an Ethernet header on a veth (it zero-pads to 14 bytes), so
#: generated frames are at least that long on both targets (MIN_FRAME), and one with a VLAN type
#: holds its tag (p4smith.veth_carries): :func:`padded`.


def value(width: int) -> st.SearchStrategy[int]:
    mask = (1 << width) - 1
    return st.one_of(st.sampled_from(sorted({v & mask for v in POOL})),
                     st.integers(0, mask))


@st.composite
def _match(draw, field):
    w = field.bitwidth
    kind = field.match_kind
    if kind == "exact":
        return Exact(draw(value(w)))
    if kind == "ternary":
        if draw(st.booleans()):
            return None
        mask = draw(st.one_of(st.just((1 << w) - 1), value(w)))
        return Ternary(draw(value(w)) & mask, mask)
    if kind == "lpm":
        plen = draw(st.integers(0, w))
        keep = ((1 << plen) - 1) << (w - plen)
        return Lpm(draw(value(w)) & keep, plen)
    if kind == "range":
        a, b = draw(value(w)), draw(value(w))
        return Range(min(a, b), max(a, b))
    if kind == "optional":
        return None if draw(st.booleans()) else Optional_(draw(value(w)))
    raise ValueError(f"match kind {kind!r}")


@st.composite
def table_entry(draw, info: ProgramInfo, tables) -> TableEntry:
    table = draw(st.sampled_from(tables))
    refs = [r.name for r in table.action_refs if r.scope != "DEFAULT_ONLY"
            and not _hidden(info.action(r.name).annotations)]
    action = info.action(draw(st.sampled_from(refs)))
    matches = tuple(draw(_match(f)) for f in table.match_fields)
    args = tuple(draw(value(p.bitwidth)) for p in action.params)
    priority = draw(st.integers(1, 100)) if table.needs_priority else 0
    return TableEntry(table.name, matches, ActionCall(action.name, args), priority)


def _hidden(annotations) -> bool:
    return any(a.strip().startswith("@hidden") for a in annotations)


def writable_tables(info: ProgramInfo) -> list:
    """Tables a controller can add entries to: in P4Info (not ``@hidden``), not const, with a
    key and some action allowed in entries."""
    return [t for t in info.tables
            if not t.is_const and t.match_fields and not _hidden(t.annotations)
            and any(r.scope != "DEFAULT_ONLY" and not _hidden(info.action(r.name).annotations)
                    for r in t.action_refs)]


def table_contents(info: ProgramInfo, max_size: int = 12):
    tables = writable_tables(info)
    if not tables:
        return st.just([])
    return st.lists(table_entry(info, tables), max_size=max_size)


@st.composite
def structured_frame(draw) -> bytes:
    """Ethernet / IPv4 / UDP or TCP from the pool (right lengths and checksum, or not)."""
    payload = draw(st.binary(max_size=48))
    proto = draw(st.sampled_from([17, 6, 1, draw(value(8))]))
    l4 = (struct.pack("!HHHH", draw(value(16)), draw(value(16)), 8 + len(payload), 0)
          if proto == 17 else
          struct.pack("!HHIIBBHHH", draw(value(16)), draw(value(16)), 0, 0, 0x50, 0x02, 1024, 0, 0)
          if proto == 6 else b"")
    total = 20 + len(l4) + len(payload)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 1, 0, draw(st.sampled_from(
        [64, 1, 0, 255])), proto, 0, draw(value(32)).to_bytes(4, "big"),
        draw(value(32)).to_bytes(4, "big")))
    ip[10:12] = ipv4_checksum(bytes(ip)).to_bytes(2, "big")
    ethertype = draw(st.sampled_from([0x0800, 0x0800, 0x0800, 0x86DD, 0x0806, draw(value(16))]))
    eth = draw(value(48)).to_bytes(6, "big") + draw(value(48)).to_bytes(6, "big") + \
        ethertype.to_bytes(2, "big")
    return eth + bytes(ip) + l4 + payload


def _mutate(frame: bytes, how: str, where: int, data: bytes, refit: bool) -> bytes:
    if how == "as is":
        return frame
    if how == "truncate":
        out = frame[:where % (len(frame) + 1)]
    elif how == "flip":
        out = bytearray(frame)
        out[where % len(out)] ^= data[0] if data and data[0] else 0xFF
        out = bytes(out)
    elif how == "patch":
        at = where % len(frame)
        out = frame[:at] + data + frame[at + len(data):]
    else:
        out = frame + data          # "tail"
    return _refit_udp_checksum(out) if refit else out


def _refit_udp_checksum(frame: bytes) -> bytes:
    """``frame`` with the UDP checksum its (possibly mutated) fields and payload call for, when
    it is IPv4/UDP at all: a mutation that the sender made (not the wire), so that it gets past
    the switch's checksum check to the checks behind it."""
    parsed = parse_frame(frame)
    if parsed is None or not parsed.udp_length_ok:
        return frame
    at = FRAME_HEADER_BYTES - 2
    blank = frame[:at] + b"\0\0" + frame[at + 2:]
    udp_len = int.from_bytes(frame[at - 2:at], "big")
    residue = udp_header_residue(parsed.src, parsed.dst, udp_len) + ones_sum(
        blank[FRAME_HEADER_BYTES:FRAME_HEADER_BYTES + udp_len - 8])
    return frame[:at] + checksum_of(residue).to_bytes(2, "big") + frame[at + 2:]


def mutated(frames: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """``frames`` as they are, or truncated, bit-flipped, patched or with a tail added; a
    mutated frame's UDP checksum is refitted half of the time (a sender's mistake rather than
    corruption on the wire)."""
    return st.builds(_mutate, frames,
                     st.sampled_from(["as is", "as is", "truncate", "flip", "patch", "tail"]),
                     st.integers(0, 1 << 16), st.binary(min_size=1, max_size=4),
                     st.booleans())


def padded(frame: bytes) -> bytes:
    """``frame`` as a veth carries it: zero-padded to :data:`MIN_FRAME` bytes; a VLAN Ethernet
    type at bytes 12..13 without room for its tag, which a veth drops, gets its low bit flipped
    (as :mod:`hina.testing.p4diff` does)."""
    out = bytearray(frame + bytes(max(0, MIN_FRAME - len(frame))))
    if not veth_carries(out):
        out[13] ^= 1
    return bytes(out)


def hina_generation(current: int) -> st.SearchStrategy[int]:
    """A HINA header generation for a job whose current one is ``current``: mostly matching,
    else stale (the previous and next generations, 0 and the extremes of the 16-bit field)."""
    others = sorted({(current - 1) & 0xFFFF, (current + 1) & 0xFFFF, 0, 1, 0xFFFF} - {current})
    return st.one_of(st.just(current), st.just(current), st.sampled_from(others))


def any_frame() -> st.SearchStrategy[bytes]:
    """Structured frames, their mutations, and random bytes; padded as Linux sends them."""
    return st.one_of(mutated(structured_frame()), st.binary(max_size=96)).map(padded)
