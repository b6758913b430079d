"""Executes examples/notebooks/quickstart.ipynb headless against the test cluster; any cell that
raises fails the test, and the wait's cell must hold its one progress display."""
import os
import uuid
import warnings

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, "examples", "notebooks", "quickstart.ipynb")


def test_quickstart_notebook_runs(cluster, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", cluster.kubeconfig)
    monkeypatch.setenv("TFK8S_NOTEBOOK_NAMESPACE", "nb-" + uuid.uuid4().hex[:8])
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # quiet ipykernel debugger noise
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": ROOT}})
    client.execute()  # raises CellExecutionError if any cell raises
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    html = [o for o in outputs if "text/html" in o.get("data", {})]
    # The status table and the quota usage render as HTML tables in Jupyter, each view with
    # its one header and phase badge; the quota with a usage bar per resource.
    assert any("<table" in o["data"]["text/html"] for o in html)
    views = [o["data"]["text/html"] for o in html if "tfk8s-view" in o["data"]["text/html"]]
    assert any("tfk8s-tfclusterstatus" in v for v in views)
    assert any("tfk8s-quotausage" in v and "tfk8s-bar " in v for v in views)
    assert all(v.count('class="tfk8s-header"') >= 1 and "tfk8s-badge tfk8s-" in v for v in views)
    # nbconvert's HTML export carries the views as they are (inline styles, no stylesheet).
    from nbconvert import HTMLExporter

    with warnings.catch_warnings():  # Debian's nbconvert warns about its own nbformat calls
        warnings.simplefilter("ignore", DeprecationWarning)
        body, _ = HTMLExporter().from_notebook_node(nb)
    assert 'class="tfk8s-header"' in body and "tfk8s-bar " in body
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "deleted" in text
    assert "[worker-1]" in text
    # Every output has a real text fallback, never the repr of IPython's HTML object.
    plain = [str(o.get("data", {}).get("text/plain", "")) for o in outputs] + [text]
    assert not any("<IPython.core.display.HTML object>" in p for p in plain)
    # A wait leaves one display: the finished progress bar with the status table, the returned
    # status not rendered again below it, nothing stale above it.
    waits = [cell for cell in nb.cells if cell.cell_type == "code" and ".wait(" in cell.source]
    assert waits
    for cell in waits:
        shown = [o for o in cell.outputs if o.get("output_type") != "stream"]
        assert len(shown) == 1, shown
        html = shown[0]["data"]["text/html"]
        assert html.count("<table") == 1, html
        assert '<div class="tfk8s-progress" data-state="done">' in html, html
        assert "<progress " in html and "4/4 ready" in html, html
        assert "application/vnd.jupyter.widget-view+json" not in shown[0]["data"]
        assert "4/4 ready" in shown[0]["data"]["text/plain"]
