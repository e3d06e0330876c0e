"""Throwaway local servers that are not dask schedulers, for the tests of a --scheduler address: an HTTP
server (as dask's dashboard and ``python3 -m http.server`` are) and a service that greets every connection
with bytes of its own (an SSH banner).  Each listens on a free port of 127.0.0.1 and stops with its block."""
from __future__ import annotations

import http.server
import socket
import threading
from contextlib import contextmanager


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def http_server():
    """Yields the tcp:// address of an HTTP server running in a thread of this process."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def banner_server(banner: bytes = b"SSH-2.0-OpenSSH_8.9\r\n"):
    """Yields the tcp:// address of a service that sends ``banner`` to every connection and keeps it open."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    conns, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.sendall(banner)
            conns.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for c in conns:
            c.close()
        listener.close()
