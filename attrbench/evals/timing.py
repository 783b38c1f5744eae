"""Cost: wall time and peak memory of each method on each example, with its sequence length.

Every method runs on the same examples, one at a time, after one warm-up call (lazy
initialisation is not the method's cost). Memory is the peak resident set above the level before
the call, sampled every 2 ms. The per-example rows
(``per_example``: id, n_tokens, seconds, peak_mb) are kept so cost can be plotted against n.
"""
from tqdm.auto import tqdm

from attrbench.plugin import Evaluation, register, timed


class Timing(Evaluation):
    name, family = "timing", "cost"
    description = "wall time and peak memory per method per example, with sequence length"
    reference = "-"
    score_methods_only = False
    primary_metric = "seconds_per_example"
    higher_is_better = {"seconds_per_example": False, "peak_mb": False}
    figures = ("cost", "bars")
    cost_columns = {"seconds_per_example": ("s / example", 3), "peak_mb": ("peak MB", 0)}

    def run(self, adapter, methods, examples, context):
        records = []
        for method in methods:
            method(adapter, [examples[0].text], target=examples[0].target)  # warm-up
            rows = []
            for example in tqdm(examples, desc=f"time {method.name}", unit="ex", disable=not context.progress,
                                leave=False):
                (result,), seconds, peak_mb = timed(lambda: method(adapter, [example.text], target=example.target))
                rows.append({"id": example.id, "n_tokens": len(result.tokens), "seconds": seconds,
                             "peak_mb": peak_mb})
            for metric, key in (("seconds_per_example", "seconds"), ("peak_mb", "peak_mb")):
                records.append(self.record(adapter, context, method, metric, [r[key] for r in rows], examples,
                                           per_example=rows))
        return records


register(Timing)
