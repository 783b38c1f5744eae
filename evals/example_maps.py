"""Every scope's map for a few examples, kept for the report's heatmaps (Kobayashi et al. 2024, Fig. 9-10).

For the first ``EXAMPLES`` sampled texts, the maps of all scopes at a middle and the last layer,
with their completeness residuals and the series to draw (atb through the whole layer). The
record's value per example is the FF's contextualization change at the last layer (1 − Spearman
of the maps before and after the FF), so the figure's story has a number beside it.
"""
from attrbench.plugin import Analysis, register
from attrbench.plugin.internal import decompositions, layout_for, map_change

EXAMPLES = 2


class ExampleMaps(Analysis):
    name = "example_maps"
    description = "all scopes' maps of a few examples at a middle and the last layer (for heatmaps)"
    reference = "Kobayashi et al. 2024, Fig. 9-10"
    figures = ("heatmaps",)

    def run(self, adapter, methods, examples, context):
        layout = layout_for(adapter.norm_first)
        layers = sorted({adapter.n_layers // 2, adapter.n_layers - 1})
        kept, values = [], []
        for dec in decompositions(adapter, examples[:EXAMPLES], None, context.progress, self.name, layers=layers):
            kept.append({"id": examples[len(kept)].id, "tokens": dec.tokens, "layers": layers,
                         "maps": {s: m.tolist() for s, m in dec.maps.items()}, "residuals": dec.residuals,
                         "value_bias": dec.value_bias, "dtype": dec.dtype, "series": list(layout.through_layer)})
            values.append(map_change(dec.maps[layout.before_ff][-1], dec.maps[layout.after_ff][-1], adapter.causal))
        return [self.record(adapter, context, "-", "ff_change_last_layer", values, examples[:EXAMPLES],
                            examples_kept=kept)]


register(ExampleMaps)
