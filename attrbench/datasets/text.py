"""Reading text files people give us (data, attributions): every problem names the file and line.

One place for the two failure modes all of them share: bytes that are not UTF-8, and a JSON-lines
row that does not parse.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from ..errors import InputError


def read_text(path: Path, encoding: str = "utf-8") -> str:
    """A file's text; bytes that are not UTF-8 are an error naming their line."""
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
        try:
            yield line_no, json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path} line {line_no}: not valid JSON ({err.msg})") from None
