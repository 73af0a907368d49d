"""An in-process embedded switch running p4/hina.p4 (or the TNA program, p4/tna/hina_tna.p4)
with one job installed, for worker tests. The job's entries are built in the program's layout
(:func:`hina.pipeline.layout_for`).

The switch (softswitch ``Switch`` + compiled hina.p4) has one loopback UDP port per worker; every
worker is a thread with its own ``FrameLink``, exactly as separate processes would be.
"""
from __future__ import annotations

import dataclasses
import threading

from hina import pipeline
from hina import protocol as P
from hina.softswitch.ports import PortLoss, UdpPort
from hina.softswitch.switch import Switch
from hina.worker.link import Endpoint, FrameLink
from hina.worker.collective import allreduce
from hina.worker.transport import JobParams, Transport

WORDS = 64                       # small packets keep the embedded target quick in tests
SWITCH = Endpoint.make("02:00:00:00:00:fe", "10.0.0.254", P.UDP_PORT_BASE)


def _worker(index: int) -> pipeline.WorkerAddress:
    return pipeline.WorkerAddress(port=index + 1, mac=0x020000000100 + index,
                                  ip=0x0A000100 + index, udp_port=40000 + index)


class LocalJob:
    """An embedded switch with one UDP port per worker and one job installed."""

    def __init__(self, program, n_workers: int, n_slots: int = 8, loss: float = 0.0,
                 lut_id: int = 1, table=pipeline.THC_DEFAULT_TABLE):
        self.switch = Switch()
        self.switch.load(program)
        dp = self.switch.dataplane
        self.layout = pipeline.layout_for(program.info.tables)
        # the TNA program's packets carry two blocks of its lanes (32 words at Tofino 1's 16);
        # the v1model program is compiled with WORDS
        words = self.layout.words if isinstance(self.layout, pipeline.TnaLayout) else WORDS
        self.spec = pipeline.JobSpec(job_id=3, workers=tuple(_worker(w) for w in range(n_workers)),
                                     n_slots=n_slots, reg_base=0, lut_id=lut_id, words=words)
        for entry in (pipeline.job_entries(self.spec, self.layout)
                      + pipeline.lut_entries(lut_id, table, words=words, layout=self.layout)):
            dp.table_insert(entry)
        group, replicas = pipeline.multicast_group(self.spec)
        dp.mcast_group_set(group, replicas)
        self.links = []
        for w, addr in enumerate(self.spec.workers):
            link_sock = FrameLink(Endpoint(addr.mac, addr.ip, addr.udp_port), SWITCH,
                                  ("127.0.0.1", 0), ("127.0.0.1", 0))
            port = UdpPort(addr.port, ("127.0.0.1", 0), peer=link_sock.sock.getsockname(),
                           loss=PortLoss(rx=loss, tx=loss, seed=w) if loss else None)
            link_sock.tunnel_switch = port.local_address
            self.switch.add_port(port)
            self.links.append(link_sock)
        self.params = JobParams(job_id=self.spec.job_id, n_workers=n_workers, n_slots=n_slots,
                                words=words, thc_table=tuple(table),
                                generation=self.spec.generation,
                                sum_saturates=self.layout.sum_saturates)

    def set_generation(self, generation: int) -> None:
        """What the controller does when the job's workers restart: rewrite the admission
        entries with the new generation (no register wipe); later :meth:`transports` use it."""
        new = dataclasses.replace(self.spec, generation=generation)
        dp = self.switch.dataplane
        write = {"INSERT": dp.table_insert, "MODIFY": dp.table_modify, "DELETE": dp.table_delete}
        for kind, entry in pipeline.generation_updates(self.spec, new, self.layout):
            write[kind](entry)
        self.spec = new
        self.params = self.params_of(generation)

    def params_of(self, generation: int) -> JobParams:
        """The job's parameters as a worker of ``generation`` knows them."""
        return dataclasses.replace(self.params, generation=generation)

    def transports(self, **kwargs):
        return [Transport(link, self.params, **kwargs) for link in self.links]

    def close(self):
        for link in self.links:
            link.close()
        self.switch.close()


def run_workers(fn, transports):
    """Run fn(worker_index, transport) on one thread per worker; return results or raise."""
    results, errors = [None] * len(transports), [None] * len(transports)

    def body(w):
        try:
            results[w] = fn(w, transports[w])
        except BaseException as exc:   # surfaced to the test below
            errors[w] = exc

    threads = [threading.Thread(target=body, args=(w,)) for w in range(len(transports))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results, errors


def allreduce_steps(job: LocalJob, codecs, grads, steps: int = 1):
    """``steps`` allreduces of ``grads[w]`` with ``codecs[w]`` through ``job``'s switch, one
    thread per worker (transports with a 30 ms minimum RTO, giving up after 20 s), then the job
    closed. Returns (``results[w][step]``, the transports); an error on any worker fails the
    caller's test with every worker's error."""
    transports = job.transports(min_rto=0.03, give_up_s=20.0)
    try:
        results, errors = run_workers(
            lambda w, t: [allreduce(grads[w], codecs[w], t, key=0) for _ in range(steps)],
            transports)
    finally:
        job.close()
    assert errors == [None] * len(transports), errors
    return results, transports
