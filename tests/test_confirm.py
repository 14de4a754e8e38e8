"""Sensitive actions need a yes: denied by default where nobody watches,
approved by a callback or a person at the terminal, every decision recorded."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time

from surfer import Agent, ScriptedModel
from surfer.agent.confirm import ConfirmationRequest, SensitiveRules
from surfer.core.actions import Click, CssPoint, Drag, Scroll, TypeText

BUY = {"thought": "buy it", "notes": "", "action": {"type": "click", "target": "the Buy now button"}}
AT_BUY = {"x": 156, "y": 162}  # the button's centre, 0..1000 of 1280x800
DONE = {"thought": "done", "notes": "", "action": {"type": "answer", "text": "done"}}


def steps_of(run_dir) -> list[dict]:  # type: ignore[no-untyped-def]
    return [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]


async def test_denied_by_default_and_the_agent_is_told(browser_env, pages, tmp_path):
    env = await browser_env(pages.url("shop.html"))
    model = ScriptedModel(policy=[BUY, DONE], localizer=[AT_BUY], validator=[{"verdict": "accept", "reasons": "ok"}])
    result = await Agent(backend=model, profile="holo2", environment=env).run("buy the lamp", out_dir=tmp_path / "run")
    assert result.status == "success"
    assert "bought" not in env.page.url  # never clicked
    first = steps_of(tmp_path / "run")[0]
    assert first["confirmation"] == {"reason": "it presses the 'Buy now' button", "approved": False, "by": "deny_all"}
    assert first["element"]["role"] == "button" and first["element"]["name"] == "Buy now"  # what the page said was there
    assert first["outcome"]["refused"] and "needs a person's approval" in first["outcome"]["error"]
    second_prompt = "".join(p.text for m in [r for r in model.requests if r.schema_name == "policy"][1].messages
                            for p in m.content if hasattr(p, "text"))
    assert "this needs a person's approval; finish with what you have or choose another way" in second_prompt


async def test_a_confirm_callback_approves_and_sees_the_action(browser_env, pages, tmp_path):
    env = await browser_env(pages.url("shop.html"))
    asked: list[ConfirmationRequest] = []

    async def shopkeeper(request: ConfirmationRequest) -> bool:
        asked.append(request)
        await asyncio.sleep(1.3)  # a person who thinks it over past the time limit's last step (1.2 s of 1.5)
        return True

    model = ScriptedModel(policy=[BUY, DONE], localizer=[AT_BUY])
    agent = Agent(backend=model, profile="holo2", environment=env, confirm=shopkeeper, validate_answers=False, max_seconds=1.5)
    result = await agent.run("buy the lamp", out_dir=tmp_path / "run")
    assert result.status == "success" and "bought=1" in env.page.url, result.reason  # the wait is not charged
    assert result.timings.waiting_seconds >= 1.3 and steps_of(tmp_path / "run")[0]["timings"]["waiting"] >= 1.3
    assert len(asked) == 1 and asked[0].action.target == "the Buy now button" and asked[0].screenshot[:2] == b"\xff\xd8"
    assert asked[0].url.endswith("shop.html")
    assert steps_of(tmp_path / "run")[0]["confirmation"]["by"] == "shopkeeper"


def test_rules():
    rules = SensitiveRules(domains=["bank.test"])
    assert rules.reason(Click(target="Delete account"), "https://a.test/") == "it presses 'Delete account' (as described)"
    assert rules.reason(TypeText(text="x", target="the card number field"), "https://a.test/") is not None
    assert rules.reason(Click(target="the Orders tab"), "https://a.test/") is None  # a noun that navigates commits nothing
    assert rules.reason(Click(target="the 'Place order' button"), "https://a.test/") is not None
    assert rules.reason(Click(target="Download the report"), "https://a.test/") is None  # 'load' is not 'pay'
    assert rules.reason(Click(target="Sender field"), "https://a.test/") is None
    assert rules.reason(Scroll(), "https://bank.test/home") == "bank.test is a domain where every action is confirmed"
    assert SensitiveRules(words=["archive"]).reason(Click(target="the 'Archive' button"), "https://a.test/") is not None
    assert SensitiveRules(exempt=["buy"]).reason(Click(target="the 'Buy' button"), "https://a.test/") is None
    # A drag is judged by where it lands: onto the Trash deletes (the desktop's file managers), onto a column does not.
    at = CssPoint(x=1, y=1)
    drag = lambda target, to: Drag(target=target, point=at, to_target=to, to_point=at)  # noqa: E731
    assert rules.reason(drag("the report.pdf file icon", "the Trash icon"), "") == \
        "it drops 'the report.pdf file icon' onto 'the Trash icon' (as described)"
    assert rules.reason(drag("the card", "the 'Done' column"), "") is None
    assert rules.reason(drag("the file", "the Documents folder"), "") is None


def test_the_person_at_the_terminal_confirms_and_steers(standin, pages, tmp_path):
    def shop(request):  # type: ignore[no-untyped-def]
        if request.role == "localizer":
            return AT_BUY
        if "bought=1" in request.text:
            return DONE
        return BUY

    server = standin(shop)
    run_dir = tmp_path / "run"
    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURFER_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "surfer", "run", "buy the lamp", "--url", pages.url("shop.html"), "--base-url",
         server.base_url, "--model", server.model, "--profile", "holo2", "--no-validator", "--out", str(run_dir)],
        stdin=secondary, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**env, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    os.close(secondary)
    os.write(primary, b"h the lamp is the only product\n")
    output = b""
    deadline = time.monotonic() + 60
    while b"perform it?" not in output and time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            output += os.read(proc.stdout.fileno(), 65536)
    assert b"perform it?" in output, output.decode(errors="replace")
    os.write(primary, b"y\n")
    rest, _ = proc.communicate(timeout=60)
    os.close(primary)
    output += rest
    assert proc.returncode == 0, output.decode(errors="replace")
    steps = steps_of(run_dir)
    assert steps[0]["confirmation"] == {"reason": "it presses the 'Buy now' button", "approved": True, "by": "person"}
    assert steps[0]["hints"] == ["the lamp is the only product"]
    assert "bought=1" in steps[1]["url"]
    assert (run_dir / "confirm-step-001.jpg").stat().st_size > 1000  # the screenshot the person was pointed to
    assert "Hint from the user: the lamp is the only product" in server.requests[0].text


async def test_a_download_is_refused_by_default_and_kept_with_a_yes(browser_env, pages, tmp_path):
    for confirm, status in ((None, "refused"), (lambda request: True, "saved")):
        env = await browser_env(pages.url("widgets/files.html"))
        box = await env.page.locator("#report").bounding_box()  # where the link is drawn
        point = {"x": round((box["x"] + box["width"] / 2) / 1280 * 1000), "y": round((box["y"] + box["height"] / 2) / 800 * 1000)}
        model = ScriptedModel(policy=[{"thought": "", "notes": "", "action": {"type": "click", "target": "the report link"}}, DONE],
                              localizer=[point])
        run_dir = tmp_path / status
        result = await Agent(backend=model, profile="holo2", environment=env, confirm=confirm, validate_answers=False).run(
            "get the report", out_dir=run_dir)
        assert [d["status"] for d in result.downloads] == [status], result.downloads
        assert (run_dir / "downloads" / "report.csv").exists() == (status == "saved")
        assert steps_of(run_dir)[0]["confirmation"]["approved"] == (status == "saved")
