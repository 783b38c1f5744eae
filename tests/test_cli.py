import json
import re

from attrbench.cli import main


def test_decompose_json_and_plot(capsys, tmp_path):
    png = tmp_path / "maps.png"
    assert main(["decompose", "--model", "tiny-gpt2", "--text", "the dogs run", "--layers", "-1",
                 "--scopes", "attn_w,atb_ln_ff_res", "--plot", str(png), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"tokens", "maps", "residuals"}
    n = len(out["tokens"])
    assert len(out["maps"]["atb_ln_ff_res"]) == 1 and len(out["maps"]["atb_ln_ff_res"][0]) == n
    assert out["residuals"]["atb_ln_ff_res"] < 1e-4 and "attn_w" not in out["residuals"]
    assert png.stat().st_size > 5000 and png.read_bytes()[:4] == b"\x89PNG"


def test_decompose_text_output(capsys):
    assert main(["decompose", "--model", "tiny-bert", "--text", "a film", "--layers", "0-1", "--dtype", "float64"]) == 0
    out = capsys.readouterr().out
    assert "atb_ff_res_ln" in out and "completeness residual" in out and "[CLS]" in out


def test_models_and_methods_json(capsys):
    assert main(["models", "--json"]) == 0
    models = json.loads(capsys.readouterr().out)
    assert {"minilm-l6", "smollm2-135m", "tiny-llama"} <= {m["name"] for m in models["models"]}
    assert main(["models"]) == 0  # a table whose columns stay aligned past a long name (the shortcut model's)
    lines = [line for line in capsys.readouterr().out.splitlines() if line[:1].strip()][:len(models["models"])]
    for line, model in zip(lines, models["models"]):
        kind = line.index(model["kind"], len(model["name"]))
        assert line.startswith(model["name"] + " ") and kind == lines[0].index(models["models"][0]["kind"]), line
    assert main(["methods", "--json"]) == 0
    methods = json.loads(capsys.readouterr().out)
    assert {"attn_w", "attn_n", "attn_res_n", "atb_ff_res_ln", "atb_ln_ff_res"} <= {m["name"] for m in methods}
    assert main(["methods"]) == 0  # a table: the axiom checked has a column of its own, apart from the description
    lines = capsys.readouterr().out.splitlines()
    start = lines[0].index("description")
    assert lines[0].split() == ["method", "family", "axiom", "description"]
    for line, method in zip(lines[1:], methods):
        assert line[start:] == method["description"] and line[start - 2:start] == "  ", line


PLUGIN_FILE = """
import numpy as np

import attrbench
from attrbench.plugin import Method, MethodResult


@attrbench.register
class FirstWord(Method):
    \"\"\"All of the attribution on the first token.\"\"\"

    name, family, output = "first_word", "baseline", "scores"
    description = "1 on the first token, 0 elsewhere"

    def run(self, adapter, texts, *, targets, layers, truncate):
        batch = adapter.encode(texts, truncate=truncate)
        return [MethodResult(self.name, adapter.name, batch.tokens[b], np.eye(n)[0], None)
                for b, n in enumerate(batch.lengths)]
"""


def test_plugins_load_from_a_file_given_on_the_command_line(tmp_path, capsys):
    from attrbench.registry import METHODS

    path = tmp_path / "first_word.py"
    path.write_text(PLUGIN_FILE)
    try:
        assert main(["attribute", "--plugins", str(path), "--model", "tiny-bert", "--method", "first_word,grad_l2",
                     "--text", "dogs run", "--json"]) == 0
        out = {entry["method"]: entry["scores"] for entry in json.loads(capsys.readouterr().out)}
        assert out["first_word"][0] == 1.0 and sum(out["first_word"]) == 1.0 and len(out["grad_l2"]) > 1
        assert main(["methods", "--plugins", str(path), "--json"]) == 0
        assert "first_word" in {m["name"] for m in json.loads(capsys.readouterr().out)}
    finally:
        METHODS.remove("first_word")
    broken = tmp_path / "broken.py"
    broken.write_text("import attrbench\nraise RuntimeError('typo')\n")
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    for bad, message in ((tmp_path / "missing.py", "not a Python file"), (broken, "RuntimeError: typo"),
                         (empty, "registers no plugin")):
        assert main(["methods", "--plugins", str(bad)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_attribute_several_methods_json_and_plot(capsys, tmp_path):
    png = tmp_path / "strip.png"
    assert main(["attribute", "--model", "tiny-bert", "--method", "alti,attn_rollout", "--text", "a wonderful film",
                 "--plot", str(png), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in out] == ["alti", "attn_rollout"]
    assert all(set(r) >= {"tokens", "scores"} and len(r["scores"]) == len(r["tokens"]) for r in out)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["attribute", "--model", "tiny-gpt2", "--method", "alti", "--text", "dogs run", "--json"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert single["row"] == len(single["tokens"]) - 1 and single["target"] == "auto"


def test_attribute_rejects_map_methods_and_unknown(capsys):
    assert main(["attribute", "--model", "tiny-bert", "--method", "atb", "--text", "a film"]) == 2
    assert main(["attribute", "--model", "tiny-bert", "--method", "nope", "--text", "a film"]) == 2
    err = capsys.readouterr().err
    assert "decompose --scopes atb" in err and "known:" in err


def test_attribute_ff_attribution_shapley(capsys):
    args = ["attribute", "--model", "tiny-bert", "--method", "ff_rollout", "--text", "a wonderful film", "--json"]
    assert main(args) == 0
    ig = json.loads(capsys.readouterr().out)
    assert main(args + ["--ff-attribution", "shapley-exact"]) == 0
    shapley = json.loads(capsys.readouterr().out)
    assert ig["params"]["ff_attribution"] == "ig" and shapley["params"]["ff_attribution"] == "shapley-exact"
    assert ig["tokens"] == shapley["tokens"] and ig["scores"] != shapley["scores"]
    assert max(abs(a - b) for a, b in zip(ig["scores"], shapley["scores"])) < 0.1
    assert main(["attribute", "--model", "tiny-bert", "--method", "alti", "--text", "a film",
                 "--ff-attribution", "shapley-exact"]) == 2
    assert "'alti' does not go through the FF block" in capsys.readouterr().err


def test_attribute_takes_method_params(capsys):
    args = ["attribute", "--model", "tiny-gpt2", "--method", "decompx,lime", "--text", "the keys to the cabinet",
            "--target", "contrast:are/is", "--json"]
    assert main(args + ["--param", "decompx.ff_attribution=decompx", "--param", "decompx.bias_split=none",
                        "--param", "lime.n_samples=50"]) == 0
    decompx, lime = json.loads(capsys.readouterr().out)
    assert decompx["params"] == {"ff_attribution": "decompx", "bias_split": "none"}
    assert lime["params"]["n_samples"] == 50 and decompx["bias_logit"] != 0
    assert main(args + ["--param", "alti.value_bias=bias"]) == 2
    assert "--param names alti, which is not among --method decompx,lime" in capsys.readouterr().err
    assert main(args + ["--param", "decompx.bias_split=cls"]) == 2
    assert "bias_split" in capsys.readouterr().err


def test_prepare_prints_a_line_for_every_task_model(monkeypatch, tmp_path, capsys):
    """`attrbench prepare` with no --models names every shipped task model (merging is stubbed: its record is what
    is printed), the shortcut model with its clean accuracy and the reliance recorded for each planted variant."""
    import attrbench.cli as cli
    from attrbench.models.training.tasks import TASK_MODELS, training_record

    monkeypatch.setattr(cli, "task_model_folder", lambda name: tmp_path / name)
    assert main(["prepare"]) == 0
    lines = capsys.readouterr().out.splitlines()
    named = [line for line in lines if not line.startswith(" ")]
    assert [line.split(":")[0] for line in named] == list(TASK_MODELS)
    shortcut = next(line for line in named if line.startswith("minilm-l6-sst2-shortcut:"))
    record = training_record("minilm-l6-sst2-shortcut")
    assert f"SST-2 dev accuracy {record['dev_accuracy']:.4f}" in shortcut
    for variant, reliance in record["reliance"].items():
        assert f"{variant} {reliance['follows_shortcut']:.1%} (n={reliance['n']})" in shortcut


def test_eval_names_the_metrics_with_undefined_values(task_models, capsys, tmp_path):
    """The footnote under `attrbench eval`'s table says which metric had undefined values and how many; one that
    applies to no example (attractors on planted shortcuts) is named as such, not blamed on constant scores."""
    model = str(task_models["root"] / "sst2")
    assert main(["eval", "--model", model, "--method", "grad_l2", "--eval", "ground_truth", "--dataset",
                 "sst2-shortcut", "--n", "2", "--out", str(tmp_path)]) == 0
    footnote = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("undefined"))
    assert footnote.endswith(": ground_truth above_attractors 2 (on every example: it does not apply to them).")



def test_a_closed_pipe_ends_quietly_and_a_full_disk_keeps_its_message(monkeypatch, capsys):
    import errno
    import os
    import subprocess
    import sys

    import attrbench.cli as cli

    # `attrbench methods --json | head`, with the reader gone before the first write: nothing is said about it
    read, write = os.pipe()
    os.close(read)
    tool = subprocess.run([sys.executable, "-c", "import sys; from attrbench.cli import main; sys.exit(main())",
                           "methods", "--json"], stdout=write, stderr=subprocess.PIPE, timeout=300)
    os.close(write)
    assert tool.returncode in (0, 141) and tool.stderr.decode() == ""

    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli, "cmd_methods", full)
    assert main(["methods"]) == 2
    assert "No space left on device" in capsys.readouterr().err


def test_a_run_prints_what_to_use_and_points_to_the_findings(tmp_path, capsys):
    """The end of `attrbench run` is the answer, one line per suite, not the report's statistical sentences."""
    from tests.runtime.test_runs import CONFIG

    config = tmp_path / "tiny.toml"
    config.write_text(CONFIG)
    assert main(["run", str(config), "--out", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    use = out.split("what to use:\n")[1].split("\n(")[0].splitlines()
    assert use and all(line.startswith("- tiny-") for line in use), out
    assert re.search(r"\(\d+ findings in full, with their tests: .+leaderboard\.md\)", out)
    assert "\nfindings:" not in out
