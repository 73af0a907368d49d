"""A P4Runtime gRPC server that records what a controller sends: for targets that do not run here.

``hina-ctl --target tofino`` talks to a Tofino's P4Runtime server (PI in ``bf_switchd``, or
Stratum), neither of which runs without the hardware or the SDE. :class:`RecordingP4Runtime`
stands in for the wire only: it is a real gRPC server (the controller's real client reaches it
over TCP) that grants primaryship, keeps every ``SetForwardingPipelineConfigRequest`` byte for
byte, answers ``GetForwardingPipelineConfig`` with the P4Info pushed, and answers reads of
counters and registers from values the test sets (``counters`` / ``registers``, keyed by the
P4Info id). Extern entries are refused with UNIMPLEMENTED, as PI's P4Runtime server does.

Example::

    >>> rec = RecordingP4Runtime.start()                                   # doctest: +SKIP
    >>> ...  # hina-ctl --switch {rec.address} --target tofino pipeline push ...
    >>> rec.pipelines[-1].config.p4_device_config[:4]                      # doctest: +SKIP
    >>> rec.stop()                                                         # doctest: +SKIP
"""
from __future__ import annotations

from concurrent import futures
from typing import Dict, List, Optional, Tuple, Union

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2, p4runtime_pb2_grpc

__all__ = ["RecordingP4Runtime"]

Value = Union[int, Tuple[int, ...]]
#: A Tofino device config is megabytes (p4/tna at one lane: 8.4 MB, context.json mostly), over
#: gRPC's default 4 MiB receive limit; Tofino's P4Runtime servers raise theirs too.
MAX_MESSAGE = 256 << 20
_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.max_send_message_length", MAX_MESSAGE)]


def _p4data(value: Value, width_bytes: int = 4) -> p4data_pb2.P4Data:
    if isinstance(value, tuple):
        return p4data_pb2.P4Data(struct=p4data_pb2.P4StructLike(
            members=[_p4data(v, width_bytes) for v in value]))
    return p4data_pb2.P4Data(bitstring=value.to_bytes(width_bytes, "big"))


class RecordingP4Runtime(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The recording server; :meth:`start` serves it on a free loopback port."""

    def __init__(self) -> None:
        self.pipelines: List[p4runtime_pb2.SetForwardingPipelineConfigRequest] = []
        self.reads: List[p4runtime_pb2.ReadRequest] = []
        #: {counter id: {index: (bytes, packets)}}
        self.counters: Dict[int, Dict[int, Tuple[int, int]]] = {}
        #: {register id: {index: int or tuple (a struct)}}
        self.registers: Dict[int, Dict[int, Value]] = {}
        self.address = ""
        self._server: Optional[grpc.Server] = None

    @classmethod
    def start(cls) -> "RecordingP4Runtime":
        rec = cls()
        rec._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=_OPTIONS)
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(rec, rec._server)
        port = rec._server.add_insecure_port("127.0.0.1:0")
        rec._server.start()
        rec.address = f"127.0.0.1:{port}"
        return rec

    def stop(self) -> None:
        """Stop serving (open streams end); idempotent."""
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    # -- the P4Runtime service -------------------------------------------------------------------
    def StreamChannel(self, request_iterator, context):
        for req in request_iterator:
            if req.WhichOneof("update") == "arbitration":
                reply = p4runtime_pb2.StreamMessageResponse()
                reply.arbitration.CopyFrom(req.arbitration)
                reply.arbitration.status.CopyFrom(status_pb2.Status(code=code_pb2.OK))
                yield reply

    def SetForwardingPipelineConfig(self, request, context):
        self.pipelines.append(request)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        if not self.pipelines:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no pipeline set")
        reply = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        reply.config.p4info.CopyFrom(self.pipelines[-1].config.p4info)
        return reply

    def Read(self, request, context):
        self.reads.append(request)
        out = p4runtime_pb2.ReadResponse()
        for entity in request.entities:
            which = entity.WhichOneof("entity")
            if which == "counter_entry":
                ask = entity.counter_entry
                for i, (nbytes, packets) in sorted(self.counters.get(ask.counter_id, {}).items()):
                    if ask.HasField("index") and ask.index.index != i:
                        continue
                    e = out.entities.add().counter_entry
                    e.counter_id, e.index.index = ask.counter_id, i
                    e.data.byte_count, e.data.packet_count = nbytes, packets
            elif which == "register_entry":
                ask = entity.register_entry
                for i, value in sorted(self.registers.get(ask.register_id, {}).items()):
                    if ask.HasField("index") and ask.index.index != i:
                        continue
                    e = out.entities.add().register_entry
                    e.register_id, e.index.index = ask.register_id, i
                    e.data.CopyFrom(_p4data(value))
            else:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, f"No {which} support yet")
        yield out

    def Write(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "the recording server takes no writes")


def main(argv=None) -> int:
    """``python -m hina.testing.p4rt_record [--port N] [--save DIR]``: serve until Ctrl-C and
    print one line per pushed pipeline (format guess, sizes); ``--save`` writes each push's
    ``p4_device_config`` and P4Info to DIR (a dry run of ``hina-ctl --target tofino``)."""
    import argparse
    import signal
    import threading
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m hina.testing.p4rt_record",
                                     description=main.__doc__)
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--save", metavar="DIR", help="write each push here")
    args = parser.parse_args(argv)
    rec = RecordingP4Runtime()
    rec._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=_OPTIONS)
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(rec, rec._server)
    port = rec._server.add_insecure_port(f"127.0.0.1:{args.port}")
    rec._server.start()
    rec.address = f"127.0.0.1:{port}"
    print(f"recording P4Runtime server on {rec.address}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    shown = 0
    while not stop.wait(0.2):
        for req in rec.pipelines[shown:]:
            shown += 1
            blob = req.config.p4_device_config
            print(f"push {shown}: p4_device_config {len(blob)} bytes (first 16: "
                  f"{blob[:16].hex()}), P4Info {req.config.p4info.ByteSize()} bytes, "
                  f"{len(req.config.p4info.tables)} tables", flush=True)
            if args.save:
                out = Path(args.save)
                out.mkdir(parents=True, exist_ok=True)
                (out / f"push{shown}.device_config.bin").write_bytes(blob)
                (out / f"push{shown}.p4info.bin").write_bytes(req.config.p4info.SerializeToString())
    rec.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
