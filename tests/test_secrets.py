"""Secrets the model never sees: the model writes {{NAME}}, the executor types
the value, and the value appears in no request the model server received and
in no file the run wrote — even after a form put it into the URL, a script
into the URL's fragment and the page into its title."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile

import pytest
from inprocess import surfer

import surfer as surfer_pkg
from surfer.agent.secrets import Secret, Secrets
from surfer.core.actions import Goto, TypeText
from surfer.core.errors import ConfigError

VALUE = 'hunter 2*Zq~9!x&"y\\'  # characters that URL encoding, JSON and HTML change, each in its own way
# the value as records may hold it: as is, as Python, a browser's form and a script's encodeURIComponent encode it
# in a URL (the last two leave different characters as they are), in a JSON string and in HTML
LEAKS = (VALUE, "hunter%202%2AZq~9%21x%26%22y%5C", "hunter+2*Zq%7E9%21x%26%22y%5C", "hunter%202*Zq~9!x%26%22y%5C",
         'hunter 2*Zq~9!x&\\"y\\\\', "hunter 2*Zq~9!x&amp;&quot;y\\")


def sign_in(request):  # type: ignore[no-untyped-def]
    if request.role == "localizer":
        return {"x": 195, "y": 150}  # the password field's centre, 0..1000 of 1280x800
    if request.role == "validator":
        return {"verdict": "accept", "reasons": "the page says signed in"}
    if "Signed in" in request.text:
        # A model that read the value off the screen and repeats it: scrubbed on the way in.
        return {"thought": f"done; I typed {VALUE}", "notes": f"password was {VALUE}", "action": {"type": "answer", "text": "signed in"}}
    return {"thought": "type the password", "notes": "",
            "action": {"type": "type", "text": "{{PASSWORD}}", "target": "the password field", "submit": True}}


def test_the_value_reaches_the_page_and_nothing_else(standin, pages, tmp_path):
    server = standin(sign_in)
    env = {**os.environ, "NO_COLOR": "1", "SHOP_PASSWORD": VALUE, "SHOP_USER": "alice"}
    for key in ("SURFER_BASE_URL", "SURFER_MODEL", "SURFER_API_KEY", "SURFER_PROFILE"):
        env.pop(key, None)
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "surfer", "run", f"Sign in with the password {VALUE}", "--url", pages.url("login.html"),
         "--base-url", server.base_url, "--model", server.model, "--profile", "holo2", "--out", str(run_dir),
         "--secret", "PASSWORD=SHOP_PASSWORD@127.0.0.1", "--secret", "USER=SHOP_USER", "--json", "--trace", "on"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    # the executor typed the real value: the page put it into its title, which the record shows scrubbed
    assert steps[1]["title"] == "Signed in with {{PASSWORD}}"
    assert "pw={{PASSWORD}}" in steps[1]["url"] and steps[1]["url"].endswith("#echo={{PASSWORD}}")
    assert steps[0]["action"]["text"] == "{{PASSWORD}}"
    # the model was told which placeholders it may use
    assert "{{PASSWORD}}" in server.requests[0].text
    for request in server.requests:
        body = json.dumps(request.body, ensure_ascii=False)
        assert not any(form in body for form in LEAKS), request.role
    written = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"trajectory.jsonl", "result.json", "report.html", "run.json", "trace.zip"}
    with zipfile.ZipFile(run_dir / "trace.zip") as trace:  # its network log, page snapshots, typed text
        files = {f"trace.zip:{name}": trace.read(name) for name in trace.namelist()}
    for name, data in {**{str(p): p.read_bytes() for p in written}, **files}.items():
        assert not any(form.encode() in data for form in LEAKS), name
    for stream in (proc.stdout, proc.stderr):
        assert not any(form in stream for form in LEAKS)
    result = json.loads(proc.stdout)
    assert result["task"] == "Sign in with the password {{PASSWORD}}"
    # PASSWORD is bound to 127.0.0.1 (typed there: it worked); USER is not, which is said once, at the start
    warning = [line for line in proc.stderr.splitlines() if "can be typed on any site" in line]
    assert len(warning) == 1 and warning[0].startswith("warning: the secret USER ") and "PASSWORD" not in warning[0]
    assert "--secret NAME=ENV_VAR@example.com" in warning[0]


def test_secret_specs_and_values():
    secrets = Secrets.from_env_specs(["PW=SHOP_PW"], {"SHOP_PW": "s3cret"})
    assert secrets.reveal("user {{PW}} / {{ PW }} / {{OTHER}}") == "user s3cret / s3cret / {{OTHER}}"
    assert secrets.scrub("a s3cret b") == "a {{PW}} b"
    assert secrets.scrub_obj({"k": ["s3cret", ("x s3cret",)], "n": 1}) == {"k": ["{{PW}}", ("x {{PW}}",)], "n": 1}
    typed = secrets.reveal_action(TypeText(text="{{PW}}"))
    assert typed.text == "s3cret" and secrets.reveal_action(Goto(url="https://h/?k={{PW}}")).url == "https://h/?k=s3cret"
    overlapping = Secrets({"A": "abc", "B": "abcdef"})
    assert overlapping.scrub("abcdef abc") == "{{B}} {{A}}"
    with pytest.raises(ConfigError, match="not set"):
        Secrets.from_env_specs(["PW=NOPE"], {})
    with pytest.raises(ConfigError, match="NAME=ENV_VAR"):
        Secrets.from_env_specs(["PW"], {})
    with pytest.raises(ConfigError, match="letters, digits"):
        Secrets({"my-pw": "x"})
    # a one-character secret replaced that character in every record and in the model's replies read back to it
    with pytest.raises(ConfigError, match="secret PW is 1 character long: too short to keep out of the records"):
        Secrets.from_env_specs(["PW=SHOP_PW"], {"SHOP_PW": "x"})
    assert Secrets({"CVC": "123"}).scrub("code 123") == "code {{CVC}}"
    # a secret reply that short is typed by its placeholder but not scrubbed (every "42" in every record became one)
    replied = Secrets({"CVC": "123"})
    assert replied.add_reply("42") == "REPLY_1" and replied.reveal("{{REPLY_1}}") == "42"
    assert replied.scrub("step 42: 123") == "step 42: {{CVC}}"
    mixed_forms = "q=a+b%7ec%C3%A9&r=a%20b~c%c3%a9&j=\"a b~c\\u00e9\"&h=x&amp;y"  # a form's, a script's, JSON, HTML
    assert Secrets({"PW": "a b~cé", "H": "x&y"}).scrub(mixed_forms) == "q={{PW}}&r={{PW}}&j=\"{{PW}}\"&h={{H}}"
    bound = Secrets.from_env_specs(["PW=SHOP_PW@example.com, *.example.org:8443"], {"SHOP_PW": "s3cret"})
    assert [str(p.host) for p in bound.sites("PW")] == ["example.com", "example.org"] and bound.scrub("s3cret") == "{{PW}}"
    assert surfer_pkg.Secret is Secret and bound.unbound_warning([]) is None and "Secret('***'" in repr(Secret("s3cret", ["example.com"]))
    for spec, error in (("PW=SHOP_PW@", "give the sites after @"), ("PW=SHOP_PW@a.com,", "give the sites after @"),
                        ("PW=SHOP_PW@https://a.com/", "--secret PW: domain pattern 'https://a.com/' is not a host")):
        with pytest.raises(ConfigError, match=re.escape(error)):
            Secrets.from_env_specs([spec], {"SHOP_PW": "s3cret"})
    with pytest.raises(ConfigError, match="secret PW: domain pattern"):
        Secrets({"PW": Secret("s3cret", domains=["a.com/login"])})
    with pytest.raises(ConfigError, match=re.escape("secret PW must be a string or Secret(value, domains=[...]), got tuple")):
        Secrets({"PW": ("s3cret", ["a.com"])})
    with pytest.raises(ConfigError, match="--secret PW is given twice"):
        Secrets.from_env_specs(["PW=SHOP_PW@a.com", "PW=SHOP_PW"], {"SHOP_PW": "s3cret"})
    # where a bound secret may go (a real browser's cases: test_a_bound_secret_goes_only_to_its_site)
    mixed = Secrets({"PW": Secret("s3cret", ["*.shop.example", "login.example:8443"]), "U": "alice"})
    type_pw = TypeText(text="{{PW}}")
    assert mixed.refusal(type_pw, field_origin="https://www.shop.example") is None
    assert mixed.refusal(type_pw, field_origin="https://login.example:8443") is None
    assert mixed.refusal(type_pw, field_origin="https://login.example")[1] == "login.example"  # not that port
    assert mixed.refusal(Goto(url="/next?pw={{PW}}"), page_url="https://shop.example/a") is None  # resolved on the page
    assert mixed.refusal(Goto(url="https://{{PW}}.evil.example/"))[1] == "{{PW}}.evil.example"  # never the value
    assert mixed.refusal(type_pw, field_origin="null")[1] == "unknown"  # a sandboxed frame, a data: page
    # a field on its site whose form sends elsewhere: refused by where the form sends it (javascript: actions pass)
    sent = mixed.refusal(type_pw, field_origin="https://www.shop.example", form_origin="https://collect.evil.example")
    assert sent[1] == "collect.evil.example" and "the form of the field sends it to a page that is on" in sent[2]
    assert mixed.refusal(type_pw, field_origin="https://www.shop.example", form_origin="https://www.shop.example") is None
    assert mixed.refusal(type_pw, field_origin="https://www.shop.example", form_origin="null") is None
    both = ["https://www.shop.example", "https://collect.evil.example"]  # its action's and a submit button's formaction's
    assert mixed.refusal(type_pw, field_origin="https://www.shop.example", form_origin=both)[1] == "collect.evil.example"
    assert "no field was found" in mixed.refusal(type_pw)[2]
    desktop = mixed.refusal(type_pw, desktop=True)
    assert desktop[1] == "desktop" and "on the desktop there is no site to check it against" in desktop[2]
    assert mixed.refusal(TypeText(text="{{U}}"), field_origin="https://evil.example") is None  # unbound: anywhere
    kept = mixed.refusal(TypeText(text="{{U}}"), field_origin="https://evil.example", default=["shop.example"])
    assert kept[0] == "U" and "is kept to the allowed domains (shop.example)" in kept[2]  # ... or to the allowed domains
    assert "U can be typed on any site" in mixed.unbound_warning([]) and mixed.unbound_warning(["shop.example"]) is None


def test_a_secret_flag_naming_an_unset_variable_exits_2(tmp_path):
    proc = surfer("run", "t", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",  # (in this process: tests/inprocess.py)
                  "--profile", "holo2", "--secret", "PW=NOT_SET_ANYWHERE", "--out", str(tmp_path / "r"),
                  env={"NOT_SET_ANYWHERE": None})
    assert proc.returncode == 2 and "NOT_SET_ANYWHERE is not set" in proc.stdout
    proc = surfer("run", "t", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--profile", "holo2",
                  "--secret", "PW=HOME@https://a.example/", "--out", str(tmp_path / "r2"))
    assert proc.returncode == 2 and "--secret PW: domain pattern 'https://a.example/' is not a host" in proc.stdout


@pytest.mark.browser
async def test_a_bound_secret_goes_only_to_its_site(browser_env, pages, tmp_path, caplog):
    """PW belongs to 127.0.0.1; the page's frame is on localhost (another site, a cross-origin iframe):
    typed there (by target or into the focused field) or put in a goto to it, PW is refused and recorded;
    typed on its site it works; an unbound secret goes anywhere, with a warning said once."""
    from rich.console import Console

    from surfer import Agent, ScriptedModel
    from surfer.apps.live import LiveView

    env = await browser_env()
    start = pages.url("secret_sites.html")
    field, frame_field, sent_field = {"x": 195, "y": 150}, {"x": 195, "y": 400}, {"x": 195, "y": 625}  # centres, 0..1000
    trap_field = {"x": 195, "y": 775}  # on 127.0.0.1, but its click moves the focus into the frame
    button_sent_field = {"x": 195, "y": 900}  # on 127.0.0.1, in a form of 127.0.0.1 whose button sends it elsewhere
    trap_to_sent = {"x": 586, "y": 900}  # on 127.0.0.1, but its click moves the focus to the field sent elsewhere

    def typing(text: str, target: str | None) -> dict:
        return {"thought": "", "notes": "", "action": {"type": "type", "text": text, **({"target": target} if target else {})}}
    evil_goto = start.replace("127.0.0.1", "localhost").replace("secret_sites.html", "login.html?pw={{PW}}")
    # a browser reads \ as / here: this opens localhost (Python's URL parser reads the host as 127.0.0.1)
    slashed_goto = evil_goto.replace("/login.html", "\\@" + start.split("/")[2] + "/login.html")
    model = ScriptedModel(
        policy=[typing("{{PW}}", "the field in the frame"),
                {"thought": "", "notes": "", "action": {"type": "goto", "url": evil_goto}},
                typing("{{PW}}", "the password field"), typing("{{USER}}", "the field in the frame"),
                typing("{{PW}}", "the trap field"), typing("{{PW}}", None),
                typing("{{PW}}", "the field of the form that sends elsewhere"),
                typing("{{PW}}", "the field of the form whose button sends elsewhere"),
                typing("{{PW}}", "the second trap field"),
                {"thought": "", "notes": "", "action": {"type": "goto", "url": slashed_goto}},
                {"thought": "", "notes": "", "action": {"type": "answer", "text": "done"}}],
        localizer=[frame_field, field, frame_field, trap_field, sent_field, button_sent_field,
                   trap_to_sent],
    )
    secrets = Secrets({"PW": Secret(VALUE, domains=["127.0.0.1"]), "USER": "alice"})
    with caplog.at_level("WARNING", logger="surfer.agent.secrets"):
        live = io.StringIO()  # what `surfer run` prints as it goes
        agent = Agent(backend=model, profile="holo2", environment=env, secrets=secrets, validate_answers=False,
                      listeners=[LiveView(Console(file=live, width=400, highlight=False))])
        Agent(backend=model, profile="holo2", secrets=secrets)  # the same secrets again: said once
    warnings = [r.getMessage() for r in caplog.records if r.name == "surfer.agent.secrets"]
    assert len(warnings) == 1 and "USER can be typed on any site" in warnings[0] and "PW" not in warnings[0]
    assert "Secret(value, domains=" in warnings[0] and "--secret" not in warnings[0]  # (Python is told no CLI flag)
    result = await agent.run("Sign in", url=start, out_dir=tmp_path / "run")
    assert result.status == "success", result
    steps = [json.loads(line) for line in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()]
    refused = [s["outcome"] for s in steps if s.get("outcome", {}).get("refused")]
    assert [(o["secret"], o["host"]) for o in refused] == [("{{PW}}", "localhost")] * 8
    assert "the field that would take the keys is on localhost" in refused[0]["error"]
    assert "the page it opens is on localhost" in refused[1]["error"]
    assert "the form of the field sends it to a page that is on localhost" in refused[4]["error"]
    assert "the form of the field sends it to a page that is on localhost" in refused[5]["error"]  # (formaction)
    assert "the form of the field sends it to a page that is on localhost" in refused[6]["error"]  # (checked at the keys)
    assert "the page it opens is on localhost" in refused[7]["error"]
    assert "127.0.0.1" in steps[-1]["url"] and "pw=" not in steps[-1]["url"]  # the goto was not performed
    assert steps[2]["outcome"].get("error") is None and steps[3]["outcome"].get("error") is None
    # the trap field is on its site, but the page moved the focus to the frame after the click: checked again
    # right before the keys, not typed
    assert steps[4]["outcome"]["error"] == ("not performed: the secret {{PW}} belongs to 127.0.0.1 and the field that "
                                            "would take the keys is on localhost; a page of another site may be trying to "
                                            "get it: use it only on its own site")
    frame = env.page.frame_locator("#other").locator("#field")
    assert await env.page.locator("#pw").input_value() == VALUE  # on its own site
    assert await frame.input_value() == "alice"  # the unbound secret, anywhere; PW never reached the frame
    # a field that took a secret draws dots, as a password field does (screenshots are pixels)
    assert await frame.evaluate("el => getComputedStyle(el).webkitTextSecurity") == "disc"
    assert await env.page.locator("#sent").input_value() == ""  # nor the field whose form sends it elsewhere
    assert await env.page.locator("#sent2").input_value() == ""  # nor the one whose form's button does
    written = (tmp_path / "run" / "trajectory.jsonl").read_text()
    assert VALUE not in written and "{{PW}} belongs to 127.0.0.1" in written
    # the policy was told why, by placeholder
    history = "".join(p.text for m in model.requests[-1].messages for p in m.content if hasattr(p, "text"))
    assert "not performed: the secret {{PW}} belongs to 127.0.0.1" in history and VALUE not in history
    assert "{{PW}} (only into fields of 127.0.0.1), {{USER}}." in history  # told up front where each one goes
    assert live.getvalue().count("refused: not performed: the secret {{PW}}") == 8  # and the person watching
    assert (tmp_path / "run" / "report.html").read_text().count("refused: not performed: the secret {{PW}}") == 8


@pytest.mark.browser
async def test_a_qa_case_checks_where_a_secret_goes_as_a_run_does(browser_env, pages):
    """A QA case's environment wraps the browser: the focused field's facts (a `type` without a target, Enter) and
    the check right before a secret's keys reach the browser that types."""
    from surfer.agent.secrets import Secret as S
    from surfer.core.actions import CssPoint
    from surfer.core.errors import ActionFailed
    from surfer.qa.executor import QaEnvironment

    secrets = Secrets({"PW": S(VALUE, domains=["127.0.0.1"])})
    env = QaEnvironment(await browser_env(pages.url("secret_sites.html")), secrets, None)
    await env.page.locator("#pw").focus()
    assert (await env.focused_element()).origin.startswith("http://127.0.0.1")
    action = TypeText(text="{{PW}}", target="the trap field", point=CssPoint(x=250, y=620))
    env.keys_guard, env.hide_typed = secrets.keys_guard(action, env.url, [], []), True
    with pytest.raises(ActionFailed, match="the field that would take the keys is on localhost"):
        await env.perform(action)  # the trap moved the focus into the other site's frame
    env.keys_guard = None
    await env.perform(TypeText(text="{{PW}}", target="the field in the frame", point=CssPoint(x=250, y=320)))
    field = env.page.frame_locator("#other").locator("#field")  # (no guard: typed; and drawn as dots)
    assert await field.evaluate("el => getComputedStyle(el).webkitTextSecurity") == "disc"
