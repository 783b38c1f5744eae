"""Random-weight stand-ins of the full comparison's models, for measuring cost where their weights cannot go.

    python benchmarks/stand_ins.py export DIR           # here: each model's config and tokenizer files (~5 MB)
    python benchmarks/stand_ins.py build DIR OUT        # there: random weights of the same shapes, a run config

A forward or backward pass costs the same whatever the weights hold, so a stand-in with the real model's config
(layers, widths, heads, vocabulary, head class) and tokenizer (the same token counts on the same texts) costs what
the real model costs, or nearly: its scores mean nothing, and the searches whose length depends on the scores
(NAOPC's beam beyond its exact limit) may take other paths. ``build`` writes ``OUT/full-stand-ins.toml``: the
shipped ``full`` config with each model replaced by its stand-in's folder, for ``bench_leaderboard.py --device``.
For a machine without the weights (90 MB MiniLM, 98 MB SmolLM2 GGUF) and no network to fetch them.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attrbench.runtime.config import read_config  # noqa: E402

KEEP = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def export(dest: Path) -> None:
    from attrbench.models import load_model

    for entry in read_config("full")["suite"]:
        name = entry["model"]
        source = Path(load_model(name).source)
        (dest / name).mkdir(parents=True, exist_ok=True)
        for file in KEEP:
            if (source / file).exists():
                shutil.copy(source / file, dest / name / file)
        print(f"{name}: {source} -> {dest / name}")


def build(specs: Path, out: Path) -> Path:
    import torch
    import transformers as hf

    config = read_config("full")
    lines = [f'name = "full-stand-ins"\nseed = {config["seed"]}\ndtype = "{config["dtype"]}"\n'
             + (f'shard_size = {config["shard_size"]}\n' if config["shard_size"] else "")]
    for entry in config["suite"]:
        folder = out / entry["model"]
        if not (folder / "model.safetensors").exists():
            model_config = hf.AutoConfig.from_pretrained(specs / entry["model"])
            torch.manual_seed(0)
            model = getattr(hf, model_config.architectures[0])(model_config)
            model.save_pretrained(folder)
            for file in KEEP[1:]:
                if (specs / entry["model"] / file).exists():
                    shutil.copy(specs / entry["model"] / file, folder / file)
            shutil.copy(specs / entry["model"] / "config.json", folder / "config.json")  # attrbench's own keys too
        evals = ", ".join(f'"{e}"' for e in entry["evals"])
        lines.append(f'[[suite]]\nmodel = "{folder.resolve()}"\ndataset = "{entry["dataset"]}"\nn = {entry["n"]}\n'
                     f'methods = "all"\nevals = [{evals}]\n')
    path = out / "full-stand-ins.toml"
    path.write_text("\n".join(lines))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("export").add_argument("dest")
    b = sub.add_parser("build")
    b.add_argument("specs")
    b.add_argument("out")
    args = parser.parse_args()
    if args.command == "export":
        export(Path(args.dest))
    else:
        print(build(Path(args.specs), Path(args.out)))


if __name__ == "__main__":
    main()
