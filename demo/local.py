"""A HINA deployment on this machine: the embedded switch on loopback UDP ports, a job, workers.

:class:`LocalDeployment` starts ``softswitch`` as its own process with one loopback UDP port per
worker, pushes ``p4/hina.p4`` and installs a job through the P4Runtime controller library, exactly
as an operator would with ``hina-ctl``; workers then reach the switch through
:class:`worker.link.FrameLink` (their MAC, IPv4 address and UDP port are what the job admits).
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from hina.controller.jobs import JobManager
from hina import programs
from hina.controller.p4runtime_client import SwitchConnection
from hina import pipeline
from hina.loopback import free_tcp_port, free_udp_ports  # noqa: F401 (free_tcp_port: re-exported)
from hina.procs import stop_group
from hina import protocol as P
from hina.softswitch.compiler import compile_file
from hina.softswitch.p4info import build_p4info
from hina.softswitch.p4runtime_server import make_device_config

HINA_P4 = programs.HINA_P4
SWITCH_MAC = 0x0200000000FE
SWITCH_IP = 0x0A0000FE            # 10.0.0.254
_READY = "softswitch ready"
_START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class WorkerSeat:
    """Everything one worker process needs to reach the switch (picklable)."""
    index: int
    mac: int
    ip: int
    udp_port: int
    tunnel_local: tuple[str, int]      # the worker's tunnel socket
    tunnel_switch: tuple[str, int]     # the switch port's socket
    job_id: int
    n_workers: int
    n_slots: int
    words: int
    thc_table: Optional[tuple[int, ...]]
    sum_saturates: bool = False        # the TNA program: SUM sticks at the int32 bounds


class LocalDeployment:
    """The embedded switch in a subprocess plus a controller connection.

    Args:
        n_workers: number of worker ports.
        words: words per packet to compile the program with (``HINA_WORDS`` of p4/hina.p4;
            the TNA program: 32 or 64, two blocks of ``TNA_LANES``).
        loss: per-port drop probability in both directions (loss testing).
        log_file: where the switch logs.
        program: ``v1model`` (p4/hina.p4) or ``tna`` (p4/tna/hina_tna.p4 on the embedded
            target's TNA dataplane, with every operation: :func:`hina.programs.embedded_defines`;
            its SUM saturates, which the seats carry to the workers).
    """

    def __init__(self, n_workers: int, words: int = P.WORDS, loss: float = 0.0,
                 log_file: Optional[str] = None, program: str = "v1model"):
        self.n_workers, self.words, self.program_name = n_workers, words, program
        self.program = compile_file(str(programs.PROGRAMS[program]),
                                    defines=programs.embedded_defines(program, words))
        self.layout = pipeline.layout_for(self.program.info.tables)
        self.layout.check_words(words)
        ports = free_udp_ports(2 * n_workers)
        self.switch_ports = ports[:n_workers]
        self.worker_ports = ports[n_workers:]
        self.grpc_addr = f"127.0.0.1:{free_tcp_port()}"
        cmd = [sys.executable, "-m", "hina.softswitch", "--no-p4", "--grpc-server-addr", self.grpc_addr,
               "--log-level", "warn"]
        for w in range(n_workers):
            cmd += ["-i", f"{w + 1}@udp:127.0.0.1:{self.switch_ports[w]}"
                          f"@127.0.0.1:{self.worker_ports[w]}"]
            if loss:
                cmd += ["--loss", f"{w + 1}:{loss}"]
        # The switch's output goes to a file: a pipe nobody reads would block it when full.
        self._own_log = log_file is None       # a temporary log is removed at close
        self.log_path = log_file or tempfile.mkstemp(prefix="softswitch-", suffix=".log")[1]
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._wait_ready()
        self.conn = SwitchConnection(self.grpc_addr)
        self.conn.set_pipeline(build_p4info(self.program.info), make_device_config(self.program))
        self.jobs = JobManager(self.conn)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            if any(line.startswith(_READY) for line in Path(self.log_path).read_text().splitlines()):
                return
            time.sleep(0.05)
        tail = Path(self.log_path).read_text().splitlines()[-20:]
        self.close()
        raise RuntimeError("the embedded switch did not start:\n" + "\n".join(tail))

    def worker_address(self, w: int) -> pipeline.WorkerAddress:
        return pipeline.WorkerAddress(port=w + 1, mac=0x020000000100 + w, ip=0x0A000100 + w,
                                      udp_port=40000 + w)

    def create_job(self, job_id: int = 1, n_slots: int = 32,
                   thc_table: Optional[Sequence[int]] = None) -> list[WorkerSeat]:
        """Install a job over all workers; returns each worker's seat."""
        workers = tuple(self.worker_address(w) for w in range(self.n_workers))
        spec = pipeline.JobSpec(job_id=job_id, workers=workers, n_slots=n_slots, reg_base=0,
                                words=self.words)
        self.jobs.create(spec, thc_table=thc_table)
        return [WorkerSeat(w, a.mac, a.ip, a.udp_port, ("127.0.0.1", self.worker_ports[w]),
                           ("127.0.0.1", self.switch_ports[w]), job_id, self.n_workers, n_slots,
                           self.words, tuple(thc_table) if thc_table is not None else None,
                           self.layout.sum_saturates)
                for w, a in enumerate(workers)]

    def delete_job(self, job_id: int = 1) -> None:
        self.jobs.delete(job_id)

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
        stop_group(self.proc, grace=10.0)
        self._log.close()
        if self._own_log:
            Path(self.log_path).unlink(missing_ok=True)

    def __enter__(self) -> "LocalDeployment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect_worker(seat: WorkerSeat, **transport_kwargs):
    """The worker side: a FrameLink and Transport for ``seat`` (call in the worker process)."""
    from hina.worker.link import Endpoint, FrameLink
    from hina.worker.transport import JobParams, Transport

    link = FrameLink(Endpoint(seat.mac, seat.ip, seat.udp_port),
                     Endpoint(SWITCH_MAC, SWITCH_IP, P.UDP_PORT_BASE),
                     seat.tunnel_local, seat.tunnel_switch)
    job = JobParams(seat.job_id, seat.n_workers, seat.n_slots, seat.words, seat.thc_table,
                    sum_saturates=seat.sum_saturates)
    return Transport(link, job, **transport_kwargs)
