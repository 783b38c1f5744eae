"""Errors that reach the user as one line naming the fix (the CLI prints ``error: <message>``)."""


class AttrbenchError(Exception):
    """Base class: every message is a single line that says what to do."""


class ModelLoadError(AttrbenchError):
    """The model name, files or architecture cannot be used."""


class InputError(AttrbenchError):
    """The text, scopes, layers or options asked for are invalid."""


class CompletenessError(AttrbenchError):
    """A decomposition did not reconstruct the real forward pass within tolerance."""


class UnknownPluginError(AttrbenchError):
    """No method or evaluation is registered under that name."""
