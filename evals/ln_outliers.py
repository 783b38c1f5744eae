"""LN gamma against FF-output outlier dimensions (Kobayashi et al. 2024, §6.2, Fig. 8).

Per layer: the Pearson and Spearman correlation, over dimensions, between the gain γ of the norm
that next reads the FF output (Post-LN: LN2; Pre-LN: the next layer's first norm, or the final
norm) and the mean |FF output| in that dimension. Then the FF's contextualization change
(1 − Spearman of the maps before and after the FF) is recomputed with the bottom-1 % γ dimensions
left out of the FF parts' norms. Published: r from −0.45 to −0.78 (BERT-base), change 0.21 → 0.09.
"""
import numpy as np
import torch
from scipy.stats import pearsonr

from attrbench.plugin import Analysis, register, spearman
from attrbench.plugin.internal import (
    decompositions,
    ff_output_readers,
    layout_for,
    map_change,
    mean_of_defined,
    norm_spec,
)

BOTTOM = 0.01


class LNOutliers(Analysis):
    name = "ln_outliers"
    description = "LN gamma vs FF-output magnitude per dimension; FF change without the bottom-1% gamma dims"
    reference = "Kobayashi et al. 2024, §6.2"

    def run(self, adapter, methods, examples, context):
        layout = layout_for(adapter.norm_first)
        before, after = layout.before_ff, layout.after_ff
        gains = [None if norm is None else norm_spec(norm).gamma.detach().double().cpu().numpy()
                 for norm in ff_output_readers(adapter)]  # the gain it multiplies by (Gemma's 1 + w)
        drop = [None if g is None else np.argsort(g)[:max(1, int(round(BOTTOM * len(g))))] for g in gains]
        sums, count = None, 0
        full, reduced = [], []
        for dec in decompositions(adapter, examples, [before, after], context.progress, self.name, keep_parts=True):
            per_full, per_reduced = [], []
            for layer, parts in enumerate(dec.parts):
                ff_parts, ff_bias = parts[after]
                out = ff_parts.sum(1) + ff_bias  # the FF output of each token, (n, d)
                mag = out.abs().double().sum(0).cpu().numpy()
                sums = np.zeros((adapter.n_layers, len(mag))) if sums is None else sums
                sums[layer] += mag
                keep = np.ones(ff_parts.shape[-1], dtype=bool)
                if drop[layer] is not None:
                    keep[drop[layer]] = False
                trimmed = ff_parts[..., torch.from_numpy(keep).to(ff_parts.device)].norm(dim=-1).double().cpu().numpy()
                per_full.append(map_change(dec.maps[before][layer], dec.maps[after][layer], adapter.causal))
                per_reduced.append(map_change(dec.maps[before][layer], trimmed, adapter.causal))
            count += len(dec.tokens)
            full.append(per_full)
            reduced.append(per_reduced)
        mean_abs = sums / count
        pearson, rank_corr = [], []
        for g, m in zip(gains, mean_abs):
            rho = None if g is None else spearman(g, m)  # None: a constant vector has no correlation
            rank_corr.append(rho)
            pearson.append(None if rho is None else float(pearsonr(g, m).statistic))
        defined = [p for p in pearson if p is not None]
        return [
            self.record(adapter, context, "-", "gamma_vs_ff_pearson", defined, examples, per_layer=pearson,
                        per_layer_spearman=rank_corr, values_per="layer",
                        note="values are per layer (over dimensions), not per example"),
            self.record(adapter, context, "-", "ff_change", mean_of_defined(full, 1), examples,
                        per_layer=mean_of_defined(full, 0), maps=[before, after]),
            self.record(adapter, context, "-", "ff_change_without_bottom_gamma", mean_of_defined(reduced, 1), examples,
                        per_layer=mean_of_defined(reduced, 0), dropped_fraction=BOTTOM,
                        dropped_dims=[None if d is None else d.tolist() for d in drop]),
        ]


register(LNOutliers)
