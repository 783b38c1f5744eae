"""What a dataset is: examples (text + target) for one model, and the base class of dataset plugins."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..errors import InputError
from ..params import Configurable

PACKAGE_DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Example:
    id: str
    text: str
    target: str  # Target syntax: "class:1", "contrast:is/are", "auto" (the model's prediction)
    meta: dict = field(default_factory=dict, compare=False, hash=False)


def data_path(relative: str, data_dir: Optional[str | Path] = None) -> Path:
    """A shipped data file (or the same path under ``data_dir``), checked to exist."""
    path = Path(data_dir or PACKAGE_DATA) / relative
    if not path.is_file():
        raise InputError(f"data file {path} is missing; reinstall attrbench or point --data-dir at a folder "
                         f"holding {relative}")
    return path


class Dataset(Configurable):
    """Base class of a dataset plugin: turns the rows of its files into examples with targets for a model.

    Subclasses set ``name``, ``family``, ``description``, ``reference`` (source and licence),
    ``files`` (split -> path under the data folder) and ``default_split``, and implement
    :meth:`examples`. Built-ins live in ``attrbench/datasets/builtin/``; third parties register
    through the entry-point group ``attrbench.datasets``. Declared ``params`` (e.g. which target an
    example is explained for) are set per suite (``dataset_params``) or with ``--param NAME.PARAM=VALUE``.
    """

    kind = "dataset"
    family: str = ""
    description: str = ""
    reference: str = ""
    files: dict = {}
    splits: tuple = ()  # the splits it serves, when they are not just the file keys
    default_split: str = "all"

    def examples(self, adapter, split: str, data_dir=None) -> tuple[list[Example], dict]:
        """All examples of ``split`` as ``adapter`` reads them, and notes (split, target, file sha256, skips)."""
        raise NotImplementedError

    def file(self, split: str, data_dir=None) -> Path:
        if split not in self.files:
            raise InputError(f"{self.name} has splits {', '.join(self.files)}, not '{split}'")
        return data_path(self.files[split], data_dir)
