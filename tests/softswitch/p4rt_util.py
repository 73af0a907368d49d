"""Shared by the P4Runtime tests: a raw-stub client with its own arbitration stream, and the
P4Info ids of a compiled program."""
from __future__ import annotations

import queue
import threading
import time

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from hina.softswitch.p4info import build_p4info


def ids(program) -> dict[str, int]:
    """Name -> P4Info id of the program's tables, actions, counters, registers and digests."""
    p4info = build_p4info(program.info)
    named = {}
    for kind in ("tables", "actions", "counters", "direct_counters", "registers", "digests"):
        for obj in getattr(p4info, kind):
            named[obj.preamble.name] = obj.preamble.id
    return named


class RawClient:
    """A P4Runtime client on raw stubs with its own arbitration stream."""

    def __init__(self, address: str, election_id: tuple[int, int], device_id: int = 0):
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.election_id, self.device_id = election_id, device_id
        self._out: queue.Queue = queue.Queue()
        self.responses: queue.Queue = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self._out.get, None))
        self._thread = threading.Thread(target=self._recv, daemon=True)
        self._thread.start()

    def _recv(self):
        try:
            for response in self.stream:
                self.responses.put(response)
        except grpc.RpcError as exc:
            self.responses.put(exc)

    def send(self, request: p4runtime_pb2.StreamMessageRequest) -> None:
        self._out.put(request)

    def arbitrate(self, election_id=None) -> p4runtime_pb2.StreamMessageResponse:
        request = p4runtime_pb2.StreamMessageRequest()
        request.arbitration.device_id = self.device_id
        high, low = election_id or self.election_id
        request.arbitration.election_id.high, request.arbitration.election_id.low = high, low
        self.send(request)
        return self.next("arbitration")

    def next(self, kind: str, timeout: float = 5):
        deadline = time.monotonic() + timeout
        while True:
            response = self.responses.get(timeout=max(0.01, deadline - time.monotonic()))
            if isinstance(response, Exception) or response.HasField(kind):
                return response

    def write(self, *updates, election_id=None):
        request = p4runtime_pb2.WriteRequest(device_id=self.device_id, updates=updates)
        high, low = election_id or self.election_id
        request.election_id.high, request.election_id.low = high, low
        return self.stub.Write(request, timeout=10)

    def read(self, *entities):
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id, entities=entities)
        return [e for response in self.stub.Read(request, timeout=10) for e in response.entities]

    def close(self):
        self._out.put(None)
        self.channel.close()
        self._thread.join(5)


def write_errors(exc: grpc.RpcError) -> list[p4runtime_pb2.Error]:
    """The per-update p4.v1.Error list of a failed Write, as PI reports it."""
    assert exc.code() == grpc.StatusCode.UNKNOWN
    details = dict(exc.trailing_metadata())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(details)
    errors = []
    for any_ in status.details:
        error = p4runtime_pb2.Error()
        any_.Unpack(error)
        errors.append(error)
    return errors


def pipeline_request(p4info, device_config, election_low=1, action="VERIFY_AND_COMMIT"):
    request = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=0)
    request.election_id.low = election_low
    request.action = getattr(p4runtime_pb2.SetForwardingPipelineConfigRequest, action)
    request.config.p4info.CopyFrom(p4info)
    request.config.p4_device_config = device_config
    return request
