"""Cost: wall time and peak memory of each method's attribution of each example, with its length.

Every attribution a run computes is timed as it is computed (``attrbench.runtime.workspace.Workspace``: one
untimed warm-up call of each method per process first, on the dataset's shortest example in a run, since
lazy imports and compilation are not the method's cost), so timing costs nothing beyond the attributions the
other evaluations score. Memory is the peak resident set above the level before the call, sampled every 2 ms,
plus on a CUDA GPU the peak of what torch allocated there above what it held before.
A reused (cached) attribution keeps the cost measured when it was computed. Every registered method takes a run's
texts in batches, so what is measured is a batch: a text's seconds are the batch's shared out by tokens (what it
costs when a run attributes many), and its peak memory is the batch's (what a run needs for the method at that batch
size, not one text alone); ``cost["batch"]`` records how many texts were timed together. Per example: seconds, peak
MB, the number of tokens, and seconds per token (cost grows with length, so per-token cost compares methods across
examples of different lengths), and the cost relative to one plain forward pass of the same example
(``cost_vs_forward``, the pass timed as the median of three). The report shows cost as median
[interquartile range] and does not rank it.
"""
import torch

from attrbench.plugin import Evaluation, register
from attrbench.plugin.internal import timed


class Timing(Evaluation):
    name, family = "timing", "cost"
    description = "wall time and peak memory per method per example, with sequence length"
    reference = "-"
    score_methods_only = False
    ranked = False
    primary_metric = "seconds_per_example"
    higher_is_better = {"seconds_per_example": False, "peak_mb": False, "seconds_per_token": False,
                        "cost_vs_forward": False}
    bounds = dict.fromkeys(higher_is_better, (0.0, None))
    figures = ("cost", "medians")
    cost_columns = {"seconds_per_example": ("s / example", 3), "peak_mb": ("peak MB", 0)}
    cost_metrics = {"seconds": "seconds_per_example", "forward_passes": "cost_vs_forward"}

    @torch.no_grad()
    def shared(self, work):
        """The time of one plain forward pass of the example (the unit the methods' cost is read in): the median of
        three, which leaves out a first, cold pass without spending a fourth on warming up."""
        ids = torch.tensor([work.ids], device=work.adapter.device)
        mask = torch.ones_like(ids)
        runs = [timed(lambda: work.adapter.row_logits(work.resolved.row, input_ids=ids, attention_mask=mask))[1]
                for _ in range(3)]
        return {"forward_seconds": sorted(runs)[1]}

    def score(self, work, result):
        cost = result.meta["cost"]
        return {"seconds_per_example": cost["seconds"], "peak_mb": cost["peak_mb"],
                "seconds_per_token": cost["seconds"] / cost["n_tokens"],
                "row": {"id": work.example.id, "n_tokens": cost["n_tokens"], "seconds": cost["seconds"],
                        "peak_mb": cost["peak_mb"]}}

    def summarise(self, scored, shared):
        out = super().summarise(scored, shared)
        for key, payloads in scored.items():
            rows = [None if p is None else p["row"] for p in payloads]
            out[key]["cost_vs_forward"]["values"] = [
                None if p is None or not s else p["seconds_per_example"] / s["forward_seconds"]
                for p, s in zip(payloads, shared)]
            for metric in out[key]:
                out[key][metric]["per_example"] = rows
        return out


register(Timing)
