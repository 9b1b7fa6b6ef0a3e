"""One exception tree for thinkloop, split by who is at fault.

::

    ThinkloopError
    ├── ConfigError                  the caller's configuration: retrying will not help
    │   ├── UnknownModelError        a model string no provider claims
    │   ├── MissingCredentialsError  a provider's key or endpoint is not configured
    │   ├── SandboxUnavailableError  the sandbox asked for cannot run on this machine
    │   └── UnknownAgentError        the gateway has no agent of that name
    ├── RequestError                 the caller's request does not fit the current state;
    │   │                            nothing was changed
    │   ├── PendingApprovalError     a session's paused run is in the way (or missing)
    │   ├── RunAccessError           a run of another session, or one that cannot be resumed
    │   ├── NotFoundError            no such thing for this user (the gateway answers 404)
    │   ├── ConflictError            it exists but cannot do that now (409)
    │   └── RunLimitError            too many runs at once; retry later (429)
    ├── ModelError                   the model provider or the network
    │   ├── ModelConnectionError     endpoint unreachable, connection reset
    │   ├── ModelTimeoutError        no answer in time
    │   ├── ModelHTTPError           a non-2xx answer (status, body)
    │   │   ├── ModelAuthError       401 / 403
    │   │   ├── ModelRateLimitError  429
    │   │   └── ContextOverflowError 400 that says the prompt is too long
    │   ├── ModelResponseError       a 2xx answer we cannot read
    │   │   └── JsonRepairError      the model's JSON, even after repair
    │   └── RetriesExhaustedError    a transient failure outlived every attempt
    ├── ToolError                    a tool or the model's use of it; never crashes a run:
    │   ├── ToolNotFoundError        the loop turns these into error observations
    │   ├── ToolArgumentsError
    │   ├── ToolTimeoutError
    │   └── ToolExecutionError
    │       ├── PathEscapeError      a path that would leave the workspace
    │       └── ChannelError         a message to a human was not delivered or answered
    │           └── NoOneToAskError  no person can be asked (ask_human says so, no failure)
    ├── RunError                     the run as a whole
    │   ├── OutputValidationError    structured output still invalid after its retries
    │   └── HookFailed               a critical hook raised; the run fails with it
    ├── StoreError                   a store could not be opened, migrated, read or written
    │   └── DamagedStoreError        its file is damaged or not a database: move it aside
    ├── GatewayError                 a gateway a client talks to (``thinkloop ui --gateway``)
    │   └── GatewayUnreachableError  it did not answer (it is down, or the network is)
    └── InternalError                a broken invariant inside thinkloop: a bug to report

Retrying is decided by type: :class:`ModelConnectionError`, :class:`ModelTimeoutError`,
:class:`ModelRateLimitError` and 5xx :class:`ModelHTTPError` are transient.

A few exceptions live elsewhere on purpose: they are signals that never leave the module that
raises them, not errors (``loop.phases.StopRun``: a hook ended the run;
``protocols.scanbase.Unsettled``: a stream needs more text; ``tools.builtin.files._Enough``:
a search has its matches; ``server.doors.Refused``: a request turned away at the door, answered
there).
``tests/test_errors.py`` holds every other exception to this tree.
"""

from __future__ import annotations


class ThinkloopError(Exception):
    """Base of every error thinkloop raises on purpose."""


class ConfigError(ThinkloopError):
    """The caller's configuration is wrong; retrying will not help."""


class UnknownModelError(ConfigError):
    """A model string that no registered provider recognises."""


class MissingCredentialsError(ConfigError):
    """A provider's key or endpoint is not configured; a fallback list may skip it."""


class SandboxUnavailableError(ConfigError):
    """The sandbox asked for cannot run on this machine; the message names what is missing."""


class UnknownAgentError(ConfigError):
    """The gateway has no agent definition of that name."""


class RequestError(ThinkloopError):
    """The request does not fit the current state (of a session, a run, the gateway); nothing
    was changed, and the same request can succeed once the state changes."""


class PendingApprovalError(RequestError):
    """The session has a paused run waiting for approval, or none when one was expected."""


class RunAccessError(RequestError):
    """The caller asked for a run it may not touch: another session's, or one that does not
    exist or cannot be resumed. Nothing was changed."""


class NotFoundError(RequestError):
    """No such thing for this user (another user's is reported the same way)."""


class ConflictError(RequestError):
    """The thing exists but cannot do that now (an ended run, an answered input)."""


class RunLimitError(RequestError):
    """Too many runs at once (per user or in all); the client should retry later."""


class GatewayError(ThinkloopError):
    """A gateway a client talks to refused a call (its message and HTTP status), or did not
    answer (:class:`GatewayUnreachableError`)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class GatewayUnreachableError(GatewayError):
    """A gateway a client (``thinkloop ui --gateway``) talks to did not answer (it is down, or
    the network is); its ``status`` is 0: no answer came."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 0)


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


class JsonRepairError(ModelResponseError, ValueError):
    """The model's text is not JSON even after repair (a ValueError too, as json's is)."""


class RetriesExhaustedError(ModelError):
    """A transient failure that outlived every attempt; ``last_error`` is the final one."""

    def __init__(self, attempts: int, last_error: ModelError) -> None:
        self.attempts = attempts
        self.last_error = last_error
        plural = "s" if attempts != 1 else ""
        super().__init__(f"gave up after {attempts} attempt{plural}: {last_error}")


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


class PathEscapeError(ToolExecutionError):
    """A path that would leave the workspace."""


class ChannelError(ToolExecutionError):
    """A message could not be delivered or no answer came back."""


class NoOneToAskError(ChannelError):
    """No person can answer this run's question (its caller has no way to be asked): not a
    failure of ``ask_human``, whose result then says so and the model goes on."""


class RunError(ThinkloopError):
    """The run as a whole could not produce what was asked."""


class OutputValidationError(RunError):
    pass


class HookFailed(RunError):
    """A critical hook raised; the run fails with this error."""


class StoreError(ThinkloopError):
    """A store could not be opened, migrated, read or written; the message is one line."""


class DamagedStoreError(StoreError):
    """The store's file is damaged (truncated, overwritten) or not a database at all; the
    message names the file and what to do about it."""


class InternalError(ThinkloopError):
    """An invariant inside thinkloop broke: a bug, never the caller's, model's or tool's."""
