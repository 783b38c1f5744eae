"""Integrated Gradients (Sundararajan et al. 2017) at the word-embedding output, refined until complete.

``IG_j = sum_d (e_j - e'_j)_d ∫_0^1 ∂F(e' + a (e - e')) / ∂e_{j,d} da``, summed over dimensions. The baseline
``e'`` embeds the text with every non-special token replaced by ``baseline`` (default: the pad token; special
tokens as in ``attrbench.ops.tokens``). Completeness, ``sum_j IG_j = F(e) - F(e')``, holds for the integral;
a quadrature meets it only as far as it resolves ``a -> ∂F/∂a`` (Sundararajan et al.: check the gap is within
a few percent and raise the steps until it is).

A fixed rule does not get there on every model. On SmolLM2-135M (20 sva-linzen contrasts, pad baseline) 50
Gauss-Legendre steps leave a median gap of 2.8 times F(e) - F(e'), and 200 steps 0.97; 2 to 4 of 20 examples
are within 5 % at 16, 50 or 200 steps, from the unk baseline as from pad. The score along the straight path is
smooth but steep and oscillating: its total variation is 2.5 to 153 times |F(e) - F(e')| (6 examples), the
same with the weights in float64 (to 3e-5; Hugging Face runs LLaMA's RMSNorm in float32 even then).
Interpolated embeddings never come near zero norm from the pad baseline (their mean square stays above 0.27
times the token's, 409 times RMSNorm's eps); from the zero embedding they do, and more steps make the median
gap larger (on 6 examples: 2.2 at 50 steps, 14 at 200). These figures are
benchmarks/results/ig-convergence-smollm2-cpu.json's (``python benchmarks/bench_ig_convergence.py``). So the
path is cut adaptively (global adaptive quadrature, e.g. Gander & Gautschi 2000): each segment ``[a, b]`` is
one captum ``IntegratedGradients`` call from ``e_a`` to ``e_b`` with ``n_steps`` Gauss-Legendre nodes, whose
own gap ``δ_s = sum IG_s - (F(e_b) - F(e_a))`` is exact (captum's convergence delta on that segment). The
segment with the largest |δ_s| is halved, again and again, until ``sum_s |δ_s| <= tolerance · |F(e) - F(e')|``
or ``max_steps`` gradient evaluations are spent. The segments' attributions add up to the composite rule over
the whole path. On SmolLM2 all 20 examples meet 5 % with 50 to 1350 evaluations (mean 775); a model on which
one segment is enough (MiniLM SST-2: gap ~2e-5) pays the fixed rule's cost.

Every result records ``n_steps`` (gradient evaluations used, discarded coarser segments included),
``segments``, ``relative_delta`` = |sum IG - (F(e) - F(e'))| / |F(e) - F(e')| (the completeness residual,
also ``meta["axiom"]``), ``segment_delta`` = sum_s |δ_s| / |F(e) - F(e')| (the bound refined on) and
``converged`` (whether that bound met ``tolerance`` within ``max_steps``).
"""
import torch

from attrbench.plugin import GradientMethod, Param, axiom_check, captum_attr, register
from attrbench.plugin.internal import BASELINE_PARAM, baseline_ids


class IntegratedGradients(GradientMethod):
    name, description = "integrated_gradients", "Integrated Gradients at the word-embedding output (captum)"
    reference = "Sundararajan et al. 2017"
    axiom = "completeness"

    params = {"n_steps": Param(50, "Gauss-Legendre steps per path segment", minimum=1),
              "tolerance": Param(0.05, "relative completeness gap the path is refined to", minimum=0.0),
              "max_steps": Param(1600, "most gradient evaluations per text (it stops there, unconverged)", minimum=1),
              "baseline": BASELINE_PARAM}

    batched = True  # a batch's texts are refined together: each round halves every unconverged text's worst segment

    def attribute(self, forward, layer, input_ids, attention_mask, adapter):
        values = self.get_params()
        steps, cap, texts = values["n_steps"], values["max_steps"], len(input_ids)
        end = layer(input_ids).detach()
        start = layer(baseline_ids(adapter, input_ids, values["baseline"])).detach()
        with torch.no_grad():
            scores_at_ends = forward(torch.cat([start, end]), *forward.repeated(2)).double()
        explained = (scores_at_ends[texts:] - scores_at_ends[:texts]).tolist()  # F(e) - F(e') per text
        targets = [values["tolerance"] * abs(x) for x in explained]
        engine = captum_attr().IntegratedGradients(forward)

        def segments(pieces: list[tuple[int, float, float]]) -> list[tuple[torch.Tensor, float]]:
            """Each (text, a, b) piece's attributions from e'+a(e-e') to e'+b(e-e') and its own gap, in one call."""
            rows = torch.tensor([b for b, _, _ in pieces], device=end.device)
            lo, hi = (torch.tensor([p[k] for p in pieces], dtype=end.dtype, device=end.device)[:, None, None]
                      for k in (1, 2))
            first, last = start[rows], end[rows]  # e' + a (e - e'): exactly e' at 0 and e at 1
            tokens = len(pieces) * input_ids.shape[1]
            attributions, delta = engine.attribute(
                first * (1 - hi) + last * hi, baselines=first * (1 - lo) + last * lo,
                additional_forward_args=tuple(a[rows] for a in forward.args), n_steps=steps, method="gausslegendre",
                return_convergence_delta=True, internal_batch_size=len(pieces) * max(1, self.batch_tokens // tokens))
            sums = attributions.detach().double().sum(-1)
            return [(sums[k], float(delta[k].double())) for k in range(len(pieces))]

        parts = [{(0.0, 1.0): piece} for piece in segments([(b, 0.0, 1.0) for b in range(texts)])]
        used = [steps] * texts
        while True:
            pieces = []
            for b, own in enumerate(parts):
                if sum(abs(d) for _, d in own.values()) > targets[b] and used[b] + 2 * steps <= cap:
                    lo, hi = max(own, key=lambda s: abs(own[s][1]))  # the segment with the largest gap
                    del own[(lo, hi)]
                    pieces += [(b, lo, (lo + hi) / 2), (b, (lo + hi) / 2, hi)]
                    used[b] += 2 * steps
            if not pieces:
                break
            for (b, lo, hi), piece in zip(pieces, segments(pieces)):
                parts[b][(lo, hi)] = piece
        scores, metas = [], []
        for b, own in enumerate(parts):
            text_scores = sum(a for a, _ in own.values()).cpu().numpy()[:int(attention_mask[b].sum())]
            gap = abs(float(text_scores.sum()) - explained[b])
            bound = sum(abs(d) for _, d in own.values())
            scores.append(text_scores)
            metas.append({"n_steps": used[b], "segments": len(own), "convergence_delta": gap,
                          "relative_delta": gap / max(abs(explained[b]), 1e-12),
                          "segment_delta": bound / max(abs(explained[b]), 1e-12),
                          "converged": bool(bound <= targets[b]), "baseline": values["baseline"],
                          "axiom": axiom_check("completeness", text_scores.sum(), explained[b], values["tolerance"],
                                               steps=used[b])})
        return scores, metas


register(IntegratedGradients)
