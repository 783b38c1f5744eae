"""SST-2 (Socher et al. 2013; GLUE, Wang et al. 2019): sentences of movie reviews, positive or negative.

Served by a binary sentence classifier (``minilm-l6-sst2``, or any 2-class model). ``dev`` and
``train`` explain the gold label; ``test`` has no labels and explains the predicted class, as the
ALTI paper did.
"""
from attrbench.plugin import Dataset, Example, InputError, file_sha256, model_task, read_sst2, register


class SST2(Dataset):
    name, family = "sst2", "sentiment"
    description = "SST-2 sentiment (GLUE); dev labelled, test explained for the predicted class"
    reference = "Socher et al. 2013; GLUE (Wang et al. 2019); files in attrbench/data/sst2"
    files = {"train": "sst2/train.tsv", "dev": "sst2/dev.tsv", "test": "sst2/test_unlabeled_glue.tsv"}
    default_split = "dev"

    def examples(self, adapter, split, data_dir=None):
        task = model_task(adapter)
        if task != "sst2":
            raise InputError(f"dataset sst2 needs a binary sentiment classifier; '{adapter.name}' is "
                             f"{task or 'a bare model without a head'}: use minilm-l6-sst2")
        if split not in self.files:
            raise InputError(f"sst2 has splits train, dev and test, not '{split}'")
        examples = [Example(f"sst2:{split}:{r['row']}", r["sentence"].strip(),
                            "auto" if r["label"] is None else f"class:{r['label']}", {"label": r["label"]})
                    for r in read_sst2(split, data_dir)]
        return examples, {"split": split, "target": "predicted class" if split == "test" else "gold label",
                          "file_sha256": file_sha256(self.file(split, data_dir))}


register(SST2)
