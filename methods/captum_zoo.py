"""captum's attribution zoo at the word embeddings: one generic plugin, one short registration each.

Every method explains the same score as ``grad_l2`` (the target's logit, or a logit difference for
contrast targets) with respect to the word embeddings ``e`` that the model adds positions to. Where
a method needs a reference input, it is the text with every non-special token replaced by the
``baseline`` token (as for ``integrated_gradients``).

Gradient methods give one value per embedding dimension, summed into a token's score:
- Saliency: ``|∂F/∂e|`` (Simonyan et al. 2014), so a token's score is the L1 norm of its gradient.
- DeepLift (Shrikumar et al. 2017): captum's rescale rule at the nn.Module nonlinearities it knows
  (ReLU, Tanh, Sigmoid, Softmax modules). Transformers' GELU/SiLU activations and functional softmax
  pass plain gradients, so on most layers it reduces to ``(e - e') · ∂F/∂e``. DeepLIFT's rules conserve
  the score difference exactly (summation-to-delta, sum of scores = F(x) - F(x')); the recorded gap
  (``meta["axiom"]``, "conservation") shows how far the plain-gradient layers take it from that.
- GradientShap (Lundberg & Lee 2017): expected gradients from random points between the baseline
  (plus Gaussian noise) and the input.
- SmoothGrad (Smilkov et al. 2017): NoiseTunnel averaging Integrated Gradients over noisy copies of
  the embeddings. The noise's standard deviation is ``noise`` times that of the text's embedding values.

Perturbation methods treat each token as one feature (all its dimensions replaced by the
baseline's together), so a token's score is its feature's value:
- Occlusion with a sliding ``window`` of tokens (Zeiler & Fergus 2014);
- FeatureAblation;
- Lime (Ribeiro et al. 2016; captum's Lasso surrogate);
- KernelShap (Lundberg & Lee 2017); a one-token text gets its exact value F(x) - F(x'). Shapley values
  meet efficiency, sum = F(x) - F(x'); captum's regression enforces it softly (the all-in and all-out
  coalitions weigh 1e6 against 1 for a sampled one), so the sum is close, not exact;
- ShapleyValueSampling (Castro et al. 2009; ``n_samples`` random permutations). Each permutation's
  marginal contributions telescope to F(x) - F(x'), so the sampled values meet efficiency exactly, up to
  float rounding, whatever the number of permutations: the sampling error is in how the total is shared
  out, not in the total.

The methods with an identity (``axiom``: DeepLift, KernelShap, ShapleyValueSampling) record in every result
its residual |sum of scores - (F(x) - F(x'))| / |F(x) - F(x')| (``meta["axiom"]``), with F at the input and
the baseline from one extra forward pass of two rows. The tolerance is float rounding for the exact
identities (DeepLift: ``attrbench.plugin.default_tolerance``, 1e-4 in float32; ShapleyValueSampling: 1e-4 in
any dtype, as captum sums its marginal contributions in float32), 1e-3 for KernelShap's soft constraint.

Random methods are seeded per text (``seed``), so a text gets the same scores alone or in a batch, and
on any device: every draw is made on the CPU (captum's NoiseTunnel, behind SmoothGrad and GradientShap's noise,
would draw it on the input's device, whose generator gives other numbers for the same seed). SmoothGrad and
GradientShap make each text's draws themselves, with captum's own draw in captum's order, since captum would
draw once for a whole batch.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from attrbench.plugin import GradientMethod, InputError, Param, axiom_check, captum_attr, default_tolerance, register
from attrbench.plugin.internal import (
    BASELINE_PARAM,
    Pooled,
    answer_pooled,
    baseline_ids,
    noise_draw,
    pool_sampler,
)

SEED = Param(0, "seed of the random draws (per text)", minimum=0)
BATCH = Param(32, "perturbed copies per forward pass (bounds memory)", minimum=1)


class _Module(torch.nn.Module):
    """captum's DeepLift hooks an nn.Module; this one wraps the forward function around the real model."""

    def __init__(self, forward, model):
        super().__init__()
        self.forward_fn, self.model = forward, model

    def forward(self, inputs, *args):
        return self.forward_fn(inputs, *args)


class CaptumMethod(GradientMethod):
    """One captum algorithm on the word embeddings; ``call`` runs it and returns (attributions, extra meta).
    ``pads``: a padded batch of texts gives each text its own result (the deterministic gradient algorithms; the
    seeded ones draw per text). Perturbation methods pool their texts' forward passes instead (``Pooled``)."""

    def __init__(self, name: str, family: str, description: str, reference: str, params: dict, call,
                 per_token: str, axiom=None, pads=False):
        self.name, self.family, self.description, self.reference = name, family, description, reference
        self.params, self.call, self.per_token = params, call, per_token
        self.axiom, self.axiom_tolerance = axiom if axiom is not None else (None, None)
        self.padded = pads

    @property
    def pools(self) -> bool:
        """Perturbation methods need outputs only: their texts' forward passes are pooled (``Pooled``)."""
        return self.family == "perturbation"

    @property
    def pads(self) -> bool:
        return self.padded

    @property
    def batched(self) -> bool:
        return self.pools or self.pads

    def run(self, adapter, texts, *, targets, layers, truncate):
        if not self.pools:
            return super().run(adapter, texts, targets=targets, layers=layers, truncate=truncate)
        batch = adapter.encode(texts, truncate=truncate)
        embed = adapter.model.get_input_embeddings()

        def layer(ids):  # captum's sampling runs on CPU copies (see Pooled)
            return embed(ids.to(adapter.device)).cpu()

        inputs = [(batch.input_ids[b:b + 1, :n].cpu(), batch.attention_mask[b:b + 1, :n].cpu())
                  for b, n in enumerate(batch.lengths)]
        forwards = [Pooled(adapter, [target], mask) for target, (_, mask) in zip(targets, inputs)]
        for forward, (ids, mask) in zip(forwards, inputs):
            self.attribute(forward, layer, ids, mask, adapter)  # records the inputs captum asks for
        answer_pooled(forwards, self, adapter)
        return [self.result(adapter, batch, b, *self.attribute(forward, layer, ids, mask, adapter))  # same draws
                for b, (forward, (ids, mask)) in enumerate(zip(forwards, inputs))]

    def attribute(self, forward, layer, input_ids, attention_mask, adapter):
        values = {**self.get_params(), "batch_tokens": self.batch_tokens}  # the budget of calls that copy their texts
        embeds = layer(input_ids).detach().requires_grad_()  # captum warns when it has to set this itself
        baselines = layer(baseline_ids(adapter, input_ids, values["baseline"])).detach() \
            if "baseline" in values else None
        tokens = (torch.arange(input_ids.shape[1], device=embeds.device)[None, :, None]
                  .expand_as(embeds).contiguous())  # token j = feature j
        numpy_state = np.random.get_state()  # GradientShap draws with numpy, the others with torch
        try:
            with torch.random.fork_rng():
                torch.manual_seed(values.get("seed", 0))
                np.random.seed(values.get("seed", 0))
                attributions, meta = self.call(forward, embeds, baselines, tokens, forward.args, values, adapter)
        finally:
            np.random.set_state(numpy_state)
        attributions = attributions.detach().double()
        scores = (attributions.sum(-1) if self.per_token == "sum" else attributions.mean(-1)).cpu().numpy()
        lengths = attention_mask.sum(-1).tolist()
        scores = [row[:n] for row, n in zip(scores, lengths)]
        metas = [{key: (float(v[b]) if isinstance(v, torch.Tensor) else v) for key, v in meta.items()}
                 for b in range(len(scores))]
        if self.axiom is not None:
            with torch.no_grad():
                ends = forward(torch.cat([baselines, embeds.detach()]), *forward.repeated(2)).double()
            tolerance = self.axiom_tolerance(adapter) if callable(self.axiom_tolerance) else self.axiom_tolerance
            for b, own in enumerate(metas):
                own["axiom"] = axiom_check(self.axiom, scores[b].sum(), float(ends[len(scores) + b] - ends[b]),
                                           tolerance)
        return (scores, metas) if self.pads else (scores[0], metas[0])


def _delta(delta) -> dict:
    """captum's convergence delta, per text."""
    return {"convergence_delta": delta.detach().abs().reshape(len(delta), -1).amax(-1)}


def _saliency(forward, embeds, baselines, tokens, args, values, adapter):
    return captum_attr().Saliency(forward).attribute(embeds, additional_forward_args=args, abs=True), {}


def _deeplift(forward, embeds, baselines, tokens, args, values, adapter):
    with warnings.catch_warnings():  # captum announces the hooks it sets on every call
        warnings.filterwarnings("ignore", message="Setting forward, backward hooks")
        attributions, delta = captum_attr().DeepLift(_Module(forward, adapter.model)).attribute(
            embeds, baselines=baselines, additional_forward_args=args, return_convergence_delta=True)
    return attributions, _delta(delta)


def _gradient_shap(forward, embeds, baselines, tokens, args, values, adapter):
    """captum's GradientShap (NoiseTunnel over InputBaselineXGradient, baselines drawn from the given one) for a
    padded batch: each text's draws are those captum makes for it alone, in its order (the baseline index, numpy;
    the noise, NoiseTunnel's own draw on the CPU; the path points, numpy), and every text's copies go through the
    model together, in passes of the method's token budget. Its convergence delta is captum's for the text's first
    copy, as a text alone records."""
    samples, texts, width = values["n_samples"], len(embeds), embeds.shape[1]
    draw = noise_draw()
    noisy = embeds.detach().cpu().repeat_interleave(samples, dim=0)  # padding keeps its embedding: masked out
    points = []
    for b in range(texts):
        n = int(args[0][b].sum())
        own = embeds[b:b + 1, :n].detach().cpu()
        np.random.seed(values["seed"])
        torch.manual_seed(values["seed"])
        np.random.choice(1, samples)  # which of the one baseline each copy starts from
        noisy[b * samples:(b + 1) * samples, :n] = draw(own, values["noise"] * float(own.std()), samples)
        points.append(np.random.uniform(0.0, 1.0, samples))
    noisy = noisy.to(embeds.device)
    copies = torch.arange(texts, device=embeds.device).repeat_interleave(samples)
    start, copied = baselines[copies], tuple(a[copies] for a in args)
    point = torch.tensor(np.concatenate(points), device=embeds.device, dtype=embeds.dtype)[:, None, None]
    grads, step = [], max(1, values["batch_tokens"] // width)
    for k in range(0, len(noisy), step):
        at = point[k:k + step]  # captum's _scale_input, to the same float operations
        scaled = (at * noisy[k:k + step] + (1.0 - at) * start[k:k + step]).requires_grad_()
        with torch.enable_grad():
            out = forward(scaled, *(a[k:k + step] for a in copied))
            grads.append(torch.autograd.grad(torch.unbind(out), scaled)[0])
    attributions = (noisy - start) * torch.cat(grads)
    first = torch.arange(texts, device=embeds.device) * samples
    with torch.no_grad():
        ends = forward(torch.cat([start[first], noisy[first]]), *(torch.cat([a[first]] * 2) for a in copied))
    delta = attributions[first].reshape(texts, -1).sum(1) - (ends[texts:] - ends[:texts])
    return attributions.reshape(texts, samples, *embeds.shape[1:]).sum(1) / samples, _delta(delta)


def _smooth_grad(forward, embeds, baselines, tokens, args, values, adapter):
    """NoiseTunnel's SmoothGrad over Integrated Gradients, for a padded batch: each text's noisy copies are those
    captum draws for it alone (its seed, its length, its embeddings' std; NoiseTunnel's own draw, on the CPU), and
    every text's copies go through one Integrated Gradients call, in passes of the method's token budget."""
    samples, texts, width = values["n_samples"], len(embeds), embeds.shape[1]
    draw = noise_draw()
    noisy = embeds.detach().cpu()[:, None].repeat(1, samples, 1, 1)  # padding keeps its embedding: masked out
    for b in range(texts):
        n = int(args[0][b].sum())
        own = noisy[b, 0, :n][None].clone()
        stdev = values["noise"] * float(own.std())
        torch.manual_seed(values["seed"])
        for k in range(samples):  # nt_samples_batch_size=1: one draw of (1, n, d) per copy, in order
            noisy[b, k, :n] = draw(own, stdev, 1)[0]
    noisy, steps = noisy.to(embeds.device).flatten(0, 1), values["n_steps"]
    copies = torch.arange(texts, device=embeds.device).repeat_interleave(samples)
    per_call = max(1, values["batch_tokens"] // (width * steps))  # copies whose steps fit one pass of the budget
    engine, parts = captum_attr().IntegratedGradients(forward), []
    for k in range(0, len(noisy), per_call):  # captum takes no fewer rows per pass than copies per call
        own = copies[k:k + per_call]
        parts.append(engine.attribute(
            noisy[k:k + per_call].requires_grad_(), baselines=baselines[own],
            additional_forward_args=tuple(a[own] for a in args), n_steps=steps, method="gausslegendre",
            internal_batch_size=len(own) * steps))
    return torch.cat(parts).reshape(texts, samples, *embeds.shape[1:]).mean(1), {}


def _occlusion(forward, embeds, baselines, tokens, args, values, adapter):
    n, window = embeds.shape[1], values["window"]
    if window > n:
        raise InputError(f"occlusion window of {window} tokens is longer than the text ({n} tokens): "
                         f"set occlusion.window to at most {n}")
    return captum_attr().Occlusion(forward).attribute(
        embeds, sliding_window_shapes=(window, embeds.shape[2]), strides=(1, embeds.shape[2]), baselines=baselines,
        additional_forward_args=args, perturbations_per_eval=values["batch_size"]), {}


def _feature_ablation(forward, embeds, baselines, tokens, args, values, adapter):
    return captum_attr().FeatureAblation(forward).attribute(
        embeds, baselines=baselines, feature_mask=tokens, additional_forward_args=args,
        perturbations_per_eval=values["batch_size"]), {}


def _sampled(algorithm: str):
    """A sampled perturbation method of captum's, by class name."""
    def call(forward, embeds, baselines, tokens, args, values, adapter):
        engine = getattr(captum_attr(), algorithm)(forward)
        pool_sampler(engine, forward, values["n_samples"])
        return engine.attribute(
            embeds, baselines=baselines, feature_mask=tokens, additional_forward_args=args,
            n_samples=values["n_samples"], perturbations_per_eval=values["batch_size"]), {}
    return call


def _shapley_sampling(forward, embeds, baselines, tokens, args, values, adapter):
    """One mask entry per token, broadcast over the embedding: captum reads every entry of the mask with ``.item()``
    once per permutation (a GPU sync each), and the products and scores are the same."""
    return _sampled("ShapleyValueSampling")(forward, embeds, baselines, tokens[..., :1], args, values, adapter)


def _kernel_shap(forward, embeds, baselines, tokens, args, values, adapter):
    if embeds.shape[1] == 1:  # captum's coalition sampler needs two features; one player's value is exact
        return _feature_ablation(forward, embeds, baselines, tokens, args, values, adapter)
    return _sampled("KernelShap")(forward, embeds, baselines, tokens, args, values, adapter)


def _register(name, family, description, reference, call, per_token="sum", axiom=None, pads=False, **params):
    """``axiom``: (the identity the scores meet, its tolerance: a number or a function of the adapter);
    ``pads``: it takes a padded batch of texts."""
    register(CaptumMethod(name, family, description, reference, params, call, per_token, axiom, pads))


_register("saliency", "gradient", "|gradient| at the word embeddings, summed per token (captum Saliency)",
          "Simonyan et al. 2014", _saliency, pads=True)
_register("deeplift", "gradient", "DeepLift rescale rule against the baseline text (captum DeepLift)",
          "Shrikumar et al. 2017", _deeplift, axiom=("conservation", default_tolerance), baseline=BASELINE_PARAM,
          pads=True)
_register("gradient_shap", "gradient", "expected gradients between noisy baselines and the input (captum)",
          "Lundberg & Lee 2017", _gradient_shap, baseline=BASELINE_PARAM,
          n_samples=Param(20, "random points on the baseline-input paths", minimum=1),
          noise=Param(0.0, "noise added to the baseline, as a fraction of the embeddings' std", minimum=0.0),
          seed=SEED, pads=True)
_register("smooth_grad", "gradient", "Integrated Gradients averaged over noisy embeddings (captum NoiseTunnel)",
          "Smilkov et al. 2017", _smooth_grad, baseline=BASELINE_PARAM,
          n_samples=Param(8, "noisy copies averaged", minimum=1),
          noise=Param(0.1, "noise std as a fraction of the embeddings' std", minimum=0.0),
          n_steps=Param(16, "Gauss-Legendre steps of each Integrated Gradients", minimum=1), seed=SEED, pads=True)
_register("occlusion", "perturbation", "output change when a window of tokens is replaced by the baseline",
          "Zeiler & Fergus 2014", _occlusion, per_token="mean", baseline=BASELINE_PARAM,
          window=Param(1, "tokens occluded together (sliding, stride 1)", minimum=1), batch_size=BATCH)
_register("feature_ablation", "perturbation", "output change when each token is replaced by the baseline",
          "captum FeatureAblation", _feature_ablation, per_token="mean", baseline=BASELINE_PARAM, batch_size=BATCH)
_register("lime", "perturbation", "Lasso surrogate fitted to random token ablations (captum Lime)",
          "Ribeiro et al. 2016", _sampled("Lime"), per_token="mean", baseline=BASELINE_PARAM,
          n_samples=Param(200, "random ablations the surrogate is fitted to", minimum=1), batch_size=BATCH,
          seed=SEED)
_register("kernel_shap", "perturbation", "Shapley values by weighted linear regression (captum KernelShap)",
          "Lundberg & Lee 2017", _kernel_shap, per_token="mean", axiom=("efficiency", 1e-3), baseline=BASELINE_PARAM,
          n_samples=Param(200, "random coalitions", minimum=1), batch_size=BATCH, seed=SEED)
_register("shapley_sampling", "perturbation", "Shapley values from random token permutations (captum)",
          "Castro et al. 2009", _shapley_sampling, per_token="mean", axiom=("efficiency", 1e-4),
          baseline=BASELINE_PARAM,
          n_samples=Param(25, "random permutations", minimum=1), batch_size=BATCH, seed=SEED)
