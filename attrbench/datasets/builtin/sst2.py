"""SST-2 (Socher et al. 2013; GLUE, Wang et al. 2019): sentences of movie reviews, positive or negative.

Served by a binary sentence classifier (``minilm-l6-sst2``, or any 2-class model). Each sentence is
explained, and scored by the erasure metrics, for the model's **predicted class** (``target =
predicted``, as ERASER and the soft-erasure paper do; on the 12 % of dev sentences the model gets
wrong, the gold label is a class the model does not predict); ``target = label`` explains the gold
label instead. ``test`` has no labels: always the predicted class, as the ALTI paper did.
"""
from attrbench.plugin import Dataset, Example, InputError, Param, register
from attrbench.plugin.internal import SST2_FILES, file_sha256, model_task, read_sst2


class SST2(Dataset):
    name, family = "sst2", "sentiment"
    description = "SST-2 sentiment (GLUE), explained for the predicted class (or the gold label: target=label)"
    reference = "Socher et al. 2013; GLUE (Wang et al. 2019); files in attrbench/datasets/data/sst2"
    files = SST2_FILES
    default_split = "dev"
    params = {"target": Param("predicted", "the class each sentence is explained for: the model's prediction "
                                           "(ERASER) or the gold label", choices=("predicted", "label"))}

    def examples(self, adapter, split, data_dir=None):
        task = model_task(adapter)
        if task != "sst2":
            raise InputError(f"dataset sst2 needs a binary sentiment classifier; '{adapter.name}' is "
                             f"{task or 'a bare model without a head'}: use minilm-l6-sst2")
        if split not in self.files:
            raise InputError(f"sst2 has splits train, dev and test, not '{split}'")
        gold = self.target == "label"
        examples = [Example(f"sst2:{split}:{r['row']}", r["sentence"].strip(),
                            f"class:{r['label']}" if gold and r["label"] is not None else "auto", {"label": r["label"]})
                    for r in read_sst2(split, data_dir)]
        return examples, {"split": split, "target": "gold label" if gold and split != "test" else "predicted class",
                          "file_sha256": file_sha256(self.file(split, data_dir))}


register(SST2)
