"""Live control from the SDK (pause, hint, finish now, cancel) and typed answers."""

from __future__ import annotations

import asyncio
import io
import json
import os

import pytest
from inprocess import surfer
from pydantic import BaseModel
from rich.console import Console

from surfer import Agent, ScriptedModel
from surfer.agent.answers import AnswerSchema
from surfer.apps.controls import TerminalControls
from surfer.core.errors import ConfigError

SCROLL = {"thought": "read on", "notes": "", "action": {"type": "scroll", "direction": "down", "amount": 2}}


class Price(BaseModel):
    amount: float
    currency: str


def answer(data: object, text: str = "9 EUR") -> dict:
    return {"thought": "found it", "notes": "", "action": {"type": "answer", "text": text, "data": data}}


async def wait_for(check, timeout: float = 20) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def policy_requests(model: ScriptedModel) -> list:
    return [r for r in model.requests if r.schema_name == "policy"]


def prompt_text(request) -> str:  # type: ignore[no-untyped-def]
    return "".join(p.text for m in request.messages for p in m.content if hasattr(p, "text"))


# -- live control -------------------------------------------------------------------


async def test_pause_hint_resume_and_finish_now(browser_env, pages, tmp_path):
    env = await browser_env(pages.url("pingpong.html"))
    model = ScriptedModel(default={"policy": SCROLL})
    model.enqueue("validator", {"verdict": "accept", "reasons": "fine"})
    agent = Agent(backend=model, profile="holo2", environment=env, max_repeats=50)
    handle = agent.start("read the page", out_dir=tmp_path / "run")
    handle.pause()  # before the first step
    await asyncio.sleep(0.5)
    assert policy_requests(model) == [] and handle.paused and not handle.done

    handle.hint("the answer is at the bottom")
    handle.resume()
    await wait_for(lambda: len(policy_requests(model)) >= 2)
    handle.pause()
    await asyncio.sleep(0.3)
    settled = len(policy_requests(model))
    await asyncio.sleep(0.3)
    assert len(policy_requests(model)) == settled  # paused between steps: no new model calls

    model.enqueue("policy", {"thought": "done", "notes": "", "action": {"type": "answer", "text": "bottom"}})
    handle.finish_now()  # wakes the paused run to answer
    result = await handle.result()
    assert result.status == "success" and result.answer == "bottom", result
    assert "the user asked to finish now" in result.reason
    assert "Hint from the user: the answer is at the bottom" in prompt_text(policy_requests(model)[0])
    steps = [json.loads(line) for line in (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()]
    assert steps[0]["hints"] == ["the answer is at the bottom"] and all("hints" not in s for s in steps[1:])
    assert len(steps) == settled + 1 and json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "success"


async def test_cancel_keeps_a_complete_record(browser_env, pages, tmp_path):
    env = await browser_env(pages.url("pingpong.html"))
    model = ScriptedModel(default={"policy": lambda r: answer(None, "done") if "Task: next" in prompt_text(r) else SCROLL})
    agent = Agent(backend=model, profile="holo2", environment=env, max_repeats=50, validate_answers=False)
    handle = agent.start("x", out_dir=tmp_path / "run")
    # a second run on the agent's one environment waits its turn (both drove the one page: net::ERR_ABORTED)
    began: list[str] = []
    waiting = agent.start("next", out_dir=False, listeners=[lambda e: began.append(type(e).__name__)])
    await wait_for(lambda: len(policy_requests(model)) >= 2)
    assert began == [] and not any("Task: next" in prompt_text(r) for r in model.requests)
    # a run cancelled before it began: its result says so (CancelledError was raised into the caller awaiting it)
    queued = agent.start("never", url=pages.url("pingpong.html"), out_dir=False)
    queued.cancel()
    never = await queued.result()
    assert (never.status, never.task, never.steps) == ("interrupted", "never", 0) and queued.done
    assert never.reason == "interrupted before it began (cancelled)"
    controls = TerminalControls(Console(file=io.StringIO()), tmp_path / "run")
    controls.handle = handle
    controls.command("q")  # the person at the terminal stops it (handle.cancel, saying who)
    result = await handle.result()
    assert result.status == "interrupted" and handle.done
    assert result.reason == "interrupted: stopped by q at the terminal"
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    lines = (tmp_path / "run" / "trajectory.jsonl").read_text().splitlines()
    assert saved["status"] == "interrupted" and saved["steps"] == len(lines) == result.steps >= 1
    assert (tmp_path / "run" / "report.html").exists()
    assert (await waiting.result()).answer == "done" and began[0] == "RunStarted"  # its turn, once the first ended


async def test_q_while_a_person_holds_the_controls_stops_the_task_instead_of_handing_back():
    from surfer.agent.control import RunControl, RunHandle

    control = RunControl()
    handle = RunHandle(asyncio.ensure_future(asyncio.sleep(60)), control)
    reading, writing = os.pipe()
    with open(reading, closefd=True) as stream:
        controls = TerminalControls(Console(file=io.StringIO()), ".", stream=stream)
        controls.handle, controls._holding = handle, True  # (`t` was typed and the turn began)
        os.write(writing, b"q\n")
        os.close(writing)
        controls._on_input()
    assert control.stopped_by == "q at the terminal" and not controls._holding
    with pytest.raises(asyncio.CancelledError):
        await handle._task


# -- typed answers --------------------------------------------------------------------


async def test_typed_answer_round_trips_with_feedback_on_a_mismatch(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    model = ScriptedModel(
        policy=[answer({"amount": "cheap", "currency": "EUR"}), answer({"amount": 9, "currency": "EUR"})],
        validator=[{"verdict": "accept", "reasons": "ok"}],
    )
    result = await Agent(backend=model, profile="holo2", environment=env).run("price?", answer_schema=Price)
    assert result.status == "success" and result.data == Price(amount=9.0, currency="EUR") and result.answer == "9 EUR"
    first, second = policy_requests(model)[:2]
    answer_variant = [v for v in first.schema["properties"]["action"]["anyOf"] if v["properties"]["type"].get("const") == "answer"][0]
    assert "data" in answer_variant["required"] and set(answer_variant["properties"]["data"]["properties"]) == {"amount", "currency"}
    assert "does not follow the answer schema" in prompt_text(second) and "amount" in prompt_text(second)
    validator = [r for r in model.requests if r.schema_name == "validator"][0]
    assert 'Data: {\\"amount\\":9.0' in prompt_text(validator)  # the validator judges the data too
    assert result.model_dump(mode="json")["data"] == {"amount": 9.0, "currency": "EUR"}


async def test_typed_answer_that_never_fits_is_a_clear_failure(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    model = ScriptedModel(default={"policy": answer({"amount": "cheap"})})
    result = await Agent(backend=model, profile="holo2", environment=env, output_retries=1).run("price?", answer_schema=Price)
    assert result.status == "error" and "does not follow the answer schema" in result.reason


def test_json_schema_answers_and_bad_schemas(tmp_path):
    schema = AnswerSchema({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    assert schema.validate({"n": 3}) == {"n": 3}
    with pytest.raises(Exception, match="'n' is a required property"):
        schema.validate({})
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        AnswerSchema({"type": "no-such-type"})
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(ConfigError, match="not readable JSON"):
        AnswerSchema.load(tmp_path / "bad.json")


def test_cli_answer_schema(standin, pages, tmp_path):
    def respond(request):  # type: ignore[no-untyped-def]
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "ok"}
        return answer({"n": 42}, text="forty-two")

    server = standin(respond)
    (tmp_path / "schema.json").write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}))
    proc = surfer("run", "how many?", "--url", pages.url("actions.html"), "--base-url", server.base_url,  # (tests/inprocess.py)
                  "--model", server.model, "--profile", "holo2", "--answer-schema", str(tmp_path / "schema.json"),
                  "--out", str(tmp_path / "run"), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["data"] == {"n": 42}
    assert json.loads((tmp_path / "run" / "result.json").read_text())["data"] == {"n": 42}
