"""What a report computed last time, reused while its inputs are the same: pure statistics and figures, by a digest
of their inputs and of the code that computes them.

A report of reports/full tests 8,202 pairs, draws about 90 figures and runs thousands of bootstrap and power
computations; a method placed on it changes a handful of them (its own pairs, the tables it enters). So every
expensive pure function of numbers (a pair's tests, a Bayesian signed-rank test, a power search, an interval, an
agreement bootstrap) is called through :func:`reused`: within a :func:`reusing` block its result is looked up by the
digest of (the function, the source of its module, the versions of numpy, scipy and statsmodels, its arguments), and
computed only when absent. The block writes what it used to one file (:data:`FILE`, in the report folder), in key
order, so the same rows give the same bytes in any process. A result that came from this file is exactly what the
function returned (the file is JSON with tuples and arrays tagged, floats written to the last bit). A changed input
or changed code is a new key: the result is computed again, never taken from an older one.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import gzip
import hashlib
import inspect
import io
import json
import marshal
import math
import sys
import tokenize
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np

FILE = "reuse.json.gz"  # in a report folder: what its last rendering computed, by key
FORMAT = 1


def _keyed(value):
    """``value`` with each mapping JSON cannot key (tuple keys) as a tagged list of pairs, for :func:`digest_of`."""
    if isinstance(value, dict):
        if all(isinstance(k, (str, int, float, bool)) or k is None for k in value):
            return {k: _keyed(v) for k, v in value.items()}
        return {"~m": [[_keyed(k), _keyed(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_keyed(v) for v in value]
    return value


def _plain(value):
    """What JSON does not write, as plain data that says what it was (for :func:`digest_of`)."""
    if isinstance(value, np.ndarray):
        return {"~a": [value.dtype.str, list(value.shape), value.tolist()]}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return {"~e": sorted(value, key=repr)}
    if hasattr(value, "get_params"):
        cls = type(value)
        return {"~p": [f"{cls.__module__}.{cls.__qualname__}", source_digest(cls), getattr(value, "name", ""),
                       value.get_params()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"~c": [type(value).__qualname__, {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}]}
    if hasattr(value, "to_dict") and hasattr(value, "columns") and hasattr(value, "index"):  # a DataFrame
        return {"~F": value.to_dict("split")}
    if isinstance(value, Path):
        return {"~P": str(value)}
    raise TypeError(f"no digest for {type(value).__name__}")


def digest_of(*parts) -> str:
    """A digest of ``parts`` in the order given. Plain data (dicts, lists, tuples, str, int, float, bool, None: a
    report's rows and most arguments) is digested as its ``marshal`` bytes at format 2, which writes each value by
    its type and content alone (floats as their 8 bytes, no references to objects seen before, so equal data gives
    equal bytes however it is shared) and is ten times faster than JSON's decimal floats; anything else as its JSON
    (floats exact), a mapping keyed by tuples as a list of pairs."""
    try:
        data = b"~marshal" + marshal.dumps(parts, 2)
    except ValueError:  # a numpy value, an array, a set, a parameterised object: described as JSON
        try:
            text = json.dumps(parts, default=_plain, ensure_ascii=False, check_circular=False)
        except TypeError:
            text = "~keyed" + json.dumps(_keyed(parts), default=_plain, ensure_ascii=False, check_circular=False)
        data = text.encode()
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@functools.lru_cache(maxsize=None)
def source_digest(obj) -> str:
    """The digest of the code of the file that defines ``obj`` (a function, class or module): code changed, key
    changed; its docstrings, comments and blank lines are not digested (:func:`code_of`), so that rewording them
    keeps what the published reports computed (a report's numbers and drawings never read them)."""
    try:
        source = Path(inspect.getfile(obj)).read_bytes()
    except (OSError, TypeError):
        return getattr(obj, "__qualname__", repr(obj))
    return hashlib.blake2b(code_of(source).encode(), digest_size=16).hexdigest()


def code_of(source: bytes) -> str:
    """Python ``source`` without its docstrings, comments, trailing spaces and blank lines: the text that runs.
    The docstrings are found by :mod:`ast` and the comments by :mod:`tokenize`, both by their places in the text,
    which do not depend on the Python version (their trees and token streams do); source that does not parse is
    returned whole (bytes not UTF-8 as Latin-1, each byte one character)."""
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError:
        return source.decode("latin-1")
    lines = text.splitlines()
    try:
        tree = ast.parse(text)
        comments = [token.start for token in tokenize.generate_tokens(io.StringIO(text).readline)
                    if token.type == tokenize.COMMENT]
    except (SyntaxError, tokenize.TokenError, ValueError):
        return text
    cut: dict[int, list[tuple[int, int]]] = {}  # per line (0-based): the character spans to leave out

    def char(row: int, byte: int) -> int:  # ast's columns count UTF-8 bytes
        return len(lines[row].encode()[:byte].decode())

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            doc = body[0]
            first, last = doc.lineno - 1, doc.end_lineno - 1
            start, end = char(first, doc.col_offset), char(last, doc.end_col_offset)
            for row in range(first, last + 1):
                cut.setdefault(row, []).append((start if row == first else 0,
                                                end if row == last else len(lines[row])))
    for row, column in comments:
        cut.setdefault(row - 1, []).append((column, len(lines[row - 1])))
    kept = []
    for row, line in enumerate(lines):
        for start, end in sorted(cut.get(row, ()), reverse=True):
            line = line[:start] + line[end:]
        if line.strip():
            kept.append(line.rstrip())
    return "\n".join(kept)


@functools.lru_cache(maxsize=1)
def _versions() -> str:
    """The libraries whose numbers and drawings a report holds (installed versions, whether imported yet or not)."""
    names = ("numpy", "scipy", "statsmodels", "pandas", "matplotlib", "baycomp")
    found = []
    for name in names:
        try:
            found.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name}=")
    return ";".join(found) + f";format={FORMAT}"


def _differences(kept: str, here: str) -> str:
    """The libraries of two :func:`_versions` strings that differ, as "pandas 3.1.1 (3.1.2 here)"."""
    def parsed(text: str) -> dict[str, str]:
        return dict(part.partition("=")[::2] for part in text.split(";") if "=" in part)

    old, new = parsed(kept), parsed(here)
    return ", ".join(f"{name} {old.get(name) or 'none'} ({new.get(name) or 'none'} here)"
                     for name in new if old.get(name) != new.get(name)) or "another file format"


# -- the file: JSON that gives back exactly what was stored (tuples, arrays and non-finite floats tagged) ----------

def _encode(value):
    if isinstance(value, tuple):
        return {"~t": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        if all(type(k) is str for k in value):
            return {"~d": {k: _encode(v) for k, v in value.items()}}
        return {"~m": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, np.ndarray):
        return {"~a": [value.dtype.str, list(value.shape), [_encode(v) for v in value.ravel().tolist()]]}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else {"~f": repr(value)}
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"cannot keep a {type(value).__name__}")


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        (tag, body), = value.items()
        if tag == "~t":
            return tuple(_decode(v) for v in body)
        if tag == "~d":
            return {k: _decode(v) for k, v in body.items()}
        if tag == "~m":
            return {_decode(k): _decode(v) for k, v in body}
        if tag == "~a":
            dtype, shape, items = body
            return np.array([_decode(v) for v in items], dtype=np.dtype(dtype)).reshape(shape)
        if tag == "~f":
            return float(body)
        raise ValueError(f"unknown tag {tag}")
    return value


class Reuse:
    """The results a report folder's last rendering kept, and those this one uses (see the module docstring)."""

    def __init__(self, folder: Optional[Path] = None):
        self.folder = None if folder is None else Path(folder)
        self.known: dict[str, object] = {}
        self.unused: Optional[str] = None  # why a kept file was not used: the libraries that differ
        if self.folder is not None:
            try:
                with gzip.open(self.folder / FILE, "rt", encoding="utf-8") as f:
                    stored = json.load(f)
                if stored.get("versions") == _versions():
                    self.known = stored["results"]
                else:
                    self.unused = _differences(str(stored.get("versions")), _versions())
            except (OSError, ValueError, KeyError, EOFError):
                self.known = {}
        self.used: dict[str, object] = {}
        self._rows: dict[int, tuple[object, str]] = {}
        self.computed = self.reused = 0

    def rows(self, rows: list) -> list[str]:
        """The digest of each row (a record: a mapping), each row digested once per rendering (rows are not changed
        once read; the row itself is held, so its identity is not taken by another)."""
        out = []
        for row in rows:
            entry = self._rows.get(id(row))
            if entry is None or entry[0] is not row:
                entry = self._rows[id(row)] = (row, digest_of(row))
            out.append(entry[1])
        return out

    def get(self, key: str, compute: Callable[[], object], valid: Callable[[object], bool] = lambda _: True):
        if key in self.used:
            self.reused += 1
            return _decode(self.used[key])
        if key in self.known:
            stored = self.known[key]
            value = _decode(stored)
            if valid(value):
                self.reused += 1
                self.used[key] = stored
                return value
        value = compute()
        self.computed += 1
        self.used[key] = _encode(value)
        return value

    def put(self, key: str, value) -> None:
        """Keep ``value`` for ``key`` in place of what was computed (a result completed after it was returned)."""
        self.used[key] = _encode(value)

    def save(self, folder: Optional[Path] = None) -> Optional[Path]:
        """Write what this rendering used, in key order (the same bytes for the same results), to ``folder``."""
        target = Path(folder or self.folder)
        target.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"versions": _versions(), "results": dict(sorted(self.used.items()))},
                          separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        tmp = target / (FILE + ".tmp")
        with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(text.encode())
        tmp.replace(target / FILE)
        return target / FILE


_ACTIVE: ContextVar[Optional[Reuse]] = ContextVar("reuse", default=None)


@contextmanager
def reusing(folder: Path, *also: Path) -> Iterator[Reuse]:
    """Within this block, :func:`reused` functions take what ``folder``'s last rendering kept (or, where it kept
    nothing, the first of ``also`` that did: a published folder rendered elsewhere); at its end what was used is
    written to ``folder``."""
    source = next((f for f in (folder, *also) if (Path(f) / FILE).is_file()), folder)
    reuse = Reuse(source)
    token = _ACTIVE.set(reuse)
    try:
        yield reuse
        reuse.save(folder)
    finally:
        _ACTIVE.reset(token)


def active() -> Optional[Reuse]:
    return _ACTIVE.get()


def key_of(function: Callable, *parts) -> str:
    """The key of ``function`` on ``parts``: its qualified name, its module's source, the libraries' versions."""
    return digest_of(f"{function.__module__}.{function.__qualname__}", source_digest(sys.modules[function.__module__]),
                     _versions(), *parts)


def reused(function: Callable) -> Callable:
    """``function`` (pure: its result depends on its arguments and its code only) looked up within :func:`reusing`,
    and called as it is outside."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        reuse = _ACTIVE.get()
        if reuse is None:
            return function(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        try:
            key = key_of(function, bound.arguments)
        except TypeError:  # an argument without a digest: computed as it is
            return function(*args, **kwargs)
        return reuse.get(key, lambda: function(*args, **kwargs))

    return wrapper
