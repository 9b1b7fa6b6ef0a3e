"""The one loop and its transitions, limits, result and handle."""

from thinkloop.hooks import Limits, RunConfig, RunState
from thinkloop.loop.handle import RunHandle
from thinkloop.loop.result import RunResult

__all__ = ["Limits", "RunConfig", "RunHandle", "RunResult", "RunState"]
