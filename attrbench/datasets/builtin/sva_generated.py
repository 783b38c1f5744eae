"""Subject-verb agreement on Gulordava et al. 2018's 'colorless green' sentences (nonce words keep
the syntax, remove the semantic cues). Read like ``sva-linzen`` (``attrbench.datasets.agreement_examples``)."""
from attrbench.plugin import Dataset, register
from attrbench.plugin.internal import agreement_examples, read_sva


class SVAGenerated(Dataset):
    name, family = "sva-generated", "agreement"
    description = "subject-verb agreement, Gulordava et al. 2018 'colorless green' sentences"
    reference = "Gulordava et al. 2018; files in attrbench/data/sva"
    files = {"all": "sva/generated_en.tsv"}
    default_split = "all"

    def examples(self, adapter, split, data_dir=None):
        return agreement_examples(adapter, self, read_sva(self.name, data_dir), "all", data_dir)


register(SVAGenerated)
