"""The package's layout holds: no import cycles, plugins import only the plugin surface, listing is light.

The import graph is read from the source (``ast``), every ``import`` statement included, those inside
functions too: an edge A -> B when module A imports module B (``from X import name`` names module
``X.name`` when that is a module, else ``X``). Importing a submodule runs its package's ``__init__``
first, as Python does, but that is not an edge of the importer's own.
"""
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attrbench"
# where each part of the package lives: the built-in methods and evaluations at the top level (pyproject's package-dir)
SOURCES = {"attrbench.methods": ROOT / "methods", "attrbench.evals": ROOT / "evals", "attrbench": PACKAGE}
PLUGIN_FOLDERS = (ROOT / "methods", ROOT / "evals", PACKAGE / "datasets" / "builtin")
# third-party packages a module may import inside a function: optional, or heavy to import when unused
HEAVY = {"captum", "shap", "numba", "ray", "yaml", "networkx", "sklearn", "peft", "datasets", "nbclient",
         "nbformat", "IPython", "pyarrow", "scikit_posthocs", "baycomp", "statsmodels"}
SURFACE = {"attrbench.plugin", "attrbench.plugin.internal"}  # what plugins may import
PUBLIC_NAMES = 40
# captum's private modules and the private attributes the pooled perturbations read or replace
CAPTUM_PRIVATE = re.compile(r"captum\.(\w+\.)*_[a-zA-Z]|\._get_perturb_generator_func|\._perturbation_generator|"
                            r"_add_noise_to_input|__closure__|interpretable_model\b")
HEAVY_INTERNAL = {"attrbench.decompose.shapley.fused", "attrbench.ops.dinic"}  # import numba at their top


def module_name(path: Path) -> str:
    for name, folder in SOURCES.items():
        if path.is_relative_to(folder):
            parts = (*name.split("."), *path.relative_to(folder).with_suffix("").parts)
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(f"{path} is in no source folder")


MODULES = {module_name(p): p for folder in SOURCES.values() for p in folder.rglob("*.py")}


def imports(path: Path):
    """(node, imported module, inside a function) for every import statement of a module."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    local = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name, id(node) in local
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                yield node, target if target in MODULES else base, id(node) in local


def graph() -> dict[str, set[str]]:
    return {name: {target for _, target, _ in imports(path) if target in MODULES and target != name}
            for name, path in MODULES.items()}


def find_cycle(edges: dict[str, set[str]]):
    """A cycle of the graph as a list of modules, or None (depth-first search)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycles():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# The packages in their layers, lowest first: a module imports only from its own package and from lower layers.
# The plugin folders share a layer and import none of each other.
LAYERS = [("_version",), ("errors",), ("params",), ("registry",), ("ops",), ("datasets",), ("models",), ("decompose",),
          ("plugin",), ("methods", "evals", "datasets.builtin"), ("runtime",), ("report",), ("api",), ("cli",),
          ("attrbench",)]


def package_of(module: str) -> str:
    """The package of a module as LAYERS names it: its first folder under attrbench, ``datasets.builtin`` apart."""
    parts = module.split(".")[1:]
    if parts[:2] == ["datasets", "builtin"]:
        return "datasets.builtin"
    return parts[0] if parts else "attrbench"


def layering_offenders(edges: dict[str, set[str]]) -> list[str]:
    rank = {package: k for k, layer in enumerate(LAYERS) for package in layer}
    offenders = []
    for module, targets in sorted(edges.items()):
        own = package_of(module)
        for target in sorted(targets):
            other = package_of(target)
            if other != own and rank[other] >= rank[own]:
                offenders.append(f"{module} ({own}) imports {target} ({other})")
    return offenders


def test_packages_import_only_from_lower_layers():
    """The layering docs/architecture.md names holds at the package level, so no two packages import each other."""
    edges = graph()
    assert {package_of(m) for m in edges} == {p for layer in LAYERS for p in layer}, "a package is not in LAYERS"
    offenders = layering_offenders(edges)
    assert not offenders, "imports against the layering:\n" + "\n".join(offenders)
    edges["attrbench.ops.stats"] = edges["attrbench.ops.stats"] | {"attrbench.decompose.layout"}  # it can fail
    assert layering_offenders(edges) == ["attrbench.ops.stats (ops) imports attrbench.decompose.layout (decompose)"]


def test_graph_sees_function_local_imports_and_cycles():
    """The cycle test can fail: function-local imports are edges, and a back edge makes a cycle."""
    edges = graph()
    assert "attrbench.decompose.shapley.fused" in edges["attrbench.decompose.shapley.engines"]  # a local import
    assert "attrbench.ops.targets" in edges["attrbench.plugin.method"]
    edges["attrbench.ops.targets"] = edges["attrbench.ops.targets"] | {"attrbench.plugin.method"}
    assert find_cycle(edges) is not None


def test_plugins_import_only_the_plugin_surface():
    offenders = []
    for folder in PLUGIN_FOLDERS:
        for path in folder.glob("*.py"):
            for node, target, _ in imports(path):
                if target.startswith("attrbench") and target not in SURFACE:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {target}")
    assert not offenders, "plugins must import from attrbench.plugin (and .internal) only:\n" + "\n".join(offenders)


def test_the_public_plugin_surface_is_narrow_and_apart_from_the_internal_one():
    """``attrbench.plugin`` exports what a plugin author needs (about 40 names); the built-ins' extra needs are in
    ``attrbench.plugin.internal``, and no name is in both."""
    import attrbench.plugin
    import attrbench.plugin.internal

    public, internal = set(attrbench.plugin.__all__), set(attrbench.plugin.internal.__all__)
    assert len(attrbench.plugin.__all__) == len(public) <= PUBLIC_NAMES
    assert not public & internal, sorted(public & internal)
    assert all(hasattr(attrbench.plugin.internal, name) for name in internal)


def test_captums_private_api_is_read_in_one_module():
    """captum's internals (private attributes and modules, a kernel's closure) are used only by
    ``attrbench/plugin/captum_pool.py``, which names the captum releases it was checked on."""
    offenders = []
    for path in [*MODULES.values(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]:
        if path == PACKAGE / "plugin" / "captum_pool.py" or path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text().split("\n"), 1):
            if CAPTUM_PRIVATE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number} {line.strip()}")
    assert not offenders, "captum's private API outside attrbench/plugin/captum_pool.py:\n" + "\n".join(offenders)
    assert CAPTUM_PRIVATE.search((PACKAGE / "plugin" / "captum_pool.py").read_text())  # the pattern finds them


def test_function_local_imports_are_heavy_optional_and_commented():
    offenders = []
    for name, path in MODULES.items():
        lines = path.read_text().split("\n")
        for node, target, local in imports(path):
            if not local:
                continue
            top = target.split(".")[0]
            allowed = target in HEAVY_INTERNAL or (top != "attrbench" and top in HEAVY)
            line = lines[node.lineno - 1]
            commented = "#" in line or lines[node.lineno - 2].strip().startswith("#")
            if not (allowed and commented):
                offenders.append(f"{name}:{node.lineno} {line.strip()}")
    assert not offenders, "function-local imports only for heavy optional packages, with a comment:\n" + \
        "\n".join(offenders)


def test_listing_methods_imports_no_heavy_library():
    code = ("import sys, json; import attrbench.plugin; from attrbench.cli import main; main(['methods', '--json']); "
            "print(json.dumps(sorted(m for m in ('captum', 'shap', 'numba', 'networkx', 'sklearn') "
            "if m in sys.modules)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().split("\n")[-1]) == []
    assert '"name": "shapley_sampling"' in run.stdout  # and the captum zoo is listed all the same


def test_a_method_is_one_file(tmp_path, monkeypatch):
    """A module dropped into methods/ is found by name with nothing else edited."""
    from attrbench.plugin import METHODS

    path = ROOT / "methods" / "zz_probe_method.py"
    path.write_text("from attrbench.plugin import Rollout, register\n\n"
                    "register(Rollout('zz_probe_method', lambda layout: 'attn_w', 'rollout', 'a test probe', '-', "
                    "identity=True, uses_values=False))\n")
    try:
        assert METHODS.get("zz_probe_method").name == "zz_probe_method"
    finally:
        path.unlink()
        METHODS.remove("zz_probe_method")
        sys.modules.pop("attrbench.methods.zz_probe_method", None)


def test_the_report_names_no_evaluation():
    """Evaluations declare their report parts (figures, cost columns, cost metrics, metric names): the report code
    reads those declarations and never an evaluation by name, so a plugin evaluation is reported as a built-in is."""
    names = [path.stem for path in (ROOT / "evals").glob("*.py") if path.stem != "__init__"]
    assert "timing" in names and "naopc" in names
    for path in (PACKAGE / "report").glob("*.py"):
        strings = {node.value for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Constant)
                   and isinstance(node.value, str)}
        assert not strings & set(names), (path.name, strings & set(names))
