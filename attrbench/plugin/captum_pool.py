"""Pooled perturbations for captum's sampling methods, and every use of captum's private API in attrbench.

A perturbation method's forward passes for one text are pooled with other texts' by running captum twice with the
same seeds: first recording the inputs captum asks for (zeros returned: the perturbations a sampler draws do not
depend on the outputs), then, once :func:`answer_pooled` has computed every recorded input of every text in the
method's length-sorted batches, replaying the outputs in captum's order. The replay takes back what the recording
built (LIME's and KernelSHAP's samples and similarities, Shapley sampling's permutation steps), so captum's per-sample
tensor work runs once per text.

This needs captum's internals (``LimeBase._get_perturb_generator_func``, ``similarity_func`` and the interpretable
model's ``fit``/``representation`` swapped on the instance, ``captum.attr._core.lime``'s defaults and a kernel's
closure, ``ShapleyValueSampling._perturbation_generator``, ``captum._utils.common``'s expansion helpers and
``NoiseTunnel._add_noise_to_input``). They are read here and nowhere else (the architecture test holds that), and
only for the captum releases of ``CAPTUM_SUPPORTED`` (:func:`attrbench.plugin.gradient.captum_attr` refuses
others in one line; pyproject pins the same range), each checked against captum's own calls by
``tests/methods/test_captum_zoo.py``.
"""
from __future__ import annotations

import inspect
import math
from typing import Optional

import numpy as np
import torch

from .gradient import TargetForward, captum_attr

class Pooled(TargetForward):
    """A perturbation method's forward passes for one text, pooled with other texts': captum runs twice with the
    same seeds. First recording (each call's inputs kept, zeros returned: the perturbations a sampler draws do not
    depend on the outputs), then, once :func:`answer_pooled` has computed every recorded input of every text in the
    method's length-sorted batches, replaying the outputs in the order captum asked for them. Its tensors are on the
    CPU whatever the model's device: captum's sampler makes a few small tensor operations per perturbation (a mask,
    a similarity), which on a GPU would each be a kernel launch; only :func:`answer_pooled`'s batches go to the
    device."""

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


def answer_pooled(forwards: list[Pooled], method, adapter) -> None:
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


def _replayed_samples(engine, forward: Pooled, n_samples: int) -> None:
    """LIME and KernelSHAP (captum's LimeBase) while pooled: the replay takes back the perturbations and similarities
    the recording drew (the same ones: the seeds are), so the sampler's per-sample tensor operations run once per
    text rather than twice, and the recording, whose outputs are placeholders, fits no surrogate. The recording makes
    a text's samples together where captum's default representation is in use (:func:`samples_at_once`)."""
    draw, similarity = engine._get_perturb_generator_func, engine.similarity_func
    model = engine.interpretable_model
    fit, representation = model.fit, model.representation
    at_once = samples_at_once(engine, n_samples)
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


def samples_at_once(engine, n_samples: int):
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
    from captum.attr._core import lime  # heavy: captum loads on first use (captum_attr)

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


def _replayed_perturbations(engine, forward: Pooled) -> None:
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


def pool_sampler(engine, forward, n_samples: int) -> None:
    """Make a captum sampling engine (Lime, KernelShap, ShapleyValueSampling) replay what ``forward`` recorded,
    when ``forward`` is :class:`Pooled`; a plain forward leaves captum as it is."""
    if not isinstance(forward, Pooled):
        return
    if hasattr(engine, "_get_perturb_generator_func"):
        _replayed_samples(engine, forward, n_samples)
    if hasattr(engine, "_perturbation_generator"):
        _replayed_perturbations(engine, forward)


def noise_draw():
    """captum's NoiseTunnel noise draw, ``(inputs, stdev, copies) -> noisy copies``: SmoothGrad and GradientShap make
    each text's draws with it, in captum's order, since captum would draw once for a whole batch."""
    return captum_attr().NoiseTunnel._add_noise_to_input


def captum_sampler(engine, inputs, **kwargs):
    """captum's own sampler of a LimeBase engine for one input (what :func:`samples_at_once` is checked against)."""
    return engine._get_perturb_generator_func(inputs, **kwargs)


def default_from_interp_rep_transform(*args, **kwargs):
    """captum's default map from an interpretable sample to a model input (LIME, KernelSHAP)."""
    from captum.attr._core.lime import default_from_interp_rep_transform as transform  # heavy: captum on first use
    return transform(*args, **kwargs)
