"""Three families of errors (STYLE.md #11).

- `ConfigError`: the user's misuse (bad flag, bad config file, unknown
  profile). The CLI exits 2 with the message.
- `RunError` and subclasses: a run failed for a reason outside the model's
  control (server down, page crashed, browser missing). Recorded and surfaced.
- `ModelOutputError`: the model answered something unusable. A signal for the
  model: the role retries with this message as feedback.
"""

from __future__ import annotations

import errno

# An OSError with one of these: a run's files cannot be written (a full disk, a quota, a read-only file system), no
# task's fault: a batch stops (fleet/batch/runner.py), a command says it in one line (apps/command_group.py).
STORAGE_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


class SurferError(Exception):
    """Base class for every error surfer raises on purpose."""


class ConfigError(SurferError):
    """Bad usage or configuration: a clear message, exit code 2."""


class RunError(SurferError):
    """A run failed for a reason that is not the model's output."""


class ModelServerUnreachable(RunError):
    """The model server cannot be reached (connection refused, DNS, timeout)."""


class ChromiumNotLaunched(ConfigError):
    """SURFER_CHROMIUM names a program that does not start as Chromium (not a browser, a broken one): a
    usage error found before the run saw anything, so the run leaves no directory."""


class ModelNotFound(ConfigError):
    """The server answers but does not serve the configured model name."""


class ModelRequestError(RunError):
    """The server rejected a request or kept failing after retries."""


class ContextTooLong(ModelRequestError):
    """The request is longer than the model's context (vLLM: "exceeds model's maximum context
    length"): the agent sends fewer screenshots (Layout.shorten) instead of ending the run."""


class EnvironmentFailure(RunError):
    """The browser or desktop failed (crashed page, missing executable)."""


class BrowserCrashed(EnvironmentFailure):
    """Chromium or the session's page crashed (killed, out of memory): an
    environment error; a batch relaunches the browser and retries the task."""


class ActionNotSupported(SurferError):
    """The environment cannot perform this kind of action."""


class ActionFailed(SurferError):
    """The environment tried the action and it did not work (e.g. bad URL)."""


class ModelOutputError(SurferError):
    """Malformed, schema-violating or out-of-range model output.

    The message is written for the model: it is sent back as feedback when
    the role retries.
    """


class CoordinateError(ModelOutputError):
    """A point outside the image frame: never clamped to a made-up point."""
