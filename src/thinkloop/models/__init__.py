"""Models: the protocol, the registry of model strings, and one module per provider."""

from thinkloop.models.base import Model, ModelSettings
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.registry import ModelRegistry, default_registry, resolve_model
from thinkloop.models.retry import RetryPolicy
from thinkloop.models.scripted import ScriptedModel, call, reply

__all__ = [
    "Model",
    "ModelRegistry",
    "ModelSettings",
    "OpenAICompatModel",
    "RetryPolicy",
    "ScriptedModel",
    "call",
    "default_registry",
    "reply",
    "resolve_model",
]
