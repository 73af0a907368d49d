"""The STF runner: every command against the real engine, and failures that must be reported."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from l3fwd_util import PROGRAM as L3FWD
from hina.softswitch.stf import run_stf, run_stf_text
from hina.softswitch.stf_syntax import (Expectation, StfError, parse_match, parse_wildcard_number,
                                        resolve_name, stf_field_name)
from hina.softswitch.api import Lpm, MatchFieldInfo, Ternary

HERE = Path(__file__).resolve().parent
STF_DIR = HERE / "stf"
FEATURES = STF_DIR / "features.p4"
REPO = HERE.parents[1]
PROCESS_TIMEOUT_S = 60

STF_PROGRAMS = {
    "l3fwd.stf": L3FWD,
    "features_tables.stf": FEATURES,
    "features_pre.stf": FEATURES,
    "features_externs.stf": FEATURES,
}


@pytest.fixture(scope="module")
def features():
    from hina.softswitch.compiler import compile_file
    return compile_file(str(FEATURES))


# -- the example files pass ------------------------------------------------------------------
@pytest.mark.parametrize("stf_name", sorted(STF_PROGRAMS))
def test_stf_file_passes(stf_name):
    result = run_stf(STF_DIR / stf_name, STF_PROGRAMS[stf_name])
    assert result.passed, result.report() + "\n" + "\n".join(result.log)
    assert result.failures == []


def test_every_stf_file_is_run():
    assert sorted(p.name for p in STF_DIR.glob("*.stf")) == sorted(STF_PROGRAMS)


# -- wrong expectations and bad commands fail, with the reason -------------------------------
FRAME = "000000000001 000000000009 1234 AB"
FORWARD_TO_1 = "add forward dstAddr:0x000000000001 set_port(port:1)\n"


@pytest.mark.parametrize("stf, message", [
    (FORWARD_TO_1 + f"packet 0 {FRAME}\nexpect 1 000000000001 000000000009 1234 AC",
     "differs at byte 14 (nibble 29): expected C, got B"),
    (FORWARD_TO_1 + f"packet 0 {FRAME}\nexpect 1 {FRAME} 00",
     "frame too short: 15 bytes, expected at least 16"),
    (FORWARD_TO_1 + f"packet 0 {FRAME}\nexpect 1 000000000001 000000000009 1234 $",
     "frame too long: 15 bytes, expected exactly 14"),
    (f"packet 0 {FRAME}\nexpect 1 {FRAME}", "port 1: expected 1 frames, got 0"),
    (FORWARD_TO_1 + f"packet 1 {FRAME}", "port 1: expected 0 frames, got 1"),
    (FORWARD_TO_1 + f"packet 0 {FRAME}\npacket 0 {FRAME}\nexpect 1 {FRAME}",
     "port 1: expected 1 frames, got 2"),
    ("add nosuchtable key:1 drop()", "no table named 'nosuchtable'"),
    ("add forward dstAddr:1 set_port(prt:1)", "has no parameter prt"),
    ("add forward dstAddr:1 set_port()", "missing argument port"),
    ("add forward nosuchkey:1 drop()", "no key field named 'nosuchkey'"),
    ("add forward dstAddr:1 fly()", "no action named 'fly' in table FeatureIngress.forward"),
    ("meter_set_rates m 0 1:1 2:2", "no meter named 'm'"),
    ("mirroring_add_mc 1 1", "unsupported STF command 'mirroring_add_mc'"),
    ("pvs_add vs 1", "no value set named 'vs'"),
    ("act_prof_create_group sel 1", "no action profile named 'sel'"),
    ("packet 0 0", "odd number of hex digits"),
    ("expect 1 0G", "must be an even number of hex digits"),
    ("register_read last_type 0 == 5", "register FeatureIngress.last_type[0] is 0, expected == 5"),
    ("check_counter rx_frames(1) packets == 1",
     "counter FeatureIngress.rx_frames[1] packets is 0, expected == 1"),
    ("check_counter forward_hits(nohandle)", "no entry was added with handle 'nohandle'"),
    ("mc_node_associate 1 0", "multicast group 1 was not created"),
    ("mc_mgrp_create 1\nmc_node_associate 1 0", "no multicast node with handle 0"),
])
def test_failures_are_reported(features, stf, message):
    _fails_with(features, stf, message)


def _fails_with(program, stf: str, message: str) -> None:
    result = run_stf_text(stf, program, filename="t.stf")
    assert not result.passed
    assert any(message in f.message for f in result.failures), result.report()


def test_failure_names_the_file_and_line(features):
    result = run_stf_text("# comment\n\nadd forward dstAddr:1 fly()\n", features, filename="t.stf")
    assert [str(f).split(": ")[0] for f in result.failures] == ["t.stf:3"]


def test_commands_after_a_failure_still_run(features):
    stf = (f"add nosuchtable k:1 a()\n{FORWARD_TO_1}packet 0 {FRAME}\nexpect 1 {FRAME} $\n")
    result = run_stf_text(stf, features)
    assert len(result.failures) == 1
    assert result.outputs == {1: [bytes.fromhex("".join(FRAME.split()))]}


def test_expect_without_data_accepts_any_number_of_frames(features):
    stf = FORWARD_TO_1 + f"packet 0 {FRAME}\npacket 0 {FRAME}\nexpect 1\n"
    assert run_stf_text(stf, features).passed


def test_frames_on_unchecked_ports_are_recorded_not_failed(features):
    stf = FORWARD_TO_1 + f"packet 0 {FRAME}\n"
    result = run_stf_text(stf, features)
    assert result.passed and len(result.outputs[1]) == 1


# -- pieces ------------------------------------------------------------------------------------
def test_wildcard_numbers():
    assert parse_wildcard_number("0x0A**") == (0x0A00, 0xFF00, 16)
    assert parse_wildcard_number("0b1*1") == (0b101, 0b101, 3)
    assert parse_wildcard_number("12") == (12, -1, 0)
    with pytest.raises(StfError):
        parse_wildcard_number("0x0G")


def test_match_values():
    ternary = MatchFieldInfo("hdr.x", 16, "ternary")
    lpm = MatchFieldInfo("hdr.ip", 32, "lpm")
    assert parse_match("0x**0A", ternary) == Ternary(0x000A, 0x00FF)
    assert parse_match("0x0800&&&0xFF00", ternary) == Ternary(0x0800, 0xFF00)
    assert parse_match("0x****", ternary) is None
    assert parse_match("0x0a000000/8", lpm) == Lpm(0x0A000000, 8)
    assert parse_match("0x0a01****", lpm) == Lpm(0x0A010000, 16)
    assert parse_match("167772161", lpm) == Lpm(167772161, 32)


def test_names_resolve_like_bmv2stf():
    names = ["MyIngress.ipv4_lpm", "MyEgress.ipv4_lpm_stats", "MyIngress.acl"]
    assert resolve_name("acl", names, "table") == "MyIngress.acl"
    assert resolve_name("MyIngress.ipv4_lpm", names, "table") == "MyIngress.ipv4_lpm"
    assert resolve_name("ipv4_lpm", names, "table") == "MyIngress.ipv4_lpm"
    with pytest.raises(StfError, match="ambiguous"):
        resolve_name("lpm", ["A.x_lpm", "B.y_lpm"], "table")
    assert stf_field_name("hdr.vlan$1.vid") == "hdr.vlan[1].vid"


def test_expectation_wildcards_and_length():
    assert Expectation(1, "AB**", False).mismatch(bytes.fromhex("ABCDEF")) is None
    assert Expectation(1, "AB**", True).mismatch(bytes.fromhex("ABCDEF")).startswith("frame too long")
    assert "differs at byte 0" in Expectation(1, "AC", False).mismatch(b"\xab")


# -- the CLI -----------------------------------------------------------------------------------
def test_stf_subcommand_exit_status():
    def run(stf: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hina.softswitch", "stf", str(stf), str(L3FWD)],
                              cwd=REPO, capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S)

    passing = run(STF_DIR / "l3fwd.stf")
    assert passing.returncode == 0 and passing.stdout.strip() == "PASS", passing.stderr
    failing = run(STF_DIR / "features_pre.stf")          # l3fwd has no table "forward"
    assert failing.returncode == 1 and failing.stdout.startswith("FAIL")
    assert "no table named 'forward'" in failing.stdout
    assert "Traceback" not in failing.stderr


def test_tabs_separate_words_like_spaces(features):
    stf = "add\tforward\tdstAddr:0x000000000001\tset_port(port:1)\n" \
          f"packet\t0\t{FRAME}\nexpect\t1\t{FRAME}\t$\n"
    result = run_stf_text(stf, features)
    assert result.passed, result.report()


# -- expect_digest (HINA extension) ----------------------------------------------------------
DIGESTS = REPO / "tests" / "conformance" / "programs" / "digest_call_time_values.p4"
OP1 = "packet 1 000000000001 0000000000AA 0800 01 00\n"


@pytest.fixture(scope="module")
def digests():
    from hina.softswitch.compiler import compile_file
    return compile_file(str(DIGESTS))


@pytest.mark.parametrize("stf, message", [
    (OP1 + "expect_digest learn_t 0xAB 1", "digest learn_t 0: expected 0xab 0x1, got 0xaa 0x1"),
    (OP1 + "expect_digest learn_t 0xAA 1\nexpect_digest learn_t 0xAA 1",
     "digest learn_t: expected 2, got 1"),
    (OP1 + OP1 + "expect_digest learn_t 0xAA *", "digest learn_t: expected 1, got 2"),
    ("expect_digest learn_t 1", "digest learn_t has 2 fields (src, port), 1 values given"),
    ("expect_digest learn_t 1 512", "field port: 512 does not fit bit<9>"),
    ("expect_digest nosuch 1", "no digest named 'nosuch'"),
])
def test_digest_expectations_fail_with_the_reason(digests, stf, message):
    _fails_with(digests, stf, message)


def test_digest_wildcards_and_unchecked_types(digests):
    # small_t has no expectation: its digest is recorded, not compared
    stf = OP1 + "packet 4 000000000001 0000000000CC 0800 03 A5\nexpect_digest learn_t * 1\n"
    result = run_stf_text(stf, digests)
    assert result.passed, result.report()
    assert any("digest small_t 0x1 0x5 0xa5" in line for line in result.log)
