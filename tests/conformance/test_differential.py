"""Random programs (``hina.testing.p4smith``, seeded) on the embedded target and BMv2: the same
frames in must give the same frames out. CI runs a handful of seeds;
``bench/p4_differential.py`` runs many."""
from __future__ import annotations

import pytest

from hina.testing import p4diff, p4smith
from hina.testing.targets import bmv2_missing, close_shared_bmv2, shared_bmv2

#: seeds run in every test session (about 2 s each with BMv2)
SEEDS = (1, 2, 3, 4, 5)


@pytest.fixture(scope="session", autouse=True)
def _stop_shared_bmv2_after_differential():
    """The shared BMv2 switch goes with the session (as in test_conformance.py)."""
    yield
    close_shared_bmv2()


@pytest.mark.parametrize("seed", SEEDS)
def test_embedded_matches_bmv2(seed, tmp_path):
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    report = p4diff.differential(seed, shared_bmv2(), tmp_path)
    assert report is None, report


def test_generator_is_deterministic():
    assert p4smith.generate(11).source == p4smith.generate(11).source
    assert p4smith.generate(11).source != p4smith.generate(12).source
    prog = p4smith.generate(11)
    frames = p4diff.packets(prog, 4)
    assert frames == p4diff.packets(prog, 4)
    assert all(len(f) >= p4smith.MIN_FRAME for f in frames)
    assert all(p4smith.veth_carries(f)
               for s in range(40) for f in p4diff.packets(p4smith.generate(s), 8))
    with pytest.raises(ValueError):
        p4diff.packets(prog, -1)


def test_the_generator_covers_every_feature_it_lists():
    """Each of p4smith.FEATURES (the coverage report's rows) appears in some of 100 programs,
    and a program's features are the ones its source shows; some programs read packet_length in
    egress after ingress changed a header's validity (how seed 3149 found issue 17)."""
    seen = set()
    length_after_validity = 0       # issue 17: egress reads packet_length after ingress's setValid
    for seed in range(100):
        prog = p4smith.generate(seed)
        seen |= prog.features
        src, used = prog.source, prog.features
        ingress = src[src.index("control MyIngress"):src.index("control MyEgress")]
        egress = src[src.index("control MyEgress"):src.index("control MyCompute")]
        length_after_validity += ("std.packet_length" in egress
                                  and (".setValid()" in ingress or ".setInvalid()" in ingress))
        assert ("table t0" in src) == bool({"const entries", "entries with priority"} & used)
        assert ("switch (t" in src) == ("switch (apply().action_run)" in used)
        assert ("pkt.extract(hdr.s.next)" in src) == ("header stack .next/.last" in used)
        assert ("lookahead<" in src) == ("lookahead in select" in used)
        assert ("hash(" in src) == any(f.startswith("hash ") for f in used)
        assert (".setValid()" in src) == ("setValid" in used)
        assert ("digest<" in src) == ("digest" in used) == bool(prog.digests)
        assert ("std.mcast_grp = " in src) == ("multicast group" in used) == prog.multicast
        assert ("clone(CloneType.I2E" in src) == ("clone I2E" in used)
        assert ("CloneType.E2E" in src) == ("clone E2E" in used)
        assert prog.clone == bool({"clone I2E", "clone E2E"} & used)
        assert ("resubmit_preserving" in src) == ("resubmit" in used)
        assert ("recirculate_preserving" in src) == ("recirculate" in used)
        for kind in ("verify", "update"):
            assert (f"{kind}_checksum(" in src) == (f"{kind}_checksum" in used)
            assert (f"{kind}_checksum_with_payload(" in src) == (
                f"{kind}_checksum_with_payload" in used)
        assert ("std.checksum_error" in src) == ("std.checksum_error read" in used)
        assert ("truncate(" in ingress) == ("truncate in ingress" in used)
        assert ("truncate(" in egress) == ("truncate in egress" in used)
        assert ("truncate(((bit<32>)" in src) == ("truncate to a field's value" in used)
        _check_value_switches(src)
        _check_checksum_calls(src)
    assert seen == set(p4smith.FEATURES)
    assert length_after_validity >= 5, length_after_validity


def _check_value_switches(src: str) -> None:
    """Every ``switch`` on a value has a ``default`` (an empty one where none was drawn):
    p4c-bm2-ss 1.2.5.16 folds values after one without as if a case always ran (seed 90160,
    programs/switch_no_default_value_after)."""
    lines = src.splitlines()
    for i, line in enumerate(lines):
        if "switch (" not in line or ".apply().action_run)" in line:
            continue
        indent = line[:len(line) - len(line.lstrip())]
        end = next(j for j in range(i + 1, len(lines)) if lines[j] == f"{indent}}}")
        assert any(lines[j].startswith(f"{indent}    default:") for j in range(i + 1, end)), \
            "\n".join(lines[i:end + 1])


def _check_checksum_calls(src: str) -> None:
    """A checksum call never lists its destination (p4c-bm2-ss refuses the copy p4c makes of
    such a list), and its condition names the validity of every header it reads (and h0's)."""
    import re
    for m in re.finditer(r"(?:verify|update)_checksum(?:_with_payload)?\((.*), \{ (.*) \}, "
                         r"(hdr\.[^,]+), HashAlgorithm\.csum16\);", src):
        cond, data, dest = m.groups()
        assert dest not in data.split(", "), m.group(0)
        for field in data.split(", ") + [dest, "hdr.h0.f0"]:
            if field.startswith("hdr."):
                header = field.rsplit(".", 1)[0]
                assert f"{header}.isValid()" in cond, (header, m.group(0))


def test_checksum_controls_leave_the_rest_of_a_program_alone(monkeypatch):
    """The checksum controls and truncate come from streams of their own: a program whose
    seed draws update_checksum calls and no verify control is, without those calls and any
    truncate, the program the seed gives with neither control nor truncate."""
    import random

    compared = 0
    for seed in range(40):
        prog = p4smith.generate(seed)
        # a verify control drawn adds std.checksum_error to what ingress reads from
        if p4smith._Gen(seed).verify or "update_checksum" not in prog.source:
            continue
        with monkeypatch.context() as m:
            class Never(random.Random):
                def random(self):      # neither control drawn; their calls not reached
                    return 1.0
            m.setattr(p4smith, "checksum_rng", lambda s: Never(s))
            m.setattr(p4smith, "truncate_rng", lambda s: Never(s))
            plain = p4smith.generate(seed).source
        stripped = "\n".join(line for line in prog.source.splitlines()
                              if "update_checksum" not in line and "truncate(" not in line)
        assert stripped == plain.rstrip("\n") or stripped + "\n" == plain, seed
        compared += 1
    assert compared >= 5, compared


def test_frames_follow_the_parser():
    """The frames take the parser's paths: over 40 programs, frames long enough to fill the
    stack, frames cut short, and frames whose select field holds a value a case names."""
    hit = cut = 0
    for seed in range(40):
        prog = p4smith.generate(seed)
        start = prog.parser["start"]
        need = sum(start["extract"]) // 8
        named = {c[0][0][1] for c in start["select"]["cases"] if c[0][0][0] == "v"} \
            if start["select"] and len(start["select"]["keys"]) == 1 else set()
        for frame in p4diff.packets(prog, 8):
            if named:
                j = start["select"]["keys"][0]
                off = sum(start["extract"][:j]) // 8
                w = start["extract"][j] // 8
                hit += int.from_bytes(frame[off:off + w], "big") in named
            cut += len(frame) < need + p4smith.MIN_FRAME
    assert hit > 20 and cut > 5, (hit, cut)


def test_digests_are_compared_in_order_or_as_counts():
    """BMv2 may drop a repeat it has not had acknowledged; a program whose copies take other
    passes (clone, resubmit, recirculate) may learn in another order (seed 3230)."""
    from hina.softswitch.api import Digest

    def learned(embedded, bmv2):
        return ([("embedded", Digest("d", (v,))) for v in embedded]
                + [("bmv2", Digest("d", (v,))) for v in bmv2])

    def compare(embedded, bmv2, unordered=False):
        stats = {}
        problem = p4diff._compare_digests(["d"], learned(embedded, bmv2), stats, unordered)
        return problem is None, stats.get("digest repeats BMv2 dropped", 0)

    assert compare([1, 1, 2], [1, 2]) == (True, 1)             # a repeat dropped
    assert compare([1, 2, 2], [2, 1])[0] is False               # order kept without copies
    assert compare([1, 2], [1])[0] is False                     # a value never sent
    assert compare([1], [1, 1])[0] is False                     # one sent more often
    assert compare([1, 1, 2, 2], [1, 2, 1, 2], unordered=True) == (True, 0)
    assert compare([1, 1, 2, 2], [2, 1], unordered=True) == (True, 2)
    assert compare([1, 1, 2], [1, 1], unordered=True)[0] is False
    assert compare([1, 2], [1, 2, 3], unordered=True)[0] is False
    assert compare([1], [1, 1], unordered=True)[0] is False
