"""How the controller's P4Runtime client writes match values (``P4InfoIndex.field_match``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from hina.controller.p4runtime_client import P4InfoIndex, P4RuntimeClientError
from hina.softswitch.compiler import compile_file
from hina.softswitch.p4info import build_p4info

RANGE_TAGS = Path(__file__).resolve().parents[1] / "softswitch" / "programs" / "range_tags.p4"
ETHER = ("RangeIngress.ether_type_ranges", "hdr.ethernet.ether_type")     # bit<16>
TAG = ("RangeIngress.tag_id_ranges", "hdr.tag.id")                       # bit<12>


@pytest.fixture(scope="module")
def index():
    return P4InfoIndex(build_p4info(compile_file(str(RANGE_TAGS)).info))


@pytest.mark.parametrize("field, bounds, low, high", [
    (ETHER, (0, 0xFF), "0000", "00ff"),          # canonical b'\x00'..b'\xff': PI's "don't care"
    (ETHER, (6, 0xA69), "0006", "0a69"),         # canonical bounds of two lengths
    (ETHER, (0x100, 0xFFFE), "0100", "fffe"),
    (TAG, (0, 0x1FF), "0000", "01ff"),
    (TAG, (0xFFF, 0xFFF), "0fff", "0fff"),
])
def test_range_bounds_are_padded_to_the_fields_bytes(index, field, bounds, low, high):
    """Both bounds as many bytes as the field has: BMv2's server judges "don't care" by the
    bytes as sent (test_range_bounds_that_look_full_in_their_own_bytes in
    bmv2_tests/test_differential.py)."""
    m = index.field_match(*field, bounds)
    assert (m.range.low.hex(), m.range.high.hex()) == (low, high)


def test_a_range_bound_wider_than_the_field_is_refused(index):
    with pytest.raises(P4RuntimeClientError, match="does not fit in bit<12>"):
        index.field_match(*TAG, (0, 0x1000))
