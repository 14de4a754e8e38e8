"""Serve a local folder over HTTP on 127.0.0.1 (fixture sites, benchmarks)."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

from surfer.models.standin import QuietServer


class _QuietHandler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


class StaticSite:
    """`with StaticSite(folder) as site: site.url("index.html")`"""

    def __init__(self, folder: str | Path, host: str = "127.0.0.1", port: int = 0,
                 tls: tuple[str | Path, str | Path] | None = None) -> None:
        """`tls`: (certificate file, key file) to serve over HTTPS instead."""
        handler = functools.partial(_QuietHandler, directory=str(folder))
        self._httpd = QuietServer((host, port), handler)
        self.scheme = "http"
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
            self.scheme = "https"

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{self.scheme}://{host}:{port}/"

    def url(self, path: str = "") -> str:
        return self.base_url + path.lstrip("/")

    def __enter__(self) -> "StaticSite":
        threading.Thread(target=self._httpd.serve_forever, name="static-site", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
