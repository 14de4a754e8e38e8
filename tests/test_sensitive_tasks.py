"""Default safety settings on an ordinary shop nobody watches (tests/pages/store/):
signing in, opening "Orders", sorting and removing a filter are never stopped;
pressing "Place order" is refused, and asking for it again ends the run
`needs_approval` with how to allow it — in the SDK, the CLI, a batch and QA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from surfer import Agent
from surfer.agent.config import AgentConfig, BrowserSettings
from surfer.fleet.batch import Batch, BatchTask, ResultsIndex
from surfer.fleet.browser_pool import SharedBrowser
from surfer.apps.demo.oracle import frame_mapper
from surfer.models.standin import ChatRequest
from surfer.tools.desktop import DesktopEnvironment
from inprocess import Ran, surfer
from test_desktop import desktop, is_event, tk_form  # noqa: F401 - fixtures

VIEWPORT = (1280, 800)
TARGETS = {  # what the model describes -> (page, where it is drawn)
    "the Username field": ("index.html", "#username"),
    "the Password field": ("index.html", "#password"),
    "the Sign in button": ("index.html", "#signin"),
    "the Orders link in the header": ("home.html", "#nav-orders"),
    "the Cart link in the header": ("home.html", "#nav-cart"),
    "the Sort order button": ("orders.html", "#sort"),
    "the remove button on the Status: Delivered filter chip": ("orders.html", "#remove-filter"),
    "the Card number field": ("cart.html", "#cc-number"),
    "the Place order button": ("cart.html", "#place-order"),
}


def act(kind: str, target: str, **fields: Any) -> dict[str, Any]:
    return {"thought": "", "notes": "", "action": {"type": kind, "target": target, **fields}}


def answer(text: str) -> dict[str, Any]:
    return {"thought": "", "notes": "", "action": {"type": "answer", "text": text}}


SIGN_IN = [
    act("type", "the Username field", text="ada"),
    act("type", "the Password field", text="correct horse battery"),
    act("click", "the Sign in button"),
]
READ_ORDERS = [
    *SIGN_IN,
    act("click", "the Orders link in the header"),
    act("click", "the Sort order button"),
    act("click", "the remove button on the Status: Delivered filter chip"),
    answer("The newest order, NW-1047, totals $86.25"),
]
PLACE_ORDER = [
    *SIGN_IN,
    act("click", "the Cart link in the header"),
    act("type", "the Card number field", text="4242 4242 4242 4242"),
    act("click", "the Place order button"),
    act("click", "the Place order button"),  # asked again after the refusal, as a model does
    answer("Order placed"),
]
ORDERS_TASK = "Sign in as ada (password: correct horse battery), open your orders, sort newest first, show all statuses and read the newest order's total"
PLACE_TASK = "Sign in as ada (password: correct horse battery) and place the order in the cart, paying with card 4242 4242 4242 4242"


class Shopper:
    """A stand-in model that follows a plan, one action per policy call, and
    locates each target where the page draws it."""

    def __init__(self, centres: dict[str, Any], plans: dict[str, list[dict[str, Any]]]) -> None:
        self.to_frame = frame_mapper("normalized_1000", VIEWPORT, 1.0)
        self.centres, self.plans = centres, plans
        self.calls: dict[str, int] = {}

    def __call__(self, request: ChatRequest) -> Any:
        if request.role == "localizer":
            target = next(t for t in self.centres if t in request.last_text)
            x, y = self.to_frame(self.centres[target], request.image_size())
            return {"x": x, "y": y}
        if request.role == "validator":
            return {"verdict": "accept", "reasons": "the answer is on the screen"}
        task = max((t for t in self.plans if t in request.text), key=len)
        step = self.calls[task] = self.calls.get(task, 0) + 1
        plan = self.plans[task]
        return plan[min(step, len(plan)) - 1]


@pytest.fixture(scope="module")
async def centres(pages, measure):  # type: ignore[no-untyped-def]
    return await measure(pages.url("store"), VIEWPORT, targets=TARGETS)


DENIED_TASK = PLACE_TASK + ", in a suite that says confirm: deny"


@pytest.fixture
def shop_model(standin, centres):  # type: ignore[no-untyped-def]
    return standin(Shopper(centres, {ORDERS_TASK: READ_ORDERS, PLACE_TASK: PLACE_ORDER, DENIED_TASK: PLACE_ORDER}))


def steps_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]


async def test_orders_sort_and_filter_are_never_stopped(browser_env, pages, shop_model, tmp_path):
    env = await browser_env(pages.url("store/index.html"))
    agent = Agent(base_url=shop_model.base_url, model=shop_model.model, profile="holo2", environment=env, validate_answers=False)
    result = await agent.run(ORDERS_TASK, out_dir=tmp_path / "run")
    assert result.status == "success", result.reason
    steps = steps_of(tmp_path / "run")
    assert [s["action"]["type"] for s in steps] == ["type", "type", "click", "click", "click", "click", "answer"]
    assert not [s for s in steps if s.get("confirmation") or "error" in s["outcome"]]
    # what the page said about each element, recorded in the step
    assert steps[3]["element"]["role"] == "link" and steps[3]["element"]["name"] == "Orders"
    assert steps[1]["element"]["type"] == "password" and "correct horse" not in json.dumps(steps[1]["element"])
    assert await env.page.locator("#sort").inner_text() == "Sort order: newest first"
    assert not await env.page.locator("#chip").is_visible()  # the filter was removed


async def test_place_order_is_refused_then_ends_needs_approval(browser_env, pages, shop_model, tmp_path):
    env = await browser_env(pages.url("store/index.html"))
    agent = Agent(base_url=shop_model.base_url, model=shop_model.model, profile="holo2", environment=env, validate_answers=False)
    result = await agent.run(PLACE_TASK, out_dir=tmp_path / "run")
    assert result.status == "needs_approval", result
    assert "Place order" in result.reason and "--approve-all" in result.reason
    assert "--approve-domain 127.0.0.1" in result.reason and "confirm=" in result.reason
    assert env.page.url.endswith("cart.html")  # never pressed
    steps = steps_of(tmp_path / "run")
    assert steps[4]["element"]["autocomplete"] == "cc-number" and "confirmation" not in steps[4]  # same site: typed
    refused = steps[-2:]
    assert [s["confirmation"]["approved"] for s in refused] == [False, False]
    assert all(s["outcome"].get("refused") for s in refused)
    # the refusal reached the model's history with what to do instead
    last_policy = [r for r in shop_model.requests if r.role == "policy"][-1].text
    assert "this needs a person's approval; finish with what you have or choose another way" in last_policy
    result_file = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result_file["status"] == "needs_approval"
    assert "needs_approval" in (tmp_path / "run" / "report.html").read_text()


def run_cli(*args: str) -> Ran:
    """`surfer ARGS` in this process (tests/inprocess.py), nobody at its input (not a terminal)."""
    return surfer(*args)


def test_cli_nobody_watching(pages, shop_model, tmp_path):
    common = ["--base-url", shop_model.base_url, "--model", shop_model.model, "--profile", "holo2", "--no-validator"]
    orders = run_cli("run", ORDERS_TASK, "--url", pages.url("store/index.html"), *common, "--out", str(tmp_path / "orders"))
    assert orders.returncode == 0, orders.stdout + orders.stderr
    place = run_cli("run", PLACE_TASK, "--url", pages.url("store/index.html"), *common, "--out", str(tmp_path / "place"))
    assert place.returncode == 1, place.stdout + place.stderr
    output = place.stdout + place.stderr
    assert "needs_approval" in output and "--approve-domain" in output
    assert json.loads((tmp_path / "place" / "result.json").read_text())["status"] == "needs_approval"
    # the user allows their own test shop: the order is placed
    shop_model.respond.calls.clear()
    host = "127.0.0.1"
    allowed = run_cli("run", PLACE_TASK, "--url", pages.url("store/index.html"), *common, "--approve-domain", host,
                      "--out", str(tmp_path / "allowed"))
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    steps = steps_of(tmp_path / "allowed")
    assert steps[5]["confirmation"] == {"reason": steps[5]["confirmation"]["reason"], "approved": True, "by": f"approve_domain:{host}"}
    assert steps[6]["url"].endswith("placed.html")


async def test_batch_nobody_watching(pages, shop_model, shared_browser, tmp_path):
    config = AgentConfig(base_url=shop_model.base_url, model=shop_model.model, profile="holo2", validate_answers=False,
                         browser=BrowserSettings(viewport=VIEWPORT))
    tasks = [
        BatchTask(id="orders", group="orders", task=ORDERS_TASK, url=pages.url("store/index.html")),
        BatchTask(id="place", group="place", task=PLACE_TASK, url=pages.url("store/index.html")),
    ]
    batch = Batch(config, tasks, tmp_path, concurrency=2)
    batch._browser = SharedBrowser.given(shared_browser)  # its sessions in the session's shared browser, not a Chromium and a driver of its own
    summary = await batch.run()
    results = {r["id"]: r for r in ResultsIndex(tmp_path / "results.jsonl").read()}
    assert results["orders"]["status"] == "success"
    assert results["place"]["status"] == "needs_approval" and "--approve-all" in results["place"]["reason"]
    assert summary.statuses == {"success": 1, "needs_approval": 1}

    from surfer.apps.view.state import OutDir

    snapshot = OutDir(tmp_path).snapshot(0)
    assert snapshot["totals"]["needs_approval"] == 1 and snapshot["totals"]["success"] == 1
    assert {r["id"]: r["status"] for r in snapshot["finished"]}["place"] == "needs_approval"


def test_qa_suite_approves_its_own_app(pages, shop_model, tmp_path):
    from junitparser import Failure, JUnitXml

    suite = tmp_path / "store.yaml"
    suite.write_text(json.dumps({  # JSON is YAML
        "name": "store", "base_url": pages.url("store/"), "concurrency": 3,
        "cases": [
            {"name": "read the newest order", "url": "index.html", "task": ORDERS_TASK,
             "expect": [{"text": "Sort order: newest first"}, {"answer": "86\\.25"}]},
            {"name": "place an order", "url": "index.html", "task": PLACE_TASK, "expect": [{"url": "placed\\.html"}]},
            {"name": "place an order, refused", "url": "index.html", "task": DENIED_TASK, "confirm": "deny"},
        ],
    }))
    junit = tmp_path / "junit.xml"
    proc = surfer("qa", str(suite), "--base-url", shop_model.base_url, "--model", shop_model.model,
                  "--profile", "holo2", "--out", str(tmp_path / "out"), "--junit", str(junit), "--quiet")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    cases = {case.name: case for s in JUnitXml.fromfile(str(junit)) for case in s}
    assert cases["read the newest order"].is_passed and cases["place an order"].is_passed
    [failure] = cases["place an order, refused"].result
    assert isinstance(failure, Failure) and failure.type == "needs_approval" and "--approve-all" in failure.message
    rows = {r["case"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    assert rows["place an order, refused"]["status"] == "needs_approval"
    assert "1 need approval" in proc.stdout + proc.stderr


async def test_desktop_orders_button_is_pressed_and_delete_account_needs_approval(desktop: DesktopEnvironment, tk_form, standin, tmp_path):
    plan = [act("click", "the 'Orders' button"), act("click", "the 'Delete account' button"),
            act("click", "the 'Delete account' button"), answer("done")]
    widgets = {"the 'Orders' button": "orders", "the 'Delete account' button": "delete_account"}

    def respond(request: ChatRequest) -> Any:
        if request.role == "localizer":
            target = next(t for t in widgets if t in request.last_text)
            centre, (width, height) = tk_form.centre(widgets[target]), tk_form.screen
            return {"x": round(centre.x * 1000 / width), "y": round(centre.y * 1000 / height)}
        calls = sum(r.role == "policy" for r in server.requests)
        return plan[min(calls, len(plan)) - 1]

    server = standin(respond)
    agent = Agent(base_url=server.base_url, model=server.model, profile="holotron", environment=desktop, validate_answers=False)
    result = await agent.run("Open the orders, then delete the account", out_dir=tmp_path / "run")
    assert result.status == "needs_approval", result
    assert "Delete account" in result.reason
    await tk_form.event(is_event("orders"))  # the navigation button was pressed
    assert tk_form.find(is_event("account-deleted")) is None
