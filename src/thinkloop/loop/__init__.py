"""The one loop and its transitions, limits, result and handle."""

from thinkloop.loop.handle import RunHandle
from thinkloop.loop.result import RunResult
from thinkloop.loop.state import Limits, RunConfig, RunState

__all__ = ["Limits", "RunConfig", "RunHandle", "RunResult", "RunState"]
