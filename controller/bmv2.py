"""Real BMv2 from Python: p4c compiles (cached), ``simple_switch_grpc`` processes, Thrift runtime.

Three pieces every BMv2 user of this repository shares (the controller's ``--target bmv2``, the
dataplane tests, the benches, the Mininet launcher):

* :func:`compile_p4c` runs ``p4c-bm2-ss`` once per (preprocessed source, defines, compiler
  version) and keeps the JSON and the text P4Info in an on-disk cache, so a test session, a
  ``hina-ctl resync`` or a second Mininet run does not compile ``hina.p4`` again (12 s at 64
  words, about a minute at 128).
* :class:`Bmv2Process` starts ``simple_switch_grpc`` on ports it picks (or is given), waits
  until its P4Runtime and Thrift servers answer, and stops it; the switch dies with the process
  that started it (``PR_SET_PDEATHSIG``), so a crashed test run leaves no switch behind. With
  ``tls=`` (:class:`hina.tls.ServerTls`) its P4Runtime server speaks TLS, and with a client CA
  mutual TLS (BMv2's ``--grpc-server-ssl`` flags). :meth:`Bmv2Process.kill` and
  :meth:`Bmv2Process.restart` crash it and start it again on the same ports and interfaces.
* :class:`Bmv2Thrift` is BMv2's Thrift runtime in process (the ``bm_runtime`` modules that ship
  with ``simple_switch_CLI``): registers as whole arrays per call, counters, no CLI process per
  request. BMv2's P4Runtime server does not implement ``RegisterEntry``, so this is how
  registers are read and written there.

Example::

    >>> build = compile_p4c("p4/hina.p4", {"HINA_WORDS": 64})          # doctest: +SKIP
    >>> with Bmv2Process({1: "veth1"}) as sw:                           # doctest: +SKIP
    ...     thrift = Bmv2Thrift(sw.thrift_port)
    ...     thrift.register_read_all("HinaIngress.slots.count")[:4]
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from hina.loopback import free_tcp_port
from hina.procs import stop_group, with_parent_death_signal

from .config import ConfigError

if TYPE_CHECKING:
    from hina.tls import ServerTls

__all__ = ["P4C_BM2_SS", "SIMPLE_SWITCH_GRPC", "SIMPLE_SWITCH_CLI", "BINARIES", "missing",
           "P4cBuild", "compile_p4c", "cache_dir", "Bmv2Process", "Bmv2Thrift", "Bmv2Error",
           "thrift_missing"]

log = logging.getLogger("hina.bmv2")

P4C_BM2_SS = "p4c-bm2-ss"
SIMPLE_SWITCH_GRPC = "simple_switch_grpc"
SIMPLE_SWITCH_CLI = "simple_switch_CLI"
BINARIES = (SIMPLE_SWITCH_GRPC, P4C_BM2_SS, SIMPLE_SWITCH_CLI)
CACHE_ENV = "HINA_CACHE_DIR"
#: Bytes by which BMv2 lets a program grow a packet: simple_switch gives each received packet a
#: buffer of its length + 512, and a deparser emitting more aborts the whole switch (assertion
#: in packet_buffer.h). A THC (LUT-SUM) result is 4 x HINA_WORDS bytes for an HINA_WORDS-byte
#: request: it grows by 3 x HINA_WORDS, so THC on BMv2 needs HINA_WORDS <= 170 (128 in practice).
PACKET_HEADROOM = 512
#: Work folders of :class:`Bmv2Process` (in the temporary directory): ``hina-bmv2-<pid>-*``.
WORKDIR_PREFIX = "hina-bmv2-"
#: Seconds a switch may take to open its gRPC and Thrift servers (it loads no program yet).
START_TIMEOUT_S = 30.0


class Bmv2Error(RuntimeError):
    """BMv2 could not be started or did not answer; ``str()`` is one line for the user."""


def missing() -> Optional[str]:
    """Why real BMv2 cannot run here (a one-line reason), or ``None`` when it can."""
    absent = [b for b in BINARIES if shutil.which(b) is None]
    if absent:
        return (f"BMv2 toolchain not installed ({', '.join(absent)} not on PATH): "
                "bash ../shared/p4tools/install.sh, or p4lang's p4c and behavioral-model")
    return None


# --------------------------------------------------------------------------------------------
# p4c, cached
# --------------------------------------------------------------------------------------------
def cache_dir() -> Path:
    """``$HINA_CACHE_DIR``, else ``$XDG_CACHE_HOME/hina/pipelines`` (``~/.cache/...``)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hina" / "pipelines"


@dataclass(frozen=True)
class P4cBuild:
    """What ``p4c-bm2-ss`` made of one program: BMv2 JSON and text P4Info (files in the cache)."""
    json: Path
    p4info: Path
    key: str

    def device_config(self) -> bytes:
        return self.json.read_bytes()


def _run_p4c(args: Sequence[str], what: str, timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([P4C_BM2_SS, *args], capture_output=True, text=True,
                              timeout=timeout)
    except FileNotFoundError:
        raise ConfigError(f"{P4C_BM2_SS} is not on PATH: install p4c (bash "
                          "../shared/p4tools/install.sh), or pass a prebuilt pipeline with "
                          "--bmv2-json FILE --p4info FILE") from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{P4C_BM2_SS} did not finish {what} within {timeout:g}s") from None


_VERSION: dict[str, str] = {}


def _p4c_version() -> str:
    if P4C_BM2_SS not in _VERSION:
        _VERSION[P4C_BM2_SS] = _run_p4c(["--version"], "--version", 30).stdout.strip()
    return _VERSION[P4C_BM2_SS]


def _define_args(defines: Mapping[str, object]) -> list[str]:
    return [f"-D{k}={v}" for k, v in sorted(defines.items())]


def compile_p4c(p4: str | os.PathLike, defines: Optional[Mapping[str, object]] = None, *,
                timeout: float = 1800.0) -> P4cBuild:
    """Compile ``p4`` with ``p4c-bm2-ss`` for v1model, or take the cached result.

    The cache key is the compiler's version, the defines and the program as p4c's own
    preprocessor sees it (``p4c-bm2-ss -E``: every include folded in), so editing an include
    compiles again and nothing else does. Entries are written to a temporary folder and
    renamed into place: a run killed mid-compile leaves no half entry, and two runs compiling
    the same program at once both end with a whole one.

    Args:
        p4: the P4_16 program.
        defines: ``-D`` macros (``{"HINA_WORDS": 64}``).
        timeout: seconds the compile may take (``hina.p4`` at 256 words takes about 4 minutes).

    Returns:
        the :class:`P4cBuild` (paths inside the cache).

    Raises:
        ConfigError: p4c is missing, the program does not compile (the first error lines), or
            the compile ran past ``timeout``.
    """
    p4 = str(p4)
    defs = _define_args(defines or {})
    pre = _run_p4c(["-E", *defs, p4], "preprocessing", 60)
    # p4c 1.2.5 exits 1 from -E whenever a -D is given, output complete: judge by the output.
    if not pre.stdout.strip() or "error" in pre.stderr.lower():
        raise ConfigError(f"{P4C_BM2_SS} cannot preprocess {p4}: {_first_error(pre.stderr)}")
    key = hashlib.sha256("\0".join([_p4c_version(), *defs, pre.stdout]).encode()).hexdigest()
    root = cache_dir() / "p4c"
    final = root / key[:32]
    build = P4cBuild(final / "program.json", final / "program.p4info.txt", key)
    if build.json.exists() and build.p4info.exists():
        return build
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        cmd = ["--arch", "v1model", "-o", str(tmp / "program.json"),
               "--p4runtime-files", str(tmp / "program.p4info.txt"), *defs, p4]
        log.info("compiling: %s %s", P4C_BM2_SS, " ".join(cmd))
        started = time.monotonic()
        done = _run_p4c(cmd, f"compiling {p4}", timeout)
        if done.returncode != 0:
            raise ConfigError(f"{P4C_BM2_SS} failed on {p4}: {_first_error(done.stderr)}")
        log.info("compiled %s in %.1f s", p4, time.monotonic() - started)
        (tmp / "source.txt").write_text(json.dumps({"p4": p4, "defines": defs}))
        try:
            os.rename(tmp, final)
        except OSError:          # another run put the same entry in place first: keep theirs
            if not build.json.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return build


def _first_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()] or lines or ["(no output)"]
    return " | ".join(errors[:3])


# --------------------------------------------------------------------------------------------
# simple_switch_grpc processes
# --------------------------------------------------------------------------------------------
def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Bmv2Process:
    """One ``simple_switch_grpc --no-p4``: its ports, its gRPC and Thrift servers, its log.

    The gRPC and Thrift ports are picked free on 127.0.0.1 (a clash with a port taken between
    the pick and the switch's bind is retried with new ports). The process is its own session
    leader and gets SIGKILL when the Python thread that started it exits, so neither a failing
    test nor a killed test run leaves a switch behind. The pipeline is pushed over P4Runtime.

    Args:
        interfaces: switch port number -> Linux interface (``-i PORT@IFACE``); may be empty.
        device_id: the P4Runtime device id.
        log_console: BMv2's per-packet log to ``log_path`` (slow: tens of times fewer packets/s).
        extra_args: more ``simple_switch_grpc`` options before ``--``.
        tls: serve P4Runtime over TLS with this certificate and key (BMv2's
            ``--grpc-server-ssl --grpc-server-cert --grpc-server-key``); with its ``client_ca``,
            mutual TLS: a client without a certificate that CA signed is refused before any RPC
            (``--grpc-server-cacert --grpc-server-with-client-auth``). ``None``: plaintext.
        grpc_port, thrift_port: the ports to listen on (127.0.0.1); picked free when not given
            (then a clash is retried with new ports; given ports are not changed).

    Attributes:
        address: ``127.0.0.1:PORT`` of the P4Runtime server.
        thrift_port: the Thrift runtime port (``simple_switch_CLI --thrift-port``).
        log_path: the switch's stdout and stderr.
    """

    def __init__(self, interfaces: Mapping[int, str] = {}, *, device_id: int = 0,
                 log_console: bool = False, extra_args: Sequence[str] = (),
                 workdir: Optional[Path] = None, tls: Optional["ServerTls"] = None,
                 grpc_port: Optional[int] = None, thrift_port: Optional[int] = None):
        if shutil.which(SIMPLE_SWITCH_GRPC) is None:
            raise Bmv2Error(missing() or f"{SIMPLE_SWITCH_GRPC} is not on PATH")
        self.interfaces = dict(interfaces)
        self.device_id = device_id
        self.tls = tls
        self._log_console, self._extra_args = log_console, tuple(extra_args)
        self._own_workdir = workdir is None
        # Named after this process, so that a run killed before stop() has its folder removed
        # by the next run (controller.bmv2_dataplane.sweep_stale).
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)      # a given folder may not exist yet
        self.log_path = self.workdir / "simple_switch.log"
        self.proc: Optional[subprocess.Popen] = None
        self.thrift_port = self.grpc_port = 0
        last = ""
        fixed = grpc_port is not None or thrift_port is not None
        for _ in range(1 if fixed else 3):
            self.grpc_port = grpc_port or free_tcp_port()
            self.thrift_port = thrift_port or free_tcp_port()
            if self.grpc_port == self.thrift_port:
                last = f"gRPC and Thrift port are both {self.grpc_port}"
                continue
            last = self._start(log_console, extra_args)
            if not last:
                return
        self.stop()
        raise Bmv2Error(f"{SIMPLE_SWITCH_GRPC} did not start: {last}")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def _tls_args(self) -> list[str]:
        """BMv2's target options for :attr:`tls` (after ``--``)."""
        if self.tls is None:
            return []
        args = ["--grpc-server-ssl", "--grpc-server-cert", str(Path(self.tls.cert).resolve()),
                "--grpc-server-key", str(Path(self.tls.key).resolve())]
        if self.tls.client_ca:
            args += ["--grpc-server-cacert", str(Path(self.tls.client_ca).resolve()),
                     "--grpc-server-with-client-auth"]
        return args

    def _start(self, log_console: bool, extra_args: Sequence[str]) -> str:
        ifaces = [a for port, iface in sorted(self.interfaces.items())
                  for a in ("-i", f"{port}@{iface}")]
        cmd = [SIMPLE_SWITCH_GRPC, "--no-p4", "--device-id", str(self.device_id), *ifaces,
               "--thrift-port", str(self.thrift_port),
               # Without a log sink BMv2 still formats every trace message unless the level is
               # off: 2.5x fewer packets/s on hina.p4 (bench/bench_bmv2_vs_embedded.py).
               *(["--log-console"] if log_console else ["--log-level", "off"]),
               *extra_args, "--", "--grpc-server-addr", self.address, *self._tls_args()]
        log.info("starting %s", " ".join(cmd))
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(with_parent_death_signal(cmd), stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"exit status {self.proc.returncode}: {self._log_tail()}"
            if _listening(self.grpc_port) and _listening(self.thrift_port):
                return ""
            time.sleep(0.05)
        self._kill()
        return f"no gRPC and Thrift servers within {START_TIMEOUT_S:g}s: {self._log_tail()}"

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-3:]) or "(empty log)"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> Optional[int]:
        """The switch's process id while it runs."""
        return self.proc.pid if self.alive() else None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Crash the switch: ``sig`` (SIGKILL: no clean-up of any kind) to its process group,
        and wait until it is gone. Its ports, interfaces and work folder stay for
        :meth:`restart`."""
        if self.proc is None:
            return
        stop_group(self.proc, sig, grace=10.0)    # a signal it survives: SIGKILL after 10 s
        self.proc = None

    def restart(self, timeout: float = 15.0) -> None:
        """Start the switch again (after :meth:`kill`, or killing a running one first) on the
        same gRPC and Thrift ports, interfaces, device id and TLS: a fresh device without a
        pipeline, as after a crash. A port still held (by the dying process, or by a stranger
        that took it meanwhile) is retried for ``timeout`` seconds.

        Raises:
            Bmv2Error: it did not start.
        """
        self.kill()
        deadline = time.monotonic() + timeout
        while True:
            last = self._start(self._log_console, self._extra_args)
            if not last:
                return
            if time.monotonic() > deadline:
                raise Bmv2Error(f"{SIMPLE_SWITCH_GRPC} did not start again on ports "
                                f"{self.grpc_port}/{self.thrift_port}: {last}")
            time.sleep(0.2)

    def _kill(self) -> None:
        if self.proc is None:
            return
        stop_group(self.proc, grace=5.0)
        self.proc = None

    def stop(self) -> None:
        """Stop the switch (idempotent) and remove its work folder if this object made it."""
        self._kill()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Bmv2Process":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# Thrift runtime, in process
# --------------------------------------------------------------------------------------------
def _bm_runtime_path() -> Optional[str]:
    """The folder holding BMv2's ``bm_runtime`` package: beside ``simple_switch_CLI``'s
    installation (``../lib/pythonX.Y/site-packages``), or ``$HINA_BM_RUNTIME``."""
    env = os.environ.get("HINA_BM_RUNTIME")
    if env:
        return env
    cli = shutil.which(SIMPLE_SWITCH_CLI)
    if cli is None:
        return None
    prefix = Path(os.path.realpath(cli)).parent.parent
    for candidate in sorted(prefix.glob("lib/python3*/site-packages")) + \
            sorted(prefix.glob("lib/python3*/dist-packages")):
        if (candidate / "bm_runtime").is_dir():
            return str(candidate)
    return None


def _load_package_from(name: str, folder: str) -> None:
    """Import the top-level package ``name`` from ``folder`` (BMv2's own site-packages, which
    is not this interpreter's) without putting the whole folder on ``sys.path``: only that one
    package becomes importable, nothing else there can shadow the project's dependencies."""
    import importlib.machinery
    import importlib.util
    if name in sys.modules:
        return
    spec = importlib.machinery.PathFinder.find_spec(name, [folder])
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def _import_standard():
    try:
        from bm_runtime.standard import Standard  # type: ignore[import-not-found]
        return Standard
    except ImportError:
        pass
    path = _bm_runtime_path()
    if path:
        _load_package_from("bm_runtime", path)
    try:
        from bm_runtime.standard import Standard  # type: ignore[import-not-found]
        return Standard
    except ImportError as exc:
        raise Bmv2Error(f"BMv2's Thrift runtime modules cannot be imported ({exc}): they ship "
                        f"with {SIMPLE_SWITCH_CLI}; the thrift package comes from Debian's "
                        "python3-thrift or 'pip install thrift'") from None


def thrift_missing() -> Optional[str]:
    """Why :class:`Bmv2Thrift` cannot be used from this interpreter (one line: BMv2's
    ``bm_runtime`` modules or the ``thrift`` package cannot be imported), or ``None``."""
    try:
        _import_standard()
        import thrift.transport.TSocket  # noqa: F401
    except Bmv2Error as exc:
        return str(exc)
    except ImportError as exc:
        return f"the thrift package cannot be imported ({exc}): Debian's python3-thrift"
    return None


class Bmv2Thrift:
    """A connection to BMv2's Thrift runtime (``standard`` service, context 0). Thread-safe.

    Args:
        port: the switch's ``--thrift-port``.
        host: its address.
        timeout: seconds per call.

    Raises:
        Bmv2Error: the modules are missing or the switch does not answer.
    """

    def __init__(self, port: int = 9090, host: str = "127.0.0.1", timeout: float = 30.0):
        Standard = _import_standard()
        from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
        from thrift.transport import TSocket, TTransport
        self.port, self.host = port, host
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(int(timeout * 1000))
        self._transport = TTransport.TBufferedTransport(sock)
        protocol = TMultiplexedProtocol.TMultiplexedProtocol(
            TBinaryProtocol.TBinaryProtocol(self._transport), "standard")
        self._client = Standard.Client(protocol)
        self._lock = threading.Lock()
        try:
            self._transport.open()
        except Exception as exc:   # thrift's TTransportException
            raise Bmv2Error(f"BMv2 Thrift runtime at {host}:{port} does not answer: {exc}") \
                from None

    def _call(self, method: str, *args):
        with self._lock:
            try:
                return getattr(self._client, method)(0, *args)
            except Exception as exc:
                what = getattr(exc, "what", None)
                detail = f"{type(exc).__name__}" + (f" (code {what})" if what is not None else "")
                raise Bmv2Error(f"BMv2 Thrift {method}{args!r}: {detail} {exc}".strip()) \
                    from None

    def learning_send_at_once(self, list_id: int) -> None:
        """Learn list ``list_id`` sends each sample alone, at once. P4Runtime configures one
        BMv2 learn list per digest name, but p4c makes one per ``digest`` call; the others
        keep BMv2's defaults (16 samples or 1 s)."""
        self._call("bm_learning_set_buffer_size", list_id, 1)
        self._call("bm_learning_set_timeout", list_id, 0)

    def register_read_all(self, name: str) -> list[int]:
        """Every cell of register array ``name`` (one call)."""
        return list(self._call("bm_register_read_all", name))

    def register_read(self, name: str, index: int) -> int:
        return int(self._call("bm_register_read", name, index))

    def register_write(self, name: str, index: int, value: int) -> None:
        self._call("bm_register_write", name, index, value)

    def register_write_range(self, name: str, first: int, last: int, value: int) -> None:
        """Cells ``first`` .. ``last`` (inclusive) of ``name`` := ``value`` (one call).

        BMv2's ``bm_register_write_range`` takes an exclusive end (``last + 1`` here)."""
        self._call("bm_register_write_range", name, first, last + 1, value)

    def register_reset(self, name: str) -> None:
        self._call("bm_register_reset", name)

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """``(bytes, packets)`` of cell ``index`` of indirect counter ``name``."""
        value = self._call("bm_counter_read", name, index)
        return int(value.bytes), int(value.packets)

    def counter_write(self, name: str, index: int, bytes_: int, packets: int) -> None:
        from bm_runtime.standard.ttypes import BmCounterValue  # type: ignore[import-not-found]
        self._call("bm_counter_write", name, index, BmCounterValue(bytes=bytes_, packets=packets))

    def meter_set_rates(self, name: str, index: int,
                        rates: list[tuple[float, int]]) -> None:
        """Cell ``index`` of meter array ``name``: ``rates`` = [(committed units per
        microsecond, burst), (peak units per microsecond, burst)], as ``simple_switch_CLI``'s
        ``meter_set_rates`` takes them."""
        from bm_runtime.standard.ttypes import BmMeterRateConfig  # type: ignore[import-not-found]
        self._call("bm_meter_set_rates", name, index,
                   [BmMeterRateConfig(units_per_micros=float(r), burst_size=int(b))
                    for r, b in rates])

    def meter_get_rates(self, name: str, index: int) -> list[tuple[float, int]]:
        return [(r.units_per_micros, r.burst_size)
                for r in self._call("bm_meter_get_rates", name, index)]

    def parse_vset_add(self, name: str, value: bytes) -> None:
        """Add ``value`` (the member's fields packed, big-endian) to parser value set ``name``."""
        self._call("bm_parse_vset_add", name, value)

    def parse_vset_clear(self, name: str) -> None:
        self._call("bm_parse_vset_clear", name)

    def close(self) -> None:
        try:
            self._transport.close()
        except Exception:  # noqa: BLE001 - closing a dead connection is not an error
            pass

    def __enter__(self) -> "Bmv2Thrift":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
