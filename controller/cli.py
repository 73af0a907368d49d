"""``hina-ctl``: deploy the HINA pipeline, manage aggregation jobs, inspect aggregation state.

Every command talks to one switch over P4Runtime (``--switch HOST:PORT``) and keeps what it
installed in a state file (``--state FILE``), so jobs survive a switch restart (``resync``) and
later commands (``job delete``) know what to remove. Read commands accept ``--json`` for scripts.

Each job gets a token its workers show the job service (``job token``); ``serve`` holds the
primary role on the switch while it runs. ``--tls-ca`` (and ``--tls-client-cert``/``--key``)
reach the switch over TLS; ``serve --tls-cert/--tls-key [--tls-client-ca]`` serves TLS.

Errors are one line on stderr and exit status 1 (usage errors: 2); the traceback of an
unexpected error goes to the log file (``--log-file``, default beside the state file).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from hina.cli import EXIT_FAILURE, EXIT_OK, OneLineParser
from hina.cli import help_with_example as _help
from hina.tls import ClientTls, ServerTls, is_loopback

from .cli_jobs import add_job_commands
from .config import ConfigError, JobConfig
from .jobs import JobError, JobManager
from .p4runtime_client import NotPrimaryError, P4RuntimeClientError, SwitchConnection
from .state import ControllerState, default_state_path
from .target import TARGETS, PipelineConfig, register_access
from .tokens import TokenStore, tokens_path

__all__ = ["main", "build_parser"]

log = logging.getLogger("hina.controller")

PROG = "hina-ctl"
DEFAULT_SWITCH = "127.0.0.1:9559"
DEFAULT_LISTEN = "127.0.0.1:50051"
SWITCH_ENV = "HINA_SWITCH"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DEFAULT_LANES_SHOWN = 8

#: Errors that are the user's to fix: one line, no traceback.
USER_ERRORS = (ConfigError, JobError, P4RuntimeClientError, ValueError, OSError)


# ------------------------------------------------------------------------------------------------
# Context: state file, switch connection, output
# ------------------------------------------------------------------------------------------------
class Context:
    """What every command needs, built from the global options."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.state_path = Path(args.state) if args.state else default_state_path()
        self.state = ControllerState.load(self.state_path)
        self.tokens = TokenStore(tokens_path(self.state_path))
        self._conn: Optional[SwitchConnection] = None
        self._registers = None

    @property
    def target(self) -> str:
        if self.state.pipeline is not None:
            return self.state.pipeline.target
        return self.args.target or "embedded"

    def open_switch(self, primary: bool) -> SwitchConnection:
        """A new session with the switch (TLS when ``--tls-ca``/``--tls-client-cert`` say so)."""
        a = self.args
        return SwitchConnection(a.switch, device_id=a.device_id, election_id=a.election_id,
                                timeout=a.timeout, primary=primary,
                                tls=ClientTls.from_args(a.tls_ca, a.tls_client_cert,
                                                        a.tls_client_key))

    def connect(self, primary: bool) -> SwitchConnection:
        if self._conn is not None:        # a read-only session opened before (the layout)
            if self._registers is not None:    # bound to that session
                self._registers.close()
                self._registers = None
            self._conn.close()
        self._conn = self.open_switch(primary)
        return self._conn

    def manager(self) -> JobManager:
        """A primary connection's JobManager that knows the jobs of the state file."""
        conn = self.connect(primary=True)
        jobs = JobManager(conn, registers=self.registers(), target=self.target)
        for config in self.state.jobs.values():
            jobs.adopt(config)
        return jobs

    def registers(self):
        """The target's register path (one per command: BMv2's keeps its Thrift connection);
        on tofino it knows the register cells jobs were given since the push (state file)."""
        if self._registers is None:
            conn = self._conn or self.connect(primary=False)
            self._registers = register_access(self.target, conn, self.args.thrift_port,
                                              used=self.state.used)
        return self._registers

    def note_used(self, jobs: JobManager, job_ids: Sequence[int]) -> None:
        """tofino: remember the register cells of ``job_ids`` as used since the push."""
        if self.target != "tofino":
            return
        self.state.used += [c for c in jobs.register_cells(job_ids) if c not in self.state.used]
        if self._registers is not None:
            self._registers.used = list(self.state.used)

    def job(self, job_id: int) -> JobConfig:
        job = self.state.jobs.get(job_id)
        if job is None:
            known = ", ".join(map(str, sorted(self.state.jobs))) or "none"
            raise JobError(f"job {job_id} does not exist (jobs: {known})")
        return job

    def save(self) -> None:
        self.state.save(self.state_path)

    def close(self) -> None:
        if self._registers is not None:
            self._registers.close()
        if self._conn is not None:
            self._conn.close()

    def print_json(self, data: Any) -> None:
        print(json.dumps(data, indent=1, sort_keys=True))

    def console(self):
        from rich.console import Console
        return Console()


# ------------------------------------------------------------------------------------------------
# Commands
# ------------------------------------------------------------------------------------------------
def cmd_pipeline_push(ctx: Context) -> int:
    a = ctx.args
    target = a.target or ctx.target
    config = PipelineConfig(target=target, p4=a.p4 or str(PipelineConfig().p4),
                            defines=dict(a.defines), bmv2_json=a.bmv2_json or "",
                            p4info=a.p4info or "", device_config_format=a.device_config_format or "",
                            p4info_externs=a.p4info_externs or "", tofino_out=a.tofino_out or "",
                            allow_parser_defects=a.allow_parser_defects)
    p4info, device_config = config.build()
    conn = ctx.connect(primary=True)
    conn.set_pipeline(p4info, device_config)
    dropped = sorted(ctx.state.jobs)
    ctx.state.pipeline, ctx.state.jobs, ctx.state.used = config, {}, []
    ctx.save()
    ctx.tokens.remove(dropped)
    what = config.target if config.target != "tofino" else (
        f"tofino, {config.device_config_format} device config of {len(device_config)} bytes, "
        f"{config.p4info_externs} P4Info externs")
    msg = f"pipeline {Path(config.p4).name} pushed to {a.switch} ({what})"
    if dropped:
        msg += f"; jobs {', '.join(map(str, dropped))} were removed with the old pipeline"
    print(msg)
    return EXIT_OK


def cmd_resync(ctx: Context) -> int:
    if ctx.state.pipeline is None:
        raise ConfigError(f"nothing to resync: the state file {ctx.state_path} has no pipeline "
                          "(run 'hina-ctl pipeline push' first)")
    p4info, device_config = ctx.state.pipeline.build()
    conn = ctx.connect(primary=True)
    conn.set_pipeline(p4info, device_config)
    if ctx.target == "tofino":            # a pushed pipeline starts with zeroed registers
        ctx.state.used = []
        ctx.save()
    jobs = JobManager(conn, registers=ctx.registers(), target=ctx.target)
    done = []
    try:
        done = jobs.resync([ctx.state.jobs[j] for j in sorted(ctx.state.jobs)])
    finally:
        if ctx.target == "tofino":
            ctx.note_used(jobs, sorted(jobs.jobs))
            ctx.save()
    print(f"pipeline re-pushed to {ctx.args.switch}; {len(done)} job(s) re-installed"
          + (f": {', '.join(str(c.job_id) for c in done)}" if done else ""))
    return EXIT_OK


def cmd_state(ctx: Context) -> int:
    from .cli_jobs import program_layout_of
    from .inspect import job_progress, slot_state
    a = ctx.args
    config = ctx.job(a.job)
    registers = ctx.registers()
    # the pushed program's registers: p4/hina.p4's, or the TNA program's (embedded or tofino)
    layout = program_layout_of(ctx)
    if a.slot is None:
        data = job_progress(registers, config, layout)
        data["slots"] = [slot_state(registers, config, s, lanes=0, layout=layout)
                         for s in range(config.n_slots)]
    else:
        data = slot_state(registers, config, a.slot, layout=layout)
    if a.json:
        ctx.print_json(data)
        return EXIT_OK
    from rich.table import Table
    slots = data["slots"] if a.slot is None else [data]
    title = (f"job {config.job_id} ({config.codec}, {config.lane_op}): "
             + (f"{data['chunks']} chunks started" if a.slot is None else f"slot {a.slot}"))
    table = Table(title=title)
    for col in ("slot", "pool", "generation", "seq", "count", "contributors", "overflow"):
        table.add_column(col)
    if config.uses_blocks:
        table.add_column("block")
        table.add_column("next")
    if a.slot is not None:
        table.add_column(f"lanes (first {min(a.lanes, len(slots[0]['pools'][0]['lanes']))})")
    for s in slots:
        for p in s["pools"]:
            generation = "-" if not p["in_use"] else str(p["generation"]) + (
                "" if p["current"] else " (old)")
            row = [str(s["slot"]), str(p["pool"]), generation,
                   "-" if p["seq"] is None else str(p["seq"]),
                   f"{p['count']}/{s['n_workers']}", ",".join(map(str, p["contributors"])) or "-",
                   {True: "yes", False: "", None: "?"}[p["overflow"]]]
            if config.uses_blocks:
                in_use = p["in_use"]
                row += [str(p["block"]) if in_use else "-",
                        ("end" if p["block_next"] is None else str(p["block_next"])) if in_use else "-"]
            if a.slot is not None:
                row.append(" ".join(map(str, p["lanes"][:a.lanes])))
            table.add_row(*row)
    ctx.console().print(table)
    return EXIT_OK


def _counters(ctx: Context) -> dict:
    from .inspect import job_packets, job_progress, reason_counts
    from .jobs import program_layout
    conn = ctx._conn or ctx.connect(primary=False)
    registers = ctx.registers()
    if ctx.target == "tofino":            # the compiler's P4Info names (TofinoRegisters)
        return {"reasons": registers.reason_counts(),
                "jobs": [{"job": j, **registers.job_packets(j)} for j in sorted(ctx.state.jobs)]}
    # the pushed program's names: p4/hina.p4's, or the TNA program's on the embedded target
    # (its progress from the slot bitmaps: it keeps no slot_count)
    layout = program_layout(conn.require_index())
    return {"reasons": reason_counts(conn, layout),
            "jobs": [{"job": c.job_id, **job_progress(registers, c, layout),
                      **job_packets(conn, c.job_id, layout)}
                     for _, c in sorted(ctx.state.jobs.items())]}


def _counters_tables(data: dict):
    from rich.console import Group
    from rich.table import Table
    reasons = Table(title="packets by reason")
    reasons.add_column("reason")
    reasons.add_column("packets", justify="right")
    for name, n in data["reasons"].items():
        reasons.add_row(name, str(n))
    jobs = Table(title="jobs")
    for col in ("job", "packets", "bytes", "chunks started", "complete copies", "filling copies"):
        jobs.add_column(col, justify="right")
    for j in data["jobs"]:       # tofino: packets and bytes only (no slot_count to read)
        jobs.add_row(*(str(j.get(k, "-")) for k in ("job", "packets", "bytes", "chunks",
                                                     "complete_copies", "filling_copies")))
    return Group(reasons, jobs)


def cmd_counters(ctx: Context) -> int:
    data = _counters(ctx)
    if ctx.args.json:
        ctx.print_json(data)
    else:
        ctx.console().print(_counters_tables(data))
    return EXIT_OK


def cmd_watch(ctx: Context) -> int:
    a = ctx.args
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    shown = 0
    if a.json:
        while not stop.is_set() and (a.count == 0 or shown < a.count):
            print(json.dumps({"time": time.time(), **_counters(ctx)}), flush=True)
            shown += 1
            stop.wait(a.interval)
        return EXIT_OK
    from rich.live import Live
    try:
        with Live(_counters_tables(_counters(ctx)), console=ctx.console(),
                  refresh_per_second=4) as live:
            shown = 1
            while not stop.wait(a.interval) and (a.count == 0 or shown < a.count):
                live.update(_counters_tables(_counters(ctx)))
                shown += 1
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def cmd_reset(ctx: Context) -> int:
    job_id = ctx.args.job
    ctx.job(job_id)
    ctx.manager().reset(job_id)
    print(f"job {job_id}: slot registers zeroed")
    return EXIT_OK


def cmd_read(ctx: Context) -> int:
    """One register or counter by name, through the target's register path."""
    a = ctx.args
    conn = ctx._conn or ctx.connect(primary=False)
    if ctx.target == "tofino":
        registers = ctx.registers()
        values = (registers.register_values(a.name, a.index) if a.kind == "register"
                  else registers.counter_values(a.name, a.index))
    elif a.kind == "counter":
        values = conn.read_counter(a.name, a.index)
    elif ctx.target == "bmv2":
        if a.index is None:
            raise ConfigError("read register on bmv2: give --index (BMv2's registers are read "
                              "through its Thrift runtime, one cell here)")
        values = {a.index: ctx.registers().read([(a.name, a.index)])[0]}
    else:
        values = conn.read_register(a.name, a.index)
    if a.json:
        ctx.print_json({"kind": a.kind, "name": a.name, "values": {
            str(i): list(v) if isinstance(v, tuple) else v for i, v in sorted(values.items())}})
        return EXIT_OK
    for i, v in sorted(values.items()):
        shown = (f"bytes {v[0]} packets {v[1]}" if a.kind == "counter"
                 else " ".join(map(str, v)) if isinstance(v, tuple) else str(v))
        print(f"{a.name}[{i}] {shown}")
    return EXIT_OK


def cmd_serve(ctx: Context) -> int:
    from .jobservice import StateFileJobs, serve
    from .primary import PrimaryHold
    from .restarts import SwitchKeeper
    a = ctx.args
    tls = ServerTls.from_args(a.tls_cert, a.tls_key, a.tls_client_ca)
    issued = ctx.tokens.ensure(sorted(ctx.state.jobs))   # jobs of an older state file
    if issued:
        log.info("tokens issued to jobs %s", ", ".join(map(str, issued)))
    # the switch side of restarts: generations bumped for restarted workers, a restarted switch
    # re-installed (docs/reliability.md, "Restarts")
    keeper = SwitchKeeper(ctx.state_path, a.thrift_port)
    hold = PrimaryHold(lambda: ctx.open_switch(primary=True), on_primary=keeper.attach)
    hold.start()
    try:
        server = serve(StateFileJobs(ctx.state_path), a.listen, lease_s=a.lease,
                       tokens=ctx.tokens, tls=tls, generation_bumper=keeper.bump)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        security = ("plaintext" if tls is None else "mutual TLS" if tls.mutual else "TLS")
        print(f"hina-ctl serve: job service listening on {a.listen} ({security}; state "
              f"{ctx.state_path}); primary on {a.switch} with election id {a.election_id}",
              flush=True)
        if tls is None and not is_loopback(a.listen):
            print(f"{PROG} serve: warning: {a.listen} is not loopback and the service is "
                  "plaintext: job tokens cross the network in the clear (give --tls-cert and "
                  "--tls-key on a shared network)", file=sys.stderr, flush=True)
        stop.wait()
        server.stop(grace=1.0).wait()
    finally:
        hold.stop()
    return EXIT_OK


# ------------------------------------------------------------------------------------------------
# Parser
# ------------------------------------------------------------------------------------------------
def _define(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"-D {text!r}: expected NAME or NAME=VALUE")
    return name, value or "1"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG, **_help(
            "Control HINA aggregation on a P4 switch (BMv2, the embedded target or a Tofino) over "
            "P4Runtime: push the pipeline, create and delete jobs, inspect slots and counters, "
            "serve the worker job service.",
            "hina-ctl --switch 127.0.0.1:9559 pipeline push && "
            "hina-ctl job create --id 1 --codec thc --worker 10.0.1.1:40000 "
            "--worker 10.0.1.2:40000"))
    parser.add_argument("--switch", default=os.environ.get(SWITCH_ENV, DEFAULT_SWITCH),
                        metavar="HOST:PORT",
                        help=f"the switch's P4Runtime address (default ${SWITCH_ENV} or "
                             f"{DEFAULT_SWITCH})")
    parser.add_argument("--device-id", type=int, default=0, help="P4Runtime device id")
    parser.add_argument("--election-id", type=int, default=1,
                        help="election id for primaryship (default 1)")
    parser.add_argument("--target", choices=TARGETS, default=None,
                        help="switch kind (default: as pushed, else embedded)")
    parser.add_argument("--thrift-port", type=int, default=None,
                        help="BMv2 Thrift port for register access (default 9090)")
    parser.add_argument("--state", metavar="FILE",
                        help="controller state file (default $HINA_CTL_STATE or "
                             "~/.local/state/hina/ctl.json)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to wait for the switch (default 10)")
    parser.add_argument("--tls-ca", metavar="FILE",
                        help="reach the switch over TLS, trusting the CA in FILE (PEM) for its "
                             "certificate")
    parser.add_argument("--tls-client-cert", metavar="FILE",
                        help="this controller's certificate (PEM), for a switch that wants one "
                             "(mutual TLS)")
    parser.add_argument("--tls-client-key", metavar="FILE", help="its private key (PEM)")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-file", metavar="FILE",
                        help="log file (default: the state file with .log appended)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                parser_class=OneLineParser)

    # pipeline push
    pipe = sub.add_parser("pipeline", help="push the P4 pipeline", **_help(
        "Manage the switch's pipeline.", "hina-ctl pipeline push -D HINA_WORDS=64"))
    pipe_sub = pipe.add_subparsers(dest="action", metavar="ACTION", required=True,
                                   parser_class=OneLineParser)
    push = pipe_sub.add_parser("push", help="compile and push the program", **_help(
        "Compile the HINA program and push it (SetForwardingPipelineConfig). Every entry on the "
        "switch is lost: installed jobs are forgotten. For BMv2 the program is compiled with "
        "p4c-bm2-ss when it is on PATH; otherwise give --bmv2-json and --p4info.",
        "hina-ctl --target bmv2 pipeline push --bmv2-json build/hina.json "
        "--p4info build/hina.p4info.txt\n"
        "  hina-ctl --target tofino --switch SWITCH:9559 pipeline push -D TNA_LANES=1 "
        "--device-config-format stratum"))
    push.add_argument("--p4", default=None,
                      help="the P4 program (default: p4/hina.p4; tofino: p4/tna/hina_tna.p4)")
    push.add_argument("-D", dest="defines", action="append", default=[], type=_define,
                      metavar="NAME[=VALUE]", help="preprocessor define (e.g. HINA_WORDS=64)")
    push.add_argument("--bmv2-json", help="prebuilt BMv2 JSON (with --p4info)")
    push.add_argument("--p4info", help="prebuilt text P4Info (with --bmv2-json)")
    push.add_argument("--device-config-format", choices=("pi", "stratum"), default=None,
                      help="tofino: PI's legacy packing (default; PI, stratum_bf) or Stratum's "
                           "BfPipelineConfig (stratum_bfrt)")
    push.add_argument("--p4info-externs", choices=("tofino", "standard"), default=None,
                      help="tofino: the compiler's P4Info with TNA externs (default for pi) or "
                           "standard registers/counters (--p4runtime-force-std-externs; default "
                           "for stratum; needed to read them through P4Runtime)")
    push.add_argument("--tofino-out", metavar="DIR",
                      help="tofino: a prebuilt 'bf-p4c -o DIR --p4runtime-files DIR/p4info.bin' "
                           "output instead of compiling")
    push.add_argument("--allow-parser-defects", action="store_true",
                      help="tofino: push a binary whose compiled parser has transitions that "
                           "are never taken (refused by default: the parser bug of bf-p4c "
                           "9.13.4, p4c #5752); for trying the control plane, not for jobs")
    push.set_defaults(func=cmd_pipeline_push)

    resync = sub.add_parser("resync", help="re-push pipeline and jobs after a switch restart",
                            **_help("Push the pipeline of the state file and re-install every "
                                    "job it lists (a restarted switch has lost them).",
                                    "hina-ctl resync"))
    resync.set_defaults(func=cmd_resync)

    add_job_commands(sub)

    state = sub.add_parser("state", help="a job's slot registers, decoded", **_help(
        "Read a job's slot state from the switch: per pool copy the generation (old: left "
        "over from an earlier generation, reclaimed by its next packet), the sequence number, "
        "contributor bitmap, count, overflow flag and (with --slot) the partial sums decoded "
        "by the codec's lane op (SUM int32, LUT_SUM two 16-bit sums per word, MAX/OR uint32).",
        "hina-ctl state --job 1 --slot 0 --json"))
    state.add_argument("--job", type=int, required=True)
    state.add_argument("--slot", type=int, default=None, help="one slot, with its lanes")
    state.add_argument("--lanes", type=int, default=DEFAULT_LANES_SHOWN,
                       help=f"lane values shown in the table (default {DEFAULT_LANES_SHOWN}; "
                            "--json has them all)")
    state.add_argument("--json", action="store_true")
    state.set_defaults(func=cmd_state)

    counters = sub.add_parser("counters", help="drops by reason, progress per job", **_help(
        "Packets per drop/exception reason (reason_counter) and each job's progress "
        "(chunks started, slot copies complete or filling).", "hina-ctl counters --json"))
    counters.add_argument("--json", action="store_true")
    counters.set_defaults(func=cmd_counters)

    reset = sub.add_parser("reset", help="zero a job's slot registers", **_help(
        "Zero the job's slot and sketch registers (its workers then start again at seq 0).",
        "hina-ctl reset --job 1"))
    reset.add_argument("--job", type=int, required=True)
    reset.set_defaults(func=cmd_reset)

    watch = sub.add_parser("watch", help="live view of counters and jobs", **_help(
        "Refresh the counters view every --interval seconds (Ctrl-C ends it).",
        "hina-ctl watch --interval 0.5"))
    watch.add_argument("--interval", type=float, default=1.0)
    watch.add_argument("--count", type=int, default=0, help="stop after N refreshes (0: never)")
    watch.add_argument("--json", action="store_true", help="one JSON object per line")
    watch.set_defaults(func=cmd_watch)

    read = sub.add_parser("read", help="one register or counter, by P4 name", **_help(
        "Read a register or counter through the target's register path. On tofino the name "
        "is looked up in the compiler's P4Info (HinaIngress.x also finds HinaTnaIngress.x; "
        "the pipe. prefix is optional).",
        "hina-ctl --target tofino read counter HinaIngress.reason_counter --json"))
    read.add_argument("kind", choices=("register", "counter"))
    read.add_argument("name", help="the P4 name (fully qualified, or a unique alias)")
    read.add_argument("--index", type=int, default=None, help="one cell (default: all)")
    read.add_argument("--json", action="store_true")
    read.set_defaults(func=cmd_read)

    serve = sub.add_parser("serve", help="run the worker job service", **_help(
        "Serve hina/jobservice.proto: workers join jobs of the state file (re-read when it "
        "changes), learn their parameters and meet at barriers. Every request must carry its "
        "job's token (hina-ctl job token J). While it runs, serve holds the primary role on the "
        "switch (with --election-id): other clients' writes are refused; a one-shot command "
        "writes beside it with a higher --election-id. On a shared network, serve TLS "
        "(--tls-cert, --tls-key; --tls-client-ca for client certificates).",
        "hina-ctl serve --listen 0.0.0.0:50051 --tls-cert ctl.crt --tls-key ctl.key"))
    serve.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT")
    serve.add_argument("--lease", type=float, default=30.0,
                       help="seconds without a request before a worker's seat is freed")
    serve.add_argument("--tls-cert", metavar="FILE",
                       help="serve TLS with this certificate (PEM; with --tls-key)")
    serve.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    serve.add_argument("--tls-client-ca", metavar="FILE",
                       help="serve only workers with a certificate signed by this CA (PEM; "
                            "mutual TLS)")
    serve.set_defaults(func=cmd_serve)
    return parser


def _setup_logging(args: argparse.Namespace, state_path: Path) -> None:
    path = Path(args.log_file) if args.log_file else state_path.with_name(state_path.name + ".log")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path)
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(getattr(logging, args.log_level.upper()))


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    state_path = Path(args.state) if args.state else default_state_path()
    _setup_logging(args, state_path)
    ctx = None
    try:
        ctx = Context(args)
        return args.func(ctx)
    except USER_ERRORS as exc:
        log.info("command failed: %s", exc, exc_info=True)   # the traceback goes to the log
        hint = ("; a running 'hina-ctl serve' holds the primary role: write beside it with a "
                "higher --election-id" if isinstance(exc, NotPrimaryError) else "")
        print(f"{PROG}: error: {exc}{hint}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE
    except Exception as exc:       # a bug: one line for the user, the traceback to the log
        log.exception("unexpected error")
        print(f"{PROG}: internal error: {type(exc).__name__}: {exc} (traceback in the log)",
              file=sys.stderr)
        return EXIT_FAILURE
    finally:
        if ctx is not None:
            ctx.close()


if __name__ == "__main__":
    sys.exit(main())
