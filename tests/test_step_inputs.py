"""A step runs on its inputs alone: the roles, layout, image rule, configuration,
secrets and guards an agent gives (`AgentParts`), and the environment, memory,
run control and event sink of the task — no `Agent` behind it."""

from __future__ import annotations

from surfer import Agent, ScriptedModel
from surfer.agent.control import RunControl
from surfer.agent.events import ActionPerformed, ModelAsked, ModelCalled, Observed, StepFinished, StepStarted
from surfer.agent.memory import Memory
from surfer.agent.run_state import RunState
from surfer.agent.steps import StepInputs, Stepper, task_prompt
from test_sessions import act


async def test_a_step_runs_on_its_inputs_alone(browser_env, pages):
    env = await browser_env(pages.url("actions.html"))
    model = ScriptedModel(policy=[act({"type": "scroll", "direction": "down"}), act({"type": "answer", "text": "seen"})])
    parts = Agent(backend=model, validate_answers=False, out_dir=False).parts()
    events: list[object] = []

    async def sink(event: object) -> None:
        events.append(event)

    run = RunState("Look further down the page", env.page.url, "r1", None, earlier="Earlier tasks: none worth telling")
    memory = Memory(task_prompt(run, parts.secrets), max_images=parts.layout.memory_images)
    control = RunControl()
    stepper = Stepper(StepInputs(
        roles=parts.roles, layout=parts.layout, imaging=parts.imaging, config=parts.config, secrets=parts.secrets,
        guards=parts.guards, environment=env, memory=memory, control=control, emit=sink,
    ), run)
    record, outcome = await stepper.step(1)
    assert outcome is None and record.action.type == "scroll" and record.error is None
    assert [type(e) for e in events] == [StepStarted, Observed, ModelAsked, ModelCalled, ActionPerformed, StepFinished]
    assert run.records == [record] and run.calls == 1
    assert "scroll" in memory.render_history()
    record, outcome = await stepper.step(2)
    assert outcome == ("success", "seen", None) and len(run.records) == 2
    prompt = "".join(p.text for m in model.requests[-1].messages for p in m.content if hasattr(p, "text"))
    assert "Earlier tasks: none worth telling" in prompt and "Look further down the page" in prompt
