"""Rows 6 and 7 of the fault suite (:mod:`hina.controller.faultsuite`): malformed requests,
drawn by hypothesis with fixed seeds, against the two gRPC servers an attacker can reach: the
embedded target's P4Runtime server and the job service (``hina-ctl serve``), over real gRPC.
What must hold: every request gets a gRPC status (no hang, no INTERNAL), and the server still
serves afterwards."""
from __future__ import annotations

import time
from collections import Counter

from hina.loopback import free_tcp_port

from .faultsuite import HINA_P4, WORDS, Row

# ------------------------------------------------------------------------------------------
# Row 6: malformed P4Runtime requests
# ------------------------------------------------------------------------------------------
ROW6_INPUT = ("hypothesis-generated Write/Read/SetForwardingPipelineConfig: random ids, match "
              "and param bytes (wrong widths, oversize), indices, election ids, device ids, "
              "random bytes as device config")
ROW6_HOLD = "every request answered with a gRPC status (no hang, no INTERNAL); server serves after"


def _hypothesis_run(strategy, n: int, body, seed: int) -> None:
    """Call ``body(example)`` for ``n`` examples of ``strategy`` drawn with a fixed seed."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    run = hypothesis_seed(seed)(settings(max_examples=n, deadline=None, database=None,
                                         phases=[Phase.generate],
                                         suppress_health_check=list(HealthCheck))(
        given(strategy)(body)))
    run()


def row_p4runtime_fuzz(requests: int, rpc_timeout_s: float = 60.0, seed: int = 6) -> Row:
    """Malformed requests against the embedded target's P4Runtime server (real gRPC)."""
    import grpc
    from hypothesis import strategies as st
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
    from hina.controller.p4runtime_client import SwitchConnection
    from hina.softswitch.compiler import compile_file
    from hina.softswitch.p4info import build_p4info
    from hina.softswitch.p4runtime_server import make_device_config, serve
    from hina.softswitch.switch import Switch
    started = time.monotonic()
    program = compile_file(str(HINA_P4), defines={"HINA_WORDS": str(WORDS)})
    p4info = build_p4info(program.info)
    known = sorted({o.preamble.id for kind in ("tables", "actions", "counters", "registers")
                    for o in getattr(p4info, kind)})
    address = f"127.0.0.1:{free_tcp_port()}"
    switch = Switch()
    server = serve(switch, address)
    with SwitchConnection(address, election_id=1) as conn:
        conn.set_pipeline(p4info, make_device_config(program))
    channel = grpc.insecure_channel(address)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    ids = st.one_of(st.sampled_from(known), st.integers(0, 2**32 - 1))
    blob = st.binary(max_size=24)
    small = st.integers(0, 3)

    @st.composite
    def entity(draw):
        e = p4runtime_pb2.Entity()
        kind = draw(st.sampled_from(("table", "register", "counter")))
        if kind == "table":
            t = e.table_entry
            t.table_id = draw(ids)
            for _ in range(draw(small)):
                m = t.match.add(field_id=draw(st.integers(0, 6)))
                which = draw(st.sampled_from(("exact", "ternary", "lpm", "range")))
                if which == "exact":
                    m.exact.value = draw(blob)
                elif which == "ternary":
                    m.ternary.value, m.ternary.mask = draw(blob), draw(blob)
                elif which == "lpm":
                    m.lpm.value, m.lpm.prefix_len = draw(blob), draw(st.integers(-5, 80))
                else:
                    m.range.low, m.range.high = draw(blob), draw(blob)
            if draw(st.booleans()):
                t.action.action.action_id = draw(ids)
                for _ in range(draw(small)):
                    t.action.action.params.add(param_id=draw(st.integers(0, 12)),
                                               value=draw(blob))
            t.priority = draw(st.integers(-2, 2**31 - 1))
        elif kind == "register":
            r = e.register_entry
            r.register_id = draw(ids)
            if draw(st.booleans()):
                r.index.index = draw(st.integers(-(2**63), 2**63 - 1))
            r.data.bitstring = draw(blob)
        else:
            c = e.counter_entry
            c.counter_id = draw(ids)
            if draw(st.booleans()):
                c.index.index = draw(st.integers(-(2**63), 2**63 - 1))
            c.data.packet_count = draw(st.integers(-(2**63), 2**63 - 1))
        return e

    @st.composite
    def request(draw):
        kind = draw(st.sampled_from(("Write", "Read", "SetForwardingPipelineConfig")))
        device = draw(st.sampled_from((0, 0, 0, 1, 2**64 - 1)))
        election = draw(st.sampled_from((0, 0, 1, 2, 2**64 - 1)))
        if kind == "Write":
            req = p4runtime_pb2.WriteRequest(device_id=device)
            req.election_id.low = election
            req.atomicity = draw(st.integers(0, 3))
            for _ in range(draw(st.integers(0, 4))):
                req.updates.add(type=draw(st.integers(0, 4))).entity.CopyFrom(draw(entity()))
        elif kind == "Read":
            req = p4runtime_pb2.ReadRequest(device_id=device)
            for _ in range(draw(st.integers(0, 3))):
                req.entities.add().CopyFrom(draw(entity()))
        else:
            req = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=device)
            req.election_id.low = election
            req.action = draw(st.integers(0, 6))
            if draw(st.booleans()):
                req.config.p4info.CopyFrom(p4info)
            req.config.p4_device_config = draw(st.binary(max_size=2048))
            req.config.cookie.cookie = draw(st.integers(0, 2**64 - 1))
        return kind, req

    codes: Counter = Counter()
    hung = internal = 0
    examples, bad, slow, hung_examples = [], [], [], []

    def body(kr):
        nonlocal hung, internal
        kind, req = kr
        batch = False
        t0 = time.monotonic()
        try:
            if kind == "Read":
                for _ in stub.Read(req, timeout=rpc_timeout_s):
                    pass
            else:
                getattr(stub, kind)(req, timeout=rpc_timeout_s)
            code = "OK"
        except grpc.RpcError as exc:
            code = exc.code().name
            batch = "updates failed" in (exc.details() or "")
            if code in ("INTERNAL", "UNKNOWN") and len(bad) < 5:
                bad.append(f"{kind}: {exc.details()}"[:300])
        codes[code] += 1
        slow.append((round(time.monotonic() - t0, 1), kind, code))
        examples.append(kind)
        hung += code == "DEADLINE_EXCEEDED"
        # UNKNOWN is the spec's code of a batch with failed updates (details per update)
        internal += code == "INTERNAL" or (code == "UNKNOWN" and not batch)

    try:
        _hypothesis_run(request(), requests, body, seed)
        # still serving: a wildcard read and the pipeline as pushed
        entries = list(stub.Read(p4runtime_pb2.ReadRequest(
            device_id=0, entities=[p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())]),
            timeout=rpc_timeout_s))
        got = stub.GetForwardingPipelineConfig(
            p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=0), timeout=rpc_timeout_s)
        serving = bool(entries) and len(got.config.p4info.tables) == len(p4info.tables)
    except Exception as exc:  # noqa: BLE001 - the finding
        serving = False
        codes[f"harness error {exc!r}"[:80]] += 1
    finally:
        channel.close()
        server.stop(grace=None).wait(5)
        server.servicer.close()
        switch.close()
    total = sum(codes.values())
    ok = total == requests and hung == 0 and internal == 0 and serving
    kinds = Counter(examples)
    held = (f"{total}/{requests} answered ({', '.join(f'{k} {v}' for k, v in codes.most_common())}); "
            f"{hung} hung, {internal} INTERNAL (UNKNOWN only for failed batches, as the spec says); "
            f"{'still serving' if serving else 'NOT serving'}; slowest answer "
            f"{max(slow)[0] if slow else 0} s")
    return Row("P4Runtime fuzz", "embedded", ROW6_INPUT, requests, ROW6_HOLD, held, ok,
               time.monotonic() - started, {"codes": dict(codes), "kinds": dict(kinds), "internal_examples": bad,
                "slowest": sorted(slow, reverse=True)[:5], "hung_examples": hung_examples})


# ------------------------------------------------------------------------------------------
# Row 7: malformed job-service requests
# ------------------------------------------------------------------------------------------
ROW7_INPUT = ("hypothesis-generated Join/Barrier/Heartbeat/Leave: random job ids, sessions, "
              "barrier names and timeouts (NaN, inf, negative), garbage tokens and metadata")
ROW7_HOLD = "every request answered with a gRPC status (no hang, no INTERNAL); service serves after"
JOB_TOKEN = "fault-suite-token"


def row_jobservice_fuzz(requests: int, rpc_timeout_s: float = 20.0, seed: int = 7) -> Row:
    """Malformed requests against the job service (``controller.jobservice.serve``, real gRPC)."""
    import grpc
    from hypothesis import strategies as st
    from hina.controller.config import JobConfig, WorkerConfig
    from hina.controller.jobservice import serve
    from hina.generated import jobservice_pb2 as pb
    from hina.generated import jobservice_pb2_grpc as pb_grpc
    started = time.monotonic()
    workers = tuple(WorkerConfig(ip=f"10.0.1.{w}", udp_port=40000 + w, port=w + 1,
                                 mac=f"02:00:00:00:01:{w:02x}") for w in range(2))
    jobs = {1: JobConfig(job_id=1, codec="fixed", workers=workers, n_slots=4, words=WORDS)}
    address = f"127.0.0.1:{free_tcp_port()}"
    server = serve(lambda: jobs, address, lease_s=5.0, tokens=lambda: dict.fromkeys(jobs, JOB_TOKEN))
    channel = grpc.insecure_channel(address)
    stub = pb_grpc.JobServiceStub(channel)
    job_ids = st.one_of(st.just(1), st.integers(0, 2**32 - 1))
    text = st.text(max_size=40)
    tokens = st.one_of(st.just(f"Bearer {JOB_TOKEN}"), st.just(JOB_TOKEN), st.just("Bearer "),
                       st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126),
                               max_size=60))
    timeouts = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                         st.floats(-1.0, 0.3))

    @st.composite
    def request(draw):
        kind = draw(st.sampled_from(("Join", "Barrier", "Heartbeat", "Leave")))
        job_id = draw(job_ids)
        session = draw(st.one_of(text, st.just("")))
        if kind == "Join":
            req = pb.JoinRequest(job_id=job_id, ip=draw(text), udp_port=draw(st.integers(0, 2**32 - 1)),
                                 name=draw(text))
        elif kind == "Barrier":
            req = pb.BarrierRequest(job_id=job_id, session=session, name=draw(text),
                                    timeout_s=draw(timeouts))
        elif kind == "Heartbeat":
            req = pb.HeartbeatRequest(job_id=job_id, session=session)
        else:
            req = pb.LeaveRequest(job_id=job_id, session=session)
        metadata = []
        if draw(st.booleans()):
            metadata.append(("authorization", draw(tokens)))
        if draw(st.booleans()):
            metadata.append(("x-garbage-bin", draw(st.binary(max_size=32))))
        return kind, req, tuple(metadata)

    codes: Counter = Counter()
    hung = internal = 0
    bad = []

    def body(krm):
        nonlocal hung, internal
        kind, req, metadata = krm
        try:
            getattr(stub, kind)(req, timeout=rpc_timeout_s, metadata=metadata)
            code = "OK"
        except grpc.RpcError as exc:
            code = exc.code().name
            if code in ("INTERNAL", "UNKNOWN") and len(bad) < 5:
                bad.append(f"{kind}: {exc.details()}"[:300])
        codes[code] += 1
        hung += code == "DEADLINE_EXCEEDED"
        internal += code in ("INTERNAL", "UNKNOWN")

    try:
        _hypothesis_run(request(), requests, body, seed)
        # still serving: a real worker joins with the token and leaves
        meta = (("authorization", f"Bearer {JOB_TOKEN}"),)
        reply = None
        try:
            reply = stub.Join(pb.JoinRequest(job_id=1, ip="10.0.1.1", udp_port=40001),
                              timeout=rpc_timeout_s, metadata=meta)
        except grpc.RpcError as exc:   # the seat may be held by a fuzzed Join: that is serving
            serving = exc.code() in (grpc.StatusCode.ALREADY_EXISTS,
                                     grpc.StatusCode.RESOURCE_EXHAUSTED,
                                     grpc.StatusCode.FAILED_PRECONDITION)
        else:
            stub.Leave(pb.LeaveRequest(job_id=1, session=reply.session), timeout=rpc_timeout_s,
                       metadata=meta)
            serving = reply.job_id == 1
    finally:
        channel.close()
        server.stop(grace=None).wait(5)
    total = sum(codes.values())
    ok = total == requests and hung == 0 and internal == 0 and serving
    held = (f"{total}/{requests} answered ({', '.join(f'{k} {v}' for k, v in codes.most_common())}); "
            f"{hung} hung, {internal} INTERNAL/UNKNOWN; "
            f"{'still serving' if serving else 'NOT serving'}")
    return Row("job service fuzz", "embedded", ROW7_INPUT, requests, ROW7_HOLD, held, ok,
               time.monotonic() - started, {"codes": dict(codes), "internal_examples": bad})
