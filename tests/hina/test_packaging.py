"""HINA as users install it: one import package ``hina`` (``pyproject.toml`` maps the checkout's
top-level folders into it), its P4 programs and generated gRPC code inside, no ``sys.path``
edits; and a wheel installed into a fresh virtual environment outside the checkout that runs
``softswitch``, ``hina-ctl`` and ``hina-worker`` end to end (push the packaged ``hina.p4``,
create a job, serve it, two workers aggregate through the switch)."""
from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_listed_and_installs_under_hina():
    """A folder with an ``__init__.py`` under a mapped folder that ``packages`` does not list
    would be missing from the wheel (while the editable install still finds it): caught here."""
    st = _pyproject()["tool"]["setuptools"]
    packages, mapping = set(st["packages"]), st["package-dir"]
    assert all(name == "hina" or name.startswith("hina.") for name in packages)
    for name, folder in mapping.items():
        base = ROOT / folder
        assert base.is_dir(), f"{name} -> {folder}: no such folder"
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(base)
            sub = ".".join((name, *rel.parts))
            # a nested folder mapped on its own (hina.testing inside hina/) is listed by its name
            assert sub in packages, f"{init.parent} holds a package that pyproject.toml omits ({sub})"


def test_package_data_covers_every_non_python_file():
    """The wheel carries the P4 programs, the proto, the grammar and v1model's includes: every
    file the code reads at run time matches a package-data pattern."""
    st = _pyproject()["tool"]["setuptools"]
    data, mapping = st["package-data"], st["package-dir"]
    missing = []
    for name, folder in mapping.items():
        base = ROOT / folder
        for path in base.rglob("*"):
            if (not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts
                    or path.name.endswith(".md") or path.name == "make_stf.py"):
                continue
            # the nearest mapped package that holds it
            rel = path.relative_to(base)
            owners = [(name, rel)] + [
                (f"{name}.{'.'.join(rel.parts[:i])}", Path(*rel.parts[i:]))
                for i in range(1, len(rel.parts))]
            if not any(Path(r).match(pattern) for owner, r in owners
                       for pattern in data.get(owner, ())):
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"not in any package-data pattern: {missing}"


def _sys_path_edits(path: Path) -> list[int]:
    """Lines of ``path`` that change ``sys.path`` (assignment, item or slice assignment,
    insert/append/extend/remove)."""
    tree = ast.parse(path.read_text(), str(path))
    lines = []

    def is_sys_path(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "path"
                and isinstance(node.value, ast.Name) and node.value.id == "sys")

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if is_sys_path(t) or (isinstance(t, ast.Subscript) and is_sys_path(t.value)):
                    lines.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and is_sys_path(node.func.value)):
            lines.append(node.lineno)
    return lines


def test_the_controller_does_not_import_torch():
    """hina-ctl runs as one process per command and the controller needs no tensors: importing
    them must not import torch (about 2 s a process). A torch import that crept in through
    hina.pipeline made the CLI's tests 4x slower."""
    code = ("import sys, hina.controller.cli, hina.controller.jobs, hina.controller.jobservice, "
            "hina.pipeline, hina.codecs; print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False", "the controller imports torch"


def test_no_sys_path_edits_anywhere(tmp_path):
    """Code imports the project through its installed name, never by editing ``sys.path``."""
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout: the file list comes from git ls-files")
    found = {f: lines for f in out.stdout.split() if (lines := _sys_path_edits(ROOT / f))}
    assert not found, f"sys.path edited in {found}"
    # the checker itself finds what it should
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nsys.path.insert(0, 'x')\nsys.path[:0] = ['y']\nprint(sys.path)\n")
    assert sorted(_sys_path_edits(probe)) == [2, 3]


# --- the wheel, installed outside the checkout ---------------------------------------------

def _free_port(kind=socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A wheel built from a copy of the checkout, installed with ``pip --no-deps`` into a new
    virtual environment outside it. The dependencies (torch, grpcio, ...) come from the test's
    own environment through a ``.pth`` file: downloading them again (GBs of torch) is not what
    this checks, and that folder holds no ``hina`` (the editable install is a finder module that
    nothing there imports)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "out", "*.egg-info", "__pycache__", ".pytest_cache",
        ".hypothesis"))
    dist = base / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist), str(src)], check=True, capture_output=True)
    wheel = next(dist.glob("hina-*.whl"))
    venv = base / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv",
                    "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True,
                   capture_output=True)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    deps = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    Path(purelib, "_hina_test_deps.pth").write_text("\n".join(deps) + "\n")
    shutil.rmtree(src)
    return venv


def _run(venv: Path, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_wheel_has_its_programs_and_commands(installed, tmp_path):
    where = _run(installed, tmp_path, "python", "-c", (
        "import json, hina, hina.controller, hina.worker, hina.softswitch, hina.programs as p;"
        "import hina.generated.jobservice_pb2;"
        "print(json.dumps([hina.controller.__file__, p.HINA_P4.is_file(),"
        " str(p.HINA_P4), (p.P4_INCLUDE / 'headers.p4').is_file()]))"))
    assert where.returncode == 0, where.stderr
    controller_file, has_p4, p4_path, has_include = json.loads(where.stdout)
    assert controller_file.startswith(str(installed)), controller_file      # not the checkout
    assert has_p4 and has_include and p4_path.startswith(str(installed))
    for tool in ("hina-ctl", "hina-worker", "softswitch"):
        done = _run(installed, tmp_path, tool, "--help")
        assert done.returncode == 0 and "usage:" in done.stdout, (tool, done.stderr)


def test_wheel_aggregates_a_job_end_to_end(installed, tmp_path):
    """softswitch (no program) on two UDP tunnel ports, ``hina-ctl pipeline push`` of the
    packaged hina.p4, ``job create``, ``serve``, and two ``hina-worker ... bench`` processes
    whose allreduce through the switch matches the exact mean."""
    grpc_addr = f"127.0.0.1:{_free_port()}"
    sw_ports = [_free_port(socket.SOCK_DGRAM) for _ in range(2)]
    wk_ports = [_free_port(socket.SOCK_DGRAM) for _ in range(2)]
    procs = []
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def start(*args: str) -> subprocess.Popen:
        proc = subprocess.Popen([str(installed / "bin" / args[0]), *args[1:]], cwd=tmp_path,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        procs.append(proc)
        return proc

    try:
        switch = start("softswitch", "--no-p4", "--log-level", "warn", "--grpc-server-addr",
                       grpc_addr, *[a for i in range(2) for a in (
                           "-i", f"{i + 1}@udp:127.0.0.1:{sw_ports[i]}@127.0.0.1:{wk_ports[i]}")])
        ctl = ["hina-ctl", "--switch", grpc_addr, "--state", str(tmp_path / "ctl.json")]
        deadline = time.monotonic() + 30
        while True:
            push = _run(installed, tmp_path, *ctl, "pipeline", "push", "-D", "HINA_WORDS=64")
            if push.returncode == 0 or time.monotonic() > deadline or switch.poll() is not None:
                break
            time.sleep(0.3)
        assert push.returncode == 0, (push.stderr, switch.poll())
        workers = [f"10.0.1.{i + 1}:40000,port={i + 1},mac=02:00:00:00:01:{i:02x},"
                   f"tunnel=127.0.0.1:{wk_ports[i]}>127.0.0.1:{sw_ports[i]}" for i in range(2)]
        create = _run(installed, tmp_path, *ctl, "job", "create", "--id", "1", "--codec",
                      "fixed", "--slots", "4", *[a for w in workers for a in ("--worker", w)])
        assert create.returncode == 0, create.stderr
        token = tmp_path / "job1.token"
        assert _run(installed, tmp_path, *ctl, "job", "token", "1", "--token-file",
                    str(token)).returncode == 0
        listen = f"127.0.0.1:{_free_port()}"
        serve = start(*ctl, "serve", "--listen", listen)
        assert "listening" in serve.stdout.readline()
        bench = [start("hina-worker", "join", "--controller", listen, "--job", "1",
                       "--token-file", str(token), "--barrier-timeout", "60", "bench",
                       "--codec", "fixed", "--size", "3000", "--rounds", "2", "--json")
                 for _ in range(2)]
        reports = []
        for proc in bench:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            reports.append(json.loads(out))
        assert sorted(r["worker_index"] for r in reports) == [0, 1]
        # fixed point at the job's scale: exact to its quantisation step, far below 1e-3
        assert all(r["max_rel_error"] is not None and r["max_rel_error"] < 1e-3 for r in reports), \
            reports
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
