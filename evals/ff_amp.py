"""FF amplification of token pairs (Kobayashi et al. 2024, §5.2).

Per layer, both maps are column-normalised (each column sums to 1) and the map before the FF
(``atb``; Pre-LN: ``atb_ln``) is subtracted from the map after it (``atb_ff``; ``atb_ln_ff``): the
FF-amp matrix. Scores are averaged per token-type pair (w_i, w_j) over the sample; pairs at the same
position and pairs seen only once are left out. Reported: the top pairs per layer, and as the
record's value each example's mean FF-amp over its off-diagonal cells (a layer's overall
amplification is 0 by construction only when nothing moves).
"""
from collections import defaultdict

import numpy as np

from attrbench.evaluation import Analysis, decompositions
from attrbench.registry import EVALS

from .context_change import series_for, visible

TOP = 10


def column_normalise(maps: np.ndarray) -> np.ndarray:
    return maps / np.maximum(maps.sum(-2, keepdims=True), 1e-30)


class FFAmp(Analysis):
    name = "ff_amp"
    description = "token pairs whose contribution the FF amplifies most, per layer"
    reference = "Kobayashi et al. 2024, §5.2"

    def run(self, adapter, methods, examples, context):
        before, after = series_for(adapter)["step"]["ff"]
        sums = [defaultdict(float) for _ in range(adapter.n_layers)]
        counts = [defaultdict(int) for _ in range(adapter.n_layers)]
        top_cell = []
        for dec in decompositions(adapter, examples, [before, after], context.progress, self.name):
            amp = column_normalise(dec.maps[after].astype(np.float64)) - column_normalise(
                dec.maps[before].astype(np.float64))
            n = amp.shape[-1]
            i, j = np.nonzero(~np.eye(n, dtype=bool) & visible(n, adapter.causal))
            top_cell.append(float(amp[:, i, j].max(-1).mean()))
            for layer in range(adapter.n_layers):
                for a, b, v in zip(i, j, amp[layer, i, j]):
                    key = (dec.tokens[a], dec.tokens[b])
                    sums[layer][key] += float(v)
                    counts[layer][key] += 1
        per_layer = []
        for layer in range(adapter.n_layers):
            pairs = [(k, sums[layer][k] / c, c) for k, c in counts[layer].items() if c > 1]
            pairs.sort(key=lambda p: -p[1])
            per_layer.append([{"to": k[0], "from": k[1], "ff_amp": v, "count": c} for k, v, c in pairs[:TOP]])
        return [self.record(adapter, context, "-", "max_ff_amp", top_cell, examples, per_layer=per_layer,
                            maps=[before, after], note="value: per example, the largest FF-amp cell, "
                            "mean over layers; per_layer: top pairs by type (seen more than once)")]


EVALS.add(FFAmp)
