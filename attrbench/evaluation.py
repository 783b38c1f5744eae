"""The one call shape every evaluation plugin has, and the steps several evaluations share.

``evaluation(adapter, methods, examples, context) -> list[dict]``: one record per (method, metric),
each with at least ``model, method, eval, dataset, metric, mean, std, n`` and the example ids it
was computed on. Evaluations that score methods get their input attributions from
:func:`attributions`, so every evaluation explains the same examples with the same targets.
Analyses of the model itself (the papers' figures) take no methods (``needs_methods = False``).
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .datasets import Example
from .errors import InputError
from .method import Method, MethodResult
from .models.adapter import pad_ids
from .targets import Target, explained_row, resolve


@dataclass
class EvalContext:
    """What an evaluation is run on, besides the model, methods and examples."""

    dataset: str
    seed: int = 0
    rank: str = "scipy"  # Spearman convention: "scipy" (tie-corrected) or "dense" (the ALTI scripts)
    progress: bool = True
    notes: dict = field(default_factory=dict)  # the dataset's split, target convention, file hash


class Evaluation:
    """Base class. Subclasses set ``name``, ``family``, ``description``, ``reference``."""

    name: str = ""
    family: str = ""
    description: str = ""
    reference: str = ""
    needs_methods: bool = True
    score_methods_only: bool = True  # needs input attributions (not token-to-token maps)

    def takes(self, method: Method) -> bool:
        return method.output == "scores" or not self.score_methods_only

    def methods_for(self, adapter, names) -> list[Method]:
        """The methods named (``"all"``: every method the model supports that this evaluation takes)."""
        from .registry import METHODS

        if not self.needs_methods:
            return []
        if names == "all" or list(names) == ["all"]:
            return [m for m in METHODS.all() if m.supports(adapter) is None and self.takes(m)]
        return [METHODS.get(name) for name in names]

    def check(self, adapter, methods: Sequence[Method], context: EvalContext) -> None:
        """Raise before any work if this evaluation cannot serve these methods on this model."""
        if self.needs_methods and not methods:
            raise InputError(f"evaluation '{self.name}' scores methods: give --method (one or more)")
        for method in methods:
            if not self.takes(method):
                raise InputError(f"'{method.name}' gives token-to-token maps, not input attributions; "
                                 f"'{self.name}' needs a scores method (e.g. its rollout)")
            reason = method.supports(adapter)
            if reason:
                raise InputError(f"method '{method.name}' cannot run on '{adapter.name}': {reason}")

    def __call__(self, adapter, methods: Sequence[Method], examples: Sequence[Example],
                 context: EvalContext) -> list[dict]:
        if not examples:
            raise InputError(f"evaluation '{self.name}' got an empty sample: give --n of at least 1")
        self.check(adapter, methods, context)
        return self.run(adapter, list(methods), list(examples), context)

    def run(self, adapter, methods, examples, context) -> list[dict]:
        raise NotImplementedError

    def record(self, adapter, context: EvalContext, method: Optional[str], metric: str, values,
               examples: Sequence[Example], **extra) -> dict:
        """A result row: mean ± std over the defined per-example ``values`` (None marks undefined ones).

        ``values`` (and ``per_example``, when given) are kept per example, in the order of
        ``example_ids``, so records of several shards merge exactly (:meth:`merge`).
        """
        values = [None if v is None else float(v) for v in values]
        return {"model": adapter.name, "method": method or "-", "eval": self.name, "dataset": context.dataset,
                "metric": metric, **summary(values), "seed": context.seed,
                "example_ids": [e.id for e in examples], "values": values, **context.notes, **extra}

    def merge(self, shards: Sequence[dict]) -> dict:
        """One record from the same record of several example shards (in shard order)."""
        merged = dict(shards[0])
        for key in ("values", "example_ids", "per_example"):
            if key in merged:
                merged[key] = [v for shard in shards for v in shard[key]]
        merged.update(summary(merged["values"]), sample_size=len(merged["example_ids"]))
        return merged


def summary(values: Sequence[Optional[float]]) -> dict:
    defined = np.array([v for v in values if v is not None], dtype=np.float64)
    return {"mean": float(defined.mean()) if len(defined) else None,
            "std": float(defined.std()) if len(defined) else None,
            "n": int(len(defined)), "n_undefined": int(len(values) - len(defined))}


def non_special(adapter, input_ids: Sequence[int]) -> np.ndarray:
    """Positions of the tokens an attribution is judged on: all but special tokens ([CLS], [SEP], [MASK]).

    [UNK] stands for a real input word, so it is judged like one.
    """
    special = set(adapter.tokenizer.all_special_ids) - {adapter.tokenizer.unk_token_id}
    return np.array([k for k, t in enumerate(input_ids) if t not in special], dtype=np.int64)


_ATTRIBUTIONS: "OrderedDict[tuple, MethodResult]" = OrderedDict()
_CACHE_SIZE = 20_000


def attributions(adapter, method: Method, examples: Sequence[Example], progress: bool = False,
                 desc: str = "") -> list[MethodResult]:
    """One method's input attributions for each example's own target.

    Memoised per process (the methods are deterministic, a conformance check), so the evaluations
    of one run share the attributions they score instead of recomputing them.
    """
    bar = tqdm(examples, desc=desc or method.name, unit="ex", disable=not progress, leave=False)
    results = []
    for e in bar:
        key = (id(adapter.model), adapter.name, str(adapter.dtype), id(method), method.name,
               method.ff_attribution, e.text, e.target)
        if key not in _ATTRIBUTIONS:
            _ATTRIBUTIONS[key] = method(adapter, [e.text], target=e.target)[0]
            if len(_ATTRIBUTIONS) > _CACHE_SIZE:
                _ATTRIBUTIONS.popitem(last=False)
        results.append(_ATTRIBUTIONS[key])
    return results


def resolved_target(adapter, example: Example, input_ids: list[int]):
    """The example's target made concrete on the unperturbed text (predicted classes fixed here)."""
    target = Target.parse(example.target)
    ids = torch.tensor([input_ids])
    with torch.no_grad():
        logits = adapter.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    return target, resolve(adapter, input_ids, target, logits)


@torch.no_grad()
def target_probabilities(adapter, target: Target, resolved, sequences: Sequence[Sequence[int]],
                         batch_size: int = 64) -> np.ndarray:
    """p(explained class/token) for token-id sequences (perturbed texts), each read at its own row."""
    out = np.zeros(len(sequences))
    order = np.argsort([len(s) for s in sequences])
    for k in range(0, len(order), batch_size):
        chunk = order[k:k + batch_size]
        ids, mask = pad_ids([sequences[i] for i in chunk], adapter.tokenizer.pad_token_id)
        logits = adapter.model(input_ids=ids, attention_mask=mask).logits.double()
        for b, i in enumerate(chunk):
            at_row = dataclasses.replace(resolved, row=explained_row(adapter, list(sequences[i]), target))
            out[i] = float(at_row.probability(logits[b:b + 1])[0])
    return out


def _release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc), so the next call's peak shows in RSS again."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the peak may then read low after earlier calls
        pass


class PeakMemory:
    """Peak resident memory above the starting level while the block runs (sampled every 2 ms).

    Freed heap pages are returned to the OS first, else memory reused from earlier calls would not
    show.
    """

    peak_bytes = 0

    def __enter__(self):
        import psutil

        _release_free_memory()
        process = psutil.Process()
        self.base = process.memory_info().rss
        self._stop = threading.Event()
        self._max = self.base

        def sample():
            while not self._stop.is_set():
                self._max = max(self._max, process.memory_info().rss)
                self._stop.wait(0.002)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        import psutil

        self._max = max(self._max, psutil.Process().memory_info().rss)
        self.peak_bytes = self._max - self.base
        return False


def timed(fn):
    """(result, seconds, peak MB above the start) of one call."""
    with PeakMemory() as memory:
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
    return result, seconds, memory.peak_bytes / 2**20


def ceil_count(percent: float, m: int) -> int:
    return min(m, max(1, math.ceil(percent * m / 100)))


def decompositions(adapter, examples: Sequence[Example], scopes: Optional[Sequence[str]], progress: bool = False,
                   desc: str = "decompose", **options):
    """Decompose each example's text (one at a time, so kept parts stay small); yields Decompositions.

    ``scopes=None`` decomposes every scope of the model.
    """
    from .decompose import decompose

    for example in tqdm(examples, desc=desc, unit="ex", disable=not progress, leave=False):
        yield decompose(adapter, [example.text], scopes=None if scopes is None else list(scopes), **options)[0]


class Analysis(Evaluation):
    """A paper's analysis of the model itself: runs the engine on the dataset's texts, takes no methods."""

    family = "analysis"
    needs_methods = False

    def check(self, adapter, methods, context):
        pass  # methods given alongside other evaluations are simply not used here


def evaluate(adapter, method_names: Sequence[str], eval_names: Sequence[str], dataset: str, *,
             n: Optional[int] = 500, seed: int = 0, split: Optional[str] = None, rank: str = "scipy",
             data_dir=None, progress: bool = True) -> list[dict]:
    """Run evaluations on a seeded sample of a dataset; every check is made before any work starts."""
    from .datasets import examples_for, sample
    from .registry import EVALS

    evals = [EVALS.get(name) for name in eval_names]
    if not evals:
        raise InputError(f"no evaluation given; known: {', '.join(EVALS.names())}")
    if rank not in ("scipy", "dense"):
        raise InputError(f"rank convention '{rank}' is not known; use scipy or dense")
    if method_names and not any(e.needs_methods for e in evals):
        raise InputError(f"{', '.join(eval_names)} analyse(s) the model itself and take(s) no --method")
    examples, notes = examples_for(adapter, dataset, split, data_dir)
    chosen = sample(examples, n, seed)
    plans = []
    for evaluation in evals:
        methods = evaluation.methods_for(adapter, method_names)
        context = EvalContext(dataset, seed, rank, progress, {**notes, "sample_size": len(chosen),
                                                              "dataset_size": len(examples)})
        evaluation.check(adapter, methods, context)
        plans.append((evaluation, methods, context))
    records = []
    for evaluation, methods, context in plans:
        records += evaluation(adapter, methods, chosen, context)
    return records
