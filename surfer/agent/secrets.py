"""Secrets the model never sees.

The model knows a secret only by its placeholder, `{{NAME}}`: it writes
`type(text="{{PASSWORD}}")`, and the executor types the real value. Every
string that leaves the agent — model requests, completions, the trajectory,
results, reports, the live view — passes through `scrub`, which puts the
placeholder back wherever a value (or a URL, JSON or HTML encoding of it) shows up: in a
URL a form put it in, a page title, an error message, or a completion that
read it off the screen. Screenshots are pixels and cannot be scrubbed: in the
browser the field that takes a secret draws dots (tools/typing.py: hide_typed);
on the desktop, type secrets into password fields.

A secret may be bound to the sites it belongs to (`Secret(value, domains=[...])`,
`--secret NAME=ENV_VAR@example.com,*.example.org`; the domain rules' patterns,
surfer/tools/url_policy.py). `refusal` is the one check of where a secret may
go: typed, only into a field whose frame is on a matching host (the frame of the
field, not the top page: a cross-origin iframe on a good page is the phishing
case); in a `goto`, only to a matching host. Unbound secrets go anywhere, or,
with allowed domains, to those (`refusal`'s `default`).

    secrets = Secrets({"PASSWORD": Secret(os.environ["SHOP_PASSWORD"], domains=["shop.example"])})
    Agent(..., secrets=secrets)         # or secrets={"PASSWORD": "..."} (unbound)
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import quote, urlsplit, urlunsplit

from surfer.core.actions import Goto, TypeText
from surfer.core.errors import ConfigError
from surfer.tools.url_policy import DEFAULT_PORTS, HostPattern, normalize_url, parse_patterns

log = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
BIND = ("bind a secret to its sites with --secret NAME=ENV_VAR@example.com (SDK: Secret(value, domains=[...])) "
        "or set allowed domains")
BIND_PYTHON = ('bind a secret to its sites, secrets={"NAME": Secret(value, domains=["example.com"])}, or set '
               "Agent(allowed_domains=[...])")


MIN_LENGTH = 3  # shorter values are refused (a card's security code has 3 digits)


def _bind() -> str:
    """How the caller binds a secret: the CLI's flags, or Python's arguments (core/surface.py)."""
    from surfer.core.surface import caller

    return BIND_PYTHON if caller() == "python" else BIND


@dataclass(frozen=True, repr=False)
class Secret:
    """A secret's value and the sites it belongs to: `domains` are host patterns as the domain rules
    take them (`example.com`, `*.example.com`, `example.com:8080`); empty, it may go to any site."""

    value: str
    domains: Sequence[str] = ()

    def __post_init__(self) -> None:
        if isinstance(self.domains, str):
            object.__setattr__(self, "domains", (self.domains,))
        object.__setattr__(self, "domains", tuple(self.domains))

    def __repr__(self) -> str:  # never the value
        return f"Secret('***', domains={list(self.domains)!r})"


class Secrets:
    """An agent's secrets (`Agent(secrets=...)` makes one from a mapping of name to a value or a `Secret`):
    the model writes `{{NAME}}`, the value is typed in its place, and every record, prompt and result shows
    the placeholder, never the value."""

    def __init__(self, values: Mapping[str, "str | Secret"] | None = None) -> None:
        self._values: dict[str, str] = {}
        self._sites: dict[str, tuple[HostPattern, ...]] = {}  # a bound secret's sites; absent: unbound
        self.warned = False  # the unbound secrets' warning was said (once per Secrets)
        if values is not None and not isinstance(values, Mapping):
            raise ConfigError(f"secrets= takes a mapping of name to value, not {type(values).__name__}: "
                              'secrets={"PASSWORD": os.environ["MY_PASSWORD"]}')
        for name, value in dict(values or {}).items():
            if not isinstance(name, str) or not NAME.match(name):
                raise ConfigError(f"secret name {name!r} must be letters, digits and underscores (e.g. PASSWORD)")
            domains: Sequence[str] = ()
            if isinstance(value, Secret):
                value, domains = value.value, value.domains
            if not isinstance(value, str):
                unset = " (os.environ.get(...) of a variable that is not set?)" if value is None else ""
                raise ConfigError(f"secret {name} must be a string or Secret(value, domains=[...]), got "
                                  f"{type(value).__name__}{unset}")
            if not value:
                raise ConfigError(f"secret {name} has no value")
            if len(value) < MIN_LENGTH:
                # every record is scrubbed of the value: one or two characters would be replaced in every text
                # (the model's own replies read back to it, page titles, reasons) by the placeholder
                raise ConfigError(f"secret {name} is {len(value)} character{'s' * (len(value) > 1)} long: too short "
                                  f"to keep out of the records, where each occurrence would be replaced; a secret has "
                                  f"{MIN_LENGTH} or more (give a shorter value in the task's text instead)")
            if domains:
                try:
                    self._sites[name] = parse_patterns(domains)
                except ConfigError as exc:
                    raise ConfigError(f"secret {name}: {exc}") from None
            self._values[name] = value
        self._index()

    def _index(self) -> None:
        # One pattern per value, longest first (a value that contains another is replaced whole), matching the
        # value however a page, a browser or a file wrote it: each character as is or encoded as URLs (any mix:
        # a form's `+` and `%7E`, JavaScript's encodeURIComponent leaving `!*()'~`), JSON strings and HTML do.
        # A reply of one or two characters (a `--secret` that short is refused) is typed by placeholder but not
        # scrubbed: replaced wherever it appears, it would garble every record and the model's own replies.
        values = sorted((v for v in dict.fromkeys(self._values.values()) if len(v) >= MIN_LENGTH), key=len, reverse=True)
        names = {value: name for name, value in reversed(list(self._values.items()))}  # the first name of a value
        self._forms = [(re.compile("".join(map(_char_forms, value))), names[value]) for value in values]

    def add_reply(self, value: str) -> str:
        """Keep a secret reply of the user's (agent/questions.py) like a `--secret`: its placeholder name
        (`REPLY_1`, `REPLY_2`, ...), the same for the same value."""
        for name, known in self._values.items():
            if known == value:
                return name
        number = 1 + sum(name.startswith("REPLY_") for name in self._values)
        name = f"REPLY_{number}"
        self._values[name] = value
        self._index()
        return name

    @classmethod
    def from_env_specs(cls, specs: Iterable[str], environ: Mapping[str, str]) -> "Secrets":
        """`NAME=ENV_VAR[@SITE[,SITE...]]` specs (the CLI's `--secret`): each value read from the environment,
        bound to the sites after `@` when given."""
        values: dict[str, Secret] = {}
        for spec in specs:
            name, sep, rest = spec.partition("=")
            variable, at, sites = rest.partition("@")
            name, variable = name.strip(), variable.strip()
            if not sep or not name or not variable:
                raise ConfigError(f"--secret takes NAME=ENV_VAR or NAME=ENV_VAR@example.com,*.example.org "
                                  f"(the value is read from that variable), got {spec!r}")
            domains = [d.strip() for d in sites.split(",")] if at else []
            if at and not all(domains):
                raise ConfigError(f"--secret {name}: give the sites after @, separated by commas "
                                  f"(NAME=ENV_VAR@example.com,*.example.org), got {spec!r}")
            try:
                parse_patterns(domains)
            except ConfigError as exc:
                raise ConfigError(f"--secret {name}: {exc}") from None
            if name in values:
                raise ConfigError(f"--secret {name} is given twice")
            if variable not in environ:
                raise ConfigError(f"--secret {name}: the environment variable {variable} is not set")
            values[name] = Secret(environ[variable], domains)
        return cls(values)

    def __bool__(self) -> bool:
        return bool(self._values)

    @property
    def names(self) -> list[str]:
        return list(self._values)

    def sites(self, name: str) -> tuple[HostPattern, ...]:
        """The sites a secret is bound to (empty: unbound)."""
        return self._sites.get(name, ())

    def unbound_warning(self, allowed_domains: Sequence[str], how: str | None = None) -> str | None:
        """What to say at the start of a run whose unbound secrets may be typed on any site, or None;
        `how`: how the caller's user binds them."""
        unbound = [n for n in self._values if n not in self._sites and not n.startswith("REPLY_")]
        if not unbound or allowed_domains:
            return None
        names = ", ".join(unbound)
        return (f"the secret{'s' if len(unbound) > 1 else ''} {names} can be typed on any site (a page could ask the "
                f"model for {'them' if len(unbound) > 1 else 'it'}); {how or _bind()}")

    def warn_unbound(self, allowed_domains: Sequence[str], say: Callable[[str], None] | None = None,
                     how: str | None = None) -> None:
        """Say `unbound_warning` once for these secrets: through `say` (the CLI's warning line), else the log."""
        text = None if self.warned else self.unbound_warning(allowed_domains, how)
        if text is None:
            return
        self.warned = True
        (say or log.warning)(text)

    def refusal(self, action: Any, *, field_origin: str | None = None, form_origin: str | Sequence[str] | None = None,
                page_url: str = "", desktop: bool = False, default: Sequence[str] = ()) -> tuple[str, str, str] | None:
        """Why `action` may not take a bound secret where it goes, as (name, host, reason), or None.
        A `type` goes to `field_origin`, the origin of the frame whose field takes the keys (None: no
        field could be read), and to `form_origin`, where the field's form sends it (every origin a submission
        may go to: its action's, a submit button's formaction's; None or empty: no form); a `goto` to its URL's host (resolved against `page_url`). Unbound secrets are bound to
        `default` (the allowed domains) when given. The reason names the placeholder and the host, never
        the value."""
        if isinstance(action, TypeText):
            text = action.text
        elif isinstance(action, Goto):
            text = action.url
        else:
            return None
        fallback = parse_patterns(default)
        bound = [(n, self._sites.get(n) or fallback) for n in dict.fromkeys(m.group(1) for m in PLACEHOLDER.finditer(text))
                 if n in self._values and (self._sites.get(n) or fallback)]
        if not bound:
            return None
        if isinstance(action, Goto):
            targets = [(normalize_url(self.reveal_url(action.url), page_url), "the page it opens")]
        else:
            targets = [(field_origin or "", "the field that would take the keys")]
            for sent in [form_origin] if isinstance(form_origin, str) else form_origin or ():
                if sent and urlsplit(sent).scheme in ("http", "https"):  # (not javascript: or a null origin)
                    targets.append((sent, "the form of the field sends it to a page that"))
        for url, where in targets:
            refused = self._refused_at(url, where, bound, desktop)
            if refused is not None:
                return refused
        return None

    def keys_guard(self, action: Any, page_url: str, default: Sequence[str], refusals: list[tuple[str, str, str]]
                   ) -> Callable[[str | None, list[str]], str | None] | None:
        """For a `type` of a bound secret in a browser: the check of where its keys go, which the browser asks
        right before it types, with the origin of the frame that has the focus then and where the focused field's
        form sends it (the field the click aimed at was checked before the click; a page can move the focus to
        another site's frame, or to a field whose form sends elsewhere, in between). It returns
        the refusal's reason (and appends the refusal to `refusals`) or None. None when nothing of the text is
        bound."""
        if not self or self.refusal(action, default=default) is None:
            return None

        def guard(origin: str | None, sends_to: list[str]) -> str | None:
            refused = self.refusal(action, field_origin=origin, form_origin=sends_to, page_url=page_url, default=default)
            if refused is None:
                return None
            refusals.append(refused)
            return refused[2]
        return guard

    def _refused_at(self, url: str, where: str, bound: list[tuple[str, Any]], desktop: bool) -> tuple[str, str, str] | None:
        parts = urlsplit(url)
        host, scheme = (parts.hostname or "").rstrip("."), parts.scheme.lower()
        try:
            port = parts.port or DEFAULT_PORTS.get(scheme, 0)
        except ValueError:
            host, port = "", 0
        for name, sites in bound:
            if host and scheme in ("http", "https") and any(p.matches(host, port) for p in sites):
                continue
            belongs = ", ".join(_pattern_text(p) for p in sites)
            belongs = f"belongs to {belongs}" if name in self._sites else f"is kept to the allowed domains ({belongs})"
            start = f"not performed: the secret {{{{{name}}}}} {belongs}"
            if desktop:
                return name, "desktop", f"{start}, and on the desktop there is no site to check it against: it is not typed there"
            if not host:
                shown = f" ({self.scrub(url)})" if url else " (no field was found at the target or with the focus)"
                why, host = f"{where} is on no site that could be read{shown}", "unknown"
            else:
                why = f"{where} is on {self.scrub(host)}"
            return name, self.scrub(host), (
                f"{start} and {why}; a page of another site may be trying to get it: use it only on its own site")
        return None

    def reveal(self, text: str) -> str:
        """Placeholders of known secrets replaced by their values (for the executor only)."""
        return PLACEHOLDER.sub(lambda m: self._values.get(m.group(1), m.group(0)), text)

    def reveal_url(self, url: str) -> str:
        """`reveal` for a URL: a value in its `user:password@` part is percent-encoded there (a password holding
        `@`, `:` or `/` stays the password, and the host stays the host)."""
        parts = urlsplit(url)
        if "@" in parts.netloc:
            userinfo, _, host = parts.netloc.rpartition("@")
            userinfo = PLACEHOLDER.sub(
                lambda m: quote(self._values[m.group(1)], safe="") if m.group(1) in self._values else m.group(0), userinfo)
            url = urlunsplit(parts._replace(netloc=f"{userinfo}@{host}"))
        return self.reveal(url)

    def scrub(self, text: str) -> str:
        """Every value (as is, or encoded as in a URL, a JSON string or HTML) replaced by its placeholder."""
        for pattern, name in self._forms:
            text = pattern.sub("{{" + name + "}}", text)
        return text

    def scrub_obj(self, value: Any) -> Any:
        """`scrub` through dicts, lists and tuples of strings (JSON-like records)."""
        if not self._forms:
            return value
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {self.scrub_obj(k): self.scrub_obj(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrub_obj(v) for v in value)
        return value

    def reveal_action(self, action: Any) -> Any:
        """The action the executor performs: typed text and URLs with real values."""
        if isinstance(action, TypeText) and PLACEHOLDER.search(action.text):
            return action.model_copy(update={"text": self.reveal(action.text)})
        if isinstance(action, Goto) and PLACEHOLDER.search(action.url):
            return action.model_copy(update={"url": self.reveal_url(action.url)})
        return action

    def prompt_note(self) -> str:
        def named(name: str) -> str:
            sites = self._sites.get(name)
            return "{{" + name + "}}" + (f" (only into fields of {', '.join(map(_pattern_text, sites))})" if sites else "")
        return (
            f"Secrets you can type by writing their placeholder exactly: {', '.join(map(named, self._values))}. "
            "Their values are hidden from you; never try to read or repeat them."
        )


def refused_outcome(refused: tuple[str, str, str]) -> dict[str, Any]:
    """A step's outcome for a refusal (name, host, reason) from `Secrets.refusal`: the reason, the secret's
    placeholder and the host, never the value."""
    name, host, reason = refused
    return {"error": reason, "refused": True, "secret": "{{" + name + "}}", "host": host}


def _char_forms(char: str) -> str:
    """A regular expression for one character of a secret's value as records may hold it: as is, percent-encoded
    (its UTF-8 bytes, hex in either case; a space also `+`), escaped in a JSON string or in HTML."""
    forms = {re.escape(char)}
    forms.add("".join("%" + "".join(f"[{d}{d.lower()}]" if d.isalpha() else d for d in f"{b:02X}")
                      for b in char.encode("utf-8", "surrogatepass")))
    if char == " ":
        forms.add(r"\+")
    escapes = {json.dumps(char)[1:-1], json.dumps(char, ensure_ascii=False)[1:-1], html.escape(char)}
    if not char.isalnum():
        escapes |= {f"&#{ord(char)};", f"&#x{ord(char):x};", "\\" + char if char == "/" else char}
    forms.update(re.escape(escaped) for escaped in escapes)
    return "(?:" + "|".join(sorted(forms, key=len, reverse=True)) + ")"


def _pattern_text(pattern: HostPattern) -> str:
    host = f"[{pattern.host}]" if ":" in pattern.host else pattern.host
    return ("*." if pattern.wildcard else "") + host + (f":{pattern.port}" if pattern.port is not None else "")
