"""A static file server on loopback, in a thread, for bundle sources over HTTP (tests, the fleet
bench): Python's http.server as it is (it ignores Range and always sends the whole file), or the
same with single-range support (`bytes=N-` / `bytes=N-M`, answered 206), as nginx or a CDN does.

    with static_server(folder, ranges=True) as server:
        open_source(server.url).latest()                      # "http://127.0.0.1:PORT/"
        server.requests, server.bytes_sent   # (method, path, status) of each; body bytes sent
        server.broken     # connections a client dropped mid-reply
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class QuietHandler(SimpleHTTPRequestHandler):
    """http.server's own handler: no Range. Logs to the server's list, not to stderr."""

    def log_message(self, format, *args):
        pass

    def log_request(self, code="-", size="-"):
        self.server.requests.append((self.command, self.path, int(getattr(code, "value", code))))

    def copyfile(self, source, outputfile):
        while block := source.read(64 * 1024):
            outputfile.write(block)
            with self.server.count_lock:
                self.server.bytes_sent += len(block)


class RangeHandler(QuietHandler):
    """Adds one byte range per request, which is all a resuming download asks for."""

    def send_head(self):
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "").strip())
        path = Path(self.translate_path(self.path))
        if match is None or not path.is_file():
            return super().send_head()
        size = path.stat().st_size
        start = int(match.group(1))
        end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
        if start >= size or end < start:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        data = open(path, "rb")  # noqa: SIM115 (closed by http.server after copyfile)
        data.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        return _Limited(data, end - start + 1)


class _Limited:
    """A file read up to `left` bytes: the rest of a range."""

    def __init__(self, data, left: int):
        self._data, self._left = data, left

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        block = self._data.read(n)
        self._left -= len(block)
        return block

    def close(self) -> None:
        self._data.close()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A client that went away mid-file (a kiosk killed while downloading) is counted, not printed."""
        self.broken += 1


@contextlib.contextmanager
def static_server(folder: str | Path, ranges: bool = True) -> Iterator[ThreadingHTTPServer]:
    """Serves `folder` on 127.0.0.1 (a port the kernel picks) until the block ends."""
    handler = functools.partial(RangeHandler if ranges else QuietHandler, directory=os.fspath(folder))
    server = _Server(("127.0.0.1", 0), handler)
    server.broken = 0
    server.daemon_threads = True
    server.requests = []
    server.bytes_sent = 0
    server.count_lock = threading.Lock()
    thread = threading.Thread(target=server.serve_forever, name="static-server", daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)

