"""Every exception rewardlab raises to its callers, in one tree, so that a caller catches one
base class (`RewardlabError`) and a command-line tool one user-error class (`UserError`)::

    RewardlabError
    ├── UserError                 the caller's mistake: the CLI prints the message, exit status 2
    │   ├── UsageError            a command called wrongly
    │   ├── ConfigError           a reward config that cannot be built (names the config path)
    │   ├── MissingDependency     an optional dependency is not installed (names the extra)
    │   ├── InputError            a rollout file that cannot be read at all
    │   ├── OutputError           an output that cannot be written as asked
    │   ├── RayEngineError        the Ray engine cannot run as asked
    │   ├── BenchmarkError        an unknown benchmark, or options it does not take
    │   ├── DataFormatError       a benchmark or preference file not in its format (names file,
    │   │                         record, field)
    │   └── RubricError           a rubric that cannot be used (names the entry and field)
    ├── InvalidInput              one sample lacks what a reward needs: status ``invalid_input``
    ├── RequestError              a reward-server request refused, with its HTTP status
    ├── BackendError              a model call that failed (``retryable`` says if a retry may help)
    ├── SandboxUnavailable        code cannot be sandboxed on this machine (says how to fix it)
    ├── RewardFailed              a sample failed under the TRL adapter's ``on_error="raise"``
    └── Unreadable                model text or data that a reader cannot use
        ├── VerdictError          a judge's answer without a valid verdict
        ├── UnclosedFence         a judge's answer that quotes a fence's start but not its end
        ├── StepSplitError        steps asked for that cannot be found in the text
        └── FormatError           a tokenizer that cannot express a PRM family's layout

Inside a reward, a `InvalidInput`, `VerdictError` or `BackendError` becomes a `Score` status with
the message as its reason; it reaches the caller only from the helpers that raise it. Each class
also keeps the standard exception it replaced as a base (`ValueError`, `RuntimeError`,
`ImportError`), so code that catches the standard one keeps working.
"""

from __future__ import annotations


class RewardlabError(Exception):
    """The root of every exception rewardlab raises on purpose."""


class UserError(RewardlabError):
    """A mistake of the caller's (a config, a file, a command line); the message says what to fix."""


class UsageError(UserError):
    """A mistake in how a command was called; reported in one line, exit status 2."""


class ConfigError(UserError, ValueError):
    """A reward config that cannot be built; the message gives the path to the bad entry."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path or '<config>'}: {message}")


class MissingDependency(UserError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class InputError(UserError, ValueError):
    """The input cannot be read at all (missing, unknown format, absent columns)."""


class OutputError(UserError, ValueError):
    """The output cannot be written as asked: it exists without resume/overwrite, or is corrupt."""


class RayEngineError(UserError, ValueError):
    """The Ray engine cannot run as asked (an address it cannot use)."""


class BenchmarkError(UserError, ValueError):
    """An unknown benchmark name, or options its class does not take."""


class DataFormatError(UserError, ValueError):
    """A benchmark or preference file is not in the expected format; the message names the file,
    the record and the missing or malformed field."""


class RubricError(UserError, ValueError):
    """A rubric that cannot be used; the message names the entry and field."""


class InvalidInput(RewardlabError, ValueError):
    """Raised inside a reward when a sample lacks what it needs; becomes status ``invalid_input``.

    The message names the field, so that a user with a million-row file can find the culprit.
    """

    def __init__(self, field_name: str, message: str):
        self.field_name = field_name
        super().__init__(f"{field_name}: {message}")


class RequestError(RewardlabError, ValueError):
    """A request that cannot be served as sent; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[type[RequestError], tuple[int, str]]:
        # Bodies are parsed in worker processes, which send a refusal back pickled.
        return RequestError, (self.status, str(self))


class BackendError(RewardlabError):
    """A call that failed. ``retryable`` says whether trying again may help (429, 5xx, timeouts,
    lost connections); ``retry_after`` is the server's hint in seconds, if it gave one."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status_code: int | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.status_code = status_code
        self.retry_after = retry_after


class SandboxUnavailable(RewardlabError, RuntimeError):
    """The sandbox cannot run on this machine; the message says how to fix it."""


class RewardFailed(RewardlabError, RuntimeError):
    """Raised by a reward function built with ``on_error="raise"`` when a sample failed."""


class Unreadable(RewardlabError, ValueError):
    """Model text or data that a reader cannot use; the message says what was missing or wrong."""


class VerdictError(Unreadable):
    """The judge's answer holds no valid verdict; the message says what was missing or wrong."""


class UnclosedFence(Unreadable):
    """The answer quotes the start of a fence but not its end."""


class StepSplitError(Unreadable):
    """The steps asked for cannot be found in the text."""


class FormatError(Unreadable):
    """A tokenizer that cannot express the family's layout (a marker that is not one token)."""
