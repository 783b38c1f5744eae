"""Contextualization change through each component (Kobayashi et al. 2024, §5.1 and §6).

Change between two scopes = 1 − Spearman of their flattened token-to-token maps (the lower
triangle only in causal models), per layer, averaged over sentences. Two series:

- ``step``: each component against the scope just before it (FF, RES2, LN; Post-LN order
  atb → atb_ff → atb_ff_res → atb_ff_res_ln, Pre-LN atb → atb_ln → atb_ln_ff → atb_ln_ff_res);
- ``from_atb`` (§6): FF → FF+RES → FF+RES+LN, each against the map before the FF block, showing how
  residual and normalisation undo the FF's change.

Published layer averages (BERT-base / GPT-2): FF 0.21 / 0.15, LN 0.27 / 0.38.
"""
import numpy as np
from scipy.stats import spearmanr

from attrbench.evaluation import Analysis, decompositions
from attrbench.registry import EVALS

POST_LN = {"step": {"ff": ("atb", "atb_ff"), "res": ("atb_ff", "atb_ff_res"), "ln": ("atb_ff_res", "atb_ff_res_ln")},
           "from_atb": {"ff": ("atb", "atb_ff"), "ff_res": ("atb", "atb_ff_res"), "ff_res_ln": ("atb", "atb_ff_res_ln")}}
PRE_LN = {"step": {"ln": ("atb", "atb_ln"), "ff": ("atb_ln", "atb_ln_ff"), "res": ("atb_ln_ff", "atb_ln_ff_res")},
          "from_atb": {"ff": ("atb_ln", "atb_ln_ff"), "ff_res": ("atb_ln", "atb_ln_ff_res")}}
PUBLISHED = {"ff": "BERT-base 0.21, GPT-2 0.15", "ln": "BERT-base 0.27, GPT-2 0.38"}


def visible(n: int, causal: bool) -> np.ndarray:
    """(n, n) mask of the cells a map can have: the lower triangle for a causal model, else all."""
    everything = np.ones((n, n), dtype=bool)
    return np.tril(everything) if causal else everything


def change(before: np.ndarray, after: np.ndarray, causal: bool) -> float:
    """1 − Spearman of two (n, n) maps; 0 for identical rankings."""
    keep = visible(before.shape[-1], causal)
    a, b = before[keep], after[keep]
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float(np.ptp(a) != np.ptp(b))
    return float(1 - spearmanr(a, b).statistic)


def series_for(adapter) -> dict:
    return PRE_LN if adapter.norm_first else POST_LN


class ContextChange(Analysis):
    name = "context_change"
    description = "1 - Spearman between the maps before and after FF, RES2 and LN, per layer"
    reference = "Kobayashi et al. 2024, §5.1, §6"

    def run(self, adapter, methods, examples, context):
        series = series_for(adapter)
        pairs = {(s, c): p for s, comps in series.items() for c, p in comps.items()}
        scopes = sorted({scope for p in pairs.values() for scope in p})
        values = {key: [] for key in pairs}  # -> per example (layers,)
        for dec in decompositions(adapter, examples, scopes, context.progress, self.name):
            for key, (a, b) in pairs.items():
                values[key].append([change(x, y, adapter.causal) for x, y in zip(dec.maps[a], dec.maps[b])])
        return [self.record(adapter, context, "-", f"change_{s}_{c}", np.mean(values[(s, c)], 1).tolist(), examples,
                            series=s, component=c, scopes=list(pairs[(s, c)]),
                            per_layer=np.mean(values[(s, c)], 0).tolist(),
                            published=PUBLISHED.get(c) if s == "step" else None)
                for s, c in pairs]


EVALS.add(ContextChange)
