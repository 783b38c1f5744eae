import json

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
    assert main(["methods", "--json"]) == 0
    methods = json.loads(capsys.readouterr().out)
    assert {"attn_w", "attn_n", "attn_res_n", "atb_ff_res_ln", "atb_ln_ff_res"} <= {m["name"] for m in methods}
