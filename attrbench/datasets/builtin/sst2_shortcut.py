"""SST-2 dev with a planted shortcut in every sentence (Bastings et al. 2022; ``attrbench.datasets.shortcuts``).

Served by ``minilm-l6-sst2-shortcut``, the classifier trained with these shortcuts and verified to follow them
(its training record's ``reliance``). Each sentence carries one shortcut, a single word or an ordered pair
(alternating by row), for a seeded label that contradicts the sentence's own sentiment on about half of them; the
example is explained for the shortcut's class, and the shortcut's words are its known evidence
(``meta["evidence"]``, scored by the ``ground_truth`` evaluation). Any other binary sentiment classifier can read it
too: on ``minilm-l6-sst2``, never trained with these words, it is the control.
"""
from attrbench.plugin import Dataset, Example, InputError, register
from attrbench.plugin.internal import SST2_FILES, evaluation_rows, file_sha256, model_task, read_sst2


class SST2Shortcut(Dataset):
    name, family = "sst2-shortcut", "ground truth"
    description = "SST-2 dev with a planted shortcut per sentence (single word or ordered pair), known evidence"
    reference = ("Bastings, Ebert, Zablotskaia, Sandholm & Filippova 2022; sentences from SST-2 dev (Socher et al. "
                 "2013, GLUE)")
    files = {"dev": SST2_FILES["dev"]}
    default_split = "dev"

    def examples(self, adapter, split, data_dir=None):
        task = model_task(adapter)
        if task != "sst2":
            raise InputError(f"dataset sst2-shortcut needs a binary sentiment classifier; '{adapter.name}' is "
                             f"{task or 'a bare model without a head'}: use minilm-l6-sst2-shortcut")
        if split != "dev":
            raise InputError(f"sst2-shortcut has the split dev only, not '{split}'")
        examples = [Example(f"sst2-shortcut:{r['row']}", r["sentence"], f"class:{r['label']}",
                            {"evidence": r["evidence"], "variant": r["variant"], "label": r["label"],
                             "sentence_label": r["gold"]})
                    for r in evaluation_rows(read_sst2(split, data_dir))]
        return examples, {"split": split, "target": "the planted shortcut's class",
                          "file_sha256": file_sha256(self.file(split, data_dir))}


register(SST2Shortcut)
