"""The processes of the kill -9 rows (:mod:`controller.faultsuite_kills`): a deployment of a
switch, ``hina-ctl serve`` and worker processes that a row can SIGKILL and start again.

* :class:`EmbeddedSwitchProcess`: ``python -m hina.softswitch --no-p4`` on loopback UDP tunnel ports
  (peers configured); :class:`Bmv2SwitchProcess`: ``simple_switch_grpc`` on a veth pair per
  worker port (:class:`controller.bmv2.Bmv2Process`). Both restart on the same ports.
* :class:`Deployment`: pipeline and job on the switch, the state file and the job's token,
  ``hina-ctl serve`` as a process (started again on the same address), worker processes.
* The worker process, ``python -m hina.controller.faultsuite_procs worker``: joins the job with its
  token and all-reduces int32 vectors (``Transport.reduce``, SUM) step after step, following the
  job's generation as :func:`worker.agent.allreduce_following` does (:func:`worker.agent.
  follow_generation`). Every worker draws every worker's vector of a step from a seed of (step,
  worker) (:func:`step_data`), so it checks its own result bit for bit. It reports each step
  (``start``, ``done`` with ``exact``, ``failed`` with the error), its seat (``joined``,
  ``seated`` again after a re-seat) and generation changes (``follow``) as JSON lines on stdout,
  with the monotonic clock the processes of the machine share. On BMv2 its frames go on the
  veth end of its port (:class:`VethFrameLink`, the worker's own FrameLink frames).
* :class:`Child`: each process's JSON lines become events; stderr goes to a log file; every
  child is its own process group and gets SIGKILL when the thread that started it ends.
"""
from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from hina import programs
from hina.loopback import free_tcp_port, free_udp_ports
from hina.procs import stop_group
from hina.worker.link import FrameLink

from .faultsuite import WORDS

__all__ = ["VethFrameLink", "Child", "EmbeddedSwitchProcess", "Bmv2SwitchProcess",
           "Deployment", "step_data", "step_sum", "main", "JOB", "N_WORKERS", "N_SLOTS",
           "ELEMENTS", "SEED_BASE", "DEFAULT_GIVE_UP_S"]

JOB = 1
N_WORKERS = 3
N_SLOTS = 8
#: int32 per worker per step: 96 chunks of 64 words (a step takes about 0.1 s on the embedded
#: target, 0.5 s on BMv2), so a kill at a random moment lands mid-step.
ELEMENTS = WORDS * 96
SEED_BASE = 1000
#: A worker's give_up_s unless told otherwise.
DEFAULT_GIVE_UP_S = 20.0
_EVENT_TIMEOUT_S = 90.0        # generous: a loaded 2-core machine starts processes slowly


# ------------------------------------------------------------------------------------------
# Small helpers
# ------------------------------------------------------------------------------------------
def _worker_address(index: int):
    """Worker ``index``'s address as the job admits it (switch port ``index + 1``)."""
    return (f"10.0.1.{index + 1}", 40000 + index, index + 1, f"02:00:00:00:01:{index:02x}")


def step_data(step: int, index: int, elements: int, seed: int):
    """Worker ``index``'s int32 vector of ``step`` (every worker can draw every worker's)."""
    import numpy as np
    rng = np.random.default_rng([seed, step, index])
    return rng.integers(-(1 << 20), 1 << 20, size=elements, dtype=np.int64).astype(np.int32)


def step_sum(step: int, n_workers: int, elements: int, seed: int):
    import numpy as np
    return np.sum([step_data(step, w, elements, seed).astype(np.int64)
                   for w in range(n_workers)], axis=0).astype(np.int32)


# ------------------------------------------------------------------------------------------
# A worker's link to BMv2 on a veth
# ------------------------------------------------------------------------------------------
_ETH_P_ALL = 0x0003
_SOL_PACKET, _PACKET_IGNORE_OUTGOING = 263, 23


class VethFrameLink(FrameLink):
    """A worker's :class:`worker.link.FrameLink` whose frames leave and arrive on a raw socket
    of a veth end (BMv2 on veth pairs) instead of a loopback tunnel. The frames are the
    FrameLink's own (built by :meth:`frame`, unwrapped by its ``recv``). Needs root.

    Args:
        me, switch: as FrameLink.
        ifname: the veth end wired to the worker's switch port.
    """

    def __init__(self, me, switch, ifname: str):
        # one frame per system call: the batched calls are for the loopback tunnel's socket
        super().__init__(me, switch, ("127.0.0.1", 0), ("127.0.0.1", 9), batched=False)
        self.sock.close()                 # the tunnel socket: frames go on the veth instead
        # protocol 0 until bound (opened for ETH_P_ALL it queues every interface's frames)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            self.sock.setsockopt(_SOL_PACKET, _PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            pass                    # older kernels: our own frames are not addressed to us
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind((ifname, _ETH_P_ALL))
        self.ifname = ifname

    def send_frame(self, frame) -> None:
        self.sock.send(bytes(frame))

    def send(self, message) -> None:
        self.sock.send(self.frame(message))


# ------------------------------------------------------------------------------------------
# Child processes
# ------------------------------------------------------------------------------------------
class Child:
    """A child process of a row: JSON lines on its stdout become :attr:`events` (other lines
    ``{"event": "text"}``), stderr goes to ``<logdir>/<name>.log``. It is its own process group
    and gets SIGKILL when the thread that started it ends (``PR_SET_PDEATHSIG``)."""

    def __init__(self, name: str, cmd: Sequence[str], logdir: Path, stdin: bool = False):
        from hina.procs import with_parent_death_signal
        self.name, self.cmd = name, list(cmd)
        self.log_path = Path(logdir) / f"{name}.log"
        self._log = open(self.log_path, "ab")
        self.events: list[dict] = []
        self._cond = threading.Condition()
        # no preexec_fn: gRPC runs in this process, and a fork() (not vfork()) would run its
        # fork handlers in the child (hina.procs)
        self.proc = subprocess.Popen(with_parent_death_signal(self.cmd), stdout=subprocess.PIPE,
                                     stderr=self._log,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     start_new_session=True, text=True, bufsize=1)
        self.killed_at: Optional[float] = None
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"read-{name}")
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            try:
                event = json.loads(line)
                if not isinstance(event, dict):
                    raise ValueError
            except ValueError:
                event = {"event": "text", "text": line, "t": time.monotonic()}
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "eof", "t": time.monotonic()})
            self._cond.notify_all()

    def wait_event(self, match: Callable[[dict], bool], timeout: float = _EVENT_TIMEOUT_S,
                   start: int = 0) -> Optional[dict]:
        """The first event from index ``start`` on that ``match`` accepts (waiting up to
        ``timeout`` seconds); ``None`` when none came (or the process's stdout ended)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            i = start
            while True:
                while i < len(self.events):
                    if match(self.events[i]):
                        return self.events[i]
                    if self.events[i]["event"] == "eof":
                        return None
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def of(self, kind: str) -> list[dict]:
        with self._cond:
            return [e for e in self.events if e.get("event") == kind]

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> float:
        """``sig`` to the process group; waits until the process is gone; the time of the
        signal."""
        at = time.monotonic()
        stop_group(self.proc, sig, grace=15.0)
        self.killed_at = at
        return at

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; idempotent."""
        stop_group(self.proc, grace=10.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._log.close()

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


# ------------------------------------------------------------------------------------------
# Switches that can be killed and started again on the same ports
# ------------------------------------------------------------------------------------------
class EmbeddedSwitchProcess:
    """``python -m hina.softswitch --no-p4`` with one loopback UDP tunnel port per worker (peer
    configured), its P4Runtime server on a fixed address."""

    kind = "embedded"

    def __init__(self, n_ports: int, logdir: Path):
        ports = free_udp_ports(2 * n_ports)
        self.switch_ports, self.worker_ports = ports[:n_ports], ports[n_ports:]
        self.address = f"127.0.0.1:{free_tcp_port()}"
        self.thrift_port = None
        self.logdir, self.starts = Path(logdir), 0
        self.cmd = [sys.executable, "-m", "hina.softswitch", "--no-p4", "--grpc-server-addr",
                    self.address, "--log-level", "warn"]
        for w in range(n_ports):
            self.cmd += ["-i", f"{w + 1}@udp:127.0.0.1:{self.switch_ports[w]}"
                               f"@127.0.0.1:{self.worker_ports[w]}"]
        self.child: Optional[Child] = None
        self.restart()

    def restart(self, timeout: float = _EVENT_TIMEOUT_S) -> None:
        """Start the switch (again): the same ports and address; waits for its ready line."""
        deadline = time.monotonic() + timeout
        while True:
            if self.child is not None:
                self.child.stop()
            self.starts += 1
            self.child = Child(f"switch-{self.starts}", self.cmd, self.logdir)
            ready = self.child.wait_event(lambda e: "softswitch ready" in e.get("text", ""),
                                          timeout=max(deadline - time.monotonic(), 1.0))
            if ready is not None:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the embedded switch did not start: "
                                   f"{self.child.log_tail()}")
            time.sleep(0.2)           # a port still held by the killed one: try again

    def kill(self) -> float:
        return self.child.kill()

    def worker_config(self, index: int):
        from .config import WorkerConfig
        ip, udp_port, port, mac = _worker_address(index)
        return WorkerConfig(ip=ip, udp_port=udp_port, port=port, mac=mac,
                            tunnel_local=f"127.0.0.1:{self.worker_ports[index]}",
                            tunnel_switch=f"127.0.0.1:{self.switch_ports[index]}")

    @property
    def cli_args(self) -> list[str]:
        return []

    def iface_map(self) -> dict[str, str]:
        return {}

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


class Bmv2SwitchProcess:
    """``simple_switch_grpc`` (:class:`controller.bmv2.Bmv2Process`) with one veth pair per
    worker port; restarted on the same gRPC and Thrift ports and interfaces."""

    kind = "bmv2"

    def __init__(self, n_ports: int, logdir: Path, tls=None):
        from .bmv2_dataplane import bmv2_on_veths
        self.veths, self.process = bmv2_on_veths(range(1, n_ports + 1), tls=tls)
        self.starts = 1

    @property
    def address(self) -> str:
        return self.process.address

    @property
    def thrift_port(self) -> int:
        return self.process.thrift_port

    def kill(self) -> float:
        at = time.monotonic()
        self.process.kill()
        return at

    def restart(self) -> None:
        self.process.restart()
        self.starts += 1

    def worker_config(self, index: int):
        from .config import WorkerConfig
        ip, udp_port, port, mac = _worker_address(index)
        return WorkerConfig(ip=ip, udp_port=udp_port, port=port, mac=mac)

    @property
    def cli_args(self) -> list[str]:
        return ["--target", "bmv2", "--thrift-port", str(self.thrift_port)]

    def iface_map(self) -> dict[str, str]:
        """Worker IPv4 address -> the veth end of its switch port."""
        return {_worker_address(i)[0]: self.veths.host(p)
                for i, p in enumerate(self.veths.ports)}

    def stop(self) -> None:
        try:
            self.process.stop()
        finally:
            self.veths.close()


# ------------------------------------------------------------------------------------------
# A deployment: switch, state file, token, hina-ctl serve, worker processes
# ------------------------------------------------------------------------------------------
class Deployment:
    """The switch with pipeline and job ``JOB`` (fixed point, ``n_workers`` workers), its state
    file and token, ``hina-ctl serve`` as a process, and worker processes on demand.

    Args:
        switch: an :class:`EmbeddedSwitchProcess` or :class:`Bmv2SwitchProcess` (stopped by
            :meth:`close`).
        logdir: where the state file, token file and the processes' logs go.
        lease_s: ``serve --lease``.
        seed: seeds the workers' vectors.
    """

    def __init__(self, switch, logdir: Path, lease_s: float, n_workers: int = N_WORKERS,
                 seed: int = SEED_BASE, elements: int = ELEMENTS, program: str = "v1model"):
        from .config import JobConfig
        from .jobs import JobManager
        from .p4runtime_client import SwitchConnection
        from .state import ControllerState
        from .target import PipelineConfig, register_access
        from .tokens import TokenStore, tokens_path, write_token_file
        self.switch, self.logdir, self.lease_s = switch, Path(logdir), lease_s
        self.n_workers, self.seed, self.elements = n_workers, seed, elements
        self.children: list[Child] = []
        self.serve: Optional[Child] = None
        self.serve_starts = self.serve_attempts = 0
        self.state_path = self.logdir / "ctl.json"
        # p4/hina.p4, or the TNA program on the embedded target's TNA dataplane
        self.pipeline = PipelineConfig(target=switch.kind, p4=str(programs.PROGRAMS[program]),
                                       defines=programs.program_defines(program, WORDS))
        with SwitchConnection(switch.address, timeout=10) as conn:
            conn.set_pipeline(*self.pipeline.build())
            registers = register_access(switch.kind, conn, switch.thrift_port)
            try:
                config = JobManager(conn, registers=registers, target=switch.kind).create_job(
                    JobConfig(job_id=JOB, codec="fixed", n_slots=N_SLOTS, words=WORDS,
                              workers=tuple(switch.worker_config(w)
                                            for w in range(n_workers))))
            finally:
                registers.close()
        ControllerState(self.pipeline, {JOB: config}).save(self.state_path)
        self.token_file = self.logdir / "job.token"
        write_token_file(self.token_file, TokenStore(tokens_path(self.state_path)).issue(JOB))
        self.listen = f"127.0.0.1:{free_tcp_port()}"
        self._names: dict[str, int] = {}

    def _name(self, base: str) -> str:
        self._names[base] = self._names.get(base, 0) + 1
        return f"{base}-{self._names[base]}"

    def start_serve(self, timeout: float = _EVENT_TIMEOUT_S) -> float:
        """Start ``hina-ctl serve`` (again) on :attr:`listen`; the time its first line came.
        A start refused because the switch still counts the killed serve as primary (or the
        address is still held) is tried again until ``timeout``."""
        deadline = time.monotonic() + timeout
        self.serve_starts += 1
        cmd = [sys.executable, "-m", "hina.controller.cli", "--switch", self.switch.address,
               "--state", str(self.state_path), "--timeout", "5", *self.switch.cli_args,
               "serve", "--listen", self.listen, "--lease", f"{self.lease_s:g}"]
        while True:
            self.serve_attempts += 1
            self.serve = self._child(self._name("serve"), cmd)
            line = self.serve.wait_event(lambda e: "listening" in e.get("text", ""),
                                         timeout=max(deadline - time.monotonic(), 1.0))
            if line is not None:
                return line["t"]
            if time.monotonic() > deadline:
                raise RuntimeError(f"hina-ctl serve did not start: {self.serve.log_tail()}")
            self.serve.stop()
            time.sleep(0.2)

    def _child(self, name: str, cmd: Sequence[str], stdin: bool = False) -> Child:
        child = Child(name, cmd, self.logdir, stdin=stdin)
        self.children.append(child)
        return child

    def worker(self, steps: int = 1_000_000, first_step: int = 0, barrier: bool = True,
               standby: bool = False, give_up_s: float = DEFAULT_GIVE_UP_S) -> Child:
        """A worker process (``standby``: it imports, says ``ready`` and waits for ``go STEP``
        on stdin before it joins)."""
        cmd = [sys.executable, "-m", "hina.controller.faultsuite_procs", "worker",
               "--controller", self.listen, "--job", str(JOB), "--token-file",
               str(self.token_file), "--steps", str(steps), "--first-step", str(first_step),
               "--elements", str(self.elements), "--seed", str(self.seed),
               "--give-up", f"{give_up_s:g}"]
        for ip, iface in self.switch.iface_map().items():
            cmd += ["--iface", f"{ip}={iface}"]
        if barrier:
            cmd.append("--barrier")
        if standby:
            cmd.append("--standby")
        return self._child(self._name("standby" if standby else "worker"), cmd, stdin=standby)

    def start_workers(self, give_up_s: float) -> dict[int, Child]:
        """``n_workers`` workers that meet at the start barrier; by worker index once joined."""
        children = [self.worker(give_up_s=give_up_s) for _ in range(self.n_workers)]
        by_index = {}
        for child in children:
            joined = child.wait_event(lambda e: e["event"] == "joined")
            if joined is None:
                raise RuntimeError(f"{child.name} did not join: {child.log_tail()}")
            by_index[joined["index"]] = child
        return by_index

    def serve_log(self) -> str:
        """What ``hina-ctl`` logged (``<state>.log``: serve's re-installs, bumps, joins)."""
        try:
            return self.state_path.with_name(self.state_path.name + ".log").read_text(
                errors="replace")
        except OSError:
            return ""

    def generation(self) -> int:
        from .state import ControllerState
        return ControllerState.load(self.state_path).jobs[JOB].generation

    def wrong(self) -> list[dict]:
        """Every result any worker found wrong."""
        return [dict(e, worker=c.name) for c in self.children for e in c.of("done")
                if not e["exact"]]

    def close(self) -> None:
        for child in self.children:
            try:
                child.stop()
            except Exception:  # noqa: BLE001 - teardown goes on
                pass
        self.switch.stop()


# ------------------------------------------------------------------------------------------
# The worker process
# ------------------------------------------------------------------------------------------
_EMIT_LOCK = threading.Lock()


def _emit(event: str, **fields) -> None:
    """One event as one JSON line on stdout. The worker's main thread and its seat watcher both
    emit: ``print`` writes the text and the newline as two writes, so two threads' lines could
    interleave into one unparseable line and both events be lost (a missed ``seated`` failed the
    serve row once); one write under a lock keeps every line whole."""
    line = json.dumps({"event": event, "t": time.monotonic(), **fields}) + "\n"
    with _EMIT_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


def _worker_main(args: argparse.Namespace) -> int:
    import numpy as np

    from hina import protocol as P
    from hina.worker.agent import MAX_GENERATION_CHANGES, follow_generation
    from hina.worker.jobclient import JobClient, JobServiceError
    from hina.worker.link import Endpoint
    from hina.worker.transport import CallMismatch, GenerationChanged, Transport, TransportError

    first = args.first_step
    _emit("ready")
    if args.standby:
        line = sys.stdin.readline().split()
        if len(line) != 2 or line[0] != "go":
            return 0                       # not needed: stdin closed
        first = int(line[1])
    client = JobClient(args.controller, token_file=args.token_file, timeout=5)
    deadline = time.monotonic() + 60
    while True:                 # a crashed worker's seat is free once its lease ran out
        try:
            seat = client.join(args.job)
            break
        except JobServiceError as exc:
            if exc.code != "RESOURCE_EXHAUSTED" or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    index, n = seat.worker_index, seat.n_workers
    _emit("joined", index=index, generation=seat.generation, session=seat.session)
    _emit("seated", index=index, generation=seat.generation, session=seat.session)
    ifaces = dict(item.split("=", 1) for item in args.iface)
    if ifaces:
        link = VethFrameLink(Endpoint.make(*seat.me), Endpoint.make(*seat.switch),
                             ifaces[seat.me[1]])
    else:
        link = seat.link()
    transport = Transport(link, seat.job_params(), give_up_s=args.give_up)
    stop = threading.Event()

    def watch_seat() -> None:               # re-seated by the heartbeat thread: say so
        last = seat.session
        while not stop.wait(0.02):
            now = client.seat
            if now is not None and now.session != last:
                last = now.session
                _emit("seated", index=now.worker_index, generation=now.generation,
                      session=now.session)

    threading.Thread(target=watch_seat, daemon=True).start()
    if args.barrier:
        client.barrier("start", timeout=60)
    try:
        for step in range(first, first + args.steps):
            _emit("start", step=step)
            mine = step_data(step, index, args.elements, args.seed)
            want = step_sum(step, n, args.elements, args.seed)
            got, changes = None, 0
            while True:
                try:
                    # the step is the call's id: the first call of a generation checks that every
                    # worker is at the same step (worker.agent.allreduce_following does the same)
                    transport.begin_call(step)
                    got = transport.reduce(P.Op.SUM, mine)
                    break
                except GenerationChanged as exc:
                    changes += 1
                    if changes > MAX_GENERATION_CHANGES:
                        _emit("failed", step=step, error=type(exc).__name__, message=str(exc))
                        break
                    generation = follow_generation(client, transport, exc)
                    _emit("follow", step=step, generation=generation)
                except CallMismatch as exc:
                    changes += 1
                    if exc.own < exc.highest or changes > MAX_GENERATION_CHANGES:
                        # behind the others: this step's result is lost; on to the next
                        _emit("failed", step=step, error=type(exc).__name__, message=str(exc))
                        break
                    _emit("ahead", step=step, lowest=exc.lowest)   # wait for the others
                except TransportError as exc:
                    _emit("failed", step=step, error=type(exc).__name__,
                          message=str(exc)[:300])
                    break
            if got is not None:
                _emit("done", step=step, exact=bool(np.array_equal(got, want)),
                      generation=transport.job.generation,
                      retransmissions=transport.last.retransmissions)
    finally:
        stop.set()
        _emit("end")
        transport.close()
        client.close()
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hina.controller.faultsuite_procs",
                                 description="a worker process of the kill -9 rows")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="join, then all-reduce int32 steps; JSON lines out")
    w.add_argument("--controller", required=True)
    w.add_argument("--job", type=int, default=JOB)
    w.add_argument("--token-file", required=True)
    w.add_argument("--steps", type=int, default=1_000_000)
    w.add_argument("--first-step", type=int, default=0)
    w.add_argument("--elements", type=int, default=ELEMENTS)
    w.add_argument("--seed", type=int, default=SEED_BASE)
    w.add_argument("--give-up", type=float, default=DEFAULT_GIVE_UP_S)
    w.add_argument("--iface", action="append", default=[], metavar="IP=IFNAME",
                   help="the worker with this IPv4 address sends on this veth (BMv2)")
    w.add_argument("--barrier", action="store_true", help="meet the others at 'start'")
    w.add_argument("--standby", action="store_true",
                   help="wait for 'go STEP' on stdin before joining")
    args = ap.parse_args(argv)
    import logging
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return _worker_main(args)


if __name__ == "__main__":
    sys.exit(main())
