"""How the test session starts its Milvus 2.3 standalone servers (test infrastructure only).

``milvus_server_command`` runs ``milvus-server`` (the ``milvus`` package's wrapper) through this
file, which changes one thing about it: ports in TIME_WAIT are bindable. The wrapper checks each
port by binding a socket without ``SO_REUSEADDR`` and silently moves a service to the next free
port when that fails. A server killed with its connections open leaves them in TIME_WAIT for
about a minute, so restarting it on the same ports (``tests/reliability/test_auth.py``) waited
62 s for nothing. The Milvus binary itself (Go) listens with ``SO_REUSEADDR``; the check here
does the same, so a port that a process still listens on is refused as before.

Shorter internal intervals were tried and left out: ``proxy.timeTickInterval`` 50 (default
200) cut a strong-consistency query on an idle server from 200 ms to 50 ms, but the idle
server then used 8-10% of a core instead of 4%, and over a whole ``make test`` the server's
CPU rose from 131 to 223 s, more than the waits it saved on two cores.

Run as a script, it is ``milvus-server`` with that check::

    python tests/milvus_service.py --data DIR [milvus-server options]
"""

from __future__ import annotations

import importlib.util
import socket
import sys
from pathlib import Path


def _listen(port: int) -> socket.socket | None:
    """A socket listening on 127.0.0.1:``port`` with ``SO_REUSEADDR``, or ``None``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
    except OSError:
        sock.close()
        return None
    return sock


def bindable(port: int) -> bool:
    """Whether ``port`` on 127.0.0.1 can be bound as the launched wrapper checks it."""
    sock = _listen(port)
    if sock is None:
        return False
    sock.close()
    return True


def milvus_server_command(data: str | Path, *options: str) -> list[str]:
    """The command that starts a test Milvus server with its data in ``data``."""
    return [sys.executable, str(Path(__file__).resolve()), "--data", str(data), *options]


def installed() -> bool:
    """Whether the ``milvus`` package (``milvus-server``) is installed."""
    return importlib.util.find_spec("milvus") is not None


def main() -> int:
    import milvus

    milvus.MilvusServerConfig.try_bind_port = lambda _config, port: _listen(port)
    sys.argv[0] = "milvus-server"
    return milvus.main() or 0


if __name__ == "__main__":
    sys.exit(main())
