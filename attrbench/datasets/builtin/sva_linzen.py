"""Subject-verb agreement, Linzen et al. 2016: Wikipedia sentences with the verb masked.

A verb-number probe (``minilm-l6-sva``) is evaluated on its held-out 15 % (the seeded 70/15/15
split it was trained with: ``train``, ``val``, ``test``); a masked or causal LM reads the whole file
(see ``attrbench.datasets.agreement_examples``).
"""
from attrbench.plugin import Dataset, InputError, register
from attrbench.plugin.internal import agreement_examples, model_task, read_sva, sva_split


class SVALinzen(Dataset):
    name, family = "sva-linzen", "agreement"
    description = "subject-verb agreement, Linzen et al. 2016 Wikipedia sentences"
    reference = "Linzen, Dupoux & Goldberg 2016; files in attrbench/data/sva"
    files = {"all": "sva/linzen_testset.tsv"}
    splits = ("train", "val", "test", "all")  # the probe's three; a language model reads all
    default_split = "test"

    def examples(self, adapter, split, data_dir=None):
        rows = read_sva(self.name, data_dir)
        if model_task(adapter) == "sva":
            if split not in ("train", "val", "test"):
                raise InputError(f"the probe's split of sva-linzen is train, val or test, not '{split}'")
            keep = set(sva_split(len(rows))[split].tolist())
            rows = [r for r in rows if r["row"] in keep]
        else:
            split = "all"
        return agreement_examples(adapter, self, rows, split, data_dir)


register(SVALinzen)
