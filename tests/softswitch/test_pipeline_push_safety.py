"""Pipeline pushes are untrusted input (issue 13): SetForwardingPipelineConfig over real gRPC.

A pushed program may include only its own bundle and p4include; errors never quote other files;
cpp runs under limits and leaves no process behind; only P4 source text is accepted; malformed
device configs get a clear status and the server keeps serving.
"""
from __future__ import annotations

import json
import os
import pickle
import threading
import time
import uuid
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from softswitch_util import PROGRAMS

compiler = pytest.importorskip("hina.softswitch.compiler")

from hina.softswitch.frontend.cpp_sandbox import (DEFAULT_LIMITS, PARENT_ENV,  # noqa: E402
                                             CppLimitError, clean_env, landlock_abi, run_limited)
from hina.softswitch.frontend.preprocess import cpp_command, run_cpp  # noqa: E402
from hina.softswitch.p4info import build_p4info  # noqa: E402
from hina.softswitch.p4runtime_server import (MAX_DEVICE_CONFIG_BYTES,  # noqa: E402
                                         make_bundle_device_config, make_device_config)

PROGRAM = PROGRAMS / "p4rt_cpu.p4"
QUICK_S = 5                      # a refused or limited push answers well within this
MIB = 1 << 20
# /etc/passwd's first line ("root:x:0:0:..."), and how the parser quoted its first token.
SECRET_MARKERS = ("root:", "'root'", Path("/etc/passwd").read_text().split("\n", 1)[0])
CLEAR_CODES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED,
               grpc.StatusCode.UNIMPLEMENTED)
FUZZ_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                         suppress_health_check=[HealthCheck.function_scoped_fixture])


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def document(source: str, name: str = "main.p4", **fields) -> bytes:
    """A device config built by hand (no client-side checks)."""
    doc = {"format": "softswitch-p4", "version": 1, "name": name, "source": source, **fields}
    return json.dumps(doc).encode("utf-8")


def push(stub, device_config: bytes, p4info=None, action: str = "VERIFY"):
    """Push; returns None on success, else the RpcError."""
    request = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=0)
    request.action = getattr(p4runtime_pb2.SetForwardingPipelineConfigRequest, action)
    if p4info is None:
        request.config.p4info.SetInParent()
    else:
        request.config.p4info.CopyFrom(p4info)
    request.config.p4_device_config = device_config
    try:
        stub.SetForwardingPipelineConfig(request, timeout=60)
    except grpc.RpcError as exc:
        return exc
    return None


def refused(stub, device_config: bytes, code=grpc.StatusCode.INVALID_ARGUMENT) -> str:
    """Push, expect ``code``; the details, checked to quote no line of /etc/passwd."""
    error = push(stub, device_config)
    assert error is not None, "the push was accepted"
    assert error.code() == code, (error.code(), error.details())
    details = error.details()
    assert details
    for marker in SECRET_MARKERS:
        assert marker not in details, details
    return details


def cpp_processes() -> list[int]:
    """Processes (cpp, cc1, the limits wrapper) started by this process's preprocessor runs."""
    tag = f"{PARENT_ENV}={os.getpid()}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


class PeakMemory:
    """Samples the resident memory of this process's cpp children while a push runs."""

    def __init__(self):
        self.peak_kib, self.seen = 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            for pid in cpp_processes():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                self.seen += 1
                for line in status.splitlines():
                    if line.startswith("VmRSS:"):
                        self.peak_kib = max(self.peak_kib, int(line.split()[1]))
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)


def assert_serving(stub, good_config: bytes, p4info) -> None:
    """The server answers and still compiles and verifies a good program."""
    assert stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=10).p4runtime_api_version
    assert push(stub, good_config, p4info) is None


def split_program() -> dict[str, str]:
    """p4rt_cpu.p4 as a bundle: main.p4 includes lib/headers.p4 (which includes ../consts.p4)
    and lib/parser.p4 (which includes headers.p4 again, relative to lib/)."""
    lines = PROGRAM.read_text().splitlines(keepends=True)
    at = {marker: next(i for i, line in enumerate(lines) if line.startswith(marker))
          for marker in ('@controller_header("packet_in")', "parser P4rtParser",
                         "control P4rtVerify")}
    headers = lines[at['@controller_header("packet_in")']:at["parser P4rtParser"]]
    return {
        "consts.p4": "#ifndef CONSTS_P4\n#define CONSTS_P4\n" + "".join(lines[6:8]) + "#endif\n",
        "lib/headers.p4": ('#ifndef HEADERS_P4\n#define HEADERS_P4\n#include "../consts.p4"\n'
                           + "".join(headers)
                           + "#endif\n"),
        "lib/parser.p4": ('#include "headers.p4"\n'
                          + "".join(lines[at["parser P4rtParser"]:at["control P4rtVerify"]])),
        "main.p4": ('#include <core.p4>\n#include <v1model.p4>\n#include "lib/headers.p4"\n'
                    '#include "lib/parser.p4"\n' + "".join(lines[at["control P4rtVerify"]:])),
    }


# --------------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def program():
    return compiler.compile_file(str(PROGRAM))


@pytest.fixture(scope="module")
def p4info(program):
    return build_p4info(program.info)


@pytest.fixture(scope="module")
def good_config(program) -> bytes:
    return make_device_config(program)


@pytest.fixture
def stub(running_switch):
    with grpc.insecure_channel(running_switch.address) as channel:
        yield p4runtime_pb2_grpc.P4RuntimeStub(channel)


# --------------------------------------------------------------------------------------------
# 1. includes are confined to the bundle and p4include, errors quote no other file
# --------------------------------------------------------------------------------------------
def test_etc_passwd_include_is_refused_without_its_content(stub, good_config, p4info):
    details = refused(stub, document('#include "/etc/passwd"\n'))
    assert details.startswith("main.p4:1:1: error: ") and "absolute" in details, details
    # the main file's name is a label only: its directory is not searched
    details = refused(stub, document('#include "passwd"\n', name="/etc/main.p4"))
    assert "no such file in the bundle" in details, details
    details = refused(stub, document("#include <passwd>\n", name="/etc/main.p4"))
    assert "<core.p4>" in details, details
    assert_serving(stub, good_config, p4info)


@pytest.mark.parametrize("source, expected", [
    ('#include "../../../../../../../etc/passwd"\n', "leads out of the bundle"),
    ('#include "lib/../../../../../../etc/passwd"\n', "leads out of the bundle"),
    ('#include "/etc/../etc/passwd"\n', "absolute"),
    ('#define F "/etc/passwd"\n#include F\n', "literally"),
    ('#inc\\\nlude "/etc/passwd"\n', "absolute"),                       # line splice
    ('/* a\n */ #  /* b\n */ include "/etc/passwd"\n', "literally"),    # comments between
    ('#include_next "passwd"\n', "#include_next is not allowed"),
    ('#import "/etc/passwd"\n', "#import is not allowed"),
    ('#pragma GCC dependency "/etc/passwd"\n', "#pragma is not allowed"),
    ('#if __has_include("/etc/passwd")\n#error exists\n#endif\n', "__has_include is not allowed"),
    ('#define H(a) __has_##a\n#if H(include)("/etc/passwd")\n#error exists\n#endif\n',
     "__has_include\" is not allowed"),                                   # pasted together
    ('#define C(a, b) a##b\nC(_Pr, agma)("GCC dependency \\"/etc/passwd\\"")\n',
     "_Pragma\" is not allowed"),
    ('x\n# 1 "/etc/passwd"\ny\n', "not a file of the bundle"),         # forged line marker
], ids=["dotdot", "dotdot-in-path", "absolute-dotdot", "computed", "splice", "comments",
        "include_next", "import", "pragma-dependency", "has_include", "has_include-pasted",
        "pragma-pasted", "forged-marker"])
def test_include_escapes_are_refused(stub, source, expected):
    details = refused(stub, document(source))
    assert expected in details, details
    assert "exists" not in details.split("error:")[-1], details       # no existence oracle


@pytest.mark.skipif(not landlock_abi(), reason="this kernel has no Landlock")
def test_landlock_keeps_cpp_in_the_bundle_even_past_the_include_check(tmp_path):
    """Defence in depth: cpp itself cannot open a file outside the allowed paths."""
    for target in ("/etc/passwd", "/dev/zero"):
        result = run_limited(cpp_command(), f'#include "{target}"\n'.encode(), "main.p4",
                             cwd=str(tmp_path), env=clean_env(), sandbox_paths=[str(tmp_path)])
        assert result.returncode != 0 and b"Permission denied" in result.stderr, result
        assert b"root:" not in result.stdout
    assert cpp_processes() == []


def test_symlink_next_to_the_named_main_file_is_not_followed(stub, tmp_path):
    (tmp_path / "evil.p4").symlink_to("/etc/passwd")
    details = refused(stub, document('#include "evil.p4"\n', name=str(tmp_path / "main.p4")))
    assert "no such file in the bundle" in details, details


@pytest.mark.parametrize("files, expected", [
    ({"../escape.p4": "x"}, "'..' parts"),
    ({"/etc/cron.d/x.p4": "x"}, "absolute"),
    ({"a//b.p4": "x"}, "empty"),
    ({"lib": "x", "lib/a.p4": "y"}, "also the directory"),
    ({"a.p4": 7}, "files"),
], ids=["dotdot", "absolute", "empty-part", "file-and-dir", "not-text"])
def test_bad_bundle_file_names_are_refused(stub, files, expected):
    details = refused(stub, document('#include "a.p4"\n', files=files))
    assert expected in details, details


def test_multi_file_bundle_with_relative_includes_commits(stub, running_switch, p4info):
    files = split_program()
    main = files.pop("main.p4")
    config = make_bundle_device_config("main.p4", main, files)
    assert push(stub, config, p4info, action="VERIFY_AND_COMMIT") is None
    program = running_switch.switch.program
    assert program.name == "main.p4"
    assert '"lib/../consts.p4"' in program.source and '"lib/headers.p4"' in program.source
    # errors in a bundle file point at that file
    files["lib/parser.p4"] += "oops\n"
    details = refused(stub, make_bundle_device_config("main.p4", main, files))
    assert details.startswith("lib/parser.p4:"), details


def test_preprocessed_config_still_commits_and_may_not_carry_directives(stub, good_config,
                                                                         p4info):
    assert push(stub, good_config, p4info, action="VERIFY_AND_COMMIT") is None
    source = json.loads(good_config)["source"]
    tampered = source.replace("\n", '\n#include "/etc/passwd"\n', 3)
    details = refused(stub, document(tampered, name="main.p4"))
    assert "#include in a preprocessed program" in details, details


# --------------------------------------------------------------------------------------------
# 2. limits: /dev/zero, bombs; nothing left running, memory bounded
# --------------------------------------------------------------------------------------------
def test_dev_zero_include_is_refused_quickly(stub, good_config, p4info):
    start = time.monotonic()
    details = refused(stub, document('#include "/dev/zero"\n'))
    assert time.monotonic() - start < QUICK_S
    assert "absolute" in details
    assert cpp_processes() == []
    assert_serving(stub, good_config, p4info)


def test_dev_zero_in_a_local_compile_is_cut_off_by_the_memory_limit():
    """Local compiles may include any file, but cpp still runs under the limits."""
    start = time.monotonic()
    with PeakMemory() as memory, pytest.raises(CppLimitError) as info:
        run_cpp('#include "/dev/zero"\n', "<input>")
    assert time.monotonic() - start < QUICK_S
    assert info.value.limit == "memory"
    assert memory.peak_kib * 1024 <= DEFAULT_LIMITS.max_memory_bytes
    assert cpp_processes() == []


MACRO_BOMB = "#define A0 x x x x x x x x x x\n" + "".join(
    f"#define A{i} " + " ".join([f"A{i - 1}"] * 10) + "\n" for i in range(1, 12)) + "A11\n"


@pytest.mark.parametrize("source, files", [
    (MACRO_BOMB, {}),
    ('#include "b0.p4"\n', {f"b{i}.p4": (f'#include "b{i + 1}.p4"\n' * 2 if i < 40 else "x\n")
                            for i in range(41)}),
], ids=["macro-bomb", "include-bomb"])
def test_preprocessor_bombs_hit_a_limit_and_leave_nothing_running(stub, good_config, p4info,
                                                                  source, files):
    start = time.monotonic()
    with PeakMemory() as memory:
        details = refused(stub, document(source, files=files),
                          code=grpc.StatusCode.RESOURCE_EXHAUSTED)
    elapsed = time.monotonic() - start
    assert elapsed < 2 * QUICK_S, elapsed
    assert "limit" in details, details
    assert memory.peak_kib * 1024 <= DEFAULT_LIMITS.max_memory_bytes
    assert cpp_processes() == []
    assert_serving(stub, good_config, p4info)


def test_include_cycle_is_a_located_error(stub):
    details = refused(stub, document('#include "a.p4"\n', files={"a.p4": '#include "b.p4"\n',
                                                                  "b.p4": '#include "a.p4"\n'}))
    assert "nested depth" in details and details.startswith(("a.p4:", "b.p4:")), details
    assert cpp_processes() == []


def test_oversize_device_config_is_resource_exhausted(stub, good_config, p4info):
    padding = "/" * (MAX_DEVICE_CONFIG_BYTES + 1)
    details = refused(stub, document("//" + padding + "\n"),
                      code=grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert f"at most {MAX_DEVICE_CONFIG_BYTES}" in details, details
    assert_serving(stub, good_config, p4info)


# --------------------------------------------------------------------------------------------
# 3. only P4 source text: no executable artifact is accepted, nothing pushed is executed
# --------------------------------------------------------------------------------------------
def test_executable_artifacts_are_refused(stub, good_config, program):
    source = json.loads(good_config)["source"]
    code = compile("import os\nos._exit(3)\n", "<pushed>", "exec")
    artifacts = {
        "pickle": pickle.dumps({"format": "softswitch-p4", "version": 1, "name": "x.p4",
                                "source": source}),
        "marshal": __import__("marshal").dumps(code),
        "elf": b"\x7fELF\x02\x01\x01" + bytes(64),
        "python-field": document(source, python="import os\nos._exit(3)\n"),
        "generated-code-field": document(source, generated=compiler.generate_python(source)),
        "pickle-field": document(source, program=pickle.dumps(program.info).hex()),
    }
    for what, config in artifacts.items():
        details = refused(stub, config)
        assert "P4 source" in details, (what, details)


def test_strings_in_the_program_never_become_code(stub, tmp_path):
    """Names and strings reach the generated Python only as literals."""
    canary = tmp_path / "canary"
    payloads = [f"a'); open({str(canary)!r}, 'w'); ('",
                f'b\\"); open({str(canary)!r}, \\"w\\"); (\\"']
    source = PROGRAM.read_text()
    source = source.replace("    table dmac_t {", f'    @name("{payloads[0]}") table dmac_t {{')
    source = source.replace("    table smac_t {", f'    @name("{payloads[1]}") table smac_t {{')
    source = source.replace("apply {\n        if (hdr.cpu_out",
                            f'apply {{\n        log_msg("{payloads[1]}");\n        if (hdr.cpu_out')
    error = push(stub, document(source))
    assert error is None or error.code() in CLEAR_CODES, error
    assert not canary.exists()


# --------------------------------------------------------------------------------------------
# 4. malformed device configs: a clear status each, and the server keeps serving
# --------------------------------------------------------------------------------------------
MALFORMED = {
    "empty": (b"", "empty"),
    "random-bytes": (bytes(range(256)) * 4, "not a 'softswitch-p4' JSON document"),
    "bad-utf8": (b'{"format": "softswitch-p4", \xff\xfe}', "not a 'softswitch-p4' JSON document"),
    "nul-bytes": (b"\0" * 100, "not a 'softswitch-p4' JSON document"),
    "deep-json": (b"[" * 100_000 + b"]" * 100_000, "not a 'softswitch-p4'"),
    "nul-in-source": (document("control \0 x;\n"), "NUL"),
    "lone-surrogate": (b'{"format": "softswitch-p4", "version": 1, "name": "m.p4", '
                       b'"source": "\\ud800 #include <core.p4>"}', "surrogate"),
    "lone-cr": (document('x\r#include "/etc/passwd"\n'), "carriage return"),
    "huge-version": (json.dumps({"format": "softswitch-p4", "version": "9" * 100_000}).encode(),
                     "not supported"),
    "files-not-object": (document("x", files=["a.p4"]), "'files'"),
    "name-with-newline": (document("x", name="a\nb.p4"), "printable"),
    "deep-parens": (document("const bit<8> X = " + "(" * 20_000 + "1" + ")" * 20_000 + ";\n"),
                    "error"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_device_config_gets_a_clear_error(stub, good_config, p4info, case):
    config, expected = MALFORMED[case]
    details = refused(stub, config)
    assert expected in details, details
    assert len(details) < 2000
    assert_serving(stub, good_config, p4info)


P4_PIECES = st.sampled_from([
    "#include ", '"', "<", ">", "core.p4", "v1model.p4", "a.p4", "lib/b.p4", "../", "/etc/passwd",
    "/dev/zero", "CANARY", "#define ", "#if ", "#endif\n", "#pragma ", "_Pragma", "__has_include",
    "##", "#", "%:", "??=", "/*", "*/", "//", "\\\n", "\n", " ", "'", "\\", "(", ")", "x", "A",
    "control", "header", "{", "}", ";", "\0", "\r", "\u00e9", "\ud800",
])


def p4ish_text():
    return st.lists(P4_PIECES, max_size=40).map("".join)


@pytest.fixture
def canary(tmp_path):
    """A file outside any bundle with a unique first line: it must never show up anywhere."""
    token = f"CANARY{uuid.uuid4().hex}"
    path = tmp_path / "canary.p4"
    path.write_text(f"{token} {token}\n")
    return path, token


def test_fuzzed_device_configs_never_break_the_server(stub, good_config, p4info, canary):
    canary_path, token = canary

    @FUZZ_SETTINGS
    @given(st.one_of(
        st.binary(max_size=300),
        st.builds(lambda source, files, name: document(source.replace("CANARY", str(canary_path)),
                                                       name=name, files=files),
                  p4ish_text(),
                  st.dictionaries(st.sampled_from(["a.p4", "lib/b.p4", "c.p4"]), p4ish_text(),
                                  max_size=3),
                  st.sampled_from(["main.p4", str(canary_path.parent / "main.p4"), "/etc/x.p4"])),
    ))
    def check(config):
        error = push(stub, config)
        if error is not None:
            assert error.code() in CLEAR_CODES, (error.code(), error.details())
            assert token not in error.details()
            for marker in SECRET_MARKERS[:1]:
                assert marker not in error.details()

    check()
    assert cpp_processes() == []
    assert_serving(stub, good_config, p4info)
