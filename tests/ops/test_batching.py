"""The batcher: answers equal direct forward passes, each distinct sequence is sent once, caches are reused,
a CUDA out-of-memory halves the batch and the answers stay the same."""
from collections import Counter

import numpy as np
import pytest
import torch

from attrbench.models.adapter import TransformerAdapter
from attrbench.models.tiny import build_family
from attrbench.ops.batching import Batcher, MemoryCache
from attrbench.ops.perturb import Forward, MaskedEmbeddings, Readout, answer, target_probabilities


def _requests(adapter, n=9):
    ids = adapter.tokenizer("the keys to the cabinet are on the table")["input_ids"]
    sequences = [tuple(ids[: len(ids) - k]) for k in range(n)]  # lengths differ: several batches
    rows = [len(s) - 1 for s in sequences]
    return sequences, rows


def _generator(adapter, sequences, rows, readout):
    first = yield Forward(adapter, readout, list(sequences), list(rows))
    second = yield Forward(adapter, readout, list(sequences[::-1]), list(rows[::-1]))  # repeats of the first
    return first, second


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert"])
def test_answers_equal_direct_passes_and_each_sequence_is_sent_once(tiny_models, model):
    adapter = tiny_models[(model, "float64")]
    sequences, rows = _requests(adapter)
    readout = Readout(3, 5)  # a contrast readout goes through the same path
    direct = target_probabilities(adapter, readout, sequences, rows, batch_size=1)
    batcher = Batcher(batch_tokens=20)  # a tiny budget: many length-sorted batches
    results = batcher.run({k: _generator(adapter, sequences, rows, readout) for k in range(3)})
    for first, second in results.values():
        np.testing.assert_allclose(first, direct, rtol=0, atol=1e-12)
        np.testing.assert_allclose(second, direct[::-1], rtol=0, atol=1e-12)
    assert batcher.rows_requested == 6 * len(sequences)
    assert batcher.rows_sent == len(sequences)  # 3 generators x 2 requests, one distinct set
    assert batcher.batches > 1 and all(len(s) * 1 <= 20 for s in sequences)


@pytest.mark.parametrize("pad_tokens, batches", [(0, 9), (8, 3), (1000, 1)])
def test_a_batch_carries_at_most_its_padding_allowance(tiny_models, pad_tokens, batches):
    """One row at each of 9 lengths: none padded (one batch per length), up to 8 tokens (4 rows pad 0+1+2+3,
    a fifth would add 4: batches of 4, 4, 1), or any (one batch); the answers are the same."""
    adapter = tiny_models[("tiny-gpt2", "float64")]
    sequences, rows = _requests(adapter)
    readout = Readout(3, 5)
    padded = []
    batcher = Batcher(pad_tokens=pad_tokens)
    real = batcher._run_batch

    def recording(batch, out, start):
        lengths = [len(item[3]) for item in batch]
        padded.append(sum(max(lengths) - n for n in lengths))
        return real(batch, out, start)

    batcher._run_batch = recording
    answer = batcher.run({0: _generator(adapter, sequences, rows, readout)})[0][0]
    np.testing.assert_allclose(answer, target_probabilities(adapter, readout, sequences, rows, batch_size=1),
                               rtol=0, atol=1e-12)
    assert batcher.batches == len(padded) == batches and max(padded) <= pad_tokens


def test_a_shared_cache_answers_a_second_batcher_without_passes(tiny_models):
    adapter = tiny_models[("tiny-bert", "float32")]
    sequences, rows = _requests(adapter, 5)
    cache = MemoryCache()
    first = Batcher(cache).run({0: _generator(adapter, sequences, rows, Readout(1))})
    again = Batcher(cache)
    second = again.run({0: _generator(adapter, sequences, rows, Readout(1))})
    assert again.rows_sent == 0 and again.rows_cached == 2 * len(sequences)  # two rounds, all cached
    np.testing.assert_array_equal(first[0][0], second[0][0])
    other = Batcher(cache)  # another readout is another output: not served from the cache
    other.run({0: _generator(adapter, sequences, rows, Readout(0))})
    assert other.rows_sent == len(sequences)


def _small_memory(monkeypatch, adapter):
    """A device that runs out of memory on batches of more than two rows."""
    real = adapter.row_logits

    def small_memory(rows, **inputs):
        if len(rows) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(rows, **inputs)

    monkeypatch.setattr(adapter, "row_logits", small_memory)


def test_out_of_memory_halves_the_batch_and_keeps_the_answers(tiny_models, monkeypatch):
    adapter = tiny_models[("tiny-gpt2", "float64")]
    sequences, rows = _requests(adapter)
    expected = target_probabilities(adapter, Readout(2), sequences, rows)
    _small_memory(monkeypatch, adapter)
    batcher = Batcher(batch_tokens=10_000)
    result = batcher.run({0: _generator(adapter, sequences, rows, Readout(2))})
    np.testing.assert_allclose(result[0][0], expected, rtol=0, atol=1e-12)
    assert batcher.oom_halvings >= 1 and batcher.max_batch <= 2


def test_plain_values_pass_through_and_other_yields_are_refused():
    def bad():
        yield "not a request"

    assert Batcher().run({"a": 1.5}) == {"a": 1.5}
    with pytest.raises(TypeError, match="Forward or MaskedEmbeddings requests only"):
        Batcher().run({"b": bad()})


def _masked(adapter, text, keep_seed, samples=7):
    ids = tuple(adapter.tokenizer(text)["input_ids"])
    rng = np.random.default_rng(keep_seed)
    uniform = torch.from_numpy(np.random.default_rng(0).random((samples, len(ids), 32)))
    classes = getattr(adapter.model.config, "num_labels", 0) if "Classification" in type(adapter.model).__name__ else 0
    readout = Readout(1, 0) if classes else Readout(3, 5)  # a classifier's two classes, or two words
    return MaskedEmbeddings(adapter, readout, ids, len(ids) - 1, rng.random(len(ids)), uniform)


@pytest.mark.parametrize("model", ["tiny-gpt2", "tiny-bert"])
def test_masked_embedding_samples_of_many_requests_batch_together_and_equal_each_alone(tiny_models, model,
                                                                                         monkeypatch):
    """Soft erasure's samples: gathered across requests (methods) of one length into token-budgeted batches
    that may split a request, each sample counted as one model input; answers equal each request alone, also
    after a CUDA out-of-memory halves the batch."""
    adapter = tiny_models[(model, "float64")]
    texts = ["the keys to the cabinet are on the table", "the key to the cabinets is here", "the keys are"]
    requests = [_masked(adapter, text, seed) for seed in range(3) for text in texts]  # 3 methods x 3 examples

    def alone(request):
        def one():
            return (yield MaskedEmbeddings(request.adapter, request.readout, request.ids, request.row, request.keep,
                                           request.uniform))
        return answer(one(), batch_size=1)

    expected = [alone(request) for request in requests]
    budget = 3 * len(requests[0].ids)  # three samples of the longest text per batch: batches split requests
    batcher = Batcher(batch_tokens=budget)
    batcher.answer(requests)
    for request, values in zip(requests, expected):
        assert request.answer.shape == (7,)
        np.testing.assert_allclose(request.answer, values, rtol=0, atol=1e-12)
    assert batcher.rows_sent == batcher.rows_distinct == batcher.rows_requested == 7 * len(requests)
    assert batcher.lengths_sent == Counter(len(r.ids) for r in requests for _ in range(7))
    lengths = {len(r.ids) for r in requests}
    assert batcher.batches < len(requests) * 7 and batcher.batches >= sum(
        -(-7 * 3 // max(1, budget // n)) for n in lengths)  # length groups, never mixed
    _small_memory(monkeypatch, adapter)
    again = [_masked(adapter, text, seed) for seed in range(3) for text in texts]
    small = Batcher(batch_tokens=10_000)
    small.answer(again)
    for request, values in zip(again, expected):
        np.testing.assert_allclose(request.answer, values, rtol=0, atol=1e-12)
    assert small.oom_halvings >= 1 and small.max_batch <= 2


def _family(model_type, head):
    model, tokenizer = build_family(model_type, head)
    return TransformerAdapter(model.double(), tokenizer, f"{model_type}-{head}")


@pytest.mark.parametrize("model, mixed", [("tiny-gpt2", True), ("tiny-bert", True), (("bert", "classifier"), True),
                                          (("modernbert", "masked_lm"), True), (("deberta-v2", "masked_lm"), True),
                                          (("qwen3", "classifier"), False)])
def test_masked_samples_of_different_lengths_share_a_pass_where_the_model_allows_padding(tiny_models, model, mixed):
    """A causal LM read at its own rows and an encoder take soft erasure's samples of several lengths in one
    right-padded pass (within the padding allowance), with the answers of each request alone; a decoder read by a
    sequence-classification head, which finds its row from the ids, is sent one length at a time."""
    adapter = tiny_models[(model, "float64")] if isinstance(model, str) else _family(*model)
    assert adapter.pads_embeddings is mixed
    texts = ["the keys to the cabinet are on the table", "the keys to the cabinet are here", "the keys are"]
    requests = [_masked(adapter, text, seed) for seed in range(2) for text in texts]
    batcher = Batcher(batch_tokens=10_000, pad_tokens=10_000)
    batcher.answer(requests)
    lengths = {len(r.ids) for r in requests}
    assert len(lengths) == 3 and batcher.batches == (1 if mixed else 3)
    assert batcher.lengths_sent == Counter(len(r.ids) for r in requests for _ in range(7))
    for request in requests:
        one = MaskedEmbeddings(request.adapter, request.readout, request.ids, request.row, request.keep, request.uniform)
        Batcher().answer([one])
        np.testing.assert_allclose(request.answer, one.answer, rtol=0, atol=1e-12)
    tight = Batcher(batch_tokens=10_000, pad_tokens=0)  # no padding allowed: one length per pass
    tight.answer([_masked(adapter, text, 0) for text in texts])
    assert tight.batches == 3


def test_a_long_round_of_model_outputs_shows_its_progress(tiny_models, capsys, monkeypatch):
    """The forward passes of a round run after every row is queued (NAOPC's bounds: minutes on long texts): with
    progress on, a round of PROGRESS_ROWS sequences or more has a bar of its own, out of every sequence to send."""
    adapter = tiny_models[("tiny-gpt2", "float64")]
    sequences, rows = _requests(adapter)
    readout = Readout(3, 5)
    monkeypatch.setattr(Batcher, "PROGRESS_ROWS", len(sequences))
    for progress, shown in ((False, False), (True, True)):
        Batcher(batch_tokens=20, progress=progress).run({0: _generator(adapter, sequences, rows, readout)})
        err = capsys.readouterr().err
        assert ("model outputs" in err) is shown and (f"/{len(sequences)} [" in err) is shown, err
    monkeypatch.setattr(Batcher, "PROGRESS_ROWS", len(sequences) + 1)  # a short round stays quiet
    Batcher(batch_tokens=20, progress=True).run({0: _generator(adapter, sequences, rows, readout)})
    assert "model outputs" not in capsys.readouterr().err
