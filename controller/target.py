"""The switch targets behind one controller: what a pipeline push sends, how registers are read.

* **embedded** (``softswitch``): the device config is the preprocessed P4 program
  (:func:`softswitch.p4runtime_server.make_device_config`), compiled here only to build the P4Info;
  registers are read and written with P4Runtime ``RegisterEntry``.
* **bmv2** (``simple_switch_grpc``): the device config is ``p4c-bm2-ss``'s JSON, compiled here
  (cached on disk by :func:`controller.bmv2.compile_p4c`) or given prebuilt (``--bmv2-json`` with
  ``--p4info``); BMv2's P4Runtime does not implement ``RegisterEntry``, so registers go through
  its Thrift runtime (:class:`ThriftRegisters`: whole arrays per call, in process).
* **tofino**: the device config is built from ``bf-p4c``'s output (:mod:`controller.tofino`, PI's
  legacy packing or Stratum's ``BfPipelineConfig``), compiled here through
  :mod:`hina.tofino_build` (cached) or given prebuilt (``--tofino-out``); the P4Info is the
  compiler's. Tables, registers and counters go by the names of the compiler's P4Info (its
  ``pipe.`` prefix optional: :class:`controller.p4runtime_client.P4InfoIndex`,
  :class:`controller.tofino.TofinoRegisters`); jobs are the TNA program's entries
  (:class:`hina.pipeline.TnaLayout`).
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

from hina import programs

from .bmv2 import CACHE_ENV, Bmv2Error, Bmv2Thrift, cache_dir, compile_p4c, thrift_missing
from .config import ConfigError
from .p4runtime_client import P4RuntimeClientError, SwitchConnection

__all__ = ["TARGETS", "PipelineConfig", "RegisterAccess", "P4RuntimeRegisters",
           "ThriftRegisters", "register_access", "HINA_P4", "CACHE_ENV"]

log = logging.getLogger("hina.controller")

TARGETS = ("embedded", "bmv2", "tofino")
HINA_P4 = programs.HINA_P4
SIMPLE_SWITCH_CLI = "simple_switch_CLI"
DEFAULT_THRIFT_PORT = 9090
_CLI_TIMEOUT_S = 30.0
#: ``register_read NAME`` (no index) of BMv2's runtime CLI: ``NAME= v0, v1, ...`` on one line.
_REGISTER_ARRAY_LINE = re.compile(
    r"^(?:RuntimeCmd:\s*)*([^\s\[\]=]+)=\s*(-?\d+(?:\s*,\s*-?\d+)*)\s*$")
_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class PipelineConfig:
    """Which program to push and how.

    Args:
        target: ``embedded`` or ``bmv2``.
        p4: the P4_16 program.
        defines: ``-D`` macros (``HINA_WORDS`` etc.).
        bmv2_json, p4info: prebuilt BMv2 JSON and text P4Info (bmv2 without ``p4c-bm2-ss``).
        device_config_format: tofino: ``pi`` (PI's legacy packing, the default) or ``stratum``
            (``BfPipelineConfig``).
        p4info_externs: tofino: the P4Info flavour, ``tofino`` (the compiler's default: TNA
            registers and counters as externs) or ``standard``
            (``--p4runtime-force-std-externs``: readable through P4Runtime); default ``tofino``
            for ``pi``, ``standard`` for ``stratum`` (what Stratum serves).
        tofino_out: tofino: a prebuilt ``bf-p4c -o`` folder with ``p4info.bin``
            (``--p4runtime-files``), used instead of compiling ``p4``.
        allow_parser_defects: tofino: push a binary whose compiled parser has transitions that
            are never taken (refused otherwise: :func:`controller.tofino.device_config_from_output`).
    """
    target: str = "embedded"
    p4: str = str(HINA_P4)
    defines: Mapping[str, str] = field(default_factory=dict)
    bmv2_json: str = ""
    p4info: str = ""
    device_config_format: str = ""
    p4info_externs: str = ""
    tofino_out: str = ""
    allow_parser_defects: bool = False

    def __post_init__(self):
        if self.target not in TARGETS:
            raise ConfigError(f"target {self.target!r}: expected one of {', '.join(TARGETS)}")
        tofino_only = [name for name in ("device_config_format", "p4info_externs", "tofino_out",
                                         "allow_parser_defects") if getattr(self, name)]
        if self.target != "tofino" and tofino_only:
            raise ConfigError(f"--{tofino_only[0].replace('_', '-')} is for --target tofino")
        if self.target == "tofino":
            from hina import tofino_build
            from .tofino import FORMATS
            fmt = self.device_config_format or "pi"
            if fmt not in FORMATS:
                raise ConfigError(f"--device-config-format {fmt!r}: expected one of "
                                  f"{', '.join(FORMATS)}")
            externs = self.p4info_externs or ("standard" if fmt == "stratum" else "tofino")
            if externs not in tofino_build.P4INFO_EXTERNS:
                raise ConfigError(f"--p4info-externs {externs!r}: expected one of "
                                  f"{', '.join(tofino_build.P4INFO_EXTERNS)}")
            object.__setattr__(self, "device_config_format", fmt)
            object.__setattr__(self, "p4info_externs", externs)
            if self.p4 == str(HINA_P4):
                object.__setattr__(self, "p4", str(tofino_build.TNA_PROGRAM))
        if bool(self.bmv2_json) != bool(self.p4info):
            raise ConfigError("--bmv2-json and --p4info go together (a prebuilt BMv2 pipeline)")
        if self.bmv2_json and self.target != "bmv2":
            raise ConfigError("--bmv2-json is for --target bmv2")

    def to_json(self) -> dict:
        data = {"target": self.target, "p4": self.p4, "defines": dict(self.defines),
                "bmv2_json": self.bmv2_json, "p4info": self.p4info}
        if self.target == "tofino":
            data.update(device_config_format=self.device_config_format,
                        p4info_externs=self.p4info_externs, tofino_out=self.tofino_out,
                        allow_parser_defects=self.allow_parser_defects)
        return data

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
        if self.target == "tofino":
            return self._build_tofino()
        if self.bmv2_json:
            return _read_prebuilt(self.bmv2_json, self.p4info)
        return self._build_bmv2()

    def _build_embedded(self) -> tuple[p4info_pb2.P4Info, bytes]:
        """Compile for the P4Info; the result is cached on disk (under
        :func:`controller.bmv2.cache_dir`) by the preprocessed source and the embedded target's
        code, so a CLI run that pushes the same program again (``resync``) does not compile it
        again. Entries are written to a temporary folder and renamed into place: a reader never
        sees half an entry, and concurrent writers of the same entry keep one whole copy."""
        from hina.softswitch.api import P4CompileError
        from hina.softswitch.compiler import compile_file, preprocess
        from hina.softswitch.p4info import build_p4info, p4info_to_text, parse_p4info_text
        from hina.softswitch.p4runtime_server import make_device_config
        try:
            source = preprocess(self.p4, defines=dict(self.defines))
            cache = cache_dir() / hashlib.sha256(
                "\0".join((self.p4, source, _softswitch_fingerprint())).encode()).hexdigest()
            try:
                return (parse_p4info_text((cache / "p4info.txt").read_text()),
                        (cache / "device_config.json").read_bytes())
            except OSError:            # not cached (or an incomplete entry): compile
                pass
            program = compile_file(self.p4, defines=dict(self.defines))
        except P4CompileError as exc:
            raise ConfigError(f"{self.p4} does not compile: {exc}") from None
        p4info, device_config = build_p4info(program.info), make_device_config(program)
        _cache_put(cache, {"p4info.txt": p4info_to_text(p4info).encode(),
                           "device_config.json": device_config})
        return p4info, device_config

    def _build_bmv2(self) -> tuple[p4info_pb2.P4Info, bytes]:
        """``p4c-bm2-ss``'s JSON and P4Info, from the compile cache of
        :func:`controller.bmv2.compile_p4c` (keyed by preprocessed source, defines and compiler
        version: a ``resync`` or a second push does not compile again)."""
        build = compile_p4c(self.p4, dict(self.defines))
        return _read_prebuilt(str(build.json), str(build.p4info))


    def _build_tofino(self) -> tuple[p4info_pb2.P4Info, bytes]:
        """The compiler's P4Info and the device config in :attr:`device_config_format`, from
        :attr:`tofino_out` or a compile of :attr:`p4` (cached by :mod:`hina.tofino_build`: the
        whole program takes minutes, a cached one none)."""
        from hina import tofino_build
        from .tofino import TofinoOutputError, device_config_from_output, read_p4info
        if self.tofino_out:
            out = Path(self.tofino_out)
        else:
            try:
                log.info("compiling %s for Tofino (bf-p4c, cached)", self.p4)
                build = tofino_build.compile_tna(Path(self.p4), target="tofino",
                                                 defines=dict(self.defines),
                                                 p4info_externs=self.p4info_externs)
            except tofino_build.TofinoCompilerMissing as exc:
                raise ConfigError(f"{exc} (or give a prebuilt output with --tofino-out)") from None
            if not build.ok:
                why = (tofino_build.assembler_stage_error(build.log)
                       or tofino_build.first_error(build.log) or f"exit status {build.returncode}")
                raise ConfigError(f"{self.p4} does not compile for Tofino: {why} (log: "
                                  f"{build.path / 'compile.log'}; the default, 16 lanes, fits Tofino 1)")
            out = build.out
        try:
            return read_p4info(out), device_config_from_output(
                out, self.device_config_format, allow_parser_defects=self.allow_parser_defects)
        except TofinoOutputError as exc:
            raise ConfigError(str(exc)) from None


def _cache_put(entry: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` as the cache folder ``entry``, atomically (temporary folder + rename).

    An entry another run put in place first is kept; one that lacks a file (left by a run
    killed before entries were written this way) is replaced. The cache is an optimisation:
    failing to write it is logged, not raised."""
    tmp = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        if entry.exists() and not all((entry / name).exists() for name in files):
            shutil.rmtree(entry, ignore_errors=True)
        os.rename(tmp, entry)
        tmp = None
    except OSError as exc:       # "directory not empty": another run wrote it first
        if not entry.exists():
            log.debug("pipeline cache not written: %s", exc)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _softswitch_fingerprint() -> str:
    """Changes whenever the embedded target's code changes (its P4Info could differ)."""
    from hina import softswitch
    root = Path(softswitch.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def _read_prebuilt(json_path: str, p4info_path: str) -> tuple[p4info_pb2.P4Info, bytes]:
    from hina.softswitch.p4info import read_p4info_text
    try:
        return read_p4info_text(p4info_path), Path(json_path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the prebuilt pipeline: {exc}") from None


class RegisterAccess(Protocol):
    """Register cells by P4 name: what ``state`` and job install need from a target."""

    def read(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        """The values of ``(register, index)`` cells, in order."""

    def zero(self, ranges: Sequence[tuple[str, int, int]]) -> None:
        """Zero ``(register, first index, count)`` ranges."""

    def close(self) -> None:
        """Release what the register path holds (a connection); idempotent."""


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

    def close(self) -> None:
        """Nothing to release: the connection belongs to the caller."""


class ThriftRegisters:
    """Registers of a BMv2 switch through its Thrift runtime (BMv2's P4Runtime server answers
    ``RegisterEntry`` with UNIMPLEMENTED).

    :meth:`read` groups the requested cells by register and fetches each register array whole,
    in one call (``bm_register_read_all``): a slot's state (bitmap, sequence, count, flags and
    one lane array per word, both pool copies) costs one call per register name, whatever the
    number of cells. :meth:`zero` writes each range in one call (``bm_register_write_range``).

    The calls run in process through :class:`controller.bmv2.Bmv2Thrift`, over one connection
    opened at the first call and reopened after a failed one (the switch restarted). Where
    BMv2's Python modules cannot be imported (:func:`controller.bmv2.thrift_missing`),
    ``simple_switch_CLI`` runs instead, one process per call with every command on its stdin:
    ``register_read NAME`` (no index: the whole array, printed ``NAME= v0, v1, ...``) per
    register, ``register_write NAME INDEX 0`` per cell to zero.

    Values are unsigned: BMv2 answers signed 64-bit integers, which are taken modulo 2**64
    (every HINA register is 32 bits or narrower).

    Args:
        thrift_port: the switch's ``--thrift-port``.
        host: the switch's address.
        use_cli: True: always ``simple_switch_CLI``; False: never (a missing module is then an
            error); None: the CLI only where the Thrift modules are missing.

    Raises (from :meth:`read` and :meth:`zero`):
        P4RuntimeClientError: the switch does not answer (``UNAVAILABLE``), a register is not in
            the loaded program or refuses the operation (``UNKNOWN``), or an index is past the
            end of its array (``OUT_OF_RANGE``); the message names the register.
    """

    def __init__(self, thrift_port: int = DEFAULT_THRIFT_PORT, host: str = "127.0.0.1",
                 use_cli: Optional[bool] = None):
        self.thrift_port, self.host = thrift_port, host
        if use_cli is None:
            why = thrift_missing()
            if why:
                log.info("BMv2 registers through %s: %s", SIMPLE_SWITCH_CLI, why)
            use_cli = why is not None
        self.use_cli = use_cli
        self._thrift: Optional[Bmv2Thrift] = None

    # -- the two ways to the switch ----------------------------------------------------------
    def _connection(self) -> Bmv2Thrift:
        if self._thrift is None:
            try:
                self._thrift = Bmv2Thrift(self.thrift_port, self.host)
            except Bmv2Error as exc:
                raise P4RuntimeClientError(str(exc), "UNAVAILABLE") from None
        return self._thrift

    def _call(self, what: str, method: str, *args):
        thrift = self._connection()
        try:
            return getattr(thrift, method)(*args)
        except Bmv2Error as exc:
            self.close()          # a broken connection is reopened by the next call
            raise P4RuntimeClientError(f"{what}: {exc}", "UNKNOWN") from None

    def _run_cli(self, commands: Sequence[str]) -> str:
        if shutil.which(SIMPLE_SWITCH_CLI) is None:
            raise P4RuntimeClientError(f"{SIMPLE_SWITCH_CLI} is not on PATH: BMv2 registers are "
                                       "read through its Thrift runtime", "UNAVAILABLE")
        where = f"{SIMPLE_SWITCH_CLI} on thrift port {self.host}:{self.thrift_port}"
        try:
            proc = subprocess.run([SIMPLE_SWITCH_CLI, "--thrift-ip", self.host,
                                   "--thrift-port", str(self.thrift_port)],
                                  input="\n".join(commands) + "\n", capture_output=True,
                                  text=True, timeout=_CLI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise P4RuntimeClientError(f"{where} did not answer within {_CLI_TIMEOUT_S:g}s",
                                       "DEADLINE_EXCEEDED") from None
        if proc.returncode != 0:
            lines = (proc.stdout + proc.stderr).strip().splitlines() or ["(no output)"]
            raise P4RuntimeClientError(f"{where}: exit status {proc.returncode}: "
                                       f"{lines[-1].strip()}", "UNAVAILABLE")
        error = next((line for line in proc.stdout.splitlines() if "Error" in line), None)
        if error is not None:     # the CLI reports a refused command and goes on, exit 0
            raise P4RuntimeClientError(f"{where}: {error.replace('RuntimeCmd:', '').strip()}",
                                       "UNKNOWN")
        return proc.stdout

    def _read_arrays(self, names: Sequence[str]) -> dict[str, list[int]]:
        if not self.use_cli:
            return {name: self._call(f"register {name}", "register_read_all", name)
                    for name in names}
        out = self._run_cli([f"register_read {name}" for name in names])
        arrays = {}
        for line in out.splitlines():
            m = _REGISTER_ARRAY_LINE.match(line.strip())
            if m:
                arrays[m.group(1)] = [int(v) for v in m.group(2).split(",")]
        absent = [name for name in names if name not in arrays]
        if absent:
            raise P4RuntimeClientError(f"{SIMPLE_SWITCH_CLI}: no values for register "
                                       f"{absent[0]} in its answer", "UNKNOWN")
        return arrays

    # -- RegisterAccess -----------------------------------------------------------------------
    def read(self, cells: Sequence[tuple[str, int]]) -> list[int]:
        """The values of ``(register, index)`` cells, in order: one array read per register."""
        arrays = self._read_arrays(list(dict.fromkeys(name for name, _ in cells)))
        out = []
        for name, index in cells:
            array = arrays[name]
            if not 0 <= index < len(array):
                raise P4RuntimeClientError(f"register {name} has {len(array)} cells: index "
                                           f"{index} is out of range", "OUT_OF_RANGE")
            out.append(array[index] & _U64)
        return out

    def zero(self, ranges: Sequence[tuple[str, int, int]]) -> None:
        """Zero ``(register, first index, count)`` ranges: one write per range."""
        ranges = [(name, first, count) for name, first, count in ranges if count > 0]
        if self.use_cli:
            if ranges:
                self._run_cli([f"register_write {name} {i} 0" for name, first, count in ranges
                               for i in range(first, first + count)])
            return
        for name, first, count in ranges:
            self._call(f"register {name}[{first}..{first + count - 1}] := 0",
                       "register_write_range", name, first, first + count - 1, 0)

    def close(self) -> None:
        """Close the Thrift connection (the next call opens a new one); idempotent."""
        thrift, self._thrift = self._thrift, None
        if thrift is not None:
            thrift.close()


def register_access(target: str, switch: SwitchConnection,
                    thrift_port: Optional[int] = None,
                    used: Sequence[tuple[str, int, int]] = ()) -> RegisterAccess:
    """The register path of ``target``: P4Runtime for the embedded target, BMv2's Thrift
    runtime (``thrift_port``, default 9090, on the P4Runtime server's host) for BMv2, P4Runtime by
    the compiler's P4Info names for Tofino (``used``: the register cells jobs were given since
    the push, :class:`controller.tofino.TofinoRegisters`)."""
    if target == "tofino":
        from .tofino import TofinoRegisters
        return TofinoRegisters(switch, used=used)
    if target == "bmv2":
        return ThriftRegisters(thrift_port or DEFAULT_THRIFT_PORT,
                               switch.address.rpartition(":")[0] or "127.0.0.1")
    return P4RuntimeRegisters(switch)
