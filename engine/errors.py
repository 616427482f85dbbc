"""Errors the engine raises. Each message tells a person what went wrong and what to do."""


class EngineError(Exception):
    """Base class: the message is shown to the user as it is."""


class ModelError(EngineError):
    """A model is missing, invalid, unsupported or refused."""


class GenerationError(EngineError):
    """Generation failed or was refused (for example, a prompt longer than the context)."""


class EngineProcessError(EngineError):
    """The separate engine process died or could not be started."""
