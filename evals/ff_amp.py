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

from attrbench.plugin import Analysis, register
from attrbench.plugin.internal import decompositions, layout_for, safe_divide, visible_cells

TOP = 10


def column_normalise(maps: np.ndarray) -> np.ndarray:
    return safe_divide(maps, maps.sum(-2, keepdims=True))


class FFAmp(Analysis):
    name = "ff_amp"
    description = "token pairs whose contribution the FF amplifies most, per layer"
    reference = "Kobayashi et al. 2024, §5.2"
    figures = ()  # its result is the table of top pairs

    def run(self, adapter, methods, examples, context):
        layout = layout_for(adapter.norm_first)
        before, after = layout.before_ff, layout.after_ff
        sums = [defaultdict(float) for _ in range(adapter.n_layers)]
        counts = [defaultdict(int) for _ in range(adapter.n_layers)]
        top_cell = []
        for dec in decompositions(adapter, examples, [before, after], context.progress, self.name):
            amp = column_normalise(dec.maps[after].astype(np.float64)) - column_normalise(
                dec.maps[before].astype(np.float64))
            n = amp.shape[-1]
            i, j = np.nonzero(~np.eye(n, dtype=bool) & visible_cells(n, adapter.causal))
            if len(i) == 0:  # a one-token text: no pair to amplify, so no value (counted as undefined)
                top_cell.append(None)
                continue
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

    def layer_summary(self, record):
        """The top two pairs of each layer: "to ← from (score)"."""
        return "; ".join(f"L{k}: " + ", ".join(f"{p['to']} ← {p['from']} ({p['ff_amp']:.2f})" for p in top[:2])
                         for k, top in enumerate(record["per_layer"]))


register(FFAmp)
