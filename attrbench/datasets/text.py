"""Reading text files people give us (data, attributions): every problem names the file and line.

One place for the two failure modes all of them share: bytes that are not UTF-8, and a JSON-lines
row that does not parse.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from ..errors import InputError

MAX_FILE_BYTES = 1 << 30  # data files are read whole: a larger one is refused, not allowed to exhaust memory
MAX_LINE_CHARS = 1 << 20  # one JSON line (an example or its attributions) of more than a million characters


def read_text(path: Path, encoding: str = "utf-8") -> str:
    """A file's text; bytes that are not UTF-8 are an error naming their line."""
    size = Path(path).stat().st_size
    if size > MAX_FILE_BYTES:
        raise InputError(f"{path} is {size / 2**30:.1f} GiB; attrbench reads data files whole and takes at most "
                         f"{MAX_FILE_BYTES / 2**30:.0f} GiB: sample or split it first")
    raw = Path(path).read_bytes()
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise InputError(f"{path} line {line}: not UTF-8 text (byte {raw[err.start]:#04x}); save the file as UTF-8"
                         ) from None


def json_lines(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, value) of each non-blank line of a JSON-lines file (a leading byte-order mark is skipped).

    Lines end at "\\n" only: a U+2028 inside a JSON string is text, not a line break.
    """
    for line_no, line in enumerate(read_text(path, "utf-8-sig").split("\n"), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            raise InputError(f"{path} line {line_no}: {len(line):,} characters, more than the {MAX_LINE_CHARS:,} a "
                             "line may hold; is this a JSON-lines file (one example per line)?")
        try:
            yield line_no, json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path} line {line_no}: not valid JSON ({err.msg})") from None
