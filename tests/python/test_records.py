"""The one record base (tfk8s._records), the one HTML renderer (tfk8s._html) and the shared
workload plumbing (tfk8s._workload), without a cluster: records are built from dicts shaped like
the bindings' results, or come from tfk8s.testing.FakeCluster."""

from __future__ import annotations

import copy
import datetime as dt
import io
import os
import pickle
import sys
import traceback
from typing import Any, Dict, List, Optional

import pytest

import tfk8s
from tfk8s import _html, _records, quota, scheduledjob, tfcluster
from tfk8s._records import MappingRecord, Record
from tfk8s.testing import FakeCluster

HOSTILE = "<script>alert('x')</script> & \"quoted\""
ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quoted&quot;"
PASSWORD = "s3cret-<b>-password-9f8e7d6c5b4a"
#: The style of every table cell (JupyterLab and nbconvert right-align cells otherwise).
CELL_STYLE = ' style="text-align:left"'


def unstyled(shown: str) -> str:
    """``shown`` without the cells' alignment style, so cells read as ``<td>31.5 cores</td>``."""
    return shown.replace(CELL_STYLE, "")


# ---- raw results as the bindings return them (hostile text wherever text goes) -------------
def fit_raw(fits: bool = False) -> Dict[str, Any]:
    return {
        "fits": fits,
        "shortfalls": [] if fits else [{"resource": "requests.cpu", "quota": HOSTILE,
                                        "requested": "4", "used": "30", "hard": "32",
                                        "remaining": "2"}],
        "problems": [] if fits else [HOSTILE],
        "notes": [] if fits else [HOSTILE],
        "message": "" if fits else HOSTILE,
    }


def tfcluster_status_raw() -> Dict[str, Any]:
    return {
        "name": "m",
        "namespace": "team-a",
        "phase": "Pending",
        "message": HOSTILE,
        "replicas": [
            {"role": "worker", "index": 0, "pod": "m-worker-0", "phase": "Running",
             "node": "n1", "restarts": 0, "reason": ""},
            {"role": "worker", "index": 1, "pod": "m-worker-1", "phase": "Pending",
             "node": "", "restarts": 0, "reason": HOSTILE},
        ],
        "not_ready": 1,
        "session": access_raw(),
        "events": ["worker-1 lost with node n2 at 12:01:07Z; recreated on n3 at 12:01:41Z"],
        "table": "REPLICA ...",
    }


def access_raw() -> Dict[str, Any]:
    return {
        "user": "alice",
        "endpoints": [{"tool": "jupyter", "port": 8888, "cluster_address": "lab:8888",
                       "external_port": 0, "external_address": "",
                       "connect": "http://lab:8888/"},
                      {"tool": "ssh", "port": 22, "cluster_address": "lab-ssh:22",
                       "external_port": 0, "external_address": HOSTILE,
                       "connect": "ssh -p 22 root@lab-ssh"}],
        "table": "TOOL ...",
    }


def dev_status_raw() -> Dict[str, Any]:
    return {"phase": "Failed", "pod": "lab-0", "node": "n1", "restarts": 3, "started_at": None,
            "ready_tools": ["ssh"], "reason": HOSTILE, "message": HOSTILE, "table": "POD ..."}


def quota_usage_raw() -> Dict[str, Any]:
    return {"usages": [{"namespace": "team", "name": HOSTILE, "ready": True,
                        "resources": [{"resource": "requests.cpu", "hard": "8", "used": "2",
                                       "remaining": "6", "fraction": 0.25}]}],
            "table": "NAMESPACE ..."}


def inventory_raw() -> Dict[str, Any]:
    node = {"name": HOSTILE, "ready": True, "schedulable": False, "gputype": "a100",
            "cputype": "", "pooltype": "shared", "privatename": "", "free": {"cpu": "8"},
            "pod_count": 2}
    return {"nodes": [node], "by_gputype": [], "by_cputype": [], "by_pool": [],
            "text": "1 node"}


def run_raw(**changes: Any) -> Dict[str, Any]:
    raw = {"name": "train-1", "uid": "u1", "namespace": "team", "scheduled_job": "train",
           "trigger": "manual", "scheduled_time": None, "start_time": 1700000000.0,
           "end_time": 1700000060.5, "duration": 60.5, "result": "Failed", "reason": HOSTILE,
           "message": HOSTILE, "attempts": 2, "active": 0, "succeeded": 0, "failed": 2,
           "alerted": False, "finished": True}
    raw.update(changes)
    return raw


def schedule_raw() -> Dict[str, Any]:
    return {"exists": True, "api_version": "batch/v1beta1", "suspended": False,
            "schedule": HOSTILE, "last_schedule_time": 1700000000.0,
            "last_successful_time": None, "next_schedule_time": 1700003600.0, "active": 0}


def every_record() -> List[Record]:
    return [
        tfk8s.FitResult(fit_raw()),
        tfk8s.TFClusterStatus(tfcluster_status_raw()),
        tfk8s.DevAccess(access_raw()),
        tfk8s.DevCredentials({"password": PASSWORD, "access": access_raw()}),
        tfk8s.DevInstanceStatus(dev_status_raw()),
        tfk8s.QuotaUsage(quota_usage_raw()),
        tfk8s.Inventory(inventory_raw()),
        tfk8s.ScheduledJobRun(run_raw()),
        tfk8s.ScheduledJobStatus(schedule_raw()),
        tfk8s.WorkloadRef({"namespace": "team-a", "name": HOSTILE, "owner": "alice",
                           "created": "2026-12-02T15:46:43Z"}),
        tfk8s.FleetEntry(fleet_entry_raw()),
        tfk8s.FleetChange({"type": "MODIFIED", "entry": fleet_entry_raw()}),
        tfk8s.DevActivity(activity_raw()),
        tfk8s.DevCullDecision({"namespace": "team-a", "name": "lab", "owner": "alice",
                               "outcome": "unknown", "reason": HOSTILE,
                               "activity": activity_raw()}),
        tfk8s.InformerFailure(informer_failure_raw()),
        tfk8s.FleetError(dict(informer_failure_raw(), source="StatefulSet")),
    ]


def informer_failure_raw() -> Dict[str, Any]:
    return {"kind": "DecodeError", "message": HOSTILE, "transient": False, "consecutive": 5,
            "fatal": True, "time": 1796119800, "error": RuntimeError(HOSTILE)}


def activity_raw() -> Dict[str, Any]:
    return {"namespace": "team-a", "name": HOSTILE,
            "jupyter_last_activity": "2026-12-02T15:46:43Z", "jupyter_kernels": 0,
            "jupyter_connections": 0, "ssh_sessions": 0, "code_server_heartbeat": None,
            "started": "2026-12-02T15:40:00Z", "recorded": None,
            "probed_at": "2026-12-02T16:00:00Z", "last_activity": "2026-12-02T15:46:43Z",
            "idle_seconds": 797, "active_now": False}


def fleet_entry_raw() -> Dict[str, Any]:
    return {"kind": "DevInstance", "namespace": "team-a", "name": "lab", "owner": "alice",
            "phase": "Pending", "message": HOSTILE, "created": 1796119200, "age_seconds": 5,
            "requested": {"gpus": 1, "cpu": 0.5, "cpu_milli": 500, "memory_bytes": 1 << 30},
            "last_activity": 1796119800}


# ---- the HTML renderer ---------------------------------------------------------------------
def test_escape_neutralises_markup_and_quotes() -> None:
    assert _html.escape(HOSTILE) == ESCAPED
    assert _html.escape(None) == ""
    assert _html.escape(3) == "3"
    assert _html.code("<x>") == "<code>&lt;x&gt;</code>"


def test_table_escapes_every_cell_and_header_and_marks_alerts() -> None:
    got = _html.table(["A<", "B"], [(HOSTILE, 1), ("ok", None)], alerts=[True, False])
    assert got.startswith('<table class="tfk8s-table"')
    assert "<thead><tr><th>A&lt;</th><th>B</th></tr></thead><tbody>" in unstyled(got)
    assert got.endswith("</tbody></table>")
    assert "<script>" not in got and got.count(ESCAPED) == 1
    rows = unstyled(got).split("<tr")[2:]
    assert rows[0].startswith(' class="tfk8s-alert"') and rows[1].startswith("><td>ok</td>")
    assert "<td></td>" in rows[1]  # None is an empty cell


def test_badge_header_and_lists() -> None:
    assert _html.badge("Running").startswith('<span class="tfk8s-badge tfk8s-ok"')
    failed = _html.badge("<Failed>", False)
    assert 'class="tfk8s-badge tfk8s-failed"' in failed and "&lt;Failed&gt;</span>" in failed
    assert 'tfk8s-badge tfk8s-ok' in _html.header("Run", phase="Succeeded")
    pending = _html.header("Run", phase="Pending", message=HOSTILE)
    assert "tfk8s-progress" in pending and ESCAPED in pending and "<script>" not in pending
    assert _html.items([]) == ""
    assert _html.items(["<a>", "b"]).endswith("><li>&lt;a&gt;</li><li>b</li></ul>")
    assert unstyled(_html.fields([("k", "<v>")])).count("<td>&lt;v&gt;</td>") == 1


# ---- every status object: one base, an HTML view, hostile text escaped ---------------------
def test_every_result_class_derives_from_the_one_record_base() -> None:
    records = {type(r) for r in every_record()}
    exported = {getattr(tfk8s, n) for n in tfk8s.__all__}
    record_classes = {c for c in exported if isinstance(c, type) and issubclass(c, Record)}
    assert record_classes == records
    for cls in records:
        assert "_html_body" in vars(cls), f"{cls.__name__} has no HTML view of its own"


@pytest.mark.parametrize("record", every_record(), ids=lambda r: type(r).__name__)
def test_every_status_object_renders_html_with_hostile_text_escaped(record: Record) -> None:
    shown = record._repr_html_()
    assert type(shown) is str and shown.startswith("<") and shown.endswith(">")
    assert "<script>" not in shown
    assert ESCAPED in shown  # every view is built in Python, from hostile text too


def test_status_html_marks_what_needs_attention() -> None:
    status = tfk8s.TFClusterStatus(tfcluster_status_raw())
    shown = unstyled(status._repr_html_())
    assert '<tr class="tfk8s-alert" style="background:rgba(207,34,46,0.14)"><td>worker-1</td>' \
        in shown
    assert "<tr><td>worker-0</td>" in shown
    assert '<tr class="tfk8s-alert"' in tfk8s.Inventory(inventory_raw())._repr_html_()


def test_record_basics_equality_copy_and_read_only_fields() -> None:
    a = tfk8s.TFClusterStatus(tfcluster_status_raw())
    b = tfk8s.TFClusterStatus(tfcluster_status_raw())
    assert a == b and a is not b
    assert a != tfk8s.TFClusterStatus(dict(tfcluster_status_raw(), phase="Running"))
    assert a != tfk8s.DevInstanceStatus(dev_status_raw())
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(AttributeError):
        a.phase = "Running"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        a.extra = 1  # type: ignore[attr-defined]  # __slots__: no stray attributes
    assert a.events == ["worker-1 lost with node n2 at 12:01:07Z; recreated on n3 at 12:01:41Z"]
    d = a.to_dict()
    assert d["phase"] == "Pending" and d["not_ready"] == 1
    d["phase"] = "changed"
    assert a.phase == "Pending"  # to_dict() is a copy
    assert copy.copy(a) == a and copy.deepcopy(a) == a
    assert pickle.loads(pickle.dumps(a)) == a
    run = tfk8s.ScheduledJobRun(run_raw())
    assert pickle.loads(pickle.dumps(run)) == run
    assert (a.ready, a.summary()) == (1, f"Pending: 1/2 replicas ready; worker-1: {HOSTILE}")
    assert repr(a) == "TFClusterStatus(phase='Pending', ready=1/2)"


class Sample(Record):
    """A record with only the base's defaults (repr, HTML, to_dict) and a secret key."""

    __slots__ = ()
    _secret_keys = frozenset({"token"})

    count: int = _records.field(int)
    label: str = _records.field(_records.text, key="display-name")


def test_record_base_defaults_convert_fields_and_hide_secrets() -> None:
    raw = {"count": "3", "display-name": HOSTILE, "token": PASSWORD, "extra": [1]}
    r = Sample(raw)
    assert (r.count, r.label) == (3, HOSTILE)  # converted; a field may read another key
    raw["count"] = "4"
    assert r.count == 3  # the record holds its own copy
    assert r.to_dict() == {"count": 3, "display-name": HOSTILE, "extra": [1]}
    assert repr(r) == f"Sample(count=3, display-name={HOSTILE!r}, extra=[1])"
    shown = r._repr_html_()
    assert shown.startswith('<div class="tfk8s-view tfk8s-sample">') and ESCAPED in shown
    assert '<th scope="row">Extra</th><td>[1]</td>' in unstyled(shown)
    assert '<th scope="row">Display-name</th>' in unstyled(shown)
    assert PASSWORD not in repr(r) + shown + str(r.to_dict())
    assert r == Sample(dict(raw, count=3)) and r != Sample(dict(raw, token="other"))
    with pytest.raises(KeyError):
        Sample({"count": 1})


def test_missing_key_fails_at_construction() -> None:
    raw = tfcluster_status_raw()
    del raw["not_ready"]
    with pytest.raises(KeyError):
        tfk8s.TFClusterStatus(raw)


def test_reprs_keep_their_shape() -> None:
    assert repr(tfk8s.FitResult(fit_raw(True))) == "FitResult(fits=True)"
    assert repr(tfk8s.FitResult(fit_raw())) == f"FitResult(fits=False, message={HOSTILE!r})"
    # A result that fits with notes (say, pods its priority class would preempt) shows them.
    noted = dict(fit_raw(True), notes=["PriorityClass high (value 1000) would preempt: …"])
    assert repr(tfk8s.FitResult(noted)) == (
        "FitResult(fits=True, notes=['PriorityClass high (value 1000) would preempt: …'])")
    assert repr(tfk8s.DevInstanceStatus(dev_status_raw())) == (
        "DevInstanceStatus(phase='Failed', pod='lab-0', node='n1')"
    )
    assert repr(tfk8s.QuotaUsage(quota_usage_raw())) == f"QuotaUsage([team/{HOSTILE}])"
    assert repr(tfk8s.Inventory(inventory_raw())) == "Inventory(1 nodes)"
    assert repr(tfk8s.DevAccess(access_raw())) == (
        "DevAccess({'jupyter': 'http://lab:8888/', 'ssh': 'ssh -p 22 root@lab-ssh'})"
    )


def test_credentials_never_show_the_password() -> None:
    creds = tfk8s.DevCredentials({"password": PASSWORD, "access": access_raw()})
    assert creds.password == PASSWORD
    for shown in (repr(creds), str(creds), creds._repr_html_(), repr(creds.to_dict()),
                  tfk8s.dump_yaml(creds)):
        assert PASSWORD not in shown
    assert "REDACTED" in repr(creds) and "REDACTED" in creds._repr_html_()
    assert creds.to_dict()["access"]["user"] == "alice"  # nested records become dicts
    assert isinstance(creds.access, tfk8s.DevAccess)
    with pytest.raises(TypeError):
        pickle.dumps(creds)


# ---- FitResult: one class everywhere -------------------------------------------------------
def test_fit_result_is_one_class_across_modules() -> None:
    assert (
        tfk8s.FitResult
        is _records.FitResult
        is tfcluster.FitResult
        is quota.FitResult
        is tfk8s.tfcluster.FitResult
    )
    from tfk8s.tfcluster import FitResult

    assert FitResult is tfk8s.FitResult
    assert FitResult.__module__ == "tfk8s._records"


def test_fit_results_of_every_path_are_the_same_class() -> None:
    fake = FakeCluster()
    client = fake.client("team")
    fake.add_node("n1", cpu="8", memory="32Gi")
    cluster = tfk8s.TFCluster(client, name="m", worker=2)
    task = tfk8s.ScheduledJob(client, name="t", image="python:3.11-slim",
                              exec_command="python3", entry_path="train.py")
    results = [
        cluster.preflight(),
        task.preflight(),
        tfk8s.check_quota(client, "team", cluster.render()),
        tfk8s.check_placement(client, cluster.render()),
    ]
    assert all(type(r) is tfk8s.FitResult for r in results)
    assert results[2] and results[2].fits  # no quota in the namespace: it fits
    assert not results[0] and "cannot be placed" in results[0].message
    assert "cannot be placed" in results[0]._repr_html_()


def test_bool_and_html_of_a_fit() -> None:
    bad = tfk8s.FitResult(fit_raw())
    assert not bad and bad.shortfalls[0]["resource"] == "requests.cpu"
    shown = bad._repr_html_()
    assert "Does not fit" in shown and "<th>Remaining</th>" in unstyled(shown)
    assert "tfk8s-failed" in shown
    assert "<td>4 cores</td><td>30 cores</td><td>32 cores</td><td>2 cores</td>" in unstyled(shown)
    assert shown.count(ESCAPED) == 4  # quota, message, problem, note
    fits = tfk8s.FitResult(fit_raw(True))._repr_html_()
    assert tfk8s.FitResult(fit_raw(True)) and "Fits" in fits and "tfk8s-ok" in fits


# ---- ScheduledJob results: records that read like the dicts they were -----------------------
def test_run_reads_like_a_dict_and_has_typed_times() -> None:
    run = tfk8s.ScheduledJobRun(run_raw())
    assert isinstance(run, MappingRecord)
    assert run["name"] == run.name == "train-1"
    assert run.get("trigger") == "manual" and run.get("nope") is None and "uid" in run
    assert run["start_time"] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)
    assert run.scheduled_time is None and run.duration == 60.5
    plain = dict(run)
    assert plain["result"] == "Failed" and run == plain and len(run) == len(run_raw())
    assert run == tfk8s.ScheduledJobRun(run_raw())
    assert run != tfk8s.ScheduledJobRun(run_raw(result="Succeeded"))
    assert scheduledjob._run_name(run) == "train-1"
    assert repr(run) == "ScheduledJobRun(name='train-1', result='Failed', attempts=2)"
    assert "2023-11-14 22:13:20 UTC" in run._repr_html_()


def test_schedule_status_reads_like_a_dict() -> None:
    status = tfk8s.ScheduledJobStatus(schedule_raw())
    assert status["api_version"] == "batch/v1beta1" and status.state == "Scheduled"
    assert status["next_schedule_time"].tzinfo is dt.timezone.utc
    assert status.last_successful_time is None
    gone = tfk8s.ScheduledJobStatus(dict(schedule_raw(), exists=False))
    assert gone.state == "NotFound"
    assert 'tfk8s-neutral" style="' in gone._repr_html_()  # no CronJob is no failure
    assert 'tfk8s-ok" style="' in status._repr_html_()


# ---- the shared workload plumbing ----------------------------------------------------------
class FailingCore:
    """Stands in for a C++ workload whose calls fail with a WorkloadFailed carrying a status."""

    def __init__(self, status: Dict[str, Any], spec: Optional[Dict[str, Any]] = None) -> None:
        self.status_raw = status
        self.spec = spec or {"name": "m", "namespace": "team"}
        self.waits: List[Any] = []

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        error = tfk8s.WorkloadFailed("cannot start")
        error.status = dict(self.status_raw)
        raise error

    apply = scale = create = start = restart = _fail

    def wait(self, *args: Any) -> Dict[str, Any]:
        self.waits.append(args)
        if callable(args[-1]):
            args[-1](self.status_raw)  # one progress report
        return self.status_raw


def test_workload_failed_status_becomes_the_status_record() -> None:
    client = FakeCluster().client("team")
    cluster = tfk8s.TFCluster(client, _core_cluster=FailingCore(tfcluster_status_raw()))
    for call in (cluster.apply, lambda: cluster.scale("worker", 3)):
        with pytest.raises(tfk8s.WorkloadFailed) as info:
            call()
        assert isinstance(info.value.status, tfk8s.TFClusterStatus)
        assert info.value.status.not_ready == 1
    inst = tfk8s.DevInstance(client, _core_instance=FailingCore(dev_status_raw()))
    for call in (inst.create, inst.start, inst.restart):
        with pytest.raises(tfk8s.WorkloadFailed) as info:
            call()
        assert isinstance(info.value.status, tfk8s.DevInstanceStatus)
        assert info.value.status.restarts == 3


def test_a_failure_traceback_ends_at_the_public_call() -> None:
    # What a notebook prints above the message: the user's line, the public call's line, then
    # the C++ call. No frame of contextlib or of the workload helpers (the context managers
    # around the call), none twice.
    client = FakeCluster().client("team")
    core = FailingCore(tfcluster_status_raw())
    core.wait = core._fail  # type: ignore[method-assign]
    cluster = tfk8s.TFCluster(client, _core_cluster=core)
    for call, public in ((lambda: cluster.wait("finished", 5, progress=True), "wait"),
                         (cluster.apply, "apply")):
        with pytest.raises(tfk8s.WorkloadFailed) as info:
            call()
        frames = traceback.extract_tb(info.value.__traceback__)
        names = [f.name for f in frames]
        files = [os.path.basename(f.filename) for f in frames]
        assert names.count(public) == 1, names
        assert "contextlib.py" not in files and "_workload.py" not in files, files
        assert names[-2:] == [public, "_fail"], names
        assert files[-2] == "tfcluster.py"
        assert isinstance(info.value.status, tfk8s.TFClusterStatus)


def test_wait_returns_the_status_record_without_progress() -> None:
    client = FakeCluster().client("team")
    core = FailingCore(tfcluster_status_raw())
    status = tfk8s.TFCluster(client, _core_cluster=core).wait("finished", 5, progress=False)
    assert status == tfk8s.TFClusterStatus(tfcluster_status_raw())
    assert core.waits == [("finished", 5, None)]  # no callback when progress is off
    dev_core = FailingCore(dev_status_raw())
    got = tfk8s.DevInstance(client, _core_instance=dev_core).wait(7, progress=False)
    assert got.phase == "Failed" and dev_core.waits == [("ready", 7, None)]


def test_wait_progress_off_a_terminal_is_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    # stderr no terminal (a log, nohup, CI) and no notebook: plain lines, no control characters
    client = FakeCluster().client("team")
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    core = FailingCore(tfcluster_status_raw())
    status = tfk8s.TFCluster(client, _core_cluster=core).wait()
    assert status == tfk8s.TFClusterStatus(tfcluster_status_raw())
    assert len(core.waits) == 1 and callable(core.waits[0][-1])
    line = ("TFCluster team/m: [##########..........] 1/2 ready · 0 s · Pending · worker-1: "
            + HOSTILE)
    assert out.getvalue() == line + "\n"  # the report; the final line would say the same


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_wait_progress_on_a_terminal_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeCluster().client("team")
    out = Terminal()
    monkeypatch.setattr(sys, "stderr", out)
    monkeypatch.setenv("COLUMNS", "200")
    tfk8s.TFCluster(client, _core_cluster=FailingCore(tfcluster_status_raw())).wait(timeout=1)
    text = out.getvalue()
    assert text.startswith("\r\x1b[K") and text.count("\n") == 1 and text.endswith(
        "\r\x1b[KTFCluster team/m: [##########..........] 1/2 ready · 0 s · Pending · worker-1: "
        + HOSTILE + "\n")
    out.seek(0)
    out.truncate()
    tfk8s.DevInstance(client, _core_instance=FailingCore(dev_status_raw())).wait(timeout=1)
    text = out.getvalue()
    assert text.startswith("\r\x1b[K") and text.count("\n") == 1 and text.endswith(
        "\r\x1b[KDevInstance team/m: [....................] 0/1 ready · 0 s · Failed · "
        + HOSTILE + "\n")


def test_spec_accessors_and_load_are_shared(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeCluster()
    client = fake.client("team")
    cluster = tfk8s.TFCluster(client, name="m", worker=2)
    inst = tfk8s.DevInstance(client, owner="alice", name="lab", cpu="500m", env={"A": 1})
    task = tfk8s.ScheduledJob(client, name="t", image="python:3.11-slim",
                              exec_command="python3", entry_path="train.py", gpus=1,
                              pod_annotations={"a": "b"})
    for workload in (cluster, inst, task):
        assert workload.namespace == "team" and workload.client is client
        assert workload.to_dict()["name"] == workload.name
        assert workload.preflight() is not None
    assert inst.to_dict()["resources"]["cpu"] == "500m"
    assert inst.to_dict()["resources"]["memory"] == "2Gi"  # the instance's default
    assert inst.to_dict()["env"] == [{"name": "A", "value": "1"}]
    assert task.to_dict()["resources"]["gpus"] == 1
    assert task.to_dict()["podAnnotations"] == {"a": "b"}
    for obj in cluster.render():
        fake.add(obj)
    loaded = tfk8s.TFCluster.load(client, "team", "m")
    assert type(loaded) is tfk8s.TFCluster and loaded.to_dict() == cluster.to_dict()
    assert tfk8s.TFCluster.list(client) == ["m"]
    assert capsys.readouterr().err == ""  # nothing printed without a terminal


def test_fleet_entry_last_activity_is_a_utc_time_or_none() -> None:
    entry = tfk8s.FleetEntry(fleet_entry_raw())
    assert entry.last_activity is not None
    assert entry.last_activity.isoformat() == "2026-12-01T10:10:00+00:00"
    assert "Last Activity" in entry._repr_html_()
    assert "2026-12-01 10:10:00 UTC" in entry._repr_html_()
    never = tfk8s.FleetEntry({**fleet_entry_raw(), "last_activity": None})
    assert never.last_activity is None
    assert "Last Activity" not in never._repr_html_()
