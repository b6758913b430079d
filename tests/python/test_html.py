"""The notebook views (tfk8s._html, tfk8s._units and every ``_repr_html_``), without a cluster
except for the last test: helpers (human units, badges by phase, usage bars, escaping) and the
HTML of every record and class, parsed and checked for structure (one header per view, the
badge class of the phase, Title Case table headers, no secret), built from dicts shaped like the
bindings' results (tests/python/test_records.py)."""

from __future__ import annotations

import html.parser
import re
from typing import Any, Dict, List, Optional, Tuple

import pytest

import tfk8s
from tfk8s import _html, _units
from tfk8s.testing import FakeCluster

from test_records import (
    ESCAPED,
    HOSTILE,
    PASSWORD,
    dev_status_raw,
    every_record,
    fit_raw,
    quota_usage_raw,
    run_raw,
    schedule_raw,
    tfcluster_status_raw,
    unstyled,
)

#: Words that are all capitals in a Title Case header.
ACRONYMS = {"CPU", "GPU", "GPUs", "API", "SSH", "IP"}
VOID = {"br", "hr", "img", "input", "meta", "link", "wbr"}


class Parsed(html.parser.HTMLParser):
    """What a view is made of: every start tag with its attributes, the text of every header
    cell, and whether the tags nest properly."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: List[Tuple[str, Dict[str, str]]] = []
        self.stack: List[str] = []
        self.errors: List[str] = []
        self.th: List[str] = []
        self._in_th = False
        self.feed(text)
        self.close()
        if self.stack:
            self.errors.append(f"unclosed {self.stack}")

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag not in VOID:
            self.stack.append(tag)
        if tag == "th":
            self._in_th = True
            self.th.append("")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()
        if tag == "th":
            self._in_th = False

    def handle_data(self, data: str) -> None:
        if self._in_th:
            self.th[-1] += data

    def with_class(self, name: str) -> List[Dict[str, str]]:
        return [a for _, a in self.tags if name in a.get("class", "").split()]

    def classes(self) -> set:
        return {c for _, a in self.tags for c in a.get("class", "").split()}


def parse(text: str) -> Parsed:
    p = Parsed(text)
    assert not p.errors, p.errors
    return p


def is_title_case(text: str) -> bool:
    for word in re.split(r"[\s\-/]+", text.strip()):
        if not word or not word[0].isalpha():
            continue
        if word in ACRONYMS:
            continue
        if not word[0].isupper() or (len(word) > 1 and word.isupper()):
            return False
    return True


def badge_levels(p: Parsed) -> List[str]:
    """The level class (tfk8s-ok, ...) of every phase badge (kind badges left out)."""
    levels = []
    for a in p.with_class("tfk8s-badge"):
        classes = a["class"].split()
        if "tfk8s-kind" not in classes:
            levels += [c[len("tfk8s-"):] for c in classes if c != "tfk8s-badge"]
    return levels


# ---- human units ---------------------------------------------------------------------------
@pytest.mark.parametrize("value, shown", [
    ("31500m", "31.5 cores"), ("2", "2 cores"), ("1", "1 core"), ("250m", "0.25 cores"),
    ("1000m", "1 core"), (3, "3 cores"), ("0", "0 cores"), ("100", "100 cores"),
    ("12345m", "12.3 cores"), ("not-a-quantity", "not-a-quantity"), (None, ""),
])
def test_cores(value: Any, shown: str) -> None:
    assert _units.cores(value) == shown


@pytest.mark.parametrize("value, shown", [
    ("128Gi", "128 GiB"), ("1536Mi", "1.5 GiB"), ("134217728Ki", "128 GiB"), ("512", "512 B"),
    ("2e9", "1.86 GiB"), ("64M", "61 MiB"), ("1Ti", "1 TiB"), ("0", "0 B"), ("-1Gi", "-1 GiB"),
    ("8Ki", "8 KiB"), ("x", "x"),
])
def test_binary_bytes(value: Any, shown: str) -> None:
    assert _units.binary_bytes(value) == shown


@pytest.mark.parametrize("resource, value, shown", [
    ("cpu", "31500m", "31.5 cores"), ("requests.cpu", "500m", "0.5 cores"),
    ("limits.cpu", "4", "4 cores"), ("memory", "8Gi", "8 GiB"),
    ("requests.memory", "1073741824", "1 GiB"), ("ephemeral-storage", "500Gi", "500 GiB"),
    ("requests.storage", "1Ti", "1 TiB"), ("fast.storageclass.storage.k8s.io/requests.storage",
                                           "10Gi", "10 GiB"),
    ("requests.nvidia.com/gpu", "4", "4"), ("nvidia.com/gpu", "1k", "1000"), ("pods", "110", "110"),
    ("count/jobs.batch", "3", "3"), ("pods", "1500m", "1500m"),
])
def test_human_units_by_resource(resource: str, value: str, shown: str) -> None:
    assert _units.human(resource, value) == shown


# ---- badges, header, bars, escaping --------------------------------------------------------
@pytest.mark.parametrize("phase, level", [
    ("Running", "ok"), ("Ready", "ok"), ("Succeeded", "ok"), ("Complete", "ok"),
    ("Pending", "progress"), ("Creating", "progress"), ("Starting", "progress"),
    ("Failed", "failed"), ("Error", "failed"), ("Unschedulable", "failed"),
    ("ImagePullBackOff", "failed"), ("CrashLoopBackOff", "failed"), ("ErrImagePull", "failed"),
    ("TimedOut", "failed"), ("SomethingBackOff", "failed"),
    ("Stopped", "neutral"), ("Suspended", "neutral"), ("Unknown", "neutral"),
    ("", "neutral"), (None, "neutral"), ("running", "neutral"),
])
def test_phase_levels(phase: Any, level: str) -> None:
    assert _html.phase_level(phase) == level
    p = parse(_html.badge(phase))
    (span,) = p.with_class("tfk8s-badge")
    assert span["class"].split() == ["tfk8s-badge", f"tfk8s-{level}"]
    assert "background:" in span["style"] and "color:#fff" in span["style"]


def test_badge_colours_differ_by_level_and_a_level_can_be_forced() -> None:
    styles = {lvl: parse(_html.badge("x", lvl)).with_class("tfk8s-badge")[0]["style"]
              for lvl in ("ok", "progress", "failed", "neutral")}
    assert len(set(styles.values())) == 4
    assert "tfk8s-failed" in _html.badge("Running", False)
    assert "tfk8s-ok" in _html.badge("Failed", True)
    assert "tfk8s-neutral" in _html.badge("Cordoned", "neutral")


def test_header_has_title_kind_phase_and_message_escaped() -> None:
    got = _html.header(HOSTILE, "TFCluster", "ImagePullBackOff", HOSTILE)
    p = parse(got)
    assert len(p.with_class("tfk8s-header")) == 1
    assert len(p.with_class("tfk8s-title")) == 1 and len(p.with_class("tfk8s-message")) == 1
    assert len(p.with_class("tfk8s-kind")) == 1 and badge_levels(p) == ["failed"]
    assert "<script>" not in got and got.count(ESCAPED) == 2
    bare = parse(_html.header("Nodes"))
    assert not bare.with_class("tfk8s-badge") and not bare.with_class("tfk8s-message")


@pytest.mark.parametrize("fraction, level", [
    (0.0, "ok"), (0.5, "ok"), (0.699, "ok"), (0.7, "warn"), (0.89, "warn"), (0.9, "full"),
    (1.0, "full"), (1.7, "full"),
])
def test_bar_levels(fraction: float, level: str) -> None:
    assert _html.bar_level(fraction) == level
    p = parse(_html.bar(fraction))
    (frame,) = p.with_class("tfk8s-bar")
    assert frame["class"].split() == ["tfk8s-bar", f"tfk8s-bar-{level}"]
    assert "border:1px solid;" in frame["style"]  # no colour: the text's, on any theme
    fill = p.tags[1][1]["style"]
    width = float(re.search(r"width:([\d.]+)%", fill).group(1))  # type: ignore[union-attr]
    assert width == pytest.approx(min(fraction, 1.0) * 100, abs=0.06)
    assert f"{fraction * 100:.0f}%" in _html.bar(fraction)


def test_bar_without_a_limit_is_text_only() -> None:
    assert _html.bar(None) == "-"
    assert _html.bar(None, "<none>") == "&lt;none&gt;"
    assert "tfk8s-bar" not in _html.bar(None)


def test_escape_and_html_fragments() -> None:
    assert _html.escape(HOSTILE) == ESCAPED
    fragment = _html.code(HOSTILE)
    assert isinstance(fragment, _html.Html) and _html.escape(fragment) == fragment
    table = _html.table(["A<"], [(HOSTILE,), (fragment,)])
    assert "<th>A&lt;</th>" in unstyled(table) and table.count(ESCAPED) == 2
    assert "<script>" not in table
    assert f"<td><code>{ESCAPED}</code></td>" in unstyled(table)  # not escaped twice


def test_links_only_for_http() -> None:
    good = _html.link("http://lab.team.svc:8888/?a=1&b=<2>")
    (a,) = parse(good).with_class("tfk8s-link")
    assert a["href"] == "http://lab.team.svc:8888/?a=1&b=<2>" and a["target"] == "_blank"
    assert "noopener" in a["rel"]
    for hostile in ("javascript:alert(1)", "ssh -p 22 root@x", HOSTILE):
        shown = _html.link(hostile)
        assert "<a" not in shown and "<script>" not in shown


def test_table_alerts_and_fields() -> None:
    p = parse(_html.table(("Name",), [("a",), ("b",)], alerts=[False, True]))
    (row,) = p.with_class("tfk8s-alert")
    assert "background:" in row["style"]
    f = _html.fields([("Not Ready", "<1>")])
    assert '<th scope="row">Not Ready</th><td>&lt;1&gt;</td>' in unstyled(f)
    assert _html.fields([]) == ""
    assert _html.label("not_ready") == "Not Ready" and _html.label("api_version") == "Api Version"


# ---- every view: one header, the phase badge, Title Case, nothing hostile or secret -------
def views() -> List[Any]:
    """(name, HTML) of every view: each record, a Client and a TFCluster."""
    fake = FakeCluster()
    client = fake.client("team")
    cluster = tfk8s.TFCluster(client, {"session": {}, "tensorboard": {}}, name="m", ps=1,
                              worker=2)
    shown = [(type(r).__name__, r._repr_html_()) for r in every_record()]
    shown += [("Client", client._repr_html_()), ("TFCluster", cluster._repr_html_())]
    return [pytest.param(name, html, id=name) for name, html in shown]


@pytest.mark.parametrize("name, shown", views())
def test_every_view_has_one_header_and_title_case_headers(name: str, shown: str) -> None:
    p = parse(shown)
    assert p.tags[0][0] == "div" and "tfk8s-view" in p.tags[0][1]["class"].split()
    assert len(p.with_class("tfk8s-view")) == 1
    headers = p.with_class("tfk8s-header")
    assert len(headers) == 1 or name == "QuotaUsage"  # one per quota
    assert p.tags[1][1].get("class") == "tfk8s-header"  # the header comes first
    assert p.th, f"{name}: no table"
    assert all(is_title_case(t) for t in p.th), p.th
    assert "<script>" not in shown and PASSWORD not in shown


# What JupyterLab's sanitizer (packages/apputils/src/sanitizer.ts) keeps of an inline style:
# these properties, with colours as hex, rgb() or rgba() whose alpha has its leading zero.
SANITIZER_PROPERTIES = {
    "background", "border", "border-collapse", "border-radius", "color", "display", "font-size",
    "font-weight", "height", "line-height", "margin", "margin-right", "opacity", "overflow",
    "padding", "text-align", "vertical-align", "white-space", "width",
}
NUMBER = r"[+-]?(\d*\.)?\d+"
LENGTH = rf"(0|{NUMBER}(px|em|rem|%))"
COLOUR = r"(#[0-9a-f]+|rgba\(\s*\d{1,3},\s*\d{1,3},\s*\d{1,3},\s*(0(\.\d+)?|1)\s*\)|white)"
VALUES = {
    "background": COLOUR, "color": COLOUR, "border": r"1px solid", "opacity": r"0(\.\d+)?|1",
    "border-collapse": "collapse", "display": "inline-block|block", "overflow": "hidden",
    "white-space": "nowrap", "vertical-align": "baseline|middle", "font-weight": r"[1-9]00",
    "text-align": "left",
    "line-height": NUMBER, "font-size": LENGTH, "border-radius": LENGTH, "height": LENGTH,
    "width": LENGTH, "margin-right": LENGTH, "margin": rf"({LENGTH}\s*){{1,4}}",
    "padding": rf"({LENGTH}\s*){{1,4}}",
}


@pytest.mark.parametrize("name, shown", views())
def test_every_table_cell_is_left_aligned(name: str, shown: str) -> None:
    """Key/value tables and normal tables alike: each cell carries its alignment, since the
    stylesheets of JupyterLab and nbconvert right-align cells of HTML outputs."""
    cells = [a for tag, a in parse(shown).tags if tag in ("td", "th")]
    assert cells, name
    assert all("text-align:left" in a.get("style", "").split(";") for a in cells), name


@pytest.mark.parametrize("name, shown", views())
def test_every_inline_style_survives_jupyterlabs_sanitizer(name: str, shown: str) -> None:
    styles = [a["style"] for _, a in parse(shown).tags if "style" in a]
    assert styles, name
    for style in styles:
        for declaration in filter(None, (d.strip() for d in style.split(";"))):
            prop, _, value = (x.strip() for x in declaration.partition(":"))
            assert prop in SANITIZER_PROPERTIES, declaration
            assert re.fullmatch(VALUES[prop], value, re.IGNORECASE), declaration


@pytest.mark.parametrize("record, level", [
    (tfk8s.TFClusterStatus(tfcluster_status_raw()), "progress"),
    (tfk8s.TFClusterStatus(dict(tfcluster_status_raw(), phase="Failed")), "failed"),
    (tfk8s.TFClusterStatus(dict(tfcluster_status_raw(), phase="Succeeded")), "ok"),
    (tfk8s.DevInstanceStatus(dev_status_raw()), "failed"),
    (tfk8s.DevInstanceStatus(dict(dev_status_raw(), phase="Stopped")), "neutral"),
    (tfk8s.DevInstanceStatus(dict(dev_status_raw(), phase="Running")), "ok"),
    (tfk8s.ScheduledJobRun(run_raw()), "failed"),
    (tfk8s.ScheduledJobRun(run_raw(result="Running")), "ok"),
    (tfk8s.ScheduledJobStatus(schedule_raw()), "ok"),
    (tfk8s.ScheduledJobStatus(dict(schedule_raw(), suspended=True)), "neutral"),
    (tfk8s.ScheduledJobStatus(dict(schedule_raw(), exists=False)), "neutral"),
    (tfk8s.FitResult(fit_raw()), "failed"),
    (tfk8s.FitResult(fit_raw(True)), "ok"),
    (tfk8s.QuotaUsage(quota_usage_raw()), "ok"),
], ids=lambda v: type(v).__name__ if not isinstance(v, str) else v)
def test_header_badge_is_coloured_by_the_phase(record: Any, level: str) -> None:
    p = parse(record._repr_html_())
    header_badges = [a for a in p.with_class("tfk8s-badge") if "tfk8s-kind" not in a["class"]]
    assert header_badges[0]["class"].split()[1] == f"tfk8s-{level}"


def test_replica_rows_have_phase_badges_and_problem_rows_are_tinted() -> None:
    html = tfk8s.TFClusterStatus(tfcluster_status_raw())._repr_html_()
    p = parse(html)
    # The header names the cluster (namespace/name), the kind in its badge.
    assert ">team-a/m</b>" in html
    assert badge_levels(p) == ["progress", "ok", "progress"]  # header, worker-0, worker-1
    assert len(p.with_class("tfk8s-alert")) == 1  # worker-1 has a reason


# ---- quota: a bar per resource, the namespace once ------------------------------------------
def quota(resources: List[Dict[str, Any]], name: str = "team-a") -> tfk8s.QuotaUsage:
    return tfk8s.QuotaUsage({"usages": [{"namespace": "team-a", "name": name, "ready": True,
                                         "resources": resources}],
                             "table": ""})


def row(resource: str, used: str, hard: str, remaining: str, fraction: float) -> Dict[str, Any]:
    return {"resource": resource, "used": used, "hard": hard, "remaining": remaining,
            "fraction": fraction}


def test_quota_has_a_bar_per_resource_coloured_by_level_in_human_units() -> None:
    usage = quota([
        row("requests.cpu", "31500m", "32", "500m", 31.5 / 32),
        row("requests.memory", "40Gi", "64Gi", "24Gi", 0.625),
        row("requests.nvidia.com/gpu", "3", "4", "1", 0.75),
        row("pods", "0", "0", "0", 0.0),
        row("count/jobs.batch", "2", "0", "-2", 1.0),
    ])
    shown = usage._repr_html_()
    p = parse(shown)
    assert p.th == ["Resource", "Used", "Hard", "Remaining", "Usage"]
    levels = [a["class"].split()[1] for a in p.with_class("tfk8s-bar")]
    assert levels == ["tfk8s-bar-full", "tfk8s-bar-ok", "tfk8s-bar-warn", "tfk8s-bar-full"]
    assert "<td>31.5 cores</td><td>32 cores</td><td>0.5 cores</td>" in unstyled(shown)
    assert "<td>40 GiB</td><td>64 GiB</td><td>24 GiB</td>" in unstyled(shown)
    assert "98%" in shown and "62%" in shown and "75%" in shown and "over" in shown
    assert "<td>-</td>" in unstyled(shown)  # a zero limit with nothing used: no bar
    assert len(p.with_class("tfk8s-alert")) == 1  # only the job count is at its limit
    assert badge_levels(p) == ["failed"]  # the header says the quota is full


def test_quota_shows_the_namespace_once_in_the_header() -> None:
    shown = quota([row("requests.cpu", "1", "8", "7", 0.125)])._repr_html_()
    assert shown.count("team-a") == 1
    (title,) = parse(shown).with_class("tfk8s-title")
    assert "Namespace" not in parse(shown).th and "Quota" not in parse(shown).th
    other = quota([row("requests.cpu", "1", "8", "7", 0.125)], name="compute")._repr_html_()
    assert other.count("team-a") == 1 and "quota compute" in other
    assert badge_levels(parse(other)) == ["ok"]


def test_quota_of_several_namespaces_has_a_header_each_and_none_is_a_line() -> None:
    raw = quota_usage_raw()
    raw["usages"].append(dict(raw["usages"][0], namespace="other", name="other", ready=False))
    p = parse(tfk8s.QuotaUsage(raw)._repr_html_())
    assert len(p.with_class("tfk8s-header")) == 2 and len(p.with_class("tfk8s-table")) == 2
    assert badge_levels(p)[-1] == "progress"  # not yet computed by the quota controller
    empty = tfk8s.QuotaUsage({"usages": [], "table": ""})._repr_html_()
    assert "no ResourceQuota" in empty and len(parse(empty).with_class("tfk8s-header")) == 1


# ---- inventory: human units, node state ----------------------------------------------------
def test_inventory_shows_cores_and_gib_and_node_states() -> None:
    node = {"name": "gpu-0", "ready": True, "schedulable": True, "gputype": "a100",
            "cputype": "epyc", "pooltype": "shared", "privatename": "", "pod_count": 3,
            "allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8"},
            "free": {"cpu": "31500m", "memory": "134217728Ki", "nvidia.com/gpu": "8"}}
    cordoned = dict(node, name="gpu-1", schedulable=False)
    down = dict(node, name="gpu-2", ready=False)
    inv = tfk8s.Inventory({"nodes": [node, cordoned, down], "by_gputype": [], "by_cputype": [],
                           "by_pool": [], "text": ""})
    shown = inv._repr_html_()
    p = parse(shown)
    assert "<td>31.5 cores of 32 cores</td>" in unstyled(shown)
    assert "<td>128 GiB</td>" in unstyled(shown)
    assert "31500m" not in shown and "Ki<" not in shown
    assert "GPU Type" in p.th and "CPU Free" in p.th and "Memory Free" in p.th
    assert badge_levels(p) == ["ok", "neutral", "failed"]
    assert len(p.with_class("tfk8s-alert")) == 2
    assert "1 of 3 ready" in shown


# ---- the classes: Client and TFCluster ------------------------------------------------------
def test_tfcluster_view_shows_roles_images_resources_and_links() -> None:
    fake = FakeCluster()
    client = fake.client("team")
    spec = {"session": {}, "tensorboard": {}, "storage": {"size": "10Gi"},
            "worker": {"replicas": 4, "resources": {"cpu": "31500m", "memory": "8Gi",
                                                    "gpus": 1}}}
    cluster = tfk8s.TFCluster(client, spec, name="mnist", ps=2, cpu_image="tf:cpu",
                              gpu_image="tf:gpu")
    shown = cluster._repr_html_()
    p = parse(shown)
    assert p.th[:6] == ["Role", "Replicas", "Image", "CPU", "Memory", "GPUs"]
    assert "<td>ps</td><td>2</td><td>tf:cpu</td>" in unstyled(shown)
    assert "<td>worker</td><td>4</td><td>tf:gpu</td><td>31.5 cores</td><td>8 GiB</td>" \
           "<td>1</td>" in unstyled(shown)
    assert "<td>10 GiB</td>" in unstyled(shown) and "namespace team" in shown
    hrefs = [a["href"] for a in p.with_class("tfk8s-link")]
    assert hrefs == ["http://mnist-session.team.svc:8888/", "http://mnist-tf-board.team.svc:6006/"]
    assert "ssh -p 22 root@mnist-session-ssh.team.svc" in shown
    plain = tfk8s.TFCluster(client, name="plain", worker=1)._repr_html_()
    assert "tfk8s-link" not in plain and "In-Cluster Address" not in plain
    assert repr(cluster) == "TFCluster(team/mnist, ps=2, worker=4)"  # the text stays short


def test_client_view_names_the_server_and_never_a_secret() -> None:
    config = tfk8s.ClientConfig()
    config.server = "https://admin:hunter2-pw@api.example.com:6443"
    config.token = "tok-" + PASSWORD
    config.ca_pem = "-----BEGIN CERTIFICATE-----\nCADATA\n"
    config.default_namespace = "<team>"
    config.context = "prod"
    client = tfk8s.Client(config=config)
    shown = client._repr_html_()
    p = parse(shown)
    for secret in ("hunter2-pw", PASSWORD, "CADATA", "BEGIN"):
        assert secret not in shown and secret not in repr(client)
    assert "https://REDACTED@api.example.com:6443" in shown
    assert "&lt;team&gt;" in shown and "bearer token" in shown and "prod" in shown
    assert [a for a in p.th] == ["Server", "Context", "Namespace", "User", "Source"]
    assert len(p.with_class("tfk8s-header")) == 1
    assert "\n" not in repr(client)


def test_client_view_says_how_it_authenticates() -> None:
    def auth(**settings: Any) -> str:
        config = tfk8s.ClientConfig()
        config.server = "https://api.example.com"
        for key, value in settings.items():
            setattr(config, key, value)
        return tfk8s.Client(config=config)._repr_html_()

    cert = auth(client_cert_pem="-----BEGIN CERTIFICATE-----\nCERTDATA\n",
                client_key_pem="-----BEGIN PRIVATE KEY-----\nKEYDATA\n")
    assert "client certificate" in cert and "CERTDATA" not in cert and "KEYDATA" not in cert
    assert "token file /var/run/token" in auth(token_file="/var/run/token")
    basic = auth(username="alice", password=PASSWORD)
    assert "basic auth as alice" in basic and PASSWORD not in basic
    assert "anonymous" in auth()


def test_client_view_against_the_live_cluster(cluster: Any) -> None:
    client = tfk8s.Client(cluster.kubeconfig)
    shown = client._repr_html_()
    p = parse(shown)
    assert client.config.server in shown and client.namespace in shown
    assert len(p.with_class("tfk8s-header")) == 1
    config = client.config
    for secret in (config.token, config.client_key_pem, config.client_cert_pem, config.ca_pem,
                   config.password):
        if secret:
            assert secret not in shown
    usage = tfk8s.inventory(client)._repr_html_()
    assert "cores" in usage and "GiB" in usage and all(is_title_case(t) for t in parse(usage).th)
