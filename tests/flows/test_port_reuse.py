"""`vrag-data up` right after `down` on the same port: the stopped server's connections linger in TIME-WAIT for about
a minute, and the port check must not take them for a server (it binds as the server does, with SO_REUSEADDR);
a port something really listens on is still refused."""

from __future__ import annotations

import socket

from flows.local import port_free


def _time_wait_port() -> int:
    """A port whose server (binding as uvicorn does, SO_REUSEADDR) was closed first while a client was connected: the
    server side is now in TIME-WAIT."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    conn, _ = srv.accept()
    conn.close()  # the side that closes first keeps TIME-WAIT
    srv.close()
    cli.close()
    return port


def test_a_port_in_time_wait_is_free_and_a_listening_one_is_not():
    port = _time_wait_port()
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:  # what the check did before: a bind without SO_REUSEADDR is refused in TIME-WAIT
        plain.bind(("127.0.0.1", port))
        lingering = False
    except OSError:
        lingering = True
    finally:
        plain.close()
    assert lingering, "the kernel released the port at once: the scenario did not happen"
    assert port_free(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert not port_free(busy.getsockname()[1])
