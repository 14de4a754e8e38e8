"""The tools' arguments, each with the description a client (and the model behind it) reads in
the tool's inputSchema: a title alone ("Max Seconds") said nothing of units, defaults or effects."""

from __future__ import annotations

from typing import Annotated, Any, Optional

from pydantic import Field

Task = Annotated[str, Field(description="What to do, in plain words, e.g. 'Find the opening hours and tell me them'.")]
Url = Annotated[Optional[str], Field(
    description="The page to start on (http, https). With a session_id it is opened first; left out, the task starts "
                "where the session's last task ended.")]
MaxSteps = Annotated[Optional[int], Field(
    description="At most this many steps (actions) for this task; default: the server's --max-steps (30).")]
MaxSeconds = Annotated[Optional[float], Field(
    description="Time limit for this task in seconds; default: the server's --max-seconds (600).")]
AnswerSchema = Annotated[Optional[dict[str, Any]], Field(
    description="A JSON Schema object the answer's structured data must follow; the result's `data` holds it.")]
StorageState = Annotated[Optional[str], Field(
    description="A Playwright storage-state file on the server's machine to start signed in (not with session_id).")]
SaveStorageState = Annotated[Optional[str], Field(
    description="Where on the server's machine to write the browser's storage state when the task succeeds "
                "(mode 0600; never returned; not with session_id).")]
SessionId = Annotated[Optional[str], Field(
    description="The session_id an earlier task returned: continue in its browser (same page, cookies, tabs).")]
TaskId = Annotated[str, Field(description="The task_id that run_task or start_task returned.")]
SessionToEnd = Annotated[str, Field(description="The session_id a task returned.")]
Reply = Annotated[str, Field(description="The reply to the agent's question; empty: leave it unanswered (needs_input).")]
Secret = Annotated[bool, Field(description="Keep the reply out of every record (the model sees a placeholder).")]
Suite = Annotated[str, Field(description="A QA suite file (YAML) on the server's machine, as `surfer qa` takes it.")]
Tags = Annotated[Optional[list[str]], Field(description="Run only the cases with one of these tags.")]
Grep = Annotated[Optional[str], Field(
    description="Run only the cases whose name matches this regular expression (any case), as surfer qa --grep.")]
GrepInvert = Annotated[Optional[str], Field(
    description="Leave out the cases whose name matches this regular expression (any case), as surfer qa --grep-invert.")]
Variables = Annotated[Optional[dict[str, str]], Field(description="Values for the suite's {{NAME}} variables.")]
Concurrency = Annotated[Optional[int], Field(description="Cases run at once (default: the suite's, 4).")]
NoCache = Annotated[bool, Field(description="Neither read nor write the suite's action cache.")]
