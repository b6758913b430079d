"""Executes examples/notebooks/quickstart.ipynb headless against the test cluster, once per module
(any cell that raises fails both tests): one test checks the notebook's outputs (the wait's cell
must hold its one progress display), the other renders its HTML export in headless Chromium and
checks the DOM Chromium built, keeping the export, the DOM and a screenshot as test output
(``TFK8S_TEST_OUTPUT_DIR``; CTest sets it to ``<build>/test-output/notebook``)."""

from __future__ import annotations

import html.parser
import os
import urllib.parse
import uuid
import warnings
from typing import Dict, List, Optional, Tuple, Union

import nbformat
import pytest
from nbclient import NotebookClient

from browser import chromium

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, "examples", "notebooks", "quickstart.ipynb")
#: Elements without an end tag, as Chromium serializes them.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Run by Chromium at the end of the page: the text-align that its style computes for the cells
#: of the tfk8s views (the export's stylesheet right-aligns cells of HTML outputs), as an
#: attribute of <body> that the dumped DOM carries.
ALIGNMENT_PROBE = """<script>
(function () {
  var cells = document.querySelectorAll(".tfk8s-view td, .tfk8s-view th"), seen = {};
  for (var i = 0; i < cells.length; i++) seen[getComputedStyle(cells[i]).textAlign] = 1;
  document.body.setAttribute("data-tfk8s-cell-align", Object.keys(seen).sort().join(" "));
})();
</script>
"""


@pytest.fixture(scope="module")
def executed(cluster) -> nbformat.NotebookNode:
    """The quickstart notebook, executed once for the module's tests."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KUBECONFIG", cluster.kubeconfig)
        env.setenv("TFK8S_NOTEBOOK_NAMESPACE", "nb-" + uuid.uuid4().hex[:8])
        env.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # quiet ipykernel debugger noise
        nb = nbformat.read(NOTEBOOK, as_version=4)
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": ROOT}})
        client.execute()  # raises CellExecutionError if any cell raises
    return nb


def export_html(nb: nbformat.NotebookNode) -> str:
    """nbconvert's HTML export (its default template, "lab")."""
    from nbconvert import HTMLExporter

    with warnings.catch_warnings():  # Debian's nbconvert warns about its own nbformat calls
        warnings.simplefilter("ignore", DeprecationWarning)
        body, _ = HTMLExporter().from_notebook_node(nb)
    return body


def is_wait(cell: nbformat.NotebookNode) -> bool:
    """A code cell that waits for a workload (and so shows a progress display)."""
    return cell.cell_type == "code" and ".wait(" in cell.source


def test_quickstart_notebook_runs(executed):
    nb = executed
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
    body = export_html(nb)
    assert 'class="tfk8s-header"' in body and "tfk8s-bar " in body
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "deleted" in text
    assert "[worker-1]" in text
    # Every output has a real text fallback, never the repr of IPython's HTML object.
    plain = [str(o.get("data", {}).get("text/plain", "")) for o in outputs] + [text]
    assert not any("<IPython.core.display.HTML object>" in p for p in plain)
    # A wait leaves one display: the finished progress bar with the status table, the returned
    # status not rendered again below it, nothing stale above it.
    waits = [cell for cell in nb.cells if is_wait(cell)]
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


# ---- the export in a browser ------------------------------------------------------------------
class Node:
    """An element of the parsed DOM: tag, attributes, children (elements and text)."""

    def __init__(self, tag: str, attrs: Dict[str, str], parent: Optional["Node"]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.parent = parent
        self.children: List[Union["Node", str]] = []

    def classes(self) -> List[str]:
        return self.attrs.get("class", "").split()

    def find(self, tag: Optional[str] = None, cls: Optional[str] = None) -> List["Node"]:
        """Every descendant element (document order) with that tag and/or class."""
        found = []
        for child in self.children:
            if isinstance(child, Node):
                if (tag is None or child.tag == tag) and (cls is None or cls in child.classes()):
                    found.append(child)
                found.extend(child.find(tag, cls))
        return found

    def text(self) -> str:
        """All the text inside, scripts and styles included."""
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def __repr__(self) -> str:
        return f"<{self.tag} {self.attrs}>"


class DomParser(html.parser.HTMLParser):
    """The tree of an HTML document as Chromium serializes it (every non-void element
    closed)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        self.current.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.current))

    def handle_endtag(self, tag: str) -> None:
        node: Optional[Node] = self.current
        while node is not None and node is not self.root and node.tag != tag:
            node = node.parent
        if node is not None and node is not self.root:
            self.current = node.parent or self.root

    def handle_data(self, data: str) -> None:
        self.current.children.append(data)


def parse_dom(text: str) -> Node:
    parser = DomParser()
    parser.feed(text)
    parser.close()
    return parser.root


@pytest.fixture
def output_dir(tmp_path) -> str:
    """Where the export, the DOM and the screenshot stay: TFK8S_TEST_OUTPUT_DIR, else
    pytest's tmp_path."""
    out = os.environ.get("TFK8S_TEST_OUTPUT_DIR")
    if not out:
        return str(tmp_path)
    os.makedirs(out, exist_ok=True)
    return out


def png_size(data: bytes) -> Tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", data[:16]
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_quickstart_html_in_chromium(executed, output_dir):
    """The HTML export as a browser shows it: Chromium loads the file (its scripts run) and
    dumps the DOM, which must hold, in each wait cell's output area, exactly one tfk8s view
    with one status table (``table.tfk8s-table``) and one finished progress bar (a
    ``<progress>`` at its maximum); as many tfk8s views as the notebook's HTML outputs hold;
    nowhere the text ``<IPython.core.display.HTML object>``. The DOM is that of the export with
    :data:`ALIGNMENT_PROBE` added at the end: every cell of a tfk8s view must compute to
    left-aligned (nbconvert's stylesheet right-aligns cells; the views align their own).

    Links: "working" means well-formed here. Every ``<a>`` in a tfk8s view must be an http(s)
    URL opening in a new tab (``target="_blank"``, ``rel="noopener noreferrer"``); the views
    only link in-cluster addresses (``http://<service>.<namespace>.svc:<port>/`` of a session or
    TensorBoard), which cannot open from the test machine, so nothing is fetched. The quickstart's
    TFCluster has neither, so its views hold no link today and that check finds nothing to
    check; the export's in-page links (heading anchors, ``#...``) must each reach an element
    with that id.

    Then a screenshot (1200x3000) of the page, kept with the export and the DOM in
    ``output_dir``, must be a PNG of that size, several times the size of a blank page's."""
    nb = executed
    page = os.path.join(output_dir, "quickstart.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(export_html(nb))
    url = "file://" + os.path.abspath(page)
    probed = os.path.join(output_dir, "quickstart.probe.html")
    with open(page, encoding="utf-8") as f, open(probed, "w", encoding="utf-8") as out:
        exported = f.read()
        end = exported.rfind("</body>")
        out.write(exported[:end] + ALIGNMENT_PROBE + exported[end:])

    dumped, dom_seconds = chromium("--dump-dom", "file://" + os.path.abspath(probed))
    with open(os.path.join(output_dir, "quickstart.dom.html"), "w", encoding="utf-8") as f:
        f.write(dumped)
    dom = parse_dom(dumped)
    body = dom.find("body")
    assert len(body) == 1, f"no <body> in Chromium's DOM: {dumped[:500]!r}"
    # Key/value and normal tables alike: left-aligned as Chromium computes the page's style.
    assert body[0].attrs.get("data-tfk8s-cell-align") == "left", body[0].attrs

    # nbconvert's lab template: one div.jp-Cell per cell, in order.
    cells = body[0].find("div", "jp-Cell")
    assert len(cells) == len(nb.cells), (len(cells), len(nb.cells))
    waits = [(cell, node) for cell, node in zip(nb.cells, cells) if is_wait(cell)]
    assert waits
    for cell, node in waits:
        assert "jp-CodeCell" in node.classes(), node
        outputs = node.find(cls="jp-OutputArea-output")
        assert outputs, f"no output area in the wait cell {cell.source!r}"
        views = node.find(cls="tfk8s-view")
        assert len(views) == 1, f"{len(views)} tfk8s views in the wait cell {cell.source!r}"
        tables = node.find("table")
        assert len(tables) == 1, f"{len(tables)} tables in the wait cell {cell.source!r}"
        assert "tfk8s-table" in tables[0].classes(), tables[0]
        assert tables[0] in views[0].find("table"), "the status table is not in the view"
        assert tables[0].find("tbody") and tables[0].find("tr"), tables[0]
        bars = node.find(cls="tfk8s-progress")
        assert len(bars) == 1, f"{len(bars)} progress displays in the wait cell {cell.source!r}"
        assert bars[0].attrs.get("data-state") == "done", bars[0]
        progress = node.find("progress")
        assert len(progress) == 1, f"{len(progress)} <progress> in the wait cell {cell.source!r}"
        assert progress[0] in bars[0].find("progress"), "the <progress> is not in the bar"
        value, maximum = progress[0].attrs.get("value"), progress[0].attrs.get("max")
        assert value and value == maximum, progress[0]
        assert "4/4 ready" in bars[0].text(), bars[0].text()

    # Every view of the notebook's HTML outputs made it into the page (nothing dropped or
    # sanitized away by the template or its scripts).
    expected = sum(o["data"]["text/html"].count('class="tfk8s-view ')
                   for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if "text/html" in o.get("data", {}))
    views = body[0].find(cls="tfk8s-view")
    assert expected and len(views) == expected, (len(views), expected)

    anchors = [a for view in views for a in view.find("a")]
    for a in anchors:
        href = a.attrs.get("href", "")
        assert href.startswith(("http://", "https://")) and len(href) > len("https://"), a
        assert a.attrs.get("target") == "_blank", a
        assert set(a.attrs.get("rel", "").split()) >= {"noopener", "noreferrer"}, a
    ids = {n.attrs["id"] for n in dom.find() if "id" in n.attrs}
    internal = [a.attrs["href"] for a in dom.find("a") if a.attrs.get("href", "").startswith("#")]
    broken = [h for h in internal if urllib.parse.unquote(h[1:]) not in ids]
    assert not broken, f"in-page links to no id: {broken}"

    text = dom.text()
    at = text.find("<IPython.core.display.HTML object>")
    assert at < 0, f"an HTML object's repr in the page: {text[max(0, at - 200):at + 40]!r}"

    shot = os.path.join(output_dir, "quickstart.png")
    if os.path.exists(shot):
        os.remove(shot)
    _, shot_seconds = chromium("--hide-scrollbars", "--window-size=1200,3000",
                               f"--screenshot={shot}", url)
    assert os.path.exists(shot), f"chromium wrote no screenshot {shot}"
    with open(shot, "rb") as f:
        data = f.read()
    assert png_size(data) == (1200, 3000)
    # Here: a blank page 17 kB, a heading and a one-cell table 18 kB, the quickstart ~310 kB.
    assert len(data) > 100_000, f"{shot}: {len(data)} bytes, a blank page?"
    print(f"chromium: DOM {dom_seconds:.1f} s, screenshot {shot_seconds:.1f} s; "
          f"{len(anchors)} links in tfk8s views, {len(internal)} in-page links; {output_dir}")
