"""The ``softswitch`` command line: a real process with UDP ports and a P4Runtime server."""
from __future__ import annotations

import os
import queue
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from scapy.utils import rdpcap

from l3fwd_util import (FORWARD, H2_IP, H2_MAC, IPV4_BITS, PROGRAM, TABLE, compile_l3fwd,
                        forwarded, free_tcp_port, ipv4_frame, mac_to_int, udp_endpoint)
from hina.softswitch import cli
from hina.softswitch.p4info import build_p4info, read_p4info_text
from hina.softswitch.p4runtime_server import encode_bytes, make_device_config

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60          # compiling and importing grpc on a loaded 2-core machine
STOP_TIMEOUT_S = 10
RPC_TIMEOUT_S = 10
DEVICE_ID = 0
ELECTION_ID = p4runtime_pb2.Uint128(high=0, low=1)
READY = re.compile(r"^softswitch ready: device (\d+), ports (.*), P4Runtime (\S+)$")
UDP_PORT_IN_READY = re.compile(r"(\d+)@udp:([\d.]+):(\d+)")


def softswitch(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hina.softswitch", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


def wait_ready(proc: subprocess.Popen) -> re.Match:
    """The ready line's match; fails with the process's stderr if it exits or never gets ready."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        readable, _, _ = select.select([proc.stdout], [], [], 0.2)
        if readable:
            line = proc.stdout.readline()
            if line:
                match = READY.match(line.strip())
                assert match, f"unexpected output {line!r}"
                return match
        if proc.poll() is not None:
            pytest.fail(f"softswitch exited with {proc.returncode}: {proc.stderr.read()}")
    proc.kill()
    pytest.fail("softswitch did not print its ready line")


def stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"softswitch ignored signal {sig}")
    return proc.returncode, proc.stderr.read()


@pytest.fixture
def processes():
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            stream.close()


class Controller:
    """The smallest P4Runtime client: become primary, push the pipeline, insert entries."""

    def __init__(self, address: str):
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.requests: "queue.Queue" = queue.Queue()
        self.stream = self.stub.StreamChannel(iter(self.requests.get, None))
        self.requests.put(p4runtime_pb2.StreamMessageRequest(
            arbitration=p4runtime_pb2.MasterArbitrationUpdate(device_id=DEVICE_ID,
                                                              election_id=ELECTION_ID)))
        reply = next(self.stream)
        assert reply.arbitration.status.code == grpc.StatusCode.OK.value[0]

    def set_pipeline(self, program) -> None:
        self.p4info = build_p4info(program.info)
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, election_id=ELECTION_ID,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        request.config.p4info.CopyFrom(self.p4info)
        request.config.p4_device_config = make_device_config(program)
        self.stub.SetForwardingPipelineConfig(request, timeout=RPC_TIMEOUT_S)

    def _id(self, objects, name: str) -> int:
        return next(o.preamble.id for o in objects if o.preamble.name == name)

    def add_route(self, ip: str, mac: str, port: int) -> None:
        entry = p4runtime_pb2.TableEntry(table_id=self._id(self.p4info.tables, TABLE))
        match = entry.match.add(field_id=1)
        match.lpm.value = encode_bytes(int.from_bytes(bytes(map(int, ip.split("."))), "big"))
        match.lpm.prefix_len = IPV4_BITS
        entry.action.action.action_id = self._id(self.p4info.actions, FORWARD)
        entry.action.action.params.add(param_id=1, value=encode_bytes(mac_to_int(mac)))
        entry.action.action.params.add(param_id=2, value=encode_bytes(port))
        request = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID, election_id=ELECTION_ID)
        update = request.updates.add(type=p4runtime_pb2.Update.INSERT)
        update.entity.table_entry.CopyFrom(entry)
        self.stub.Write(request, timeout=RPC_TIMEOUT_S)

    def close(self) -> None:
        self.requests.put(None)
        self.stream.cancel()
        self.channel.close()


# -- running a switch --------------------------------------------------------------------------
def test_switch_process_forwards_traces_captures_and_stops_on_sigterm(processes, tmp_path):
    h1, h2 = udp_endpoint(), udp_endpoint()
    grpc_addr = f"127.0.0.1:{free_tcp_port()}"
    pcap_dir = tmp_path / "pcap"
    proc = softswitch(str(PROGRAM), "-i", "1@udp:127.0.0.1:0",
                      "-i", f"2@udp:127.0.0.1:0@127.0.0.1:{h2.getsockname()[1]}",
                      "--grpc-server-addr", grpc_addr, "--device-id", str(DEVICE_ID),
                      "--pcap", str(pcap_dir), "--log-level", "trace",
                      "--log-file", str(tmp_path / "switch.log"))
    processes.append(proc)
    ready = wait_ready(proc)
    assert ready.group(3) == grpc_addr
    ports = {int(n): (host, int(port)) for n, host, port in UDP_PORT_IN_READY.findall(ready[2])}
    assert sorted(ports) == [1, 2]

    controller = Controller(grpc_addr)
    try:
        controller.set_pipeline(compile_l3fwd())
        controller.add_route(H2_IP, H2_MAC, 2)
        frame = ipv4_frame()
        h1.sendto(frame, ports[1])
        assert h2.recvfrom(65535)[0] == forwarded(frame, H2_MAC)
    finally:
        controller.close()
        h1.close()
        h2.close()

    returncode, stderr = stop(proc)
    assert returncode == 0, stderr
    assert "Traceback" not in stderr
    trace = (tmp_path / "switch.log").read_text()
    assert "MyIngress.ipv4_lpm" in trace         # the per-packet trace names the table it hit
    port1_in = pcap_dir / "udp_127.0.0.1_{}_in.pcap".format(ports[1][1])
    assert [bytes(p) for p in rdpcap(str(port1_in))] == [frame]


def test_switch_without_program_stops_on_sigint(processes):
    proc = softswitch("--no-p4", "--grpc-server-addr", f"127.0.0.1:{free_tcp_port()}")
    processes.append(proc)
    ready = wait_ready(proc)
    assert ready.group(2) == "none"
    returncode, stderr = stop(proc, signal.SIGINT)
    assert returncode == 0, stderr
    assert "Traceback" not in stderr


# -- compile -----------------------------------------------------------------------------------
def test_compile_writes_p4info_and_device_config(tmp_path):
    p4info_path, config_path = tmp_path / "l3fwd.p4info.txt", tmp_path / "l3fwd.json"
    assert cli.main(["compile", str(PROGRAM), "--p4info", str(p4info_path),
                     "--device-config", str(config_path)]) == 0
    p4info = read_p4info_text(str(p4info_path))
    assert [t.preamble.name for t in p4info.tables] == [TABLE]
    assert FORWARD in [a.preamble.name for a in p4info.actions]
    assert config_path.read_bytes() == make_device_config(compile_l3fwd())


def test_compile_error_is_one_located_line(tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text(PROGRAM.read_text().replace("ipv4_lpm.apply();", "ipv4_lpm.apply()"))
    result = subprocess.run([sys.executable, "-m", "hina.softswitch", "compile", str(bad),
                             "--p4info", str(tmp_path / "out.txt")],
                            cwd=REPO, capture_output=True, text=True, timeout=READY_TIMEOUT_S)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert re.match(rf"softswitch: {re.escape(str(bad))}:\d+:\d+: error: ", lines[0]), lines[0]
    assert not (tmp_path / "out.txt").exists()


# -- bad arguments -----------------------------------------------------------------------------
def test_bad_argument_in_a_process_is_one_line_exit_2():
    result = subprocess.run([sys.executable, "-m", "hina.softswitch", "--no-p4", "-i", "x@eth0"],
                            cwd=REPO, capture_output=True, text=True, timeout=READY_TIMEOUT_S)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "port number 'x'" in result.stderr


@pytest.mark.parametrize("argv, message", [
    ([], "one of the arguments program --no-p4 is required"),
    (["--no-p4", "prog.p4"], "not allowed with"),
    (["--no-p4", "--log-level", "loud"], "invalid choice"),
    (["--no-p4", "-i", "1@udp:127.0.0.1"], "HOST:PORT"),
    (["--no-p4", "--loss", "1:2.0"], "between 0 and 1"),
    (["--no-p4", "-D", "1X=2"], "NAME or NAME=VALUE"),
    (["compile", "prog.p4"], "--p4info"),
    (["stf", "only.stf"], "required"),
])
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize("argv, message", [
    (["--no-p4", "-i", "1@udp:127.0.0.1:0", "-i", "1@udp:127.0.0.1:0"], "port number 1 is given twice"),
    (["--no-p4", "-i", "1@udp:127.0.0.1:0", "--loss", "2:0.5"], "there is no port 2"),
    (["--no-p4", "-i", "1@nosuchif0"], "no network interface named 'nosuchif0'"),
    (["compile", "/nonexistent/x.p4", "--p4info", os.devnull], "/nonexistent/x.p4"),
])
def test_runtime_errors_exit_1_with_one_line(argv, message, capsys):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
