"""The pseudo-header of the TNA program's UDP checksum (tna_parser.p4) as the Tofino compiler
builds it: tests/tofino/data/udp_checksum_probe.p4 writes it as p4/tna does, ``{src, dst, 8w0,
protocol}``, a constant in a parser checksum list. The compiled ingress parser's checksum unit
must sum the protocol byte (by its place: an odd byte of the IPv4 header, so the low byte of its
word, 0x0011 as the pseudo-header has it) and the addresses, and leave out the TTL byte beside
the protocol; the embedded target sums the list as written, the same words. About 3 s a compile,
cached."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from hina import tofino_build
from hina.softswitch.engine.externs import TnaChecksum

PROBE = Path(__file__).parent / "data" / "udp_checksum_probe.p4"
needs_compiler = pytest.mark.skipif(shutil.which("bf-p4c") is None,
                                    reason="bf-p4c (../shared/p4tools-tofino) is not installed")


def _rows(bfa: str) -> list[str]:
    """The ingress parser's rows (a match value and what it extracts), as text."""
    ingress = bfa.split("parser ingress:", 1)[1].split("\nparser egress:", 1)[0]
    return re.split(r"\n(?=      \S[^\n]*:\n)", ingress)


def _bytes(spec: str) -> set[int]:
    out = set()
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("..")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


@needs_compiler
def test_the_pseudo_headers_protocol_byte_is_summed_in_its_place():
    build = tofino_build.compile_tna(PROBE, target="tofino")
    assert build.ok, tofino_build.first_error(build.log)
    bfa = next((build.out / "pipe").glob("*.bfa")).read_text()
    starts = [r for r in _rows(bfa) if re.search(r"type: VERIFY\n.*\n.*\n\s+start: 1", r)]
    assert len(starts) == 1, "one state starts the UDP checksum (the one extracting IPv4)"
    row = starts[0]
    mask = _bytes(re.search(r"mask: \[([^\]]*)\]", row).group(1))
    ipv4 = int(re.search(r"\n\s+(\d+)(?:\.\.\d+)?: \S+\n\s+# - bit\[0\.\.3\][^\n]*hdr\.ipv4\.version",
                         row).group(1))
    ttl, protocol, src_dst = ipv4 + 8, ipv4 + 9, set(range(ipv4 + 12, ipv4 + 20))
    assert protocol % 2 == 1, "the protocol byte is an odd byte of its 16-bit word"
    assert protocol in mask and ttl not in mask and src_dst <= mask, (sorted(mask), ipv4)


def test_the_embedded_target_sums_the_same_words():
    """{src, dst, 8w0, protocol} as one list on the embedded target: the words src_hi, src_lo,
    dst_hi, dst_lo and 0x0011, what Tofino's unit sums from the packet by place."""
    src, dst, protocol = 0x0A000101, 0x0A0000FE, 17
    listed, by_place = TnaChecksum(), TnaChecksum()
    listed.add((src << 48) | (dst << 16) | protocol, 80)
    for word in (src >> 16, src & 0xFFFF, dst >> 16, dst & 0xFFFF, protocol):
        by_place.add(word, 16)
    assert listed.acc % 0xFFFF == by_place.acc % 0xFFFF
