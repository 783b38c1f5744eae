"""A random attribution: the floor a method must beat on every faithfulness metric.

Each token gets an independent uniform score in [0, 1), seeded by ``seed`` and the text (so a text
gets the same scores alone or in a batch, and every run the same). A faithfulness metric on which a
method does not beat this row says nothing for the method (ICE, Atanasova et al.; Edin et al. 2024
report random orderings the same way).
"""
import zlib

import numpy as np

from attrbench.plugin import Method, MethodResult, Param, register


class RandomBaseline(Method):
    name, family, output = "random", "baseline", "scores"
    description = "uniform random scores per token (seeded by the text): the floor of every faithfulness table"
    reference = "a control, as in Edin et al. 2024 and the ICE test of random rationales"
    params = {"seed": Param(0, "seed of the draws (with the text)", minimum=0)}
    batched = True  # no model pass: a shard's texts drawn in one call

    def run(self, adapter, texts, *, targets, layers, truncate):
        batch = adapter.encode(texts, truncate=truncate)
        results = []
        for b, (text, n) in enumerate(zip(texts, batch.lengths)):
            rng = np.random.default_rng([self.seed, zlib.crc32(text.encode())])
            results.append(MethodResult(self.name, adapter.name, batch.tokens[b], rng.random(n), None,
                                        {"truncated": batch.truncated[b]}))
        return results


register(RandomBaseline)
