"""The wheel holds what a checkout has: every package (the top-level methods/ and evals/ as attrbench.methods and
attrbench.evals), the shipped data and configs; installed apart from the checkout, it lists every built-in and
evaluates an example."""
import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"attrbench.methods": ROOT / "methods", "attrbench.evals": ROOT / "evals", "attrbench": ROOT / "attrbench"}


def source_packages() -> set[str]:
    """Every folder of the sources that holds Python files, as the package name it installs under."""
    out = set()
    for name, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = path.parent.relative_to(folder).parts
            if not any(part.startswith((".", "__")) for part in parts):
                out.add(".".join((name, *parts)))
    return out


def test_pyproject_lists_every_package_and_maps_the_top_level_plugins():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == source_packages()
    assert config["package-dir"] == {"attrbench.methods": "methods", "attrbench.evals": "evals"}
    assert not (ROOT / "attrbench" / "methods").exists() and not (ROOT / "attrbench" / "evals").exists()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel ``python -m build`` makes, from a copy of the sources (setuptools writes build/ beside them)."""
    pytest.importorskip("build")
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("attrbench", "methods", "evals"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
                           str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = out.glob("attrbench-*.whl")
    return path


def test_the_wheel_holds_every_module_and_the_shipped_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            if "__pycache__" not in path.parts:
                assert "/".join((*name.split("."), *path.relative_to(folder).parts)) in names, path
    for shipped in ("attrbench/datasets/data/sst2", "attrbench/datasets/data/sva", "attrbench/runtime/configs",
                    "attrbench/models/training/shipped"):
        assert any(n.startswith(shipped + "/") for n in names), shipped
    assert not any(n.startswith(("methods/", "evals/")) for n in names)  # no generic top-level packages


def test_the_installed_wheel_lists_the_built_ins_and_evaluates_an_example(wheel, tmp_path):
    """A fresh virtual environment holding the wheel alone (its dependencies are read from this one's site-packages,
    without this checkout's editable install): `attrbench methods` lists every built-in, and a one-example
    `attrbench eval` on a tiny model runs, all from the installed files."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", "--target",
                    str(site), str(wheel)], check=True, timeout=300, capture_output=True)
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # a path line, not a site dir
    cli = "import sys; from attrbench.cli import main; sys.exit(main(sys.argv[1:]))"
    where = subprocess.run([str(python), "-c", "import attrbench.methods as m, attrbench.evals as e; "
                            "print(m.__path__[0]); print(e.__path__[0])"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert where.returncode == 0, where.stderr[-3000:]
    assert all(Path(p).is_relative_to(site) for p in where.stdout.split()), where.stdout  # not the checkout's
    listed = subprocess.run([str(python), "-c", cli, "methods", "--json"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr[-3000:]
    names = {m["name"] for m in json.loads(listed.stdout)}
    from attrbench.plugin import METHODS

    assert names == set(METHODS.names()) and {"alti", "grad_l2", "lime", "integrated_gradients"} <= names
    scored = subprocess.run([str(python), "-c", cli, "eval", "--model", "tiny-gpt2", "--method", "grad_l2", "--eval",
                             "erasure_aopc", "--dataset", "sva-linzen", "--n", "1", "--json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert scored.returncode == 0, scored.stderr[-3000:]
    records = json.loads(scored.stdout)  # the shipped Linzen items, read from the installed package
    assert {(r["method"], r["eval"], r["n"]) for r in records} == {("grad_l2", "erasure_aopc", 1)}
