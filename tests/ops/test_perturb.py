"""Word features: the tokenizer's own word split, and a split of its text where the tokenizer marks none."""
from types import SimpleNamespace

import pytest
import transformers as hf
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from attrbench.errors import InputError
from attrbench.models.tiny import tiny_tokenizer
from attrbench.ops.perturb import marks_words, word_features

TEXT = "The keys to the cabinet, which my brother's friends lost, are"
WORDS = ["The", "keys", "to", "the", "cabinet", ",", "which", "my", "brother", "'", "s", "friends", "lost", ",", "are"]


def sentencepiece_like() -> hf.PreTrainedTokenizerFast:
    """A Unigram tokenizer that, as Gemma's and Llama 2's, turns spaces into ▁ before its pre-tokenizer (none), so
    its word ids put the whole text in one word; pieces: ▁word, word and single characters, a BOS before the text."""
    words = {"keys", "to", "the", "cabinet", "which", "my", "friends", "lost", "are"}
    pieces = [("<unk>", 0.0), ("<bos>", 0.0)] + [(f"▁{w}", -1.0) for w in sorted(words)] + \
             [("▁brot", -0.5), ("her's", -0.5)] + [(c, -10.0) for c in sorted(set(TEXT.replace(" ", "▁")))]
    tok = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=False))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    return hf.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<bos>")


def _decoded(tokenizer, text: str) -> list[str]:
    ids = tokenizer(text)["input_ids"]
    features = word_features(SimpleNamespace(tokenizer=tokenizer, name="t"), text, ids)
    return ["".join(tokenizer.convert_ids_to_tokens([ids[p] for p in f])) for f in features]


def test_a_tokenizer_that_marks_no_words_gets_the_texts_words():
    """Its own word ids are one word (a word-level metric would see one feature and be undefined on every
    example); the features are the text's words instead, each token in the word its characters overlap, the
    words one token spans ("brother" and "'s" in "her's") one feature, the BOS left out."""
    tokenizer = sentencepiece_like()
    ids = tokenizer(TEXT)["input_ids"]
    assert set(w for w in tokenizer(TEXT).word_ids() if w is not None) == {0} and not marks_words(tokenizer)
    pieces = _decoded(tokenizer, TEXT)
    assert "▁brot" in tokenizer.convert_ids_to_tokens(ids) and "her's" in pieces[8]
    assert [p.replace("▁", "") for p in pieces] == WORDS[:8] + ["brother's"] + WORDS[11:]
    plain = _decoded(tokenizer, "The keys are")
    assert plain == ["The", "▁keys", "▁are"] and _decoded(tokenizer, " ") == ["▁"]
    assert _decoded(tokenizer, " The  keys ") == ["▁The", "▁▁keys▁"]  # a space token: the next word, else the last


def test_a_tokenizer_that_marks_words_keeps_its_own_split():
    """A tokenizer with a pre-tokenizer (BERT's, GPT-2's, the tiny models') keeps its word ids, punctuation and
    all, so the rows of the models published with them are unchanged."""
    tokenizer = tiny_tokenizer(encoder=False)
    assert marks_words(tokenizer)
    ids = tokenizer(TEXT)["input_ids"]
    own: dict[int, list[int]] = {}
    for position, word in enumerate(tokenizer(TEXT).word_ids()):
        own.setdefault(word, []).append(position)
    assert word_features(SimpleNamespace(tokenizer=tokenizer, name="tiny"), TEXT, ids) == list(own.values())
    assert len(own) == len(WORDS)


def test_word_units_need_a_fast_tokenizer_and_the_texts_ids():
    tokenizer = sentencepiece_like()
    with pytest.raises(InputError, match="the text the token ids came from"):
        word_features(SimpleNamespace(tokenizer=tokenizer, name="t"), TEXT, [1, 2, 3])
    slow = SimpleNamespace(tokenizer=SimpleNamespace(is_fast=False), name="slow")
    with pytest.raises(InputError, match="fast tokenizer"):
        word_features(slow, TEXT, [1])
