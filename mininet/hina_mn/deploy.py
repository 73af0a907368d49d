"""A HINA deployment in Mininet: network up, pipeline pushed, job created, workers run, and a
teardown that always leaves the machine as it was.

The job is created the way an operator creates one (:class:`controller.config.JobConfig`,
:class:`controller.jobs.JobManager`: registers zeroed over P4Runtime on the embedded target and
over BMv2's Thrift runtime on BMv2), and recorded in a ``hina-ctl`` state file in the log
folder, so ``hina-ctl state`` / ``counters`` inspect the running network
(:meth:`HinaNetwork.ctl_command`).

Example::

    >>> topo = StarTopo(n_workers=4)                                      # doctest: +SKIP
    >>> with HinaNetwork(topo, target="embedded") as hn:                  # doctest: +SKIP
    ...     reports = hn.run_workers(mode="allreduce", codecs=["sum"], size=65536)
    ...     print(hn.counters())
"""
from __future__ import annotations
from hina import programs

import atexit
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Optional, Sequence

from mininet.link import TCLink
from mininet.log import info, warn
from mininet.net import Mininet

from hina.procs import stop_group

from . import topo as T
from .switches import TARGETS, P4ProcessSwitch
from .workloads import thc_table

HINA_P4 = programs.HINA_P4
#: The switch programs a network can run: p4/hina.p4 (v1model) on either target, the TNA program
#: (p4/tna/hina_tna.p4) on the embedded target's TNA dataplane.
PROGRAMS = programs.PROGRAMS
#: Words per packet the TNA program is built for here (:data:`hina.programs.TNA_WORDS`).
TNA_WORDS = programs.TNA_WORDS
#: the agent every worker host runs (``python -m hina.mininet.host_worker``)
HOST_WORKER = "hina.mininet.host_worker"
PYTHON = sys.executable
SWITCH_IP = "10.0.0.254"
SWITCH_MAC = "02:00:00:00:00:fe"
WORKER_UDP_PORT = 40000
MASTER_PORT = 29500
WORKER_GRACE_S = 5.0
STRAY_SCANS = 4      # at most, in stop()
KILL_WAIT_S = 2.0     # how long a killed process that is not our child may take to vanish
#: Linux interface names have at most 15 characters (IFNAMSIZ - 1).
MAX_INTERFACE_NAME = 15
#: The job's codec as the controller records it: THC, so that its table is installed; the
#: other codecs' lane ops (SUM, MAX, OR) need nothing per job. ``hina-ctl state`` decodes lanes
#: by this codec's lane op (LUT_SUM: two 16-bit sums per word).
JOB_CODEC = "thc"
CTL_STATE = "ctl.json"
#: Set in every worker agent's environment to the aggregating switch's name: which network the
#: agent belongs to (teardown finds agents it lost track of by it).
NETWORK_ENV = "HINA_MN_NETWORK"


class DeploymentError(RuntimeError):
    """The deployment cannot go on; ``str()`` is one line for the user."""


def resolve_loss_method(method: str, target: str, shape: T.LinkShape) -> str:
    """Pick how ``shape.loss`` is applied: ``netem`` (TCLink), ``nft`` (netdev hooks in every
    host) or ``switch`` (the embedded target's own ``--loss``). ``auto`` prefers them in that
    order. Raises :class:`DeploymentError` naming what is missing.

    Delay needs netem whatever the loss method: without it, ``--delay`` is refused.
    """
    if method not in T.LOSS_METHODS:
        raise DeploymentError(f"loss method {method!r}: one of {T.LOSS_METHODS}")
    needs_netem = shape.delay is not None
    netem_why = T.netem_missing() if (needs_netem or method in ("auto", "netem")) else None
    if needs_netem and netem_why:
        raise DeploymentError(f"--delay {shape.delay} needs netem, which is unavailable: "
                              f"{netem_why}")
    if not shape.loss:
        return "none"
    if method == "auto":
        if netem_why is None:
            return "netem"
        if T.nft_missing() is None:
            return "nft"
        return "switch" if target == "embedded" else _refuse(netem_why, T.nft_missing())
    if method == "netem" and netem_why:
        raise DeploymentError(f"--loss-method netem: {netem_why}")
    if method == "nft" and T.nft_missing():
        raise DeploymentError(f"--loss-method nft: {T.nft_missing()}")
    if method == "switch" and target != "embedded":
        raise DeploymentError("--loss-method switch: only the embedded target drops frames "
                              "itself; use netem or nft with BMv2")
    return method


def _refuse(*why: str) -> str:
    raise DeploymentError("--loss: no way to drop packets here: " + "; ".join(why))


@dataclass
class WorkerReport:
    """One host's outcome: its JSON report (``results`` or ``error``) and exit status."""
    host: str
    rank: int
    returncode: int
    report: dict = field(default_factory=dict)
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return (self.returncode == 0 and "error" not in self.report
                and all(r.get("ok") for r in self.report.get("results", [])))


class HinaNetwork:
    """Mininet with a P4 switch running ``p4/hina.p4`` and one HINA job over the worker hosts.

    Args:
        topo: a :class:`hina_mn.topo.HinaTopo` (built with the loss method's ``netem_loss``).
        target: ``embedded`` (softswitch) or ``bmv2`` (simple_switch_grpc).
        shape: the worker links' impairments (for the nft / switch loss methods).
        loss_method: from :func:`resolve_loss_method`.
        words: words per packet of the program: ``HINA_WORDS`` of p4/hina.p4, or ``2 *
            TNA_LANES`` of the TNA program (32 or 64).
        program: ``v1model`` (p4/hina.p4) or ``tna`` (p4/tna/hina_tna.p4, the embedded target
            only: its TNA dataplane; the job's SUM saturates, ``sum_saturates``).
        n_slots: the job's slots (each worker's window).
        job_id: the job.
        log_dir: switch logs, worker outputs, BMv2 build files (default: a new temporary dir).
        pcap_dir: capture every switch port here.
        switch_log_level: the switch's log level.
        loss_seed: seed of the switch's own loss (loss method ``switch``).
    """

    def __init__(self, topo: T.HinaTopo, target: str = "embedded",
                 shape: T.LinkShape = T.LinkShape(), loss_method: str = "none",
                 words: int = 128, n_slots: int = 32, job_id: int = 1,
                 log_dir: Optional[str] = None, pcap_dir: Optional[str] = None,
                 switch_log_level: str = "warn", loss_seed: Optional[int] = None,
                 program: str = "v1model"):
        if target not in TARGETS:
            raise DeploymentError(f"target {target!r}: one of {tuple(TARGETS)}")
        if program not in PROGRAMS:
            raise DeploymentError(f"program {program!r}: one of {tuple(PROGRAMS)}")
        if program == "tna" and target != "embedded":
            raise DeploymentError(f"program tna: the embedded target runs it (its TNA "
                                  f"dataplane); {target} runs p4/hina.p4 only")
        if program == "tna" and words not in TNA_WORDS:
            raise DeploymentError(f"program tna: words={words}: the TNA program carries "
                                  f"{' or '.join(map(str, TNA_WORDS))} words per packet here "
                                  "(two blocks of TNA_LANES = 16 or 32)")
        self.program = program
        self.topo, self.target, self.shape, self.loss_method = topo, target, shape, loss_method
        self.words, self.n_slots, self.job_id = words, n_slots, job_id
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="hina-mn-"))
        self._temporary_log_dir = log_dir is None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        switch_args = dict(log_dir=str(self.log_dir), pcap_dir=pcap_dir,
                           log_level=switch_log_level)
        if target == "embedded" and loss_method == "switch":
            switch_args.update(loss=shape.loss / 100.0, loss_seed=loss_seed)
        self.switch_cls = partial(TARGETS[target], **switch_args)
        self.net: Optional[Mininet] = None
        self.conn = None
        self.jobs = None
        self.workers: list = []
        self.job_config = None
        self.registers = None
        self._procs: list[subprocess.Popen] = []
        self._intf_names = expected_interfaces(topo)
        too_long = sorted(n for n in self._intf_names if len(n) > MAX_INTERFACE_NAME)
        if too_long:
            raise DeploymentError(f"interface name {too_long[0]!r} is longer than "
                                  f"{MAX_INTERFACE_NAME} characters: shorten the node names")

    # -- bring-up ---------------------------------------------------------------------------
    def start(self) -> "HinaNetwork":
        """Build and start the network, configure the hosts, push the pipeline, create the job.
        On failure everything started so far is torn down before the error propagates.

        Raises:
            DeploymentError: an interface of this network already exists (another network
                runs, or a killed run left it): nothing is touched.
        """
        busy = leftover_interfaces(self._intf_names)
        if busy:
            raise DeploymentError(
                f"interface(s) {', '.join(busy)} already exist: another Mininet network is "
                f"running, or a killed run left them (remove with: ip link del {busy[0]})")
        try:
            self.net = Mininet(topo=self.topo, switch=self.switch_cls, controller=None,
                               link=TCLink, autoSetMacs=False, autoStaticArp=False,
                               build=False, cleanup=False)
            atexit.register(self.stop)     # the last resort: an interpreter that exits
            self.net.build()
            self.net.start()
            self.workers = [self.net.get(h) for h in self.topo.workers]
            self._configure_hosts()
            self._push_pipeline()
            self._create_job()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def switch(self) -> P4ProcessSwitch:
        return self.net.get(self.topo.aggregator)

    def data_intf(self, host):
        """The host's interface toward the aggregating switch."""
        for intf in host.intfList():
            link = intf.link
            if link and self.topo.aggregator in (link.intf1.node.name, link.intf2.node.name):
                return intf
        raise DeploymentError(f"{host.name} has no link to {self.topo.aggregator}")

    def control_intf(self, host):
        bridge = getattr(self.topo, "control_bridge", T.CONTROL_BRIDGE)
        for intf in host.intfList():
            link = intf.link
            if link and bridge in (link.intf1.node.name, link.intf2.node.name):
                return intf
        return None

    def _configure_hosts(self) -> None:
        for rank, host in enumerate(self.workers):
            data = self.data_intf(host)
            host.cmd("sysctl -q -w net.ipv6.conf.all.disable_ipv6=1")
            # Checksums computed by the kernel, not left to the (virtual) NIC: what crosses
            # the switch and its pcaps is then a correct frame (the tutorials do the same).
            host.cmd(f"ethtool --offload {data.name} rx off tx off >/dev/null 2>&1")
            # The P4 program answers no ARP, and the switch may be outside the host's subnet
            # (topology.json): a host route and a permanent neighbour entry.
            host.cmd(f"ip route replace {SWITCH_IP}/32 dev {data.name}")
            host.cmd(f"ip neigh replace {SWITCH_IP} lladdr {SWITCH_MAC} dev {data.name} "
                     "nud permanent")
            ctl = self.control_intf(host)
            if ctl is not None:
                host.setIP(self.topo.control_ip(rank), 24, intf=ctl)
            if self.loss_method == "nft":
                rules = self.log_dir / f"{host.name}-loss.nft"
                rules.write_text(T.nft_loss_rules(data.name, self.shape.loss))
                _, err, code = host.pexec(["nft", "-f", str(rules)])
                if code != 0:
                    raise DeploymentError(f"{host.name}: nft refused the loss rules: "
                                          f"{' '.join(err.split())}")
        for name, commands in getattr(self.topo, "host_commands", {}).items():
            for command in commands:
                out = self.net.get(name).cmd(command)
                if out.strip():
                    info(f"{name}$ {command}\n{out}")

    def _push_pipeline(self) -> None:
        from hina.controller.p4runtime_client import SwitchConnection
        p4info, device_config = compile_pipeline(self.target, self.words, self.program)
        info(f"*** Pushing {PROGRAMS[self.program].name} to {self.switch.name} "
             f"({self.switch.grpc_address})\n")
        if self.conn is None:
            self.conn = SwitchConnection(self.switch.grpc_address,
                                         device_id=self.switch.device_id)
        self.conn.set_pipeline(p4info, device_config)

    def worker_config(self, rank: int):
        """Worker ``rank`` as the controller knows it: its data interface's MAC and IPv4
        address, the HINA UDP port, and the switch port its link ends on."""
        from hina.controller.config import WorkerConfig
        data = self.data_intf(self.workers[rank])
        peer = data.link.intf2 if data.link.intf1 is data else data.link.intf1
        return WorkerConfig(ip=data.IP(), udp_port=WORKER_UDP_PORT,
                            port=self.switch.ports[peer], mac=data.MAC())

    def _create_job(self) -> None:
        from hina.controller.config import ConfigError, JobConfig
        from hina.controller.jobs import JobError, JobManager
        from hina.controller.state import ControllerState
        from hina.controller.target import PipelineConfig, register_access
        config = JobConfig(job_id=self.job_id, codec=JOB_CODEC,
                           workers=tuple(self.worker_config(r) for r in range(len(self.workers))),
                           n_slots=self.n_slots, reg_base=0, words=self.words,
                           thc_table=thc_table(), switch_ip=SWITCH_IP, switch_mac=SWITCH_MAC)
        if self.registers is None:
            self.registers = register_access(self.target, self.conn,
                                             getattr(self.switch, "thrift_port", None))
        if self.jobs is None:
            self.jobs = JobManager(self.conn, registers=self.registers, target=self.target)
        try:
            self.job_config = self.jobs.create_job(config)
        except (ConfigError, JobError) as exc:
            raise DeploymentError(str(exc)) from None
        state = ControllerState(PipelineConfig(target=self.target,
                                               p4=str(PROGRAMS[self.program]),
                                               defines=programs.program_defines(
                                                   self.program, self.words)),
                                {self.job_id: self.job_config})
        state.save(self.ctl_state)
        info(f"*** Job {self.job_id}: {len(self.workers)} workers, {self.n_slots} slots, "
             f"{self.program} program, {self.words} words; hina-ctl state {self.ctl_state}\n")

    @property
    def ctl_state(self) -> Path:
        """The ``hina-ctl`` state file of this network (pipeline and job as installed)."""
        return self.log_dir / CTL_STATE

    def ctl_command(self, *args: str) -> list[str]:
        """The ``hina-ctl`` command line that inspects this network's switch, e.g.
        ``hn.ctl_command("counters", "--json")`` (read commands work beside the launcher's
        primary connection)."""
        cmd = [PYTHON, "-m", "hina.controller.cli", "--switch", self.switch.grpc_address,
               "--device-id", str(self.switch.device_id), "--state", str(self.ctl_state),
               "--log-file", str(self.log_dir / "hina-ctl.log")]
        if self.target == "bmv2":
            cmd += ["--thrift-port", str(self.switch.thrift_port)]
        return cmd + list(args)

    def reset_job(self) -> None:
        """Delete the job and create it afresh (slot registers and packet counter zeroed, over
        P4Runtime or BMv2's Thrift runtime): a new run of worker processes starts its sequence
        numbers at 0 again."""
        self.jobs.delete(self.job_id)
        self._create_job()

    # -- workers ----------------------------------------------------------------------------
    def worker_command(self, rank: int, mode: str, codecs: Sequence[str], size: int,
                       rounds: int = 1, steps: int = 6, seed: int = 0,
                       give_up_s: float = 30.0, min_rto: Optional[float] = None) -> list[str]:
        host = self.workers[rank]
        data = self.data_intf(host)
        cmd = [PYTHON, "-m", HOST_WORKER, "--rank", str(rank), "--workers", str(len(self.workers)),
               "--job-id", str(self.job_id), "--slots", str(self.n_slots),
               "--words", str(self.words), "--thc-table", ",".join(map(str, thc_table())),
               "--bind", f"{data.IP()}:{WORKER_UDP_PORT}",
               "--switch", f"{SWITCH_IP}:{_hina_port()}", "--mode", mode,
               "--codec", ",".join(codecs), "--size", str(size), "--rounds", str(rounds),
               "--steps", str(steps), "--seed", str(seed), "--give-up", str(give_up_s)]
        if min_rto is not None:
            cmd += ["--min-rto", str(min_rto)]
        if self.job_config is not None and self.job_config.sum_saturates:
            cmd += ["--sum-saturates"]
        if mode == "ddp":
            ctl = self.control_intf(host)
            if ctl is None:
                raise DeploymentError("--mode ddp needs the control network (gloo cannot cross "
                                      "the P4 switch, which forwards only HINA)")
            cmd += ["--master", f"{self.topo.control_ip(0)}:{MASTER_PORT}", "--ifname", ctl.name]
        return cmd

    def run_workers(self, mode: str = "allreduce", codecs: Sequence[str] = ("sum",),
                    size: int = 65536, rounds: int = 1, steps: int = 6, seed: int = 0,
                    timeout_s: float = 600.0, give_up_s: float = 30.0,
                    min_rto: Optional[float] = None) -> list[WorkerReport]:
        """Run ``host_worker.py`` on every worker host at once; wait for all; their reports."""
        return self.run_commands([self.worker_command(rank, mode, codecs, size, rounds, steps,
                                                      seed, give_up_s, min_rto)
                                  for rank in range(len(self.workers))], timeout_s)

    def run_commands(self, commands: Sequence[Sequence[str]],
                     timeout_s: float = 600.0) -> list[WorkerReport]:
        """Run ``commands[rank]`` on worker host ``rank``, all at once (an agent that prints
        its JSON report as its last ``{`` line, e.g. ``hina.mininet.tta_worker``); wait for
        all, killing any still running after ``timeout_s``; their reports. The processes are
        recorded at once, so :meth:`stop` kills them whatever happens."""
        if len(commands) != len(self.workers):
            raise DeploymentError(f"{len(commands)} commands for {len(self.workers)} workers")
        procs = []
        for host, cmd in zip(self.workers, commands):
            out = open(self.log_dir / f"{host.name}.out", "w")
            err = open(self.log_dir / f"{host.name}.err", "w")
            env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
                       **{NETWORK_ENV: self.topo.aggregator})
            proc = host.popen(list(cmd), stdout=out, stderr=err, env=env)
            out.close()
            err.close()
            procs.append(proc)
            self._procs.append(proc)
        deadline = time.monotonic() + timeout_s
        reports = []
        for rank, (host, proc) in enumerate(zip(self.workers, procs)):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._kill(proc)
            reports.append(self._report(host, rank, proc.returncode))
        return reports

    def _report(self, host, rank: int, returncode: int) -> WorkerReport:
        out = (self.log_dir / f"{host.name}.out").read_text(errors="replace")
        err = (self.log_dir / f"{host.name}.err").read_text(errors="replace")
        report: dict = {}
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                report = json.loads(line)
                break
        if not report:
            report = {"error": f"no report (exit status {returncode}); see "
                               f"{self.log_dir / (host.name + '.err')}"}
        tail = "\n".join(err.splitlines()[-15:])
        return WorkerReport(host.name, rank, returncode, report, tail)

    # -- inspection --------------------------------------------------------------------------
    def counters(self) -> dict[str, int]:
        """The switch's packets per drop/exception reason (``HinaIngress.reason_counter``)."""
        return self.jobs.reason_counts()

    def nft_drops(self) -> dict[str, int]:
        """Frames the nft loss rules dropped, per host (loss method ``nft``)."""
        return {h.name: T.nft_dropped(h, self.data_intf(h).name) for h in self.workers}

    # -- teardown ---------------------------------------------------------------------------
    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        stop_group(proc, grace=WORKER_GRACE_S)   # mnexec -d made the worker a group leader

    def stop(self) -> None:
        """Stop workers, the controller connection, the switch and the network; then remove
        any interface of this network that is still there. Safe to call more than once."""
        atexit.unregister(self.stop)
        for proc in self._procs:
            self._kill(proc)
        self._procs.clear()
        # Agents started but interrupted before they were recorded. At least two scans, then
        # until one finds none: one may start during a scan, and a /proc scan has once been
        # seen to miss a process that the next one found (CI, 2026-11-27).
        for scan in range(STRAY_SCANS):
            strays = self.stray_workers()
            if not strays and scan > 0:
                break
            for pid in strays:
                warn(f"*** killing worker agent {pid}, started but not recorded\n")
                _kill_pid(pid)
        if self.registers is not None:
            self.registers.close()
            self.registers = None
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception as exc:    # teardown goes on whatever the connection does
                warn(f"*** closing the P4Runtime connection: {exc}\n")
            self.conn = None
        if self.net is not None:
            net, self.net = self.net, None
            try:
                net.stop()
            finally:
                for node in net.switches:      # a switch whose start failed half-way
                    if isinstance(node, P4ProcessSwitch):
                        node.stop_process()
        for name in sorted(self._intf_names & set(leftover_interfaces(self._intf_names))):
            warn(f"*** removing leftover interface {name}\n")
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)

    def remove_temporary_logs(self) -> None:
        """Remove :attr:`log_dir` if this network made it (no ``log_dir`` given): for a caller
        whose run went well, after :meth:`stop`. A failed run keeps it (its error names it)."""
        if self._temporary_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def stray_workers(self) -> list[int]:
        """Pids of this network's worker agents that are running but not recorded (an
        interrupt between a worker's start and its recording), found by :data:`NETWORK_ENV`."""
        tag = f"{NETWORK_ENV}={self.topo.aggregator}".encode()
        recorded = {p.pid for p in self._procs}
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in recorded or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if tag in f.read().split(b"\0"):
                        pids.append(int(entry))
            except OSError:          # gone, or not ours to read
                continue
        return pids

    def __enter__(self) -> "HinaNetwork":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@functools.lru_cache(maxsize=4)
def compile_pipeline(target: str, words: int, program: str = "v1model"):
    """(P4Info message, device config bytes) of ``program`` (:data:`PROGRAMS`) for ``target``,
    at ``words`` words per packet; cached in memory (every network of a process pushes the same
    program) and on disk.

    The embedded target compiles in process (its P4Info cached by
    :class:`controller.target.PipelineConfig`); BMv2 needs ``p4c-bm2-ss``, whose output
    :func:`controller.bmv2.compile_p4c` caches by source, defines and compiler version.

    Raises:
        DeploymentError: the program does not compile, or p4c is missing (for BMv2).
    """
    from hina.controller.config import ConfigError
    from hina.controller.target import PipelineConfig
    try:
        return PipelineConfig(target=target, p4=str(PROGRAMS[program]),
                              defines=programs.program_defines(program, words)).build()
    except ConfigError as exc:
        raise DeploymentError(f"{target} pipeline: {exc}") from None


def _kill_pid(pid: int) -> None:
    """SIGKILL ``pid`` and reap it if it is our child."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    try:
        os.waitpid(pid, 0)
        return
    except ChildProcessError:      # not our child: init reaps it, soon (SIGKILL is asynchronous)
        pass
    deadline = time.monotonic() + KILL_WAIT_S
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.02)


def expected_interfaces(topo) -> set[str]:
    """Names of every interface (both ends of every link) and bridge ``topo`` makes."""
    names = set()
    for a, b, info in topo.links(withInfo=True):
        names |= {f"{a}-eth{info['port1']}", f"{b}-eth{info['port2']}"}
    return names | {s for s in topo.switches() if topo.nodeInfo(s).get("cls") is T.IpBridge}


def leftover_interfaces(names) -> list[str]:
    """Which of ``names`` exist as interfaces of the root namespace."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    present = {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()
               if line.count(":") >= 2}
    return sorted(present & set(names))


def _hina_port() -> int:
    from hina import protocol as P
    return P.UDP_PORT_BASE
