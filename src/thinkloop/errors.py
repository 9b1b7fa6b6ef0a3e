"""One exception tree for thinkloop, split by who is at fault.

::

    ThinkloopError
    ├── ConfigError                  the caller: bad model string, missing key, bad setting
    │   └── UnknownModelError        a model string no provider claims
    ├── ModelError                   the model provider or the network
    │   ├── ModelConnectionError     endpoint unreachable, connection reset
    │   ├── ModelTimeoutError        no answer in time
    │   ├── ModelHTTPError           a non-2xx answer (status, body)
    │   │   ├── ModelAuthError       401 / 403
    │   │   ├── ModelRateLimitError  429
    │   │   └── ContextOverflowError 400 that says the prompt is too long
    │   └── ModelResponseError       a 2xx answer we cannot read
    ├── ToolError                    a tool or the model's use of it; never crashes a run:
    │   ├── ToolNotFoundError        the loop turns these into error observations
    │   ├── ToolArgumentsError
    │   ├── ToolTimeoutError
    │   └── ToolExecutionError
    ├── RunError                     the run as a whole
    │   └── OutputValidationError    structured output still invalid after its retries
    ├── RunAccessError               the caller named a run of another session (or none)
    └── StoreError                   a store could not be opened, migrated, read or written

Retrying is decided by type: :class:`ModelConnectionError`, :class:`ModelTimeoutError`,
:class:`ModelRateLimitError` and 5xx :class:`ModelHTTPError` are transient.
"""

from __future__ import annotations


class ThinkloopError(Exception):
    """Base of every error thinkloop raises on purpose."""


class ConfigError(ThinkloopError):
    """The caller's configuration is wrong; retrying will not help."""


class PendingApprovalError(ConfigError):
    """The session has a paused run waiting for approval, or none when one was expected."""


class UnknownModelError(ConfigError):
    """A model string that no registered provider recognises."""


class ModelError(ThinkloopError):
    """A model provider failed to give a usable answer."""

    transient: bool = False


class ModelConnectionError(ModelError):
    transient = True


class ModelTimeoutError(ModelError):
    transient = True


class ModelHTTPError(ModelError):
    def __init__(self, status: int, body: str, *, retry_after: float | None = None) -> None:
        self.status = status
        self.body = body
        self.retry_after = retry_after
        snippet = body if len(body) <= 300 else body[:300] + "..."
        super().__init__(f"model endpoint answered HTTP {status}: {snippet}")

    @property
    def transient(self) -> bool:  # type: ignore[override]
        return self.status >= 500 or self.status in (408, 409, 429)


class ModelAuthError(ModelHTTPError):
    pass


class ModelRateLimitError(ModelHTTPError):
    pass


class ContextOverflowError(ModelHTTPError):
    """The request did not fit the model's context window."""


class ModelResponseError(ModelError):
    """The endpoint answered 2xx with something that is not a usable completion."""


class ToolError(ThinkloopError):
    """Raised inside tool execution; the loop reports it to the model as an observation."""


class ToolNotFoundError(ToolError):
    pass


class ToolArgumentsError(ToolError):
    pass


class ToolTimeoutError(ToolError):
    pass


class ToolExecutionError(ToolError):
    pass


class RunError(ThinkloopError):
    """The run as a whole could not produce what was asked."""


class OutputValidationError(RunError):
    pass


class RunAccessError(ThinkloopError):
    """The caller asked for a run it may not touch: another session's, or one that does not
    exist or cannot be resumed. Nothing was changed."""


class StoreError(ThinkloopError):
    """A store could not be opened, migrated, read or written; the message is one line."""
