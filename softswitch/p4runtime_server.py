"""A P4Runtime gRPC server (``p4.v1.P4Runtime``) over a :class:`~softswitch.switch.Switch`.

What a controller sees is what PI/BMv2 (``simple_switch_grpc``) offers, plus RegisterEntry:

* **Arbitration** (``StreamChannel``): the connected client with the highest election id is the
  primary; it gets ``MasterArbitrationUpdate`` with status OK, the others ALREADY_EXISTS (or
  NOT_FOUND while no client is primary). Every client is told when the primary changes; when the
  primary's stream ends, the next highest connected client takes over (as PI does). A second
  client with an election id in use ends its stream with INVALID_ARGUMENT. Only the primary may
  Write, set the pipeline and send PacketOut; as in PI, while no client is connected at all,
  requests with election id 0 are served too (handy for one-shot tools). Only the default role
  is supported: a named role is refused with UNIMPLEMENTED.
* **Pipeline** (``SetForwardingPipelineConfig``): VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT,
  COMMIT and RECONCILE_AND_COMMIT. The device config is this target's JSON document (see
  :func:`make_device_config`, :func:`make_bundle_device_config`): P4 source only, compiled here
  as untrusted input (includes confined to its own files and p4include, cpp under limits, at
  most :data:`MAX_DEVICE_CONFIG_BYTES`; see :mod:`softswitch.frontend.bundle`).
  RECONCILE_AND_COMMIT acts as VERIFY_AND_COMMIT: run-time state starts afresh. The pushed P4Info is kept verbatim and its
  ids are the ones every later request uses, so a P4Info from real p4c works (and one from
  the Tofino compiler, ``bf-p4c``, for a TNA program: its ``pipe.`` table names, struct
  registers and externs as ``softswitch/p4rt/pipeline.py`` says); it must describe
  the program (names, widths, match kinds) or the push fails with INVALID_ARGUMENT. A program
  loaded on the switch directly (``softswitch --program``) is served with the P4Info
  :func:`softswitch.p4info.build_p4info` generates for it, until a controller pushes another.
* **Write**: CONTINUE_ON_ERROR (the default, and all BMv2 offers), ROLLBACK_ON_ERROR and
  DATAPLANE_ATOMIC (the same here: a batch runs under the switch lock, so no frame sees part of
  it; on the first failure every applied update is undone and the others report ABORTED).
  TableEntry (with default entries),
  MulticastGroupEntry, CloneSessionEntry, CounterEntry, DirectCounterEntry, RegisterEntry,
  MeterEntry, DirectMeterEntry, DigestEntry, ValueSetEntry (MODIFY only, the whole set: exact members, at most
  the set's size, else RESOURCE_EXHAUSTED; PI's BMv2 server refuses ValueSetEntry writes, so
  BMv2 is driven through its Thrift ``bm_parse_vset_*`` calls in the tests). Failed updates are reported as PI does: overall status UNKNOWN with
  one ``p4.v1.Error`` per update in ``grpc-status-details-bin``.
* **Read** with wildcards for the same entities, streamed in batches. An answer is one
  snapshot, copied under the switch lock and encoded after the lock is released. One request
  returns at most :data:`MAX_READ_ENTITIES` entities: a request whose answer would hold more
  (say, a wildcard over every cell of every register of a large program) is refused with
  RESOURCE_EXHAUSTED, so read such state one register (or index) per entity.
* **Values**: bytestrings are accepted padded or canonical; a value wider than its field is
  OUT_OF_RANGE, an empty one INVALID_ARGUMENT. Reads answer in canonical form (no leading zero
  bytes). Writes to tables with ``const entries`` and to const default actions are
  PERMISSION_DENIED; don't-care matches (ternary mask 0, lpm /0, full range) must be omitted.
* **Packet I/O**: PacketOut becomes ``packet_out`` header + payload entering ingress on the CPU
  port; frames the dataplane sends to the CPU port lose their ``packet_in`` header, whose fields
  become PacketIn metadata for the primary. Digests go to the primary as DigestList once a
  DigestEntry configured them, as PI sends them (``p4rt.digests``): lists of up to
  ``max_list_size`` held at most ``max_timeout_ns``, and with ``ack_timeout_ns`` data already
  sent dropped until its list is acknowledged or the ack times out.
* **Action profiles and selectors**: ActionProfileMember and ActionProfileGroup (INSERT,
  MODIFY, DELETE, Read with wildcards), entries naming ``action_profile_member_id`` or
  ``action_profile_group_id``. A direct action in an entry of such a table, a member or group
  in an entry of another table, a group of an action profile without selector are
  INVALID_ARGUMENT; an unknown member or group (one of another profile included) NOT_FOUND;
  deleting a member a group or an entry uses, or a group an entry uses, FAILED_PRECONDITION;
  more members than the profile's size RESOURCE_EXHAUSTED; weights above 1 and
  ``action_profile_action_set`` UNIMPLEMENTED (BMv2 has neither).
* **Not supported** (UNIMPLEMENTED): extern entries,
  meter config in table entries, resetting a MeterEntry or DirectMeterEntry.

Example::

    >>> switch = Switch(device_id=0, cpu_port=255)
    >>> server = serve(switch, "127.0.0.1:9559")
    >>> ...                                    # p4runtime-shell, ONOS, hina-ctl ...
    >>> server.stop(grace=None).wait()
    >>> server.servicer.close()
"""
from __future__ import annotations

import logging
import threading
from concurrent import futures
from typing import Callable, Optional

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from . import api
from .api import CompiledProgram
from .frontend.cpp_sandbox import CppLimitError
from .p4rt.arbiter import CLOSE, Arbiter, Client, election_id_of, format_election_id
from .p4rt.digests import DigestStreams
from .p4rt.device_config import (  # noqa: F401 (MAX_DEVICE_CONFIG_BYTES, make_*: public here)
    MAX_DEVICE_CONFIG_BYTES, DeviceConfig, DeviceConfigTooLarge, make_bundle_device_config,
    make_device_config, parse_device_config)
from .p4rt.errors import (P4RuntimeError, abort, as_p4runtime_error, invalid, not_found,
                          unimplemented)
from .p4rt.pipeline import ControllerHeader, Pipeline, decode_bytes, encode_bytes, enum_name
from .p4rt.reader import MAX_READ_ENTITIES, READ_BATCH_SIZE, Reader
from .p4rt.writer import Writer
from .switch import Switch

log = logging.getLogger("softswitch.p4runtime")

DEFAULT_ADDRESS = "127.0.0.1:9559"
DEFAULT_MAX_WORKERS = 16         # each open StreamChannel holds one worker thread
COMPILED_PROGRAM_CACHE_SIZE = 4  # compiled device configs kept for re-pushes

SetPipelineRequest = p4runtime_pb2.SetForwardingPipelineConfigRequest
# RECONCILE_AND_COMMIT commits like VERIFY_AND_COMMIT: run-time state is not carried over.
COMMITTING_ACTIONS = (SetPipelineRequest.VERIFY_AND_COMMIT, SetPipelineRequest.RECONCILE_AND_COMMIT)
GetRequest = p4runtime_pb2.GetForwardingPipelineConfigRequest
WriteRequest = p4runtime_pb2.WriteRequest


def api_version() -> str:
    """The P4Runtime API version this server implements (the installed ``p4runtime`` protos)."""
    try:
        from importlib.metadata import version
        return version("p4runtime")
    except Exception:   # metadata missing (vendored protos): the version these were written for
        return "1.4.1"


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The P4Runtime service for one :class:`Switch`.

    Args:
        switch: the device served; its ``device_id`` is the P4Runtime device id.
        compile_source: ``(source, filename) -> CompiledProgram``; defaults to
            ``softswitch.compiler.compile_source``.
        max_read_entities: the most entities one Read request may return; a request whose
            answer would hold more is refused with RESOURCE_EXHAUSTED.
    """

    def __init__(self, switch: Switch,
                 compile_source: Optional[Callable[[str, str], CompiledProgram]] = None,
                 max_read_entities: int = MAX_READ_ENTITIES):
        self.switch = switch
        self.max_read_entities = max_read_entities
        self.arbiter = Arbiter(switch.device_id)
        self._compile_source = compile_source
        # Lock order: self._lock (pipeline changes), then switch.lock (the dataplane and
        # everything read with it: pipeline, digest_enabled).
        self._lock = threading.RLock()
        self.pipeline: Optional[Pipeline] = None
        self._saved: Optional[Pipeline] = None
        self._programs: dict[tuple[str, str], CompiledProgram] = {}   # by (name, source)
        self.digests = DigestStreams(self._send_digest_list)
        switch.add_packet_in_sink(self._on_packet_in)
        switch.add_digest_sink(self._on_digest)

    def close(self) -> None:
        """Detach from the switch (the server keeps no other resources)."""
        self.switch.remove_packet_in_sink(self._on_packet_in)
        self.switch.remove_digest_sink(self._on_digest)
        self.digests.close()

    # -- common checks -------------------------------------------------------------------------
    def _check_device(self, device_id: int) -> None:
        if device_id != self.switch.device_id:
            raise not_found(f"device id {device_id} is not served here "
                             f"(this is device {self.switch.device_id})")

    @staticmethod
    def _check_role(role: str) -> None:
        if role:
            raise unimplemented(f"role {role!r}: only the default role is supported")

    def _check_primary(self, election_id_msg, what: str) -> None:
        election_id = election_id_of(election_id_msg)
        if election_id == 0 and self.arbiter.primary is None:
            return          # as PI: with no client connected, unarbitrated requests are served
        if not self.arbiter.is_primary(election_id):
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"{what}: election id {format_election_id(election_id)} is "
                                 "not the primary client's")

    def _current_pipeline(self) -> Optional[Pipeline]:
        """The pipeline of the program the switch runs.

        A program loaded on the switch directly (``softswitch --program``) rather than pushed
        over P4Runtime is served with the P4Info generated from it, as if a controller had
        pushed that P4Info and :func:`make_device_config`'s document.
        """
        with self.switch.lock:
            program, pipeline = self.switch.program, self.pipeline
            if program is not None and (pipeline is None or pipeline.program is not program):
                from .p4info import build_p4info
                pipeline = Pipeline(build_p4info(program.info), make_device_config(program),
                                    self.switch.cookie, program)
                self.pipeline = pipeline
                self.digests.clear()
            return pipeline

    def _require_pipeline(self) -> Pipeline:
        pipeline = self._current_pipeline()
        if pipeline is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "no forwarding pipeline config is set on the device")
        return pipeline

    # -- Capabilities --------------------------------------------------------------------------
    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=api_version())

    # -- pipeline ------------------------------------------------------------------------------
    def SetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            self._check_primary(request.election_id, "SetForwardingPipelineConfig")
            self._set_pipeline(request)
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        except Exception as exc:  # every failure becomes a status; INTERNAL ones are logged
            abort(context, exc, "SetForwardingPipelineConfig")

    def _set_pipeline(self, request) -> None:
        action = request.action
        with self._lock:
            if action == SetPipelineRequest.COMMIT:
                if self._saved is None:
                    raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                         "COMMIT: no config was saved with VERIFY_AND_SAVE")
                self._commit(self._saved)
                return
            if action not in (SetPipelineRequest.VERIFY, SetPipelineRequest.VERIFY_AND_SAVE,
                              *COMMITTING_ACTIONS):
                raise invalid(f"SetForwardingPipelineConfig action "
                               f"{enum_name(SetPipelineRequest.Action, action)} is not valid")
            pipeline = self._verify(request.config)
            if action == SetPipelineRequest.VERIFY_AND_SAVE:
                self._saved = pipeline
            elif action in COMMITTING_ACTIONS:
                self._commit(pipeline)

    def _verify(self, config) -> Pipeline:
        if not config.HasField("p4info"):
            raise invalid("forwarding pipeline config has no P4Info")
        try:
            device_config = parse_device_config(config.p4_device_config)
        except DeviceConfigTooLarge as exc:
            raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)) from None
        except ValueError as exc:
            raise invalid(str(exc)) from None
        program = self._compile(device_config)
        p4info = p4info_pb2.P4Info()
        p4info.CopyFrom(config.p4info)
        return Pipeline(p4info, config.p4_device_config, config.cookie.cookie, program)

    def _compile(self, device_config: DeviceConfig) -> CompiledProgram:
        """Compile the device config's program; the last few results are reused, so pushing
        the same pipeline again (controller restart, tests) costs no compilation.

        The program is untrusted: it is compiled by :func:`softswitch.compiler.compile_bundle`,
        confined to its own files and ``p4include`` and under the preprocessor's limits (a
        ``compile_source`` given to the constructor is trusted and called instead)."""
        key = (device_config.name, device_config.source, device_config.files)
        program = self._programs.get(key)
        if program is not None:
            return program
        try:
            if self._compile_source is not None:
                program = self._compile_source(device_config.source, filename=device_config.name)
            else:
                from .compiler import compile_bundle
                program = compile_bundle(device_config.bundle)
        except CppLimitError as exc:
            raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)) from None
        except api.P4UnsupportedError as exc:
            raise unimplemented(str(exc)) from None
        except api.P4CompileError as exc:
            raise invalid(str(exc)) from None
        except RecursionError:
            raise invalid(f"{device_config.name}: the program nests too deeply for this "
                           "target's compiler") from None
        if len(self._programs) >= COMPILED_PROGRAM_CACHE_SIZE:
            self._programs.pop(next(iter(self._programs)))
        self._programs[key] = program
        return program

    def _commit(self, pipeline: Pipeline) -> None:
        with self.switch.lock:      # no frame or request sees the new dataplane with old ids
            self.switch.load(pipeline.program, cookie=pipeline.cookie,
                             p4info_bytes=pipeline.p4info.SerializeToString())
            self.pipeline, self._saved = pipeline, None
            self.digests.clear()

    def GetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device(request.device_id)
            pipeline = self._require_pipeline()
            response = p4runtime_pb2.GetForwardingPipelineConfigResponse()
            config = response.config
            config.cookie.cookie = pipeline.cookie
            kind = request.response_type
            if kind in (GetRequest.ALL, GetRequest.P4INFO_AND_COOKIE):
                config.p4info.CopyFrom(pipeline.p4info)
            if kind in (GetRequest.ALL, GetRequest.DEVICE_CONFIG_AND_COOKIE):
                config.p4_device_config = pipeline.device_config
            return response
        except Exception as exc:
            abort(context, exc, "GetForwardingPipelineConfig")

    # -- Write ---------------------------------------------------------------------------------
    def Write(self, request, context):
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            self._check_primary(request.election_id, "Write")
            atomic = request.atomicity != WriteRequest.CONTINUE_ON_ERROR
            if request.atomicity not in (WriteRequest.CONTINUE_ON_ERROR,
                                         WriteRequest.ROLLBACK_ON_ERROR,
                                         WriteRequest.DATAPLANE_ATOMIC):
                raise invalid(f"atomicity "
                               f"{enum_name(WriteRequest.Atomicity, request.atomicity)} "
                               "is not valid")
            results: list[Optional[P4RuntimeError]] = []
            with self.switch.lock:   # no frame is processed in the middle of a batch
                writer = Writer(self, self._require_pipeline(),
                                 self.switch.require_dataplane(), undoable=atomic)
                for index, update in enumerate(request.updates):
                    try:
                        writer.apply(update)
                        results.append(None)
                    except Exception as exc:   # reported per update
                        results.append(as_p4runtime_error(exc, f"Write update {index}"))
                        if atomic:
                            writer.rollback()
                            break
            if atomic and any(results):
                aborted = P4RuntimeError(grpc.StatusCode.ABORTED,
                                         "not applied: another update of the batch failed")
                results += [None] * (len(request.updates) - len(results))
                results = [r or aborted for r in results]
        except Exception as exc:
            abort(context, exc, "Write")
            return None
        if any(results):
            _abort_write(context, results)
        return p4runtime_pb2.WriteResponse()

    # -- Read ----------------------------------------------------------------------------------
    def Read(self, request, context):
        # The switch lock is held only while the answer is copied (bounded by
        # max_read_entities); it is encoded batch by batch after the lock is released, and not
        # at all once the client has gone (deadline passed, cancelled).
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            with self.switch.lock:
                reader = Reader(self, self._require_pipeline(), self.switch.require_dataplane(),
                                 self.max_read_entities)
                for entity in request.entities:
                    reader.snapshot(entity)
            for sent, response in enumerate(reader.responses()):
                if not context.is_active():
                    log.debug("Read abandoned after %d of %d entities: the client is gone",
                              sent * READ_BATCH_SIZE, len(reader))
                    return
                yield response
        except Exception as exc:
            abort(context, exc, "Read")

    # -- StreamChannel -------------------------------------------------------------------------
    def StreamChannel(self, request_iterator, context):
        client = Client()
        context.add_callback(lambda: client.close())
        reader = threading.Thread(target=self._stream_reader, args=(client, request_iterator),
                                  name="p4rt-stream", daemon=True)
        reader.start()
        try:
            while True:
                message = client.outgoing.get()
                if message is CLOSE:
                    break
                yield message
        finally:
            self.arbiter.remove(client)
        if client.abort_with is not None:
            context.abort(client.abort_with.code, client.abort_with.message)

    def _stream_reader(self, client: Client, request_iterator) -> None:
        try:
            for request in request_iterator:
                try:
                    self._stream_message(client, request)
                except P4RuntimeError as exc:
                    if request.HasField("arbitration"):
                        client.close(exc)   # a bad arbitration ends the stream, as in PI
                        return
                    client.send(_stream_error(exc, request))
                except Exception as exc:
                    client.send(_stream_error(as_p4runtime_error(exc, "StreamChannel"),
                                              request))
        except grpc.RpcError:
            pass            # the client went away
        except Exception:   # a broken request stream must not leave the client dangling
            log.exception("StreamChannel reader failed")
        client.close(client.abort_with)

    def _stream_message(self, client: Client, request) -> None:
        kind = request.WhichOneof("update")
        if kind == "arbitration":
            update = request.arbitration
            if client.election_id is not None and update.device_id != self.switch.device_id:
                raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"arbitration: this stream is bound to device "
                                     f"{self.switch.device_id}, not {update.device_id}")
            self._check_device(update.device_id)
            if update.HasField("role") and (update.role.name or update.role.HasField("config")):
                raise unimplemented(f"role {update.role.name!r}: only the default role is "
                                     "supported")
            self.arbiter.update(client, election_id_of(update.election_id))
        elif kind == "packet":
            if client.election_id is None or self.arbiter.primary is not client:
                raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                     "PacketOut: only the primary client may send packets")
            self._packet_out(request.packet)
        elif kind == "digest_ack":
            self.digests.ack(request.digest_ack.digest_id, request.digest_ack.list_id)
        else:
            raise invalid(f"stream message {kind or 'with no update'} is not supported")

    # -- packet I/O ----------------------------------------------------------------------------
    def _packet_out(self, packet: p4runtime_pb2.PacketOut) -> None:
        pipeline = self._require_pipeline()
        if self.switch.cpu_port is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "PacketOut: the device has no CPU port")
        header = b""
        if pipeline.packet_out is not None:
            header = _pack_header(pipeline.packet_out, packet.metadata)
        elif packet.metadata:
            raise invalid("PacketOut has metadata but the P4Info has no packet_out header")
        self.switch.receive(self.switch.cpu_port, header + packet.payload)

    def _on_packet_in(self, frame: bytes) -> None:
        primary, pipeline = self.arbiter.primary, self._current_pipeline()
        if primary is None or pipeline is None:
            return
        response = p4runtime_pb2.StreamMessageResponse()
        packet = response.packet
        header = pipeline.packet_in
        if header is not None:
            size = (header.bitwidth + 7) // 8
            if len(frame) < size:
                log.warning("dropping PacketIn of %d bytes: shorter than its packet_in header",
                            len(frame))
                return
            value = int.from_bytes(frame[:size], "big") >> (size * 8 - header.bitwidth)
            shift = header.bitwidth
            for md_id, _, width in header.fields:
                shift -= width
                md = packet.metadata.add()
                md.metadata_id = md_id
                md.value = encode_bytes((value >> shift) & ((1 << width) - 1))
            frame = frame[size:]
        packet.payload = frame
        primary.send(response)

    def _on_digest(self, digest: api.Digest) -> None:
        primary, pipeline = self.arbiter.primary, self._current_pipeline()
        if primary is None or pipeline is None:
            return
        digest_id = pipeline.digest_ids.get(digest.name)
        if digest_id is not None:
            self.digests.offer(digest_id, tuple(encode_bytes(v) for v in digest.values))

    def _send_digest_list(self, response) -> None:
        primary = self.arbiter.primary
        if primary is not None:
            primary.send(response)


def _pack_header(header: ControllerHeader, metadata) -> bytes:
    values = {}
    by_id = {md_id: (name, width) for md_id, name, width in header.fields}
    for md in metadata:
        if md.metadata_id not in by_id:
            raise invalid(f"PacketOut metadata id {md.metadata_id} is not in the "
                           "packet_out header")
        name, width = by_id[md.metadata_id]
        values[md.metadata_id] = decode_bytes(md.value, width, f"PacketOut metadata {name!r}")
    packed = 0
    for md_id, _, width in header.fields:
        packed = (packed << width) | values.get(md_id, 0)
    size = (header.bitwidth + 7) // 8
    return (packed << (size * 8 - header.bitwidth)).to_bytes(size, "big")


def _stream_error(exc: P4RuntimeError, request) -> p4runtime_pb2.StreamMessageResponse:
    response = p4runtime_pb2.StreamMessageResponse()
    error = response.error
    error.canonical_code, error.message = exc.rpc_code, exc.message
    if request.HasField("packet"):
        error.packet_out.packet_out.CopyFrom(request.packet)
    elif request.HasField("digest_ack"):
        error.digest_list_ack.digest_list_ack.CopyFrom(request.digest_ack)
    return response


def _abort_write(context, results: list[Optional[P4RuntimeError]]) -> None:
    """Fail a Write as PI does: UNKNOWN, one p4.v1.Error per update in the status details."""
    status = status_pb2.Status(code=code_pb2.UNKNOWN,
                               message=f"{sum(1 for r in results if r)} of {len(results)} "
                                       "updates failed")
    for result in results:
        error = p4runtime_pb2.Error()
        if result is None:
            error.canonical_code = code_pb2.OK
        else:
            error.canonical_code, error.message = result.rpc_code, result.message
        status.details.add().Pack(error)
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(grpc.StatusCode.UNKNOWN, status.message)



# --------------------------------------------------------------------------------------------
# Serving
# --------------------------------------------------------------------------------------------
def server_credentials(cert: str, key: str,
                       client_ca: Optional[str] = None) -> grpc.ServerCredentials:
    """TLS credentials for :func:`serve` from PEM files, as Stratum takes them: the server's
    certificate and key and, for mutual TLS, the CA whose client certificates are accepted
    (every other client is refused at the handshake).

    Raises:
        ValueError: a file cannot be read or is not PEM, or the key does not match the
            certificate (named by its flag: ``--tls-cert``, ``--tls-key``, ``--tls-client-ca``).
    """
    import ssl

    def read(path: str, flag: str) -> bytes:
        try:
            data = open(path, "rb").read()
        except OSError as exc:
            raise ValueError(f"{flag} {path}: {exc.strerror or exc}") from None
        if b"-----BEGIN " not in data:
            raise ValueError(f"{flag} {path}: not a PEM file")
        return data

    cert_pem, key_pem = read(cert, "--tls-cert"), read(key, "--tls-key")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ValueError(f"--tls-key {key} does not go with --tls-cert {cert} "
                         f"({exc.reason or exc})") from None
    ca_pem = read(client_ca, "--tls-client-ca") if client_ca else None
    return grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=ca_pem,
                                       require_client_auth=ca_pem is not None)


def serve(switch: Switch, address: str = DEFAULT_ADDRESS,
          max_workers: int = DEFAULT_MAX_WORKERS,
          credentials: Optional[grpc.ServerCredentials] = None,
          max_read_entities: int = MAX_READ_ENTITIES) -> grpc.Server:
    """Start a P4Runtime server for ``switch`` on ``address`` (plaintext, like BMv2's, unless
    ``credentials`` are given).

    Args:
        switch: the device to serve.
        address: ``host:port`` to listen on; 127.0.0.1 by default, so only local clients.
        max_workers: gRPC worker threads; each open StreamChannel holds one.
        credentials: serve TLS only (:func:`server_credentials`; with a client CA, mutual
            TLS: a client without a certificate that CA signed is refused). A switch reachable
            from a shared network must use them: any client that reaches a plaintext server can
            arbitrate with a higher election id and rewrite the tables.
        max_read_entities: the most entities one Read request may return (larger answers
            are refused with RESOURCE_EXHAUSTED).

    Returns:
        the started ``grpc.Server``, with its :class:`P4RuntimeServicer` as ``server.servicer``
        (attribute added here). Shut down with ``server.stop(grace).wait()``, then
        ``server.servicer.close()`` to detach it from the switch.

    Raises:
        OSError: the address cannot be bound.

    Example::

        >>> server = serve(Switch(device_id=0, cpu_port=64), "127.0.0.1:9559")
    """
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="p4rt"))
    servicer = P4RuntimeServicer(switch, max_read_entities=max_read_entities)
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    try:
        port = (server.add_secure_port(address, credentials) if credentials is not None
                else server.add_insecure_port(address))
        problem = "" if port else ": no address could be bound"
    except RuntimeError as exc:
        port, problem = 0, f": {exc}"
    if not port:
        server.stop(grace=None)
        servicer.close()
        raise OSError(f"P4Runtime server cannot listen on {address}{problem}")
    server.start()
    server.servicer = servicer
    log.info("P4Runtime server for device %d listening on %s (%s)", switch.device_id, address,
             "plaintext" if credentials is None else "TLS")
    return server
