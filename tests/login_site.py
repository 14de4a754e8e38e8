"""A site behind a login for the signed-in tests: its pages need a server-side
session, made only by a real login form POST (a random `sid` cookie, HttpOnly);
a signed-out visit to /account is redirected to /login. The server counts the
sign-ins it saw, so a test can tell a run that typed the password from one that
started signed in.

`AcmeOracle` is the ground-truth model for it and acts only as a vision model
could: the policy reads the page's title and URL and its own history (what it
typed), the localizer answers the centres of the fields as drawn (measured once
in a real Chromium, `measure_login`), and the answer is what /account shows."""

from __future__ import annotations

import base64
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from surfer.models.standin import QuietServer

USER, PASSWORD, ORDER = "alice", "correct horse 42", "AB-7741"
BASIC_AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()  # /staging/account wants it
VIEWPORT = (1100, 700)  # the signed-in tests' viewport
TASK = "Open my account and report my latest order number."
USERNAME_FIELD, PASSWORD_FIELD = "the 'Username' text field", "the 'Password' text field"
FIELDS = {USERNAME_FIELD: "#username", PASSWORD_FIELD: "#password"}

LOGIN_PAGE = """<!doctype html><html><head><title>Sign in — Acme Books</title><link rel="icon" href="data:,"></head>
<body style="margin:0;font:18px sans-serif">
<h1 style="position:absolute;left:100px;top:20px;margin:0">Sign in to Acme Books</h1>
<form method="post" action="/login">
  <input type="hidden" name="next" value="{next}">
  <label style="position:absolute;left:100px;top:90px">Username</label>
  <input id="username" name="username" autocomplete="off" style="position:absolute;left:100px;top:120px;width:300px;height:36px;font:18px sans-serif">
  <label style="position:absolute;left:100px;top:180px">Password</label>
  <input id="password" name="password" type="password" style="position:absolute;left:100px;top:210px;width:300px;height:36px;font:18px sans-serif">
  <button id="submit" style="position:absolute;left:100px;top:270px;width:120px;height:40px">Sign in</button>
</form>
<p style="position:absolute;left:100px;top:330px;color:#b00">{error}</p>
</body></html>"""

ACCOUNT_PAGE = """<!doctype html><html><head><title>Account — Acme Books</title><link rel="icon" href="data:,"></head>
<body style="margin:40px;font:20px sans-serif"><h1>Welcome back, {user}</h1><p>Your latest order: <b>{order}</b></p>
<script>localStorage.setItem("acme.visited", "{visit}")</script></body></html>"""

BEACON_PAGE = """<!doctype html><html><head><title>Beacon — Acme Books</title><link rel="icon" href="data:,"></head>
<body><p>A page that loads an image from another host.</p><img src="{other}/pixel.gif" width="1" height="1"></body></html>"""

PREFS_PAGE = """<!doctype html><html><head><title>Preferences — Acme Books</title><link rel="icon" href="data:,"></head>
<body><p>Theme saved.</p><script>localStorage.setItem("acme.theme", "dark-{visit}")</script></body></html>"""


@dataclass
class AcmeSite:
    """`with AcmeSite() as site:` serves the site on 127.0.0.1; `site.logins` counts sign-ins."""

    sessions: dict[str, str] = field(default_factory=dict)
    logins: int = 0
    pixels: list[str] = field(default_factory=list)  # the Host header of each /pixel.gif request

    def __post_init__(self) -> None:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: str = "", headers: dict[str, str] | None = None, kind: str = "text/html") -> None:
                data = body.encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", f"{kind}; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def _user(self) -> str | None:
                match = re.search(r"(?:^|;\s*)sid=([0-9a-f]+)", self.headers.get("Cookie", ""))
                return site.sessions.get(match.group(1)) if match else None

            def do_GET(self) -> None:  # noqa: N802
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                if parts.path == "/login":
                    self._send(200, LOGIN_PAGE.format(next=query.get("next", ["/account"])[0], error=""))
                elif parts.path == "/account":
                    user = self._user()
                    if user is None:
                        self._send(303, headers={"Location": "/login?next=/account"})
                    else:
                        self._send(200, ACCOUNT_PAGE.format(user=user.title(), order=ORDER, visit=secrets.token_hex(8)))
                elif parts.path == "/staging/account":  # behind an HTTP sign-in, as a staging server is
                    if self.headers.get("Authorization") != BASIC_AUTH:
                        self._send(401, "sign in", headers={"WWW-Authenticate": 'Basic realm="staging"'})
                    else:
                        self._send(200, ACCOUNT_PAGE.format(user=USER.title(), order=ORDER, visit=secrets.token_hex(8)))
                elif parts.path == "/go":  # a redirect to anywhere (?to=URL)
                    self._send(302, headers={"Location": query.get("to", ["/"])[0]})
                elif parts.path == "/beacon":
                    self._send(200, BEACON_PAGE.format(other=query.get("other", [""])[0]))
                elif parts.path == "/pixel.gif":
                    site.pixels.append(self.headers.get("Host", ""))
                    self._send(200, "", kind="image/gif")
                elif parts.path == "/prefs":
                    self._send(200, PREFS_PAGE.format(visit=secrets.token_hex(4)),
                               headers={"Set-Cookie": "theme=dark; Path=/; Max-Age=86400"})
                else:
                    self._send(404, "not found")

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                if urlsplit(self.path).path != "/login":
                    self._send(404, "not found")
                    return
                nxt = form.get("next", ["/account"])[0]
                if form.get("username", [""])[0] == USER and form.get("password", [""])[0] == PASSWORD:
                    site.logins += 1
                    sid = secrets.token_hex(16)
                    site.sessions[sid] = USER
                    self._send(303, headers={"Location": nxt, "Set-Cookie": f"sid={sid}; Path=/; HttpOnly; Max-Age=3600; SameSite=Lax"})
                else:
                    self._send(200, LOGIN_PAGE.format(next=nxt, error="Wrong username or password"))

        self._httpd = QuietServer(("127.0.0.1", 0), Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def sign_in_state(self) -> dict[str, Any]:
        """A Playwright storage state made from a real sign-in (the form's POST, by HTTP): the server's session cookie."""
        import http.client
        from urllib.parse import urlencode

        connection = http.client.HTTPConnection("127.0.0.1", self._httpd.server_address[1], timeout=10)
        connection.request("POST", "/login", urlencode({"username": USER, "password": PASSWORD, "next": "/account"}),
                           {"Content-Type": "application/x-www-form-urlencoded"})
        response = connection.getresponse()
        response.read()
        sid = re.search(r"sid=([0-9a-f]+)", response.getheader("Set-Cookie") or "")
        assert sid is not None, response.status
        import time

        cookie = {"name": "sid", "value": sid.group(1), "domain": "127.0.0.1", "path": "/", "expires": time.time() + 3600,
                  "httpOnly": True, "secure": False, "sameSite": "Lax"}
        return {"cookies": [cookie], "origins": []}

    def __enter__(self) -> "AcmeSite":
        threading.Thread(target=self._httpd.serve_forever, name="acme-site", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


async def measure_login(site: AcmeSite, viewport: tuple[int, int], browser: Any) -> dict[str, Any]:
    """Where the login form's fields are drawn (CSS px centres), measured in `browser` (a context of its own)."""
    from surfer.core.actions import CssPoint

    context = await browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    try:
        page = await context.new_page()
        await page.goto(site.url("/login"))
        centres = {}
        for target, selector in FIELDS.items():
            box = await page.locator(selector).bounding_box()
            assert box is not None
            centres[target] = CssPoint(x=box["x"] + box["width"] / 2, y=box["y"] + box["height"] / 2)
        return centres
    finally:
        await context.close()


_TARGET = re.compile(r"Target: (.+)")
_ANSWER = re.compile(r'Proposed answer: "(.*)"')


@dataclass
class AcmeOracle:
    """The ground-truth model of the Acme site (see the module's docstring)."""

    centres: dict[str, Any]
    to_frame: Any  # oracle.frame_mapper(...)
    secret: str = "PASSWORD"  # the placeholder the password is typed as ({{PASSWORD}}): the model never knows it
    calls: dict[str, int] = field(default_factory=dict)

    def __call__(self, request: Any) -> Any:
        self.calls[request.role] = self.calls.get(request.role, 0) + 1
        return getattr(self, request.role)(request)

    def policy(self, request: Any) -> dict[str, Any]:
        text = request.text
        location = text.rsplit("Current page:", 1)[-1].strip().splitlines()[0] if "Current page:" in text else ""
        history = text.split("History:", 1)[-1].rsplit("Current page:", 1)[0]
        if location.startswith("Account"):
            return {"thought": "The account page shows the order.", "notes": "", "action": {"type": "answer", "text": ORDER}}
        if location.startswith("Sign in"):
            if f"text={USER!r}" not in history:
                action = {"type": "type", "text": USER, "target": USERNAME_FIELD, "clear": True}
            else:
                action = {"type": "type", "text": "{{" + self.secret + "}}", "target": PASSWORD_FIELD, "clear": True, "submit": True}
            return {"thought": "The site asks me to sign in.", "notes": "", "action": action}
        return {"thought": "Not where I expected.", "notes": "", "action": {"type": "fail", "reason": f"lost at {location}"}}

    def localizer(self, request: Any) -> dict[str, Any]:
        match = _TARGET.search(request.last_text)
        target = match.group(1).strip() if match else ""
        if target not in self.centres:
            return {"x": 0, "y": 0}
        x, y = self.to_frame(self.centres[target], request.image_size(-1))
        return {"x": x, "y": y}

    def validator(self, request: Any) -> dict[str, Any]:
        match = _ANSWER.search(request.last_text)
        if match and match.group(1) == ORDER:
            return {"verdict": "accept", "reasons": "The account page shows this order number."}
        return {"verdict": "reject", "reasons": "That is not the order number shown."}
