"""Models: the protocol, the registry of model strings, and one module per provider.

``anthropic`` and ``local`` are imported only when a model string names them, so importing
thinkloop does not load the Anthropic SDK or llama.cpp.
"""

from thinkloop.core.errors import MissingCredentialsError, RetriesExhaustedError
from thinkloop.core.model import Model, ModelSettings
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.openai_wire import WireQuirks
from thinkloop.models.presets import PRESETS, Preset
from thinkloop.models.registry import ModelRegistry, default_registry, resolve_model
from thinkloop.models.retry import RetryPolicy
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.models.wrappers import FallbackModel, OverflowRecovery

__all__ = [
    "PRESETS",
    "FallbackModel",
    "MissingCredentialsError",
    "Model",
    "ModelRegistry",
    "ModelSettings",
    "OpenAICompatModel",
    "OverflowRecovery",
    "Preset",
    "RetriesExhaustedError",
    "RetryPolicy",
    "ScriptedModel",
    "WireQuirks",
    "call",
    "default_registry",
    "reply",
    "resolve_model",
]
