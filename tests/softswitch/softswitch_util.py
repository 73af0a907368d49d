"""Plain helpers the softswitch tests import by name (``from softswitch_util import ...``): the
test programs' folder, the golden P4Info files, free TCP ports. A module of its own, not
conftest.py: ``from conftest import`` finds whichever directory's conftest pytest put first on
``sys.path`` (tests/controller's, when its files are named first on one command line)."""
from __future__ import annotations

import socket
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
GOLDEN = HERE.parent / "golden"


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (bind to port 0, read it back, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
