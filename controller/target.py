"""The two switch targets behind one controller: what a pipeline push sends, how registers are read.

* **embedded** (``softswitch``): the device config is the preprocessed P4 program
  (:func:`softswitch.p4runtime_server.make_device_config`), compiled here only to build the P4Info;
  registers are read and written with P4Runtime ``RegisterEntry``.
* **bmv2** (``simple_switch_grpc``): the device config is ``p4c-bm2-ss``'s JSON, compiled here when
  ``p4c-bm2-ss`` is on PATH or given prebuilt (``--bmv2-json`` with ``--p4info``); BMv2's
  P4Runtime does not implement ``RegisterEntry``, so registers go through its Thrift runtime
  (``simple_switch_CLI``'s ``register_read`` / ``register_write``).

The BMv2 paths follow BMv2's documented interfaces but have not run here (no BMv2 in this
environment); their tests skip with the reason.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Protocol, Sequence

from p4.config.v1 import p4info_pb2

from .config import ConfigError
from .p4runtime_client import P4RuntimeClientError, SwitchConnection

__all__ = ["TARGETS", "PipelineConfig", "RegisterAccess", "P4RuntimeRegisters",
           "ThriftRegisters", "register_access", "HINA_P4"]

log = logging.getLogger("hina.controller")

TARGETS = ("embedded", "bmv2")
HINA_P4 = Path(__file__).resolve().parents[1] / "p4" / "hina.p4"
P4C_BM2_SS = "p4c-bm2-ss"
SIMPLE_SWITCH_CLI = "simple_switch_CLI"
DEFAULT_THRIFT_PORT = 9090
CACHE_ENV = "HINA_CACHE_DIR"
_CLI_TIMEOUT_S = 30.0
_REGISTER_LINE = re.compile(r"(\S+)\[(\d+)\]\s*=\s*(\d+)")


@dataclass(frozen=True)
class PipelineConfig:
    """Which program to push and how.

    Args:
        target: ``embedded`` or ``bmv2``.
        p4: the P4_16 program.
        defines: ``-D`` macros (``HINA_WORDS`` etc.).
        bmv2_json, p4info: prebuilt BMv2 JSON and text P4Info (bmv2 without ``p4c-bm2-ss``).
    """
    target: str = "embedded"
    p4: str = str(HINA_P4)
    defines: Mapping[str, str] = field(default_factory=dict)
    bmv2_json: str = ""
    p4info: str = ""

    def __post_init__(self):
        if self.target not in TARGETS:
            raise ConfigError(f"target {self.target!r}: expected one of {', '.join(TARGETS)}")
        if bool(self.bmv2_json) != bool(self.p4info):
            raise ConfigError("--bmv2-json and --p4info go together (a prebuilt BMv2 pipeline)")
        if self.bmv2_json and self.target != "bmv2":
            raise ConfigError("--bmv2-json is for --target bmv2")

    def to_json(self) -> dict:
        return {"target": self.target, "p4": self.p4, "defines": dict(self.defines),
                "bmv2_json": self.bmv2_json, "p4info": self.p4info}

    @classmethod
    def from_json(cls, data: dict) -> "PipelineConfig":
        return cls(**data)

    def build(self) -> tuple[p4info_pb2.P4Info, bytes]:
        """(P4Info, device config) for :meth:`SwitchConnection.set_pipeline`.

        Raises:
            ConfigError: the program does not compile, a file is missing, or BMv2 has neither
                ``p4c-bm2-ss`` nor a prebuilt JSON.
        """
        if self.target == "embedded":
            return self._build_embedded()
        if self.bmv2_json:
            return _read_prebuilt(self.bmv2_json, self.p4info)
        return self._build_bmv2()

    def _build_embedded(self) -> tuple[p4info_pb2.P4Info, bytes]:
        """Compile for the P4Info; the result is cached on disk (see :func:`_cache_dir`) under
        the preprocessed source and the embedded target's code, so a CLI run that pushes the
        same program again (``resync``) does not compile it again."""
        from softswitch.api import P4CompileError
        from softswitch.compiler import compile_file, preprocess
        from softswitch.p4info import build_p4info, p4info_to_text, parse_p4info_text
        from softswitch.p4runtime_server import make_device_config
        try:
            source = preprocess(self.p4, defines=dict(self.defines))
            cache = _cache_dir() / hashlib.sha256(
                "\0".join((self.p4, source, _softswitch_fingerprint())).encode()).hexdigest()
            if (cache / "device_config.json").exists():
                return (parse_p4info_text((cache / "p4info.txt").read_text()),
                        (cache / "device_config.json").read_bytes())
            program = compile_file(self.p4, defines=dict(self.defines))
        except P4CompileError as exc:
            raise ConfigError(f"{self.p4} does not compile: {exc}") from None
        p4info, device_config = build_p4info(program.info), make_device_config(program)
        try:      # the cache is an optimisation: failing to write it is not an error
            cache.mkdir(parents=True, exist_ok=True)
            (cache / "p4info.txt").write_text(p4info_to_text(p4info))
            (cache / "device_config.json").write_bytes(device_config)   # last: marks complete
        except OSError as exc:
            log.debug("pipeline cache not written: %s", exc)
        return p4info, device_config

    def _build_bmv2(self) -> tuple[p4info_pb2.P4Info, bytes]:
        if shutil.which(P4C_BM2_SS) is None:
            raise ConfigError(f"{P4C_BM2_SS} is not on PATH: install p4c, or pass a prebuilt "
                              "pipeline with --bmv2-json FILE --p4info FILE")
        with tempfile.TemporaryDirectory(prefix="hina-p4c-") as tmp:
            out, p4info = Path(tmp) / "hina.json", Path(tmp) / "hina.p4info.txt"
            cmd = [P4C_BM2_SS, "--arch", "v1model", "-o", str(out),
                   "--p4runtime-files", str(p4info), self.p4]
            cmd += [f"-D{k}={v}" for k, v in self.defines.items()]
            log.info("compiling: %s", " ".join(cmd))
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                first = (proc.stderr.strip().splitlines() or ["(no output)"])[0]
                raise ConfigError(f"{P4C_BM2_SS} failed on {self.p4}: {first}")
            return _read_prebuilt(str(out), str(p4info))


def _cache_dir() -> Path:
    """``$HINA_CACHE_DIR``, else ``$XDG_CACHE_HOME/hina/pipelines`` (``~/.cache/...``)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hina" / "pipelines"


def _softswitch_fingerprint() -> str:
    """Changes whenever the embedded target's code changes (its P4Info could differ)."""
    import softswitch
    root = Path(softswitch.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def _read_prebuilt(json_path: str, p4info_path: str) -> tuple[p4info_pb2.P4Info, bytes]:
    from softswitch.p4info import read_p4info_text
    try:
        return read_p4info_text(p4info_path), Path(json_path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the prebuilt pipeline: {exc}") from None


class RegisterAccess(Protocol):
    """Register cells by P4 name: what ``state`` and job install need from a target."""

    def read(self, cells: Sequence[tuple[str, int]]) -> list[int]: ...

    def zero(self, ranges: Sequence[tuple[str, int, int]]) -> None: ...


class P4RuntimeRegisters:
    """Registers through P4Runtime ``RegisterEntry`` (the embedded target)."""

    def __init__(self, switch: SwitchConnection):
        self.switch = switch

    def read(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        return self.switch.read_register_cells(cells)

    def zero(self, ranges: Sequence[tuple[str, int, int]]) -> None:
        self.switch.write([self.switch.register_update(name, i, 0)
                           for name, first, count in ranges for i in range(first, first + count)],
                          "zero registers")


class ThriftRegisters:
    """Registers through BMv2's Thrift runtime, by running ``simple_switch_CLI``.

    One CLI process per call, commands on its stdin; ``register_read NAME INDEX`` answers
    ``NAME[INDEX]= VALUE``.
    """

    def __init__(self, thrift_port: int = DEFAULT_THRIFT_PORT, host: str = "127.0.0.1"):
        self.thrift_port, self.host = thrift_port, host

    def _run(self, commands: Sequence[str]) -> str:
        if shutil.which(SIMPLE_SWITCH_CLI) is None:
            raise P4RuntimeClientError(f"{SIMPLE_SWITCH_CLI} is not on PATH: BMv2 registers are "
                                       "read through its Thrift runtime", "UNAVAILABLE")
        try:
            proc = subprocess.run([SIMPLE_SWITCH_CLI, "--thrift-ip", self.host,
                                   "--thrift-port", str(self.thrift_port)],
                                  input="\n".join(commands) + "\n", capture_output=True,
                                  text=True, timeout=_CLI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise P4RuntimeClientError(f"{SIMPLE_SWITCH_CLI} on thrift port {self.thrift_port} "
                                       f"did not answer within {_CLI_TIMEOUT_S:g}s",
                                       "DEADLINE_EXCEEDED") from None
        if proc.returncode != 0 or "Error" in proc.stdout:
            detail = next((line for line in (proc.stdout + proc.stderr).splitlines()
                           if "rror" in line), "exit status %d" % proc.returncode)
            raise P4RuntimeClientError(f"{SIMPLE_SWITCH_CLI}: {detail.strip()}", "UNKNOWN")
        return proc.stdout

    def read(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        out = self._run([f"register_read {name} {index}" for name, index in cells])
        got = {(m.group(1), int(m.group(2))): int(m.group(3))
               for m in _REGISTER_LINE.finditer(out)}
        try:
            return [got[(name, index)] for name, index in cells]
        except KeyError as exc:
            raise P4RuntimeClientError(f"{SIMPLE_SWITCH_CLI}: no value for register cell "
                                       f"{exc.args[0]}", "UNKNOWN") from None

    def zero(self, ranges: Sequence[tuple[str, int, int]]) -> None:
        self._run([f"register_write {name} {i} 0"
                   for name, first, count in ranges for i in range(first, first + count)])


def register_access(target: str, switch: SwitchConnection,
                    thrift_port: Optional[int] = None) -> RegisterAccess:
    """The register path of ``target``."""
    if target == "bmv2":
        return ThriftRegisters(thrift_port or DEFAULT_THRIFT_PORT,
                               switch.address.rpartition(":")[0] or "127.0.0.1")
    return P4RuntimeRegisters(switch)
