"""BMv2 and the embedded target side by side: p4/hina.p4 packets/s and aggregated elements/s.

Usage (root, BMv2 toolchain on PATH)::

    .venv/bin/python bench/bench_bmv2_vs_embedded.py [--words 64|128] [--workers 4] [--window 16]
        [--duration 3] [--thc] [--no-basic] [--targets bmv2,embedded] [--json FILE] [--quick]

One run, one set of veth pairs (one per worker port, ``hv<pid>-<n>s<port>`` / ``...h<port>``),
one frame generator. Each target in turn runs on the switch ends of those veths as its own
process with logging off: ``simple_switch_grpc --log-level off`` (p4c-bm2-ss's JSON; without
that option BMv2 formats every log message even with no log sink, 2-3 times slower on hina.p4)
and then ``python -m hina.softswitch --no-p4 --log-level off`` (the embedded target on ``-i
PORT@IFACE`` ports). Both get the same pipeline
(``p4/hina.p4`` with the same ``-D HINA_WORDS``) and the same job entries (``hina.pipeline``)
over P4Runtime through :class:`controller.p4runtime_client.SwitchConnection`; the bench then sends
the same frames from the host ends on raw sockets.

Method (HINA rows): a job of ``--workers`` workers (worker ``w`` on port ``w + 1``) with
``--window`` slots. Chunk ``seq`` goes to slot ``seq mod slots``, pool ``(seq div slots) mod
2`` (docs/protocol.md); the bench keeps ``--window`` chunks in flight: it sends the N
contributions of chunks 0..window-1, and the N contributions of chunk ``seq + window`` as soon as
all N multicast copies of chunk ``seq``'s RESULT are in (the workers' self-clocking, with every
worker in one process). So the switch always has work queued, but never more than
``window * N`` contributions and ``window`` results per port, which its queues hold (BMv2's
egress queues hold 64 packets per port; basic.p4 with 60 frames in flight lost some there).
Every RESULT is checked byte for byte against the numpy sum.
After ``--warmup`` seconds the counters are read, and again ``--duration`` seconds later:

* input packets/s: contributions aggregated per second (completed chunks/s x N; sent and
  aggregated differ only by the chunks in flight at the two readings);
* result packets/s: RESULT frames received per second (N multicast copies per chunk);
* aggregated elements/s: contributions folded into a slot per second x elements per
  contribution (HINA_WORDS int32 lanes for SUM, 2 x HINA_WORDS 4-bit THC indices for LUT_SUM);
* switch CPU: the switch process's user+system CPU time over the interval, in % of one core
  (BMv2 runs several threads, so it can exceed 100 %); driver CPU: this process's.

A run in which some chunk stays incomplete for ``--stall`` seconds lost a frame: its losses are
reported and the run is repeated with half the window (fresh pipeline, up to ``--retries``
times), so the figure printed comes from the largest window, halving from ``--window``, that ran
without loss (the table gives the window and the lossy attempts). ``basic.p4`` (IPv4 LPM forwarding) runs the
same way with one frame per unit from port 1 to port 2 and ``--basic-window`` frames in flight.

Without root or BMv2 the bench exits with status 2 and one line saying why.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from hina.framing import (Endpoint, build_frame, checksum_of, ipv4_checksum, ones_sum,
                          udp_header_residue)
from hina.programs import HINA_P4

ROOT = Path(__file__).resolve().parents[1]
BASIC_P4 = ROOT / "bench" / "programs" / "basic.p4"
TARGETS = ("bmv2", "embedded")
PROG = "bench_bmv2_vs_embedded"
EMBEDDED_READY_TIMEOUT_S = 120.0
BASIC_IDS = 4096                   # distinct basic.p4 frames (IPv4 identification 0..4095)
BMV2_ARGS = ("--log-level", "off")   # logging off: no console, no file, no message formatting
PAYLOAD_VARIANTS = 8               # distinct contribution vectors per worker, cycled by seq
_SOL_PACKET = 263
_PACKET_STATISTICS = 6


class BenchError(RuntimeError):
    """A failure to report as one line."""


# --------------------------------------------------------------------------------------------
# Machine
# --------------------------------------------------------------------------------------------
def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        version = subprocess.run(["simple_switch_grpc", "--version"], capture_output=True,
                                 text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = "?"
    return {"cores": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "python": platform.python_version(), "load_average": list(os.getloadavg()),
            "bmv2": version}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _veth_drops(names: list[str]) -> int:
    total = 0
    for n in names:
        for kind in ("rx_dropped", "tx_dropped"):
            try:
                total += int(Path(f"/sys/class/net/{n}/statistics/{kind}").read_text())
            except (OSError, ValueError):
                pass
    return total


def _socket_drops(sockets) -> int:
    """Frames the kernel dropped on our receive sockets since the last call (resets them)."""
    total = 0
    for s in sockets:
        try:
            _, drops = struct.unpack("II", s.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 8))
            total += drops
        except OSError:
            pass
    return total


# --------------------------------------------------------------------------------------------
# The switches: one process each, on the switch ends of the veths
# --------------------------------------------------------------------------------------------
from hina.loopback import free_tcp_port
from hina.procs import stop_group, with_parent_death_signal


class EmbeddedProcess:
    """``python -m hina.softswitch --no-p4 -i PORT@IFACE ...`` (logging off), its P4Runtime
    address, and its stop. Dies with this process (``PR_SET_PDEATHSIG``)."""

    def __init__(self, interfaces: dict[int, str]):
        self.workdir = Path(tempfile.mkdtemp(prefix="hina-embedded-"))
        self.log_path = self.workdir / "softswitch.log"
        self.address = f"127.0.0.1:{free_tcp_port()}"
        cmd = [sys.executable, "-m", "hina.softswitch", "--no-p4", "--log-level", "off",
               "--grpc-server-addr", self.address]
        for port, iface in sorted(interfaces.items()):
            cmd += ["-i", f"{port}@{iface}"]
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(self.log_path, "wb") as err:
            self.proc = subprocess.Popen(with_parent_death_signal(cmd), stdout=subprocess.PIPE,
                                         stderr=err, stdin=subprocess.DEVNULL, cwd=str(ROOT),
                                         env=env, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + EMBEDDED_READY_TIMEOUT_S
        buf = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                buf += chunk
                if b"softswitch ready" in buf:
                    return
                if not chunk:
                    break
            if self.proc.poll() is not None:
                break
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no log)"]
        raise BenchError(f"the embedded switch did not start: {tail[0]}")

    def stop(self) -> None:
        stop_group(self.proc, grace=5.0)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        import shutil
        shutil.rmtree(self.workdir, ignore_errors=True)


class RunningSwitch:
    """One target's process on the veths, with a primary P4Runtime session."""

    def __init__(self, kind: str, veths):
        from hina.controller.bmv2 import Bmv2Process
        from hina.controller.p4runtime_client import SwitchConnection
        self.kind = kind
        self.groups: list[int] = []
        interfaces = {p: veths.switch(p) for p in veths.ports}
        # Bmv2Process passes BMV2_ARGS ("--log-level off") itself: without it simple_switch
        # formats every per-packet log message even with no log sink, 2-3 times slower.
        self.proc = (Bmv2Process(interfaces) if kind == "bmv2"
                     else EmbeddedProcess(interfaces))
        try:
            self.conn = SwitchConnection(self.proc.address, election_id=1, timeout=30.0)
        except BaseException:
            self.proc.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.proc.pid if self.kind == "bmv2" else self.proc.pid

    def push(self, pipeline) -> None:
        """Set the pipeline: every table, register and multicast group starts afresh.

        BMv2 keeps its multicast groups across a pipeline push (and a second INSERT of the same
        group id then doubles every result), so the groups this bench wrote are deleted first,
        as :meth:`controller.bmv2_dataplane.Bmv2Dataplane.reset` does.
        """
        from hina.controller.p4runtime_client import P4RuntimeClientError
        for group in self.groups:
            try:
                self.conn.write([self.conn.multicast_update("DELETE", group)],
                                f"delete multicast group {group}")
            except P4RuntimeClientError:
                pass                  # the embedded target already dropped it with the pipeline
        self.groups = []
        p4info, config = pipeline
        self.conn.set_pipeline(p4info, config)

    def insert(self, entries) -> None:
        from hina.controller.jobs import entry_update
        index = self.conn.require_index()
        for start in range(0, len(entries), 512):
            self.conn.write([entry_update(index, "INSERT", e) for e in entries[start:start + 512]],
                            "insert entries")

    def mcast(self, group: int, replicas) -> None:
        self.conn.write([self.conn.multicast_update("INSERT", group,
                                                    [(r.port, r.rid) for r in replicas])],
                        f"multicast group {group}")
        self.groups.append(group)

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            self.proc.stop()


def build_pipelines(kind: str, words: int, with_basic: bool) -> dict:
    """(P4Info, device config) per program for ``kind``: p4c-bm2-ss (cached) for BMv2, the
    embedded target's device config (the preprocessed source) otherwise."""
    from hina.controller.bmv2 import compile_p4c
    from hina.controller.target import PipelineConfig
    from hina.softswitch.p4info import read_p4info_text
    programs = {"hina": (HINA_P4, {"HINA_WORDS": words})}
    if with_basic:
        programs["basic"] = (BASIC_P4, {})
    out = {}
    for name, (p4, defines) in programs.items():
        if kind == "bmv2":
            build = compile_p4c(p4, defines)
            out[name] = (read_p4info_text(str(build.p4info)), build.device_config())
        else:
            out[name] = PipelineConfig(target="embedded", p4=str(p4),
                                       defines={k: str(v) for k, v in defines.items()}).build()
    return out


# --------------------------------------------------------------------------------------------
# Workloads: what one unit of work sends, and how its outputs are recognised and checked
# --------------------------------------------------------------------------------------------
SWITCH_MAC, SWITCH_IP = 0x0200000000FE, 0x0A0000FE
_HDR = 42                                     # Ethernet + IPv4 + UDP before the HINA header


class HinaWorkload:
    """Chunks of one job: unit ``seq`` is the N contributions of chunk ``seq``; its outputs are
    the N multicast copies of its RESULT, each checked against the numpy aggregate."""

    def __init__(self, op, words: int, n_workers: int, n_slots: int, seed: int = 0):
        import numpy as np
        from scapy.packet import Raw

        from hina import pipeline
        from hina import protocol as P
        from hina.layers import HINA, pack_nibbles

        self.op, self.words, self.n = op, words, n_workers
        thc = op == P.Op.LUT_SUM
        self.job = pipeline.JobSpec(
            job_id=1, n_slots=n_slots, reg_base=0, words=words, lut_id=1 if thc else 0,
            workers=tuple(pipeline.WorkerAddress(port=w + 1, mac=0x020000000100 + w,
                                                 ip=0x0A000100 + w, udp_port=40000 + w)
                          for w in range(n_workers)))
        self.entries = pipeline.job_entries(self.job)
        if thc:
            self.entries += pipeline.lut_entries(1, pipeline.THC_DEFAULT_TABLE, words)
        self.group = pipeline.multicast_group(self.job)
        self.elements = 2 * words if thc else words          # per contribution
        self.expected_outputs = n_workers
        self.result_type = int(P.MsgType.RESULT)
        rng = np.random.default_rng(seed)
        self.templates: list[list[bytes]] = []                 # [variant][worker]
        # [variant][worker]: the ones' sum of each template's pseudo-header, UDP header and
        # message with pool/slot and seq zero; frames() adds those fields' sum for the checksum
        self.residues: list[list[int]] = []
        self.results: list[bytes] = []                         # [variant]
        self.payload_at = _HDR + P.HEADER_BYTES
        switch = Endpoint.make(SWITCH_MAC, SWITCH_IP, P.UDP_PORT_BASE)
        table = np.asarray(pipeline.THC_DEFAULT_TABLE, dtype=np.int64)
        for _ in range(PAYLOAD_VARIANTS):
            row, values, residues = [], [], []
            for w, addr in enumerate(self.job.workers):
                if thc:
                    v = rng.integers(0, P.THC_TABLE_SIZE, 2 * words)
                    payload = pack_nibbles(v)
                else:
                    v = rng.integers(-(1 << 20), 1 << 20, words)
                    payload = v.astype(">i4").tobytes()
                values.append(v)
                message = bytes(HINA(msg_type=P.MsgType.AGGREGATE, op=op,
                                     job_id=self.job.job_id) / Raw(payload))
                src = Endpoint.make(addr.mac, addr.ip, addr.udp_port)
                row.append(build_frame(src, switch, message))
                residues.append(udp_header_residue(src, switch, P.UDP_BYTES + len(message))
                                + ones_sum(message))   # its pool/slot and seq are zero
            stack = np.stack(values).astype(np.int64)
            if thc:
                result = table[stack].sum(axis=0).astype(">u2").tobytes()
            else:
                result = stack.sum(axis=0).astype(">i4").tobytes()
            self.templates.append(row)
            self.residues.append(residues)
            self.results.append(result)

    def ident(self, unit: int) -> int:
        return unit

    def frames(self, seq: int) -> list[tuple[int, bytes]]:
        slot, pool = seq % self.job.n_slots, (seq // self.job.n_slots) % 2
        ps = struct.pack("!HI", (pool << 15) | slot, seq & 0xFFFFFFFF)
        extra = ones_sum(ps)          # at an even offset of the message: the sums add
        variant = seq % PAYLOAD_VARIANTS
        out = []
        for w, t in enumerate(self.templates[variant]):
            checksum = struct.pack("!H", checksum_of(self.residues[variant][w] + extra))
            out.append((w + 1, t[:_HDR - 2] + checksum + t[_HDR:_HDR + 6] + ps + t[_HDR + 12:]))
        return out

    def key(self, data: bytes) -> Optional[int]:
        if len(data) < _HDR + 12 or data[_HDR] & 0xF != self.result_type:
            return None
        return int.from_bytes(data[_HDR + 8:_HDR + 12], "big")

    def check(self, seq: int, data: bytes) -> bool:
        expected = self.results[seq % PAYLOAD_VARIANTS]
        return data[self.payload_at:self.payload_at + len(expected)] == expected

    def install(self, sw: RunningSwitch) -> None:
        group, replicas = self.group
        sw.mcast(group, replicas)
        sw.insert(self.entries)


class BasicWorkload:
    """basic.p4 forwarding: unit ``u`` is one IPv4 frame into port 1 routed to port 2, told
    apart by its IPv4 identification (``u mod BASIC_IDS``)."""

    elements = 0
    expected_outputs = 1

    def __init__(self):
        from hina.softswitch.api import ActionCall, Lpm, TableEntry
        self.entries = [TableEntry("MyIngress.ipv4_lpm", (Lpm(prefix, plen),),
                                   ActionCall("MyIngress.ipv4_forward", (mac, port)))
                        for prefix, plen, mac, port in
                        ((0x0A000100, 24, 0x000000000101, 1), (0x0A000200, 24, 0x000000000202, 2),
                         (0x0A000000, 8, 0x000000000303, 3), (0xC0A80000, 16, 0x000000000404, 4))]
        self.templates = [self._frame(i) for i in range(BASIC_IDS)]

    @staticmethod
    def _frame(ident: int) -> bytes:
        payload = bytes(26)
        hdr = bytearray(20)
        hdr[0], hdr[2:4], hdr[4:6], hdr[8], hdr[9] = 0x45, (20 + len(payload)).to_bytes(2, "big"), \
            ident.to_bytes(2, "big"), 64, 17
        hdr[12:16], hdr[16:20] = (0x0A000101).to_bytes(4, "big"), (0x0A000205).to_bytes(4, "big")
        hdr[10:12] = ipv4_checksum(hdr).to_bytes(2, "big")
        return bytes.fromhex("0000000000aa" "0000000000bb" "0800") + bytes(hdr) + payload

    def ident(self, unit: int) -> int:
        return unit % BASIC_IDS

    def frames(self, unit: int) -> list[tuple[int, bytes]]:
        return [(1, self.templates[unit % BASIC_IDS])]

    def key(self, data: bytes) -> Optional[int]:
        if len(data) < 34 or data[12:14] != b"\x08\x00":
            return None
        return int.from_bytes(data[18:20], "big")

    def check(self, ident: int, data: bytes) -> bool:
        return data[:6] == b"\x00\x00\x00\x00\x02\x02" and data[22] == 63

    def install(self, sw: RunningSwitch) -> None:
        sw.insert(self.entries)


# --------------------------------------------------------------------------------------------
# The driver: a closed loop with a fixed number of units in flight
# --------------------------------------------------------------------------------------------
@dataclass
class Drive:
    window: int
    seconds: float = 0.0
    units: int = 0                  # units completed in the measured interval
    inputs: int = 0                 # frames sent in the measured interval
    outputs: int = 0                # frames received in the measured interval
    switch_cpu: float = 0.0         # switch CPU seconds in the interval
    driver_cpu: float = 0.0         # this process's CPU seconds in the interval
    stalled: bool = False
    incomplete_units: int = 0       # units still short of outputs when the run ended
    missing_outputs: int = 0
    wrong_outputs: int = 0          # outputs whose content failed the check
    unexpected_outputs: int = 0     # frames that belong to no unit in flight
    kernel_drops: int = 0           # veth and receive-socket drops during the run
    total_units: int = 0


def drive(io, veth_names: list[str], workload, window: int, warmup_s: float, duration_s: float,
          stall_s: float, switch_pid: int) -> Drive:
    sockets = io.sockets
    result = Drive(window=window)
    pending: dict[int, int] = {}          # unit -> outputs received (oldest unit first)
    launched: dict[int, float] = {}       # unit -> when its frames were sent
    expected = workload.expected_outputs
    sent = received = done = 0
    next_unit = 0
    sending = True

    def send(port: int, frame: bytes) -> None:
        s = sockets[port]
        while True:
            try:
                s.send(frame)
                return
            except BlockingIOError:
                select.select([], [s], [], 0.01)

    def launch() -> bool:
        nonlocal next_unit, sent
        ident = workload.ident(next_unit)
        if ident in pending:              # an old unit is still short: it lost a frame
            return False
        for port, frame in workload.frames(next_unit):
            send(port, frame)
            sent += 1
        pending[ident] = 0
        launched[ident] = time.monotonic()
        next_unit += 1
        return True

    _socket_drops(sockets.values())
    drops0 = _veth_drops(veth_names)
    start = time.monotonic()
    for _ in range(window):
        launch()
    last_rx = time.monotonic()
    mark = start + warmup_s
    end = None
    snap0 = None
    key, check = workload.key, workload.check
    while True:
        events = io.receive(0.05)
        for _port, data in events:
            received += 1
            ident = key(data)
            if ident is None or ident not in pending:
                result.unexpected_outputs += 1
                continue
            if not check(ident, data):
                result.wrong_outputs += 1
            pending[ident] += 1
            if pending[ident] >= expected:
                del pending[ident]
                del launched[ident]
                done += 1
                if sending and not launch():
                    result.stalled = True
        now = time.monotonic()
        if events:
            last_rx = now
        if snap0 is None and now >= mark:
            snap0 = (now, done, sent, received, _cpu_seconds(switch_pid), time.process_time())
            end = now + duration_s
        elif snap0 is not None and sending and now >= end:
            t0, d0, s0, r0, c0, p0 = snap0
            result.seconds = now - t0
            result.units, result.inputs, result.outputs = done - d0, sent - s0, received - r0
            result.switch_cpu = _cpu_seconds(switch_pid) - c0
            result.driver_cpu = time.process_time() - p0
            sending = False
        if not pending and not sending:
            break
        # A unit short of outputs for stall_s lost a frame: with other units still flowing,
        # its age tells, not the silence of the ports.
        if result.stalled or (pending and now - launched[next(iter(pending))] > stall_s):
            result.stalled = True
            break
    if sending:                        # stalled before the measurement ended
        t0, d0, s0, r0, c0, p0 = snap0 or (start, 0, 0, 0, _cpu_seconds(switch_pid),
                                            time.process_time())
        result.seconds = last_rx - t0
        result.units, result.inputs, result.outputs = done - d0, sent - s0, received - r0
    result.incomplete_units = len(pending)
    result.missing_outputs = sum(expected - c for c in pending.values())
    result.kernel_drops = _veth_drops(veth_names) - drops0 + _socket_drops(sockets.values())
    result.total_units = done
    return result


def _drain(io, quiet_s: float = 0.2) -> None:
    while io.receive(quiet_s):
        pass


# --------------------------------------------------------------------------------------------
# One figure on one target (with the window halved after a loss)
# --------------------------------------------------------------------------------------------
@dataclass
class Row:
    figure: str
    target: str
    window: int
    seconds: float
    input_pps: float
    output_pps: float
    elements_per_s: float
    switch_cpu_pct: float
    driver_cpu_pct: float
    wrong: int
    unexpected: int
    lossy_attempts: list = field(default_factory=list)


def measure(sw: RunningSwitch, io, veth_names, pipeline, make_workload, figure: str, window: int,
            args) -> Row:
    attempts = []
    while True:
        workload = make_workload(window)
        sw.push(pipeline)
        workload.install(sw)
        _drain(io, 0.05)
        d = drive(io, veth_names, workload, window, args.warmup, args.duration, args.stall,
                  sw.pid)
        lost = d.stalled or d.missing_outputs or d.kernel_drops
        if not lost or window == 1 or len(attempts) >= args.retries:
            break
        attempts.append({"window": window, "incomplete_units": d.incomplete_units,
                         "missing_outputs": d.missing_outputs, "kernel_drops": d.kernel_drops})
        print(f"  {figure} on {sw.kind}: loss at window {window} ({d.incomplete_units} units "
              f"incomplete, {d.missing_outputs} outputs missing, {d.kernel_drops} kernel drops); "
              f"retrying at window {max(1, window // 2)}", flush=True)
        window = max(1, window // 2)
    if d.stalled or d.missing_outputs or d.kernel_drops:
        attempts.append({"window": window, "incomplete_units": d.incomplete_units,
                         "missing_outputs": d.missing_outputs, "kernel_drops": d.kernel_drops,
                         "kept": True})
    secs = d.seconds or float("nan")
    n_in = d.units * (len(workload.frames(0)))
    return Row(figure=figure, target=sw.kind, window=window, seconds=d.seconds,
               input_pps=n_in / secs, output_pps=d.outputs / secs,
               elements_per_s=n_in * workload.elements / secs,
               switch_cpu_pct=100 * d.switch_cpu / secs, driver_cpu_pct=100 * d.driver_cpu / secs,
               wrong=d.wrong_outputs, unexpected=d.unexpected_outputs, lossy_attempts=attempts)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------
def _fmt(x: float) -> str:
    return "-" if x != x or x == 0 else f"{x:,.0f}"


def print_table(rows: list[Row]) -> None:
    head = ("figure", "target", "window", "in pkt/s", "out pkt/s", "elements/s", "switch CPU",
            "driver CPU", "losses")
    lines = [head]
    for r in rows:
        lossy = "; ".join(f"w={a['window']}: {a['incomplete_units']} units short"
                          + (" (this row)" if a.get("kept") else "")
                          for a in r.lossy_attempts) or "0"
        lines.append((r.figure, r.target, str(r.window), _fmt(r.input_pps), _fmt(r.output_pps),
                      _fmt(r.elements_per_s), f"{r.switch_cpu_pct:.0f} %",
                      f"{r.driver_cpu_pct:.0f} %", lossy))
    by_fig: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_fig.setdefault(r.figure, {})[r.target] = r
    for fig, t in by_fig.items():
        if "bmv2" in t and "embedded" in t and t["embedded"].input_pps > 0:
            b, e = t["bmv2"], t["embedded"]
            lines.append((fig, "bmv2/embedded", "", f"{b.input_pps / e.input_pps:.2f}x",
                          f"{b.output_pps / e.output_pps:.2f}x" if e.output_pps else "-",
                          f"{b.elements_per_s / e.elements_per_s:.2f}x" if e.elements_per_s
                          else "-", "", "", ""))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines[1:]:
        print("| " + " | ".join(c.ljust(w) if i < 3 else c.rjust(w)
                                for i, (c, w) in enumerate(zip(line, widths))) + " |")


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------
def parse_args(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\nUsage")[0],
                                 epilog=__doc__.split("\n\n", 3)[3],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", type=int, default=64, choices=(64, 128, 256),
                    help="HINA_WORDS of the program (default 64)")
    ap.add_argument("--workers", type=int, default=4, help="workers of the job (default 4)")
    ap.add_argument("--window", type=int, default=16,
                    help="HINA chunks in flight = the job's slots (default 16)")
    ap.add_argument("--basic-window", type=int, default=32,
                    help="basic.p4 frames in flight (default 32)")
    ap.add_argument("--duration", type=float, default=3.0,
                    help="measured seconds per figure and target (default 3)")
    ap.add_argument("--warmup", type=float, default=0.5, help="seconds before measuring")
    ap.add_argument("--stall", type=float, default=1.0,
                    help="seconds a unit may wait for its outputs before it counts as lost "
                         "(default 1)")
    ap.add_argument("--retries", type=int, default=3,
                    help="times to halve the window after a loss (default 3)")
    ap.add_argument("--thc", action="store_true", help="also measure THC LUT_SUM")
    ap.add_argument("--no-basic", action="store_true", help="skip the basic.p4 figure")
    ap.add_argument("--targets", default="bmv2,embedded",
                    help="comma-separated, in run order (default bmv2,embedded)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 0.2 s warm-up, 0.5 s measured")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    args.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    bad = [t for t in args.targets if t not in TARGETS]
    if bad or not args.targets:
        ap.error(f"--targets: expected some of {', '.join(TARGETS)}")
    if not 1 <= args.workers <= 32:
        ap.error("--workers: 1..32")
    if not 1 <= args.window <= 512:
        ap.error("--window: 1..512 (the switch's slot registers)")
    if not 1 <= args.basic_window < BASIC_IDS:
        ap.error(f"--basic-window: 1..{BASIC_IDS - 1}")
    if args.quick:
        args.warmup, args.duration = 0.2, 0.5
    return args


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def run(args) -> dict:
    from hina.controller.bmv2_dataplane import VethPorts, _PortIO, sweep_stale
    from hina import protocol as P

    mach = machine()
    print(f"machine: {mach['cores']} cores ({mach['cpu'] or '?'}), Linux {mach['kernel']}, "
          f"load average {mach['load_average'][0]:.2f}; simple_switch_grpc {mach['bmv2']} "
          f"{' '.join(BMV2_ARGS)}; embedded target: python -m hina.softswitch (Python {mach['python']})")
    print(f"settings: HINA_WORDS={args.words}, {args.workers} workers (ports 1..{args.workers}), "
          f"window {args.window} chunks = {args.window} slots, basic.p4 window "
          f"{args.basic_window}; warm-up {args.warmup:g} s, measured {args.duration:g} s per "
          f"figure and target; targets one after the other on the same veths", flush=True)

    figures = [("hina SUM", "hina", lambda w: HinaWorkload(P.Op.SUM, args.words, args.workers, w),
                args.window)]
    if args.thc:
        figures.append(("hina THC LUT_SUM", "hina",
                        lambda w: HinaWorkload(P.Op.LUT_SUM, args.words, args.workers, w),
                        args.window))
    if not args.no_basic:
        figures.append(("basic.p4 forward", "basic", lambda w: BasicWorkload(), args.basic_window))

    t = time.monotonic()
    pipelines = {kind: build_pipelines(kind, args.words, not args.no_basic)
                 for kind in args.targets}
    print(f"pipelines ready in {time.monotonic() - t:.1f} s (p4c-bm2-ss and the embedded "
          "compiler, both cached on disk)", flush=True)

    rows: list[Row] = []
    sweep_stale()
    veths = io = None
    try:
        veths = VethPorts(tuple(range(1, max(args.workers, 2) + 1)))
        io = _PortIO(veths)
        names = [n for p in veths.ports for n in (veths.switch(p), veths.host(p))]
        for kind in args.targets:
            t = time.monotonic()
            sw = RunningSwitch(kind, veths)
            try:
                print(f"{kind}: switch up in {time.monotonic() - t:.1f} s", flush=True)
                for figure, program, make, window in figures:
                    row = measure(sw, io, names, pipelines[kind][program], make, figure,
                                  window, args)
                    rows.append(row)
                    print(f"  {figure:<18} {kind:<9} {row.input_pps:>10,.0f} in pkt/s "
                          f"{row.output_pps:>10,.0f} out pkt/s  switch CPU "
                          f"{row.switch_cpu_pct:.0f} %", flush=True)
            finally:
                sw.close()
            _drain(io, 0.05)
    finally:
        if io is not None:
            io.close()
        if veths is not None:
            veths.close()

    print()
    print_table(rows)
    wrong, unexpected = sum(r.wrong for r in rows), sum(r.unexpected for r in rows)
    print(f"every output checked: {wrong} wrong (RESULT payload vs the numpy aggregate; basic.p4 "
          f"MAC rewrite and TTL), {unexpected} unexpected (no unit in flight)")
    return {"machine": mach, "settings": {k: v for k, v in vars(args).items() if k != "json"},
            "rows": [asdict(r) for r in rows]}


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        from hina.controller.bmv2_dataplane import harness_missing
    except ImportError as exc:
        print(f"{PROG}: cannot import the BMv2 harness: {exc}", file=sys.stderr)
        return 2
    reason = harness_missing()
    if reason:
        print(f"{PROG}: {reason}", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        report = run(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (switches, sockets and veths removed)", file=sys.stderr)
        return 130
    except Exception as exc:   # noqa: BLE001 - one line for the user
        print(f"{PROG}: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
