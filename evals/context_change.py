"""Contextualization change through each component (Kobayashi et al. 2024, §5.1 and §6).

Change between two scopes = 1 − Spearman of their flattened token-to-token maps (the lower
triangle only in causal models), per layer, averaged over sentences. Two series, from the layer's
layout (``attrbench.decompose.layout``):

- ``step``: each component against the scope just before it (FF, RES2, LN; Post-LN order
  atb → atb_ff → atb_ff_res → atb_ff_res_ln, Pre-LN atb → atb_ln → atb_ln_ff → atb_ln_ff_res);
- ``from_atb`` (§6): FF → FF+RES → FF+RES+LN, each against the map before the FF block, showing how
  residual and normalisation undo the FF's change.

A change is undefined where a map is constant (a one-token text): such layers are left out of the
means, not scored as 0. Published layer averages (BERT-base / GPT-2): FF 0.21 / 0.15, LN 0.27 / 0.38.
"""
from attrbench.plugin import Analysis, register
from attrbench.plugin.internal import decompositions, layout_for, map_change, mean_of_defined

# layer averages of the step series, by norm placement: BERT-base (Post-LN), GPT-2 (Pre-LN)
PUBLISHED = {False: {"ff": 0.21, "ln": 0.27}, True: {"ff": 0.15, "ln": 0.38}}
PUBLISHED_SOURCE = {False: "Kobayashi et al. 2024 (BERT-base, another model)",
                    True: "Kobayashi et al. 2024 (GPT-2, another model)"}


class ContextChange(Analysis):
    name = "context_change"
    description = "1 - Spearman between the maps before and after FF, RES2 and LN, per layer"
    reference = "Kobayashi et al. 2024, §5.1, §6"

    def run(self, adapter, methods, examples, context):
        layout = layout_for(adapter.norm_first)
        pairs = {("step", c): p for c, p in layout.steps.items()}
        pairs |= {("from_atb", c): p for c, p in layout.since_ff.items()}
        scopes = sorted({scope for p in pairs.values() for scope in p})
        values = {key: [] for key in pairs}  # -> per example (layers,)
        for dec in decompositions(adapter, examples, scopes, context.progress, self.name):
            for key, (a, b) in pairs.items():
                values[key].append([map_change(x, y, adapter.causal) for x, y in zip(dec.maps[a], dec.maps[b])])
        published = PUBLISHED[adapter.norm_first]
        return [self.record(adapter, context, "-", f"change_{s}_{c}", mean_of_defined(values[(s, c)], 1), examples,
                            series=s, component=c, scopes=list(pairs[(s, c)]),
                            per_layer=mean_of_defined(values[(s, c)], 0),
                            published={"value": published[c], "source": PUBLISHED_SOURCE[adapter.norm_first]}
                            if s == "step" and c in published else None)
                for s, c in pairs]


register(ContextChange)
