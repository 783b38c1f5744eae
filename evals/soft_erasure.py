"""Soft normalised comprehensiveness and sufficiency (Zhao & Aletras 2023, "Incorporating Attribution
Importance for Improving Faithfulness Metrics", ACL), as their code (``casszhao/SoftFaith``) reports them.

Hard erasure deletes the top-k tokens and ignores how much more important one token is than
another. The soft metrics perturb every token in proportion to its score: each dimension of token
i's input embedding is kept with a probability from q_i, the method's score rescaled to [0, 1] over
the example's non-special tokens (``importance``: ``minmax`` (s − min) / (max − min), their default;
``sigmoid``; or ``positive``, max(s, 0) / max s). Special tokens are never masked. With p the scored
probability of the explained target (``attrbench.ops.perturb``), p(x) the full input's, p(0) the
input with every non-special embedding zeroed, and p_c, p_s the means over ``samples`` Bernoulli
masks (seeded per example: every method sees the same draws):

    comprehensiveness: M_id ~ Bernoulli(1 − q_i)    sufficiency: M_id ~ Bernoulli(q_i)
    Soft-NC = clip(max(0, p(x) − p_c) / max(0, p(x) − p(0)), 0, 1)                       (higher: better)
    Soft-NS = clip((max(0, p(x) − p(0)) − max(0, p(x) − p_s)) / max(0, p(x) − p(0)), 0, 1)  (higher: better)

i.e. their normalisation by the sufficiency of an empty input, S(x, 0) = 1 − max(0, p(x) − p(0)), and
their clipping. Undefined where zeroing every token does not lower p (nothing to normalise by) or no
score varies. The raw drops are kept as named variants: ``soft_comprehensiveness_raw`` = p(x) − p_c
(higher: better) and ``soft_sufficiency_raw`` = p(x) − p_s (lower: better).

The random floor (:meth:`SoftErasure.floor`, leaderboard runs) is a Monte-Carlo expectation: ``FLOOR_DRAWS``
seeded uniform score vectors (the ``random`` method's distribution), each turned into keep probabilities
and run through the same ``samples`` masks as every method; per draw the raw drops, and Soft-NC / Soft-NS
averaged over the draws (clip and max are not linear: the mean of the metric, not the metric of the mean
drop), with standard error std / √draws. It is the costly floor: 2 · ``samples`` · ``FLOOR_DRAWS`` model
inputs per example (4,000 at the defaults, one request that the batcher packs into full batches), about
as many as 100 methods' soft erasure. With ``minmax`` importance (the default) it takes half: for a uniform
draw u, 1 − u is uniform too and minmax(1 − u) = 1 − minmax(u), so the sufficiency mask of draw 1 − u is the
comprehensiveness mask of draw u, and one set of ``samples`` · ``FLOOR_DRAWS`` model inputs gives both
floors' draws (:meth:`SoftErasure.mirrored`; the floor rows' key says ``mirrored``).
"""
from typing import Optional

import numpy as np
import torch

from attrbench.plugin import Evaluation, InputError, Param, Readout, answer, register
from attrbench.plugin.internal import MaskedEmbeddings, special_mask

IMPORTANCE = ("minmax", "sigmoid", "positive")
METRICS = {"soft_nc": True, "soft_ns": True, "soft_comprehensiveness_raw": True, "soft_sufficiency_raw": False}


def embeddings_reason(adapter):
    """Why the word embeddings of a model cannot be fed back as ``inputs_embeds`` (None if they can)."""
    try:
        embed = adapter.model.get_input_embeddings()
    except (NotImplementedError, AttributeError):
        embed = None
    if not isinstance(embed, torch.nn.Embedding):
        return f"'{adapter.name}' has no word-embedding layer to mask (get_input_embeddings)"
    return None


def keep_probabilities(scores: np.ndarray, special: np.ndarray, importance: str = "minmax",
                       retain: Optional[float] = None):
    """q_i in [0, 1] from the scores (specials: 1, never masked); None when the scores say nothing. With ``retain``
    (π), q is rescaled to mean π over the non-special tokens (:func:`at_retain`); None where it cannot be."""
    scores = np.asarray(scores, dtype=np.float64)
    own = scores[~special]
    if importance == "positive":
        positive = np.clip(own, 0.0, None)
        if positive.max(initial=0.0) <= 0:
            return None
        q = positive / positive.max()
    elif importance == "sigmoid":
        q = 1.0 / (1.0 + np.exp(-own))
    else:
        spread = np.ptp(own) if len(own) else 0.0
        if spread == 0:
            return None
        q = (own - own.min()) / spread
    if retain is not None:
        q = at_retain(q, retain)
        if q is None:
            return None
    out = np.ones(len(scores))
    out[~special] = q
    return out


def at_retain(q: np.ndarray, retain: float) -> Optional[np.ndarray]:
    """min(1, c·q) with the one c > 0 that makes its mean ``retain``: the same expected share of kept embedding
    dimensions for every method (sufficiency keeps π, comprehensiveness 1 − π), the ratios of q kept below the cap.
    Water-filling: the largest q are capped at 1 one by one until the rest, scaled, stay below it. None where too few
    q are positive for any c to reach π (minmax gives the lowest-scored token q = 0)."""
    q = np.asarray(q, dtype=np.float64)
    target = retain * len(q)
    if not len(q) or np.count_nonzero(q > 0) < target - 1e-12:
        return None
    ordered = np.sort(q)[::-1]
    for capped in range(len(q)):
        rest = ordered[capped:].sum()
        if rest <= 0:
            break
        scale = (target - capped) / rest
        if scale * ordered[capped] <= 1.0 + 1e-12:
            return np.minimum(1.0, scale * q)
    kept = np.minimum(1.0, np.ceil(q))  # every positive q kept: where π is their share (up to rounding)
    return kept if abs(kept.mean() - retain) <= 1e-9 else None  # else a q too small to scale (subnormal)


def masked_probability(adapter, ids: list[int], readout_row: int, resolved, keep: np.ndarray, uniform: torch.Tensor
                       ) -> float:
    """Mean scored probability over Bernoulli masks of the embeddings: dimension d of token i kept where
    ``uniform[s, i, d] < keep[i]`` (one example alone; a run batches the samples of every method)."""
    return float(answer(_masked(adapter, ids, readout_row, resolved, keep, uniform)))


def _masked(adapter, ids, readout_row, resolved, keep, uniform):
    """The request generator of :func:`masked_probability`: a scheduler answers it with other methods' samples."""
    values = yield MaskedEmbeddings(adapter, Readout.of(resolved), tuple(ids), readout_row, keep, uniform)
    return float(np.mean(values))


class SoftErasure(Evaluation):
    name, family = "soft_erasure", "faithfulness"
    description = "soft normalised comprehensiveness and sufficiency: embeddings masked in proportion to the scores"
    reference = "Zhao & Aletras 2023, Incorporating Attribution Importance for Improving Faithfulness Metrics"
    headline = 1
    primary_metric = "soft_nc"
    higher_is_better = METRICS
    bounds = {"soft_nc": (0.0, 1.0), "soft_ns": (0.0, 1.0), "soft_comprehensiveness_raw": (-1.0, 1.0),
              "soft_sufficiency_raw": (-1.0, 1.0)}  # clipped ratios; differences of probabilities
    metric_names = {"soft_nc": "Soft-NC", "soft_ns": "Soft-NS", "soft_comprehensiveness_raw": "soft comprehensiveness",
                    "soft_sufficiency_raw": "soft sufficiency"}
    undefined_when = {**dict.fromkeys(("soft_nc", "soft_ns"), "zeroing every embedding does not lower p, so there is "
                                                              "nothing to normalise by, or one scorable token"),
                      **dict.fromkeys(("soft_comprehensiveness_raw", "soft_sufficiency_raw"),
                                      "one scorable token: no score varies")}
    at_bound_when = {"soft_nc": "the comprehensiveness masks lower p as far as zeroing every embedding and the ratio "
                                "is clipped; the more dimensions a method's keep probabilities remove, the likelier: "
                                "pi_soft_erasure compares methods at one expected share",
                     "soft_ns": "the sufficiency masks do not lower p, and the ratio is clipped"}
    robustness = ("soft_nc", "soft_ns")
    params = {"samples": Param(20, "Bernoulli mask samples per example (the expectation's sample size)", minimum=1),
              "importance": Param("minmax", "scores to keep probabilities: minmax (the paper's code), sigmoid or "
                                            "positive", choices=IMPORTANCE)}

    def retain_target(self) -> Optional[float]:
        """The expected retaining probability every method is brought to (None: each method's own)."""
        return None

    def check(self, adapter, methods, context):
        reason = embeddings_reason(adapter)
        if reason:
            raise InputError(f"evaluation '{self.name}' cannot run on '{adapter.name}': {reason}; use "
                             "erasure_aopc or naopc (token removal) instead")
        super().check(adapter, methods, context)

    def _uniform(self, work) -> torch.Tensor:
        width = work.adapter.model.get_input_embeddings().embedding_dim
        draws = work.rng("soft_erasure").random((self.samples, len(work.ids), width))
        return torch.from_numpy(draws)  # float64 on the CPU (MPS has no float64): only the masks go to the device

    def shared(self, work):
        special = special_mask(work.adapter, work.ids)
        p_full = yield from work.perturbations().full()
        p_zero = yield from _masked(work.adapter, work.ids, work.resolved.row, work.resolved, special.astype(float),
                                    self._uniform(work)[:1])
        return {"p_full": p_full, "p_zero": p_zero}

    def score(self, work, result):
        special = special_mask(work.adapter, work.ids)
        q = keep_probabilities(result.values, special, self.importance, self.retain_target())
        if q is None:
            return dict.fromkeys(METRICS)
        uniform = self._uniform(work)
        p_full = yield from work.perturbations().full()
        p_comp = yield from _masked(work.adapter, work.ids, work.resolved.row, work.resolved,
                                    np.where(special, 1.0, 1.0 - q), uniform)
        p_suff = yield from _masked(work.adapter, work.ids, work.resolved.row, work.resolved, q, uniform)
        return {"soft_comprehensiveness_raw": p_full - p_comp, "soft_sufficiency_raw": p_full - p_suff}

    def summarise(self, scored, shared):
        out = super().summarise(scored, shared)
        for key, payloads in scored.items():
            nc, ns = [], []
            for payload, common in zip(payloads, shared):
                comp = None if payload is None else payload.get("soft_comprehensiveness_raw")
                suff = None if payload is None else payload.get("soft_sufficiency_raw")
                normalised = _normalised(comp, suff, common)
                nc.append(None if normalised is None else float(normalised[0]))
                ns.append(None if normalised is None else float(normalised[1]))
            out[key]["soft_nc"]["values"], out[key]["soft_ns"]["values"] = nc, ns
        return out

    @property
    def floor_how(self) -> str:
        how = ("FLOOR_DRAWS uniform score draws through the methods' masks; Soft-NC / Soft-NS averaged over the "
               "draws (the raw drops: their mean)")
        return how + ("; the sufficiency draws are the comprehensiveness draws' mirror images (u and 1 − u: the "
                      "same masks under minmax)" if self.mirrored() else "")

    def mirrored(self) -> bool:
        """Whether the floor's sufficiency draws are its comprehensiveness draws mirrored: under ``minmax`` keep
        probabilities q(1 − u) = 1 − q(u) on the non-special tokens, so sufficiency's mask of the uniform draw 1 − u
        (itself uniform) is comprehensiveness's mask of u, the same model inputs. Not with ``sigmoid`` or
        ``positive``, nor at a retaining probability π (its rescaling breaks the symmetry)."""
        return self.importance == "minmax" and self.retain_target() is None

    @property
    def floor_key(self) -> str:
        """As every floor's, marked ``mirrored`` where the sufficiency draws are mirror images: another estimator of
        the same expectation, so rows of the unmirrored one are not read as its."""
        key = super().floor_key
        return f"{key[:-1]},mirrored)" if self.mirrored() else key

    def floor(self, work):
        """Per draw of uniform scores, the raw drops under the methods' masks, all draws in one request (mirrored:
        the comprehensiveness masks only, which are also the sufficiency masks of the mirrored draws)."""
        special = special_mask(work.adapter, work.ids)
        draws = work.rng("floor:soft_erasure").random((self.floor_draws, len(work.ids)))
        keeps = [keep_probabilities(d, special, self.importance, self.retain_target()) for d in draws]
        keeps = np.array([q for q in keeps if q is not None])  # None for every draw or none (one scored token)
        mirrored = self.mirrored()
        if not len(keeps):
            return {**dict.fromkeys(METRICS), "floor": {"exact": False, "mirrored": mirrored}}
        uniform = self._uniform(work)
        p_full = yield from work.perturbations().full()
        masks = np.where(special, 1.0, 1.0 - keeps)
        if not mirrored:
            masks = np.concatenate([masks, keeps])
        values = yield MaskedEmbeddings(work.adapter, Readout.of(work.resolved), tuple(work.ids), work.resolved.row,
                                        masks, uniform)
        per_draw = p_full - np.asarray(values).reshape(len(masks), len(uniform)).mean(1)
        comp = per_draw[:len(keeps)]
        suff = comp.copy() if mirrored else per_draw[len(keeps):]  # mirrored: draw k's is that of 1 − u_k
        return {"soft_comprehensiveness_raw": float(comp.mean()), "soft_sufficiency_raw": float(suff.mean()),
                "mc_se": {"soft_comprehensiveness_raw": _se(comp), "soft_sufficiency_raw": _se(suff)},
                "draws": {"comprehensiveness": comp.tolist(), "sufficiency": suff.tolist()},
                "floor": {"exact": False, "mirrored": mirrored}}

    def summarise_floor(self, floor, shared, scored):
        """Raw drops as a method's (linear); Soft-NC and Soft-NS per draw, then their mean over the draws."""
        out = super().summarise_floor(floor, shared, scored)
        for k, (payload, common) in enumerate(zip(floor, shared)):
            per_draw = None if payload is None or not payload.get("draws") else _normalised(
                np.asarray(payload["draws"]["comprehensiveness"]), np.asarray(payload["draws"]["sufficiency"]), common)
            for metric, values in zip(("soft_nc", "soft_ns"), (None, None) if per_draw is None else per_draw):
                out[metric]["values"][k] = None if values is None else float(values.mean())
                out[metric]["mc_se"][k] = None if values is None else _se(values)
        return out


def _normalised(comp, suff, common):
    """(Soft-NC, Soft-NS) of raw drops (numbers or arrays of draws), as the authors' code clips them; None where
    undefined (no drop, or zeroing every token does not lower p)."""
    scale = None if common is None else max(0.0, common["p_full"] - common["p_zero"])
    if comp is None or not scale:
        return None
    return (np.clip(np.maximum(0.0, comp) / scale, 0, 1), np.clip((scale - np.maximum(0.0, suff)) / scale, 0, 1))


def _se(values: np.ndarray) -> float:
    """The Monte-Carlo standard error of a mean over draws: std / √draws."""
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else 0.0


class RetainedSoftErasure(SoftErasure):
    """π-Soft-NC and π-Soft-NS: Soft-NC and Soft-NS with every method's keep probabilities brought to one expected
    retaining probability π (Huang & Chan 2026, arXiv 2601.03089).

    Soft-NS rewards keeping many words and Soft-NC removing many: a method whose minmax-rescaled scores sit mostly
    near its maximum keeps most embedding dimensions under the sufficiency masks whatever its order says. Here q is
    rescaled to mean π over the non-special tokens before the masks are drawn (:func:`at_retain`: min(1, c·q), the
    ratios kept below the cap), so every method, and every draw of the random floor, keeps π of the dimensions in
    expectation under sufficiency and 1 − π under comprehensiveness; the masks' uniform draws are soft_erasure's.
    The rescaling is this project's reading of the paper's abstract (same expected retaining probability for every
    method); undefined, besides Soft-NC's cases, where fewer than π of the tokens have a positive q. A control of
    Soft-NC / Soft-NS: π-Soft-NC is shown in the robustness panel, not counted as a vote of its own."""

    name = "pi_soft_erasure"
    description = "soft erasure with every method's keep probabilities rescaled to one expected retaining probability"
    reference = "Huang & Chan 2026, Faithfulness Evaluation for Decoder-only LLM Attributions with Controlled " \
                "Retained Information (arXiv 2601.03089)"
    headline = 101
    metric_names = {"soft_nc": "π-Soft-NC", "soft_ns": "π-Soft-NS", "soft_comprehensiveness_raw":
                    "π-soft comprehensiveness", "soft_sufficiency_raw": "π-soft sufficiency"}
    robustness = ()
    undefined_when = {**dict.fromkeys(("soft_nc", "soft_ns"), "zeroing every embedding does not lower p, so there is "
                                                              "nothing to normalise by, one scorable token, or fewer "
                                                              "than π of the tokens with a positive keep probability"),
                      **dict.fromkeys(("soft_comprehensiveness_raw", "soft_sufficiency_raw"),
                                      "one scorable token, or fewer than π of the tokens with a positive keep "
                                      "probability: no rescaling reaches π")}
    at_bound_when = {**SoftErasure.at_bound_when,  # without the pointer to this control
                     "soft_nc": "the comprehensiveness masks lower p as far as zeroing every embedding and the ratio "
                                "is clipped"}
    params = {**SoftErasure.params,
              "retain": Param(0.5, "π: the mean keep probability every method is rescaled to (sufficiency keeps π "
                                   "of the embedding dimensions in expectation, comprehensiveness 1 − π)",
                              minimum=0.01, maximum=0.99)}

    def retain_target(self) -> Optional[float]:
        return self.retain


register(SoftErasure)
register(RetainedSoftErasure)
