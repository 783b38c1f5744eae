"""Errors that reach the user as one line naming the fix (the CLI prints ``error: <message>``)."""
import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """Control characters (line breaks included) of quoted user input written as escapes."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


class AttrbenchError(Exception):
    """Base class: every message is a single line that says what to do."""

    def __init__(self, message: str = "", *args):
        super().__init__(one_line(str(message)), *args)


class ModelLoadError(AttrbenchError):
    """The model name, files or architecture cannot be used."""


class InputError(AttrbenchError):
    """The text, scopes, layers or options asked for are invalid."""


class CompletenessError(AttrbenchError):
    """A decomposition did not reconstruct the real forward pass within tolerance."""


class MethodError(AttrbenchError):
    """A method returned values that cannot be a result (wrong shape, non-finite); nothing is kept."""


class UnknownPluginError(InputError):
    """No method, evaluation or dataset is registered under that name."""
