"""``softswitch``: the embedded P4 target's command line, modelled on ``simple_switch_grpc``.

Usage::

    softswitch [PROGRAM.p4 | --no-p4] -i N@IFNAME|N@udp:HOST:PORT[@PEER:PORT] ...
               [--grpc-server-addr 127.0.0.1:9559] [--device-id 0] [--cpu-port N]
               [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]
               [--log-level trace|debug|info|warn|error|off] [--log-file FILE]
               [--pcap DIR] [--loss PORT:PROB[:rx|tx|both] ...] [--loss-seed N]
               [-I INCLUDE_DIR ...] [-D NAME[=VALUE] ...]
    softswitch compile PROGRAM.p4 --p4info OUT.txt [--device-config OUT.json] [-I ..] [-D ..]
    softswitch stf TEST.stf PROGRAM.p4 [--trace] [-I ..] [-D ..]

The switch prints one line when its ports and its P4Runtime server are up::

    softswitch ready: device 0, ports 1@udp:127.0.0.1:9001 2@udp:127.0.0.1:9002, P4Runtime 127.0.0.1:9559

and stops cleanly on SIGINT or SIGTERM (exit status 0). With ``--no-p4`` it waits for a
controller's SetForwardingPipelineConfig. ``--log-level trace`` or ``debug`` also logs the
engine's per-packet trace (parser states, tables, actions, drops and why).

Errors are one line on stderr, never a traceback: bad arguments exit 2, a program that does not
compile or a port that cannot be opened exit 1 (the traceback of an unexpected error goes to the
log at debug level).
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Optional, Sequence

from .api import P4CompileError
from .ports import PortError, PortLoss, PortSpec, parse_loss_spec
from .switch import Switch

log = logging.getLogger("softswitch")

PROG = "softswitch"
DEFAULT_GRPC_ADDR = "127.0.0.1:9559"
GRPC_STOP_GRACE_S = 1.0
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
LOG_LEVELS = {
    "trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
    "warn": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 1,
}
TRACE_LEVELS = ("trace", "debug")       # levels that turn on the engine's per-packet trace
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SUBCOMMANDS = ("compile", "stf")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class CliError(Exception):
    """A failure to report as one line on stderr with exit status 1."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit status 2)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# ------------------------------------------------------------------------------------------------
# Argument parsing
# ------------------------------------------------------------------------------------------------
def _port_spec(text: str) -> PortSpec:
    try:
        return PortSpec.parse(text)
    except PortError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _loss_spec(text: str) -> tuple[int, PortLoss]:
    try:
        return parse_loss_spec(text)
    except PortError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _define(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"-D {text!r}: expected NAME or NAME=VALUE")
    return name, value if value else "1"


def _add_compiler_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                        help="add DIR to the preprocessor's include path")
    parser.add_argument("-D", dest="defines", action="append", default=[], type=_define,
                        metavar="NAME[=VALUE]", help="define a preprocessor macro")


def build_run_parser() -> argparse.ArgumentParser:
    """The parser of ``softswitch [PROGRAM | --no-p4] ...`` (running a switch)."""
    parser = OneLineParser(
        prog=PROG, description="Run a v1model P4_16 program on the embedded software switch "
        "behind a P4Runtime server. Subcommands: 'softswitch compile ...', 'softswitch stf ...'.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("program", nargs="?", help="the P4_16 program to load at start")
    source.add_argument("--no-p4", action="store_true",
                        help="start without a program; a controller pushes one over P4Runtime")
    parser.add_argument("-i", "--interface", dest="ports", action="append", default=[],
                        type=_port_spec, metavar="N@IF",
                        help="port N on Linux interface IF (needs root), or on UDP "
                             "udp:HOST:PORT[@PEERHOST:PEERPORT]; repeat for every port")
    parser.add_argument("--grpc-server-addr", default=DEFAULT_GRPC_ADDR, metavar="HOST:PORT",
                        help=f"P4Runtime server address (default {DEFAULT_GRPC_ADDR})")
    parser.add_argument("--tls-cert", metavar="FILE",
                        help="serve P4Runtime over TLS with this certificate (PEM; with "
                             "--tls-key); a switch reachable from a shared network needs it")
    parser.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    parser.add_argument("--tls-client-ca", metavar="FILE",
                        help="accept only controllers with a certificate signed by this CA "
                             "(PEM; mutual TLS)")
    parser.add_argument("--device-id", type=int, default=0, help="P4Runtime device id")
    parser.add_argument("--cpu-port", type=int, default=None, metavar="N",
                        help="port whose frames become PacketIn (and where PacketOut enters)")
    parser.add_argument("--log-level", choices=list(LOG_LEVELS), default="info",
                        help="'trace' and 'debug' also log every packet's path")
    parser.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")
    parser.add_argument("--pcap", metavar="DIR",
                        help="record every port into DIR/<port-name>_in.pcap and _out.pcap")
    parser.add_argument("--loss", action="append", default=[], type=_loss_spec,
                        metavar="PORT:PROB[:rx|tx|both]",
                        help="drop frames at random on PORT (default both directions)")
    parser.add_argument("--loss-seed", type=int, default=None, metavar="N",
                        help="seed of the loss generators, for reproducible drops (port N uses "
                             "seed + N)")
    _add_compiler_options(parser)
    return parser


def build_compile_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=f"{PROG} compile",
        description="Check a program and write its P4Info (and device config) like p4c.")
    parser.add_argument("program", help="the P4_16 program")
    parser.add_argument("--p4info", required=True, metavar="FILE",
                        help="write the P4Info in protobuf text format here")
    parser.add_argument("--device-config", metavar="FILE",
                        help="write the device config (what SetForwardingPipelineConfig carries)")
    _add_compiler_options(parser)
    return parser


def build_stf_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=f"{PROG} stf",
                                     description="Run an STF test (p4c's format) in process.")
    parser.add_argument("stf", help="the .stf test")
    parser.add_argument("program", help="the P4_16 program it tests")
    parser.add_argument("--trace", action="store_true", help="print each packet's trace")
    _add_compiler_options(parser)
    return parser


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------
def setup_logging(level_name: str, log_file: Optional[str]) -> logging.Handler:
    """Send the ``softswitch`` loggers to ``log_file`` (or stderr) at ``level_name``.

    Returns the handler, for :func:`teardown_logging` (``main`` can run more than once in a
    process, in tests).
    """
    handler: logging.Handler = (logging.FileHandler(log_file) if log_file
                                else logging.StreamHandler(sys.stderr))
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    log.addHandler(handler)
    log.setLevel(LOG_LEVELS[level_name])
    log.propagate = False
    return handler


def teardown_logging(handler: logging.Handler) -> None:
    log.removeHandler(handler)
    log.propagate = True
    log.setLevel(logging.NOTSET)
    handler.close()


def _compile(path: str, include_dirs: Sequence[str], defines: Sequence[tuple[str, str]]):
    from .compiler import compile_file          # the engine; imported when needed
    try:
        return compile_file(path, include_dirs=tuple(include_dirs), defines=dict(defines))
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# ------------------------------------------------------------------------------------------------
# Commands
# ------------------------------------------------------------------------------------------------
def run_switch(args: argparse.Namespace, ready_stream=None) -> int:
    """Start the switch, serve until SIGINT/SIGTERM, stop cleanly. Returns the exit status."""
    from .p4runtime_server import serve, server_credentials   # grpc: loaded only to serve

    ready_stream = ready_stream or sys.stdout
    credentials = None
    if args.tls_cert or args.tls_key or args.tls_client_ca:
        if not (args.tls_cert and args.tls_key):
            raise CliError("TLS needs both --tls-cert and --tls-key")
        try:
            credentials = server_credentials(args.tls_cert, args.tls_key, args.tls_client_ca)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    numbers = [spec.number for spec in args.ports]
    duplicates = sorted({n for n in numbers if numbers.count(n) > 1})
    if duplicates:
        raise CliError(f"port number {duplicates[0]} is given twice (-i)")
    losses = {}
    for number, loss in args.loss:
        if number not in numbers:
            raise CliError(f"--loss {number}:...: there is no port {number} (-i)")
        losses[number] = PortLoss(loss.rx, loss.tx,
                                  None if args.loss_seed is None else args.loss_seed + number)

    program = _compile(args.program, args.include_dirs, args.defines) if args.program else None
    switch = Switch(device_id=args.device_id, cpu_port=args.cpu_port,
                    trace=args.log_level in TRACE_LEVELS)
    server = None
    stop = threading.Event()
    previous_handlers: dict = {}
    try:
        if program is not None:
            switch.load(program)
        for spec in args.ports:
            port = spec.open(loss=losses.get(spec.number), pcap_dir=args.pcap)
            try:
                switch.add_port(port)
            except OSError as exc:       # the pcap files cannot be created
                port.close()
                raise CliError(f"port {spec.text}: {exc.filename}: {exc.strerror}") from None
        try:
            server = serve(switch, args.grpc_server_addr, credentials=credentials)
        except OSError as exc:
            raise CliError(str(exc)) from None
        for sig in STOP_SIGNALS:
            previous_handlers[sig] = signal.signal(sig, lambda *_: stop.set())
        ports = " ".join(f"{n}@{p.name}" for n, p in sorted(switch.ports.items()))
        print(f"{PROG} ready: device {args.device_id}, ports {ports or 'none'}, "
              f"P4Runtime {args.grpc_server_addr}", file=ready_stream, flush=True)
        while not stop.wait(timeout=1.0):   # a timed wait lets signals be handled promptly
            pass
        log.info("stopping")
    finally:
        if server is not None:
            server.stop(GRPC_STOP_GRACE_S).wait()
            server.servicer.close()
        switch.close()
        for sig, handler in previous_handlers.items():
            signal.signal(sig, handler)
    return EXIT_OK


def run_compile(args: argparse.Namespace) -> int:
    """``softswitch compile``: write the P4Info text and, if asked, the device config."""
    from .p4info import write_p4info_text
    program = _compile(args.program, args.include_dirs, args.defines)
    try:
        write_p4info_text(program.info, args.p4info)
        if args.device_config:
            with open(args.device_config, "wb") as f:
                f.write(_device_config(program))
    except OSError as exc:
        raise CliError(f"{exc.filename}: {exc.strerror}") from None
    return EXIT_OK


def _device_config(program) -> bytes:
    """The bytes a controller puts in ForwardingPipelineConfig.p4_device_config."""
    from .p4runtime_server import make_device_config
    return make_device_config(program)


def run_stf_command(args: argparse.Namespace) -> int:
    """``softswitch stf``: run the test, print PASS or FAIL with each failure; exit 0 or 1."""
    from .stf import run_stf
    program = _compile(args.program, args.include_dirs, args.defines)
    try:
        result = run_stf(args.stf, program, trace=args.trace)
    except OSError as exc:
        raise CliError(f"{args.stf}: {exc.strerror or exc}") from None
    print(result.report())
    return EXIT_OK if result.passed else EXIT_FAILURE


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``softswitch`` console script and ``python -m hina.softswitch``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        command, argv = argv[0], argv[1:]
        parser = build_compile_parser() if command == "compile" else build_stf_parser()
        action = run_compile if command == "compile" else run_stf_command
    else:
        parser, action = build_run_parser(), run_switch
    args = parser.parse_args(argv)       # bad arguments: one usage line, exit 2
    if action is run_switch:
        level, log_file = args.log_level, args.log_file
    else:
        level, log_file = ("trace" if getattr(args, "trace", False) else "warn"), None
    try:
        handler = setup_logging(level, log_file)
    except OSError as exc:
        print(f"{PROG}: --log-file {log_file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        return action(args)
    except (P4CompileError, PortError, CliError) as exc:
        print(f"{PROG}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:   # last resort: one line for the user, the traceback in the log
        log.debug("unexpected error", exc_info=True)
        print(f"{PROG}: internal error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        teardown_logging(handler)


if __name__ == "__main__":
    sys.exit(main())
