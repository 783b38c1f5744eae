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

import inspect
import math
import warnings
from typing import Optional

import numpy as np
import torch

from attrbench.plugin import (
    BASELINE_PARAM,
    GradientMethod,
    InputError,
    Param,
    TargetForward,
    axiom_check,
    baseline_ids,
    captum_attr,
    default_tolerance,
    register,
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


class _Pooled(TargetForward):
    """A perturbation method's forward passes for one text, pooled with other texts': captum runs twice with the
    same seeds. First recording (each call's inputs kept, zeros returned: the perturbations a sampler draws do not
    depend on the outputs), then, once :func:`_answer` has computed every recorded input of every text in the
    method's length-sorted batches, replaying the outputs in the order captum asked for them. Its tensors are on the
    CPU whatever the model's device: captum's sampler makes a few small tensor operations per perturbation (a mask,
    a similarity), which on a GPU would each be a kernel launch; only :func:`_answer`'s batches go to the device."""

    def __init__(self, adapter, targets, attention_mask):
        super().__init__(adapter, targets, attention_mask)
        self.rows, self.index, self.contrast = self.rows.cpu(), self.index.cpu(), self.contrast.cpu()
        self.args = (attention_mask, self.rows, self.index, self.contrast)
        self.calls: list[tuple] = []  # per call: (inputs, mask, rows, index, contrast), one row per input
        self.answers: list[torch.Tensor] = []
        self.samples: list = []  # LIME / KernelSHAP: each perturbation drawn while recording, and its similarity
        self.similarities: list = []
        self.perturbations: list[list] = []  # Shapley sampling: each permutation's ablated inputs, as recorded
        self.replaying = False

    def __call__(self, inputs, attention_mask, rows=None, index=None, contrast=None):
        if self.replaying:
            return self.answers.pop(0)
        self.calls.append((inputs.detach(), *self.per_copy(len(inputs), attention_mask, rows, index, contrast)))
        return inputs.new_zeros(len(inputs))


def _answer(forwards: list[_Pooled], method: GradientMethod, adapter) -> None:
    """Every recorded call's outputs, computed in the method's length-sorted batches of plain passes (the run's whole
    budget, ``4 * batch_tokens``, with at most ``pad_tokens`` of padding), then each forward set to replay its own.
    A batch is gathered call by call, as slices of each call's rows (a call's rows are consecutive in the sorted
    order: one length, their order kept), not row by row: Shapley sampling records some 500 rows per text."""
    calls = [(f, k) for f in forwards for k in range(len(f.calls))]
    sizes = np.array([len(f.calls[k][0]) for f, k in calls], dtype=np.int64)
    owner = np.repeat(np.arange(len(calls)), sizes)  # each row's call, and its place in that call
    place = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    lengths = np.repeat([f.calls[k][0].shape[1] for f, k in calls], sizes).tolist()
    chunks: list[list[torch.Tensor]] = [[] for _ in calls]
    for batch in method.batches(adapter, lengths, 4 * method.batch_tokens):
        width, rows = lengths[batch[-1]], np.asarray(batch)  # the longest is last
        cuts = np.flatnonzero((np.diff(owner[rows]) != 0) | (np.diff(place[rows]) != 1)) + 1
        runs = [(int(owner[r[0]]), int(place[r[0]]), len(r)) for r in np.split(rows, cuts)]
        parts = []
        for p in range(5):
            column = [calls[c][0].calls[calls[c][1]][p][start:start + n] for c, start, n in runs]
            if p < 2:  # embeddings (n, L, d) and mask (n, L): right-padded to the batch's width, mask 0 there
                column = [torch.nn.functional.pad(c, (0, 0, 0, width - c.shape[1]) if c.ndim == 3 else
                                                  (0, width - c.shape[1])) for c in column]
            parts.append(torch.cat(column).to(adapter.device))
        with torch.no_grad():
            values = calls[runs[0][0]][0].score(*parts).cpu()
        at = 0
        for c, _, n in runs:
            chunks[c].append(values[at:at + n])
            at += n
    answers = iter([torch.cat(chunk) for chunk in chunks])  # in the order of ``calls``: forward by forward
    for f in forwards:
        f.answers, f.replaying = [next(answers) for _ in f.calls], True


class CaptumMethod(GradientMethod):
    """One captum algorithm on the word embeddings; ``call`` runs it and returns (attributions, extra meta).
    ``pads``: a padded batch of texts gives each text its own result (the deterministic gradient algorithms; the
    seeded ones draw per text). Perturbation methods pool their texts' forward passes instead (:class:`_Pooled`)."""

    def __init__(self, name: str, family: str, description: str, reference: str, params: dict, call,
                 per_token: str, axiom=None, pads=False):
        self.name, self.family, self.description, self.reference = name, family, description, reference
        self.params, self.call, self.per_token = params, call, per_token
        self.axiom, self.axiom_tolerance = axiom if axiom is not None else (None, None)
        self.padded = pads

    @property
    def pools(self) -> bool:
        """Perturbation methods need outputs only: their texts' forward passes are pooled (:class:`_Pooled`)."""
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

        def layer(ids):  # captum's sampling runs on CPU copies (see _Pooled)
            return embed(ids.to(adapter.device)).cpu()

        inputs = [(batch.input_ids[b:b + 1, :n].cpu(), batch.attention_mask[b:b + 1, :n].cpu())
                  for b, n in enumerate(batch.lengths)]
        forwards = [_Pooled(adapter, [target], mask) for target, (_, mask) in zip(targets, inputs)]
        for forward, (ids, mask) in zip(forwards, inputs):
            self.attribute(forward, layer, ids, mask, adapter)  # records the inputs captum asks for
        _answer(forwards, self, adapter)
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
    draw = captum_attr().NoiseTunnel._add_noise_to_input
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
    draw = captum_attr().NoiseTunnel._add_noise_to_input
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
        if isinstance(forward, _Pooled) and hasattr(engine, "_get_perturb_generator_func"):
            _replayed_samples(engine, forward, values["n_samples"])
        if isinstance(forward, _Pooled) and hasattr(engine, "_perturbation_generator"):
            _replayed_perturbations(engine, forward)
        return engine.attribute(
            embeds, baselines=baselines, feature_mask=tokens, additional_forward_args=args,
            n_samples=values["n_samples"], perturbations_per_eval=values["batch_size"]), {}
    return call


def _replayed_samples(engine, forward: _Pooled, n_samples: int) -> None:
    """LIME and KernelSHAP (captum's LimeBase) while pooled: the replay takes back the perturbations and similarities
    the recording drew (the same ones: the seeds are), so the sampler's per-sample tensor operations run once per
    text rather than twice, and the recording, whose outputs are placeholders, fits no surrogate. The recording makes
    a text's samples together where captum's default representation is in use (:func:`_at_once`)."""
    draw, similarity = engine._get_perturb_generator_func, engine.similarity_func
    model = engine.interpretable_model
    fit, representation = model.fit, model.representation
    at_once = _at_once(engine, n_samples)
    pending: list = []  # the similarities drawn at once, not yet asked for
    features = [0]  # the surrogate's number of features, as the sampler is told

    def generator(inputs, **kwargs):
        if forward.replaying:
            return iter(forward.samples).__next__  # StopIteration where the recording's sampler stopped
        features[0] = int(kwargs.get("num_interp_features", 0))
        drawn = at_once(inputs, **kwargs) if at_once else None
        if drawn is not None:
            samples, weights = drawn
            pending[:] = weights or []
            own = iter(samples).__next__
        else:
            own = draw(inputs, **kwargs)

        def recorded():
            forward.samples.append(own())
            return forward.samples[-1]
        return recorded

    similarities = iter(forward.similarities)

    def similar(*args, **kwargs):
        if forward.replaying:
            return next(similarities)
        forward.similarities.append(pending.pop(0) if pending else similarity(*args, **kwargs))
        return forward.similarities[-1]

    def fitted(*args, **kwargs):
        return fit(*args, **kwargs) if forward.replaying else None

    def coefficients(*args, **kwargs):  # the recording's result is thrown away: zeros of the surrogate's shape
        return representation(*args, **kwargs) if forward.replaying else torch.zeros(1, features[0])

    engine._get_perturb_generator_func, engine.similarity_func = generator, similar
    model.fit, model.representation = fitted, coefficients


_CHUNK_VALUES = 1 << 22  # mask entries indexed per step while the samples' model inputs are made
_SERIAL_REDUCTION = 32768  # torch reduces a flat vector of at most this many values on one thread, in one order


def _at_once(engine, n_samples: int):
    """LIME's and KernelSHAP's samples for a text made together rather than one per call of captum's loop, where
    captum's default interpretable representation is in use. Their draws are the same: nothing else draws between
    two samples, and LIME's default sampler (``torch.bernoulli`` of a (1, features) tensor of 0.5 per sample) gives
    the same stream as one (n_samples, features) draw, while KernelSHAP's sampler is a generator pulled n_samples
    times ahead. Each model input is then the same elementwise product, made for many samples at once, and LIME's
    default similarity (cosine distance through an exponential kernel of width 1) the same kernel of cosines reduced
    in one call, where that call reduces each sample's flat vector in the order captum's call for it alone does: up
    to ``_SERIAL_REDUCTION`` values (tokens x hidden size), or on one thread; beyond, torch splits a single vector's
    sum over threads, and captum's kernel runs per sample. A function of the sampler's arguments giving (samples,
    similarities or None where captum's kernel is to run), or None where the representation or the sampler is
    another."""
    from captum.attr._core import lime  # heavy: captum loads on first use (attrbench.plugin.captum_attr)

    kernel = engine.similarity_func
    closure = dict(zip(kernel.__code__.co_freevars, (c.cell_contents for c in kernel.__closure__ or ()))) \
        if hasattr(kernel, "__code__") else {}
    cosine_kernel = getattr(kernel, "__name__", "") == "default_exp_kernel" and closure == {
        "distance_mode": "cosine", "kernel_width": 1.0}
    bernoulli = engine.perturb_func is lime.default_perturb_func
    if not (engine.perturb_interpretable_space and (bernoulli or inspect.isgeneratorfunction(engine.perturb_func))
            and engine.from_interp_rep_transform is lime.default_from_interp_rep_transform):
        return None

    def at_once(inputs, **kwargs):
        mask, baselines = kwargs.get("feature_mask"), kwargs.get("baselines")
        if not (isinstance(inputs, torch.Tensor) and isinstance(mask, torch.Tensor)
                and isinstance(baselines, torch.Tensor)):
            return None
        if bernoulli:
            draws = torch.bernoulli(torch.ones(n_samples, int(kwargs["num_interp_features"])) * 0.5)
            draws = draws.to(device=inputs.device).long()
        else:
            sampler = engine.perturb_func(inputs, **kwargs)
            draws = torch.cat([next(sampler) for _ in range(n_samples)])
        chunk = max(1, _CHUNK_VALUES // max(1, mask.numel()))  # (chunk, *mask.shape) at a time bounds the memory
        model_inputs = torch.cat([  # each sample's mask as captum indexes it, then captum's own products
            kept.to(inputs.dtype) * inputs + (~kept).to(inputs.dtype) * baselines
            for kept in (draws[start:start + chunk].bool()[:, mask] for start in range(0, n_samples, chunk))])
        samples = [(draws[i:i + 1], model_inputs[i]) for i in range(n_samples)]
        if not cosine_kernel or (inputs.numel() > _SERIAL_REDUCTION and torch.get_num_threads() > 1):
            return samples, None  # a long flat vector's reduction is split over threads: captum's kernel per sample
        flat = inputs.reshape(1, -1).float()
        cosine = torch.cat([torch.nn.functional.cosine_similarity(
            model_inputs[start:start + chunk].reshape(-1, flat.shape[1]).float(), flat, dim=1)
            for start in range(0, n_samples, chunk)])
        exponents = -1 * (1 - cosine) ** 2 / 2.0
        return samples, [math.exp(value) for value in exponents.tolist()]

    return at_once


def _replayed_perturbations(engine, forward: _Pooled) -> None:
    """Shapley sampling while pooled: the replay takes back each permutation's ablated inputs as the recording built
    them (the permutations are the same: the seeds are), so they are built once per text rather than twice."""
    build = engine._perturbation_generator
    calls = iter(forward.perturbations)

    def generator(*args, **kwargs):
        if forward.replaying:
            yield from next(calls)
            return
        forward.perturbations.append([])
        for item in _permutation_steps(*args, **kwargs) or build(*args, **kwargs):
            forward.perturbations[-1].append(item)
            yield item

    engine._perturbation_generator = generator


def _permutation_steps(inputs, additional_args, target, baselines, input_masks, feature_permutation,
                       perturbations_per_eval) -> Optional[list]:
    """What captum's ``ShapleyValueSampling._perturbation_generator`` yields for one permutation of one input tensor,
    made for all its steps at once: step i holds the input where the feature's place in the permutation is at most
    i and the baseline elsewhere (captum gets there by i products, ``current * ~selected + input * selected``, the
    same values), with the mask of the feature added at that step; in batches of ``perturbations_per_eval`` with
    the forward arguments and target expanded as captum expands them. None for several input tensors."""
    from captum._utils.common import _expand_additional_forward_args, _expand_target  # heavy: captum on first use

    if len(inputs) != 1 or len(input_masks) != 1:
        return None
    x, base, mask = inputs[0], baselines[0], input_masks[0]
    order = torch.as_tensor(feature_permutation if isinstance(feature_permutation, torch.Tensor)
                            else [int(f) for f in feature_permutation], device=mask.device)
    place = torch.empty_like(order)
    place[order] = torch.arange(len(order), device=mask.device)
    step = torch.arange(len(order), device=mask.device).view(-1, *([1] * mask.dim()))
    kept = place[mask][None] <= step  # (steps, *mask.shape)
    steps = torch.where(kept, x, base).reshape(len(order) * x.shape[0], *x.shape[1:])
    selected = mask[None] == order.view(-1, *([1] * mask.dim()))
    present = set(mask.unique().tolist())
    out, per = [], max(1, perturbations_per_eval)
    repeated = (_expand_additional_forward_args(additional_args, per) if additional_args is not None else None,
                _expand_target(target, per))
    for start in range(0, len(order), per):
        k = min(per, len(order) - start)
        args, target_k = repeated if k == per else (
            _expand_additional_forward_args(additional_args, k) if additional_args is not None else None,
            _expand_target(target, k))
        rows = slice(start * x.shape[0], (start + k) * x.shape[0])
        features = {0} if present & {int(f) for f in order[start:start + k]} else set()
        out.append(((steps[rows],), args, target_k, (selected[start:start + k].reshape(k, *mask.shape),),
                    features))
    return out


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
