"""Facts about the software a result was computed with, recorded beside every result."""
from __future__ import annotations

import platform
import sys

import torch
import transformers

from .._version import __version__


def library_versions() -> dict:
    return {"attrbench": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": sys.version.split()[0], "platform": platform.platform()}
