"""`surfer auth`: sign-in states for runs that start signed in.

    surfer auth save https://app.example.com/login --out state.json
    surfer auth check state.json --url https://app.example.com/account [--load]

`save` opens a visible browser where you sign in (2FA included); when you
close the window or press Enter here, the browser's storage state is written
to --out (mode 0600). `check` says whether a state still signs in: from the
file alone (the cookies sent to the URL's host and when they expire), and with
--load from a real load of the URL. Exit codes: 0 saved / still signs in,
1 nothing saved / no longer signs in, 2 bad usage (no display, a bad file)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from surfer.apps import options


def register(app: typer.Typer) -> None:
    auth = typer.Typer(name="auth", no_args_is_help=True, rich_markup_mode="rich",
                       help="Sign-in states: save one by signing in yourself, check one still signs in.")
    app.add_typer(auth, name="auth")

    @auth.command("save")
    def save(
        url: str = typer.Argument(..., help="The page to start on (your app's sign-in page)."),
        out: Path = typer.Option(..., "--out", help="Where to write the storage state (JSON, mode 0600)."),
        timeout: float = typer.Option(600.0, "--timeout", min=1, help="Seconds to wait for you at most; then what there is is saved."),
        headless: bool = typer.Option(False, "--headless", hidden=True, help="(tests) No window: only Enter or --timeout end it."),
    ) -> None:
        """Open a visible browser on URL; sign in there, then close the window or press Enter here: the state is saved."""
        import asyncio
        import sys
        import threading

        from surfer.apps.exit_codes import EXIT_FAILED, EXIT_USAGE
        from surfer.core.errors import ConfigError, EnvironmentFailure
        from surfer.tools.browser.signin import record_sign_in
        from surfer.tools.browser.state import write_storage_state

        console = options.console(stderr=True)
        with options.setup_errors(console):
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"surfer auth save needs an http(s) URL, got {url!r}")
            if out.is_dir():
                raise ConfigError(f"--out {out} is a directory; name a file, e.g. {out / 'state.json'}")

        async def main() -> tuple[dict | None, str]:
            done = asyncio.Event()
            loop = asyncio.get_running_loop()

            def read_enter() -> None:  # a daemon thread: a person who closes the window never presses Enter
                if sys.stdin is not None and sys.stdin.readline():
                    loop.call_soon_threadsafe(done.set)

            threading.Thread(target=read_enter, name="surfer-auth-enter", daemon=True).start()

            async def opened(_page: object) -> None:
                options.say(console, "sign in", "bold cyan", f"in the browser window at {url}; when you are done, close "
                            "the window or press Enter here.")

            return await record_sign_in(url, headless=headless, done=done, timeout=timeout, on_open=opened)

        try:
            state, how = asyncio.run(main())
        except EnvironmentFailure as exc:
            options.say(console, "error:", "red", exc)
            raise typer.Exit(EXIT_USAGE) from None
        if state is None:
            options.say(console, "nothing saved:", "red", "the browser closed before its state could be read")
            raise typer.Exit(EXIT_FAILED)
        write_storage_state(state, out)
        cookies, origins = state.get("cookies", []), [o for o in state.get("origins", []) if o.get("localStorage")]
        domains = sorted({c.get("domain", "").lstrip(".") for c in cookies})
        options.say(console, "saved", "green", f"{len(cookies)} cookie(s) for {', '.join(domains) or 'no domain'} and the "
                    f"localStorage of {len(origins)} origin(s) to {out} (mode 0600; {how}). It signs in whoever holds it: "
                    "keep it out of version control.")
        if not cookies and not origins:
            options.say(console, "warning:", "yellow", "the state is empty: did the sign-in finish before you were done?")

    @auth.command("check")
    def check(
        state_file: Path = typer.Argument(..., help="A storage-state file (surfer auth save, --save-storage-state)."),
        url: str = typer.Option(..., "--url", help="A page that needs the sign-in (its host picks the cookies)."),
        load: bool = typer.Option(False, "--load", help="Also open URL in a headless browser with the state and look for a sign-in form."),
        expect_text: Optional[str] = typer.Option(None, "--expect-text", help="With --load: text only a signed-in page shows."),
    ) -> None:
        """Say whether a storage state still signs in to URL: its cookies' expiry, and with --load a real load."""
        import asyncio

        from surfer.apps.exit_codes import EXIT_FAILED, EXIT_OK
        from surfer.core.errors import ConfigError
        from surfer.tools.browser.state import check_state, loose_permissions, read_storage_state

        console = options.console()
        with options.setup_errors(console):
            if expect_text is not None and not load:
                raise ConfigError("--expect-text needs --load")
            state = read_storage_state(state_file)
            warning = loose_permissions(state_file)
        if warning:
            options.say(console, "warning:", "yellow", warning)
        now = time.time()
        facts = check_state(state, url)
        for cookie in facts.cookies:
            console.print(f"  {cookie.describe(now)}")
        if facts.others:
            console.print(f"  ({facts.others} cookie(s) for other hosts or paths)")
        if facts.storage_origins:
            console.print(f"  localStorage of {', '.join(facts.storage_origins)}")
        valid = facts.valid(now)
        ok = bool(valid or facts.storage_origins)
        if not facts.cookies:
            verdict = f"no cookie of this state is sent to {url}"
        elif not valid:
            verdict = f"every cookie for {url} has expired: sign in again (surfer auth save)"
        else:
            earliest = facts.earliest_expiry(now)
            verdict = f"{len(valid)} cookie(s) still valid for {url}" + (
                f"; the first expires {time.strftime('%Y-%m-%d %H:%M', time.localtime(earliest))}" if earliest else "")
        if load:
            from surfer.tools.browser.signin import probe

            seen = asyncio.run(probe(url, state, expect_text))
            ok = seen.signed_in
            what = "a sign-in form" if seen.password_field else ("the expected text missing" if seen.text_found is False else "no sign-in form")
            verdict += f"; loading it ended at {seen.url} ({seen.title!r}, HTTP {seen.status}) with {what}"
        options.say(console, "signs in:" if ok else "signed out:", "green" if ok else "red", verdict)
        raise typer.Exit(EXIT_OK if ok else EXIT_FAILED)
