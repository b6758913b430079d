"""The live progress of a wait (tfk8s._progress): what a status (or a ScheduledJob run) measures,
the terminal line, the plain log lines, the notebook display (widgets and HTML) that becomes the
result and what its updates cost, ScheduledJob.wait_for_run's bar, and how the view is chosen.
No cluster: statuses are fake dicts, IPython is a fake module, time a fake clock, the C++ run
wait a stand-in."""

import io
import re
import sys
import threading
import types
from typing import Any, Dict, List, Optional, Tuple

import nbformat
import pytest
from nbclient import NotebookClient

import tfk8s
from tfk8s import _progress
from tfk8s._progress import HtmlView, LogView, Progress, TerminalView, WidgetView
from tfk8s.testing import FakeCluster

EVIL = "Unschedulable: 0/1 nodes\x1b[31m have\nenough cpu <b>"
HTML_OBJECT = "<IPython.core.display.HTML object>"


def replica(role: str, index: int, phase: str, reason: str = "") -> Dict[str, Any]:
    return {"role": role, "index": index, "pod": f"m-{role}-{index}", "phase": phase,
            "node": "n1" if phase == "Running" else "", "restarts": 0, "reason": reason}


def cluster_raw(ready: int, total: int = 3, reason: str = EVIL) -> Dict[str, Any]:
    replicas = [replica("worker", i, "Running" if i < ready else "Pending",
                        "" if i < ready else reason) for i in range(total)]
    return {"name": "m", "namespace": "team-a",
            "phase": "Running" if ready == total else "Pending", "message": "",
            "replicas": replicas, "not_ready": total - ready, "session": None, "events": [],
            "table": f"TABLE {ready}/{total}"}


def run_raw(result: str, finished: bool = False, attempts: int = 1, failed: int = 0,
            reason: str = "") -> Dict[str, Any]:
    return {"name": "train-1", "namespace": "team", "scheduled_job": "train",
            "trigger": "manual", "result": result, "reason": reason, "message": reason,
            "attempts": attempts, "active": 0 if finished else 1,
            "succeeded": int(result == "Succeeded"), "failed": failed, "finished": finished,
            "duration": None, "scheduled_time": None, "start_time": None, "end_time": None}


def dev_raw(phase: str, reason: str = "") -> Dict[str, Any]:
    return {"phase": phase, "pod": "lab-0", "node": "n1", "restarts": 0, "started_at": 1.7e9,
            "ready_tools": ["jupyter"] if phase == "Running" else [], "reason": reason,
            "message": reason or "running on n1", "table": "POD lab-0"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def progress(view: Any, clock: Clock, status_type: Any = tfk8s.TFClusterStatus,
             expected: int = 3) -> Progress:
    return Progress(view, status_type, "TFCluster team/m", expected, clock=clock,
                    tick_seconds=None)


# ---- measure ----------------------------------------------------------------------------------
def test_a_cluster_status_measures_ready_of_total_and_the_first_blocker() -> None:
    status = tfk8s.TFClusterStatus(cluster_raw(1))
    assert _progress.measure(status, 5) == (1, 3, "Pending", "worker-1: " + EVIL)
    empty = tfk8s.TFClusterStatus(dict(cluster_raw(0, 0), message="creating"))
    assert _progress.measure(empty, 5) == (0, 5, "Running", "")  # the spec's count until listed
    waiting = tfk8s.TFClusterStatus(dict(cluster_raw(0, 0), phase="Pending", message="creating"))
    assert _progress.measure(waiting, 5) == (0, 5, "Pending", "creating")
    assert _progress.expected_total({"ps": {"replicas": 1}, "worker": {"replicas": 2},
                                     "chief": {"replicas": 1}, "name": "m"}) == 4
    assert _progress.expected_total({"name": "lab", "owner": "alice"}) == 1


def test_a_dev_instance_status_measures_its_pod() -> None:
    pending = tfk8s.DevInstanceStatus(dev_raw("Pending", "Unschedulable: 0/1 nodes"))
    assert _progress.measure(pending, 1) == (0, 1, "Pending", "Unschedulable: 0/1 nodes")
    assert _progress.measure(tfk8s.DevInstanceStatus(dev_raw("Running")), 1) == (
        1, 1, "Running", "")


# ---- terminal ---------------------------------------------------------------------------------
def test_a_run_measures_finished_of_one_and_its_failed_attempts() -> None:
    def measured(raw: Dict[str, Any]) -> Tuple[int, int, str, str]:
        return _progress.measure_run(tfk8s.ScheduledJobRun(raw))

    assert measured(run_raw("Pending")) == (0, 1, "Pending", "")
    assert measured(run_raw("Running")) == (0, 1, "Running", "")
    assert measured(run_raw("Running", attempts=2, failed=1)) == (
        0, 1, "Running", "1 of 2 attempts failed, retrying")
    assert measured(run_raw("Succeeded", True, attempts=2, failed=1)) == (1, 1, "Succeeded", "")
    assert measured(run_raw("Failed", True, 2, 2, "BackoffLimitExceeded")) == (
        1, 1, "Failed", "BackoffLimitExceeded")
    assert measured(run_raw("TimedOut", True, reason="DeadlineExceeded"))[2:] == (
        "TimedOut", "DeadlineExceeded")


def test_a_terminal_gets_one_line_rewritten_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    out, clock = Stream(tty=True), Clock()
    p = progress(TerminalView(out), clock)
    clock.now += 4
    p.update(cluster_raw(1))
    p.tick()  # same second: nothing rewritten
    clock.now += 8
    p.tick()
    final = tfk8s.TFClusterStatus(cluster_raw(3))
    assert p.result(final) is final
    writes = out.getvalue()
    assert writes.endswith("\n") and writes.count("\n") == 1
    lines = writes[:-1].split("\r\x1b[K")
    assert lines[0] == ""
    assert lines[1:] == [
        "TFCluster team/m: [....................] 0/3 ready · 0 s · waiting",
        "TFCluster team/m: [######..............] 1/3 ready · 4 s · Pending · worker-1: "
        "Unschedulable: 0/1 nodes [31m have enough cpu <b>",
        "TFCluster team/m: [######..............] 1/3 ready · 12 s · Pending · worker-1: "
        "Unschedulable: 0/1 nodes [31m have enough cpu <b>",
        "TFCluster team/m: [####################] 3/3 ready · 12 s · Running",
    ]
    p.tick()  # after the end: nothing more
    assert out.getvalue() == writes


def test_terminal_width_from_columns_else_the_stream_else_a_fallback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "77")
    assert _progress.terminal_columns(Stream(tty=True)) == 77
    monkeypatch.setenv("COLUMNS", "wide")
    assert _progress.terminal_columns(Stream(tty=True)) == 100  # no real terminal behind it
    monkeypatch.delenv("COLUMNS")
    assert _progress.terminal_columns(Stream(tty=True), fallback=60) == 60


def test_a_narrow_terminal_line_is_cut_to_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    out = Stream(tty=True)
    p = progress(TerminalView(out), Clock())
    p.update(cluster_raw(1))
    p.fail(tfk8s.Timeout("not ready"))
    assert all(len(line) <= 39 for line in out.getvalue()[:-1].split("\r\x1b[K"))


# ---- log lines --------------------------------------------------------------------------------
def test_a_log_gets_a_line_per_change_a_heartbeat_and_a_final_line() -> None:
    out, clock = Stream(tty=False), Clock()
    p = progress(LogView(out, interval=10), clock)
    p.tick()  # nothing known yet, nothing due
    clock.now += 1
    p.update(cluster_raw(1))  # first status: a line
    clock.now += 2
    p.update(cluster_raw(1, reason="ImagePullBackOff"))  # same count and phase: no line
    clock.now += 3
    p.tick()  # 5 s since the last line: not yet
    clock.now += 5
    p.tick()  # 10 s: a line
    clock.now += 1
    p.update(cluster_raw(2))  # the count changed: a line
    clock.now += 1
    p.result(tfk8s.TFClusterStatus(cluster_raw(3)))
    text = out.getvalue()
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text), repr(text)
    assert text.splitlines() == [
        "TFCluster team/m: [######..............] 1/3 ready · 1 s · Pending · worker-1: "
        "Unschedulable: 0/1 nodes [31m have enough cpu <b>",
        "TFCluster team/m: [######..............] 1/3 ready · 11 s · Pending · worker-1: "
        "ImagePullBackOff",
        "TFCluster team/m: [#############.......] 2/3 ready · 12 s · Pending · worker-2: "
        "Unschedulable: 0/1 nodes [31m have enough cpu <b>",
        "TFCluster team/m: [####################] 3/3 ready · 13 s · Running",
    ]
    out = Stream(tty=False)
    p = progress(LogView(out), clock)
    p.update(cluster_raw(3))
    p.result(tfk8s.TFClusterStatus(cluster_raw(3)))  # the same line again: not repeated
    assert out.getvalue() == (
        "TFCluster team/m: [####################] 3/3 ready · 0 s · Running\n")


def test_a_failed_wait_ends_the_log_with_its_outcome_and_status() -> None:
    out, clock = Stream(tty=False), Clock()
    error = tfk8s.WorkloadFailed("cannot start")
    error.status = tfk8s.DevInstanceStatus(dev_raw("Failed", "ErrImagePull"))
    with pytest.raises(tfk8s.WorkloadFailed):
        with _progress.showing(False, tfk8s.DevInstanceStatus, "x") as off:
            assert off.callback is None
            raise error
    assert out.getvalue() == ""
    p = progress(LogView(out), clock, tfk8s.DevInstanceStatus, expected=1)
    p.update(dev_raw("Pending", "waiting to be scheduled"))
    p.fail(error)
    p.fail(tfk8s.Timeout("late"))  # once ended, stays ended
    assert out.getvalue().splitlines()[-1] == (
        "TFCluster team/m: [....................] 0/1 ready · 0 s · Failed · failed · "
        "ErrImagePull")
    for exc, outcome in ((tfk8s.Timeout("late"), "timed out"),
                         (KeyboardInterrupt(), "cancelled"),
                         (ValueError("x"), "stopped by ValueError")):
        out = Stream(tty=False)
        p = progress(LogView(out), clock)
        p.fail(exc)
        assert out.getvalue() == (
            f"TFCluster team/m: [....................] 0/3 ready · 0 s · waiting · {outcome}\n")


# ---- ScheduledJob.wait_for_run ----------------------------------------------------------------
class RunWait:
    """The C++ ScheduledJob's stand-in: wait_for_run reports ``reports`` and returns ``final``."""

    spec = {"name": "train", "namespace": "team"}

    def __init__(self, reports: List[Dict[str, Any]], final: Dict[str, Any]) -> None:
        self.reports = reports
        self.final = final
        self.calls: List[Tuple[str, Optional[float], bool]] = []

    def wait_for_run(self, name: str, timeout: Optional[float], on_progress: Any) -> Any:
        self.calls.append((name, timeout, on_progress is not None))
        for raw in self.reports:
            if on_progress is not None:
                on_progress(raw)
        return self.final


def test_wait_for_run_shows_a_bar_and_still_hands_on_progress_the_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "IPython", None)
    monkeypatch.delitem(sys.modules, "IPython")  # no notebook: a log on a non-terminal stderr
    reports = [run_raw("Pending"), run_raw("Running"), run_raw("Running", attempts=2, failed=1)]
    core = RunWait(reports, run_raw("Failed", True, 2, 2, "BackoffLimitExceeded"))
    job = tfk8s.ScheduledJob(FakeCluster().client("team"), _core_job=core)
    seen: List[Any] = []
    monkeypatch.setattr(sys, "stderr", Stream(tty=False))
    done = job.wait_for_run({"name": "train-1"}, timeout=5, on_progress=seen.append)
    assert isinstance(done, tfk8s.ScheduledJobRun) and done.result == "Failed"
    assert core.calls == [("train-1", 5, True)]
    assert [type(r) for r in seen] == [tfk8s.ScheduledJobRun] * 3
    assert [r.result for r in seen] == ["Pending", "Running", "Running"]
    text = sys.stderr.getvalue()
    lines = [re.sub(r"· \d+ s ·", "· N s ·", line) for line in text.splitlines()]
    title = "ScheduledJob team/train run train-1"
    assert lines == [  # a line per change of the count or the result, then the failed end
        f"{title}: [....................] 0/1 finished · N s · Pending",
        f"{title}: [....................] 0/1 finished · N s · Running",
        f"{title}: [####################] 1/1 finished · N s · Failed · failed · "
        "BackoffLimitExceeded",
    ]
    monkeypatch.setattr(sys, "stderr", Stream(tty=False))
    seen.clear()
    job.wait_for_run("train-1", progress=False, on_progress=seen.append)
    assert sys.stderr.getvalue() == "" and len(seen) == 3
    job.wait_for_run("train-1", progress=False)
    assert core.calls[-1] == ("train-1", 600, False)  # nothing to report to: no callback


def test_a_run_in_a_notebook_ends_as_its_own_display() -> None:
    screen, clock = FakeDisplay(), Clock()
    view = HtmlView(ColabShell(), screen.display, screen.update_display)
    p = Progress(view, tfk8s.ScheduledJobRun, "ScheduledJob team/train run train-1", clock=clock,
                 tick_seconds=None, how=_progress.measure_run, word="finished")
    p.update(run_raw("Running"))
    clock.now += 42
    done = tfk8s.ScheduledJobRun(run_raw("Succeeded", True))
    assert p.result(done) is done
    check_bundles(screen)
    (last,) = screen.shown.values()
    assert 'data-state="done"' in last["text/html"] and '<progress value="1" max="1">' in \
        last["text/html"]
    assert "1/1 finished · 42 s · Succeeded" in last["text/plain"]
    assert last["text/html"].endswith(done._repr_html_())
    failed = HtmlView(ColabShell(), screen.display, screen.update_display)
    p = Progress(failed, tfk8s.ScheduledJobRun, "r", clock=clock, tick_seconds=None,
                 how=_progress.measure_run, word="finished")
    p.result(tfk8s.ScheduledJobRun(run_raw("Failed", True, reason="BackoffLimitExceeded")),
             "failed")
    assert 'data-state="failed"' in screen.shown[failed.display_id]["text/html"]


# ---- notebook ---------------------------------------------------------------------------------
class FakeDisplay:
    """IPython.display's display / update_display, recording what a frontend would show."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, Dict[str, Any], str]] = []
        self.shown: Dict[str, Dict[str, Any]] = {}

    def display(self, bundle: Dict[str, Any], raw: bool = False,
                display_id: Optional[str] = None) -> None:
        assert raw and display_id and display_id not in self.shown
        self.calls.append(("display", bundle, display_id))
        self.shown[display_id] = bundle

    def update_display(self, bundle: Dict[str, Any], raw: bool = False,
                       display_id: Optional[str] = None) -> None:
        assert raw and display_id in self.shown
        self.calls.append(("update", bundle, display_id))
        self.shown[display_id] = bundle


class FakeHook:
    def compute_format_data(self, result: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        return {"text/plain": repr(result), "text/html": result._repr_html_()}, {}


class FakeEvents:
    def __init__(self) -> None:
        self.callbacks: Dict[str, List[Any]] = {}

    def register(self, event: str, callback: Any) -> None:
        self.callbacks.setdefault(event, []).append(callback)

    def trigger(self, event: str) -> None:
        for callback in self.callbacks.get(event, []):
            callback(None)


class ColabShell:
    """A kernel's shell whose class is not ZMQInteractiveShell."""

    def __init__(self, kernel: Any = object()) -> None:
        self.kernel = kernel
        self.displayhook = FakeHook()
        self.events = FakeEvents()


def fake_ipython(monkeypatch: pytest.MonkeyPatch, shell: Any, screen: FakeDisplay) -> None:
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell  # type: ignore[attr-defined]
    display = types.ModuleType("IPython.display")
    display.display = screen.display  # type: ignore[attr-defined]
    display.update_display = screen.update_display  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)


def no_widgets(monkeypatch: pytest.MonkeyPatch) -> None:
    """ipywidgets as if not installed."""
    real_import = __import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ipywidgets" or name.startswith("ipywidgets."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr("builtins.__import__", fake_import)


def check_bundles(screen: FakeDisplay) -> None:
    for _, bundle, _ in screen.calls:
        assert bundle["text/plain"] and HTML_OBJECT not in bundle["text/plain"]
        assert '<div class="tfk8s-progress"' in bundle["text/html"]
        assert "<progress " in bundle["text/html"]


def test_the_view_is_chosen_by_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    import ipywidgets  # imported with the real IPython, before it is faked

    screen = FakeDisplay()
    monkeypatch.setitem(sys.modules, "IPython", None)
    monkeypatch.delitem(sys.modules, "IPython")
    monkeypatch.setattr(sys, "stderr", Stream(tty=True))
    assert isinstance(_progress.choose_view(), TerminalView)
    monkeypatch.setattr(sys, "stderr", Stream(tty=False))
    assert isinstance(_progress.choose_view(), LogView)
    fake_ipython(monkeypatch, None, screen)  # IPython imported, no shell: a script
    assert isinstance(_progress.choose_view(), LogView)
    fake_ipython(monkeypatch, ColabShell(kernel=None), screen)  # terminal IPython: no kernel
    assert isinstance(_progress.choose_view(), LogView)
    fake_ipython(monkeypatch, ColabShell(), screen)
    # Debian 12's ipywidgets 6.0 speaks the widget protocol 1, which no current frontend renders
    assert ipywidgets.__version__.startswith("6.") or ipywidgets.__protocol_version__ >= "2"
    monkeypatch.setattr(ipywidgets, "__protocol_version__", "1.0.0", raising=False)
    assert type(_progress.choose_view()) is HtmlView
    monkeypatch.setattr(ipywidgets, "__protocol_version__", "2.1.0")
    view = _progress.choose_view()
    assert type(view) is WidgetView
    view.close()
    no_widgets(monkeypatch)
    assert type(_progress.choose_view()) is HtmlView


def test_the_html_display_becomes_the_result_shown_once(monkeypatch: pytest.MonkeyPatch) -> None:
    screen, shell, clock = FakeDisplay(), ColabShell(), Clock()
    fake_ipython(monkeypatch, shell, screen)
    no_widgets(monkeypatch)
    monkeypatch.setattr(_progress, "_shown", [])
    with _progress.showing(True, tfk8s.TFClusterStatus, "TFCluster team/<m>", 3) as p:
        assert isinstance(p.view, HtmlView)
        p.clock, p.started = clock, clock.now
        p.ticker = None  # ticks by hand below
        p.stop.set()
        p.update(cluster_raw(1))
        clock.now += 7
        p.tick()
        final = p.result(tfk8s.TFClusterStatus(cluster_raw(3)))
    kinds = [kind for kind, _, _ in screen.calls]
    assert kinds == ["display", "update", "update", "update"]
    assert len({display_id for _, _, display_id in screen.calls}) == 1  # one display
    check_bundles(screen)
    live = screen.calls[1][1]
    assert '<progress value="1" max="3">' in live["text/html"]
    assert "worker-1: Unschedulable" in live["text/html"] and "\x1b" not in live["text/plain"]
    assert "&lt;b&gt;" in live["text/html"] and "TFCluster team/&lt;m&gt;" in live["text/html"]
    assert "7 s" in screen.calls[2][1]["text/plain"]
    (last,) = screen.shown.values()
    assert last["text/html"].count("<table") == 1
    assert '<progress value="3" max="3">' in last["text/html"]
    assert 'data-state="done"' in last["text/html"]
    assert last["text/html"].endswith(final._repr_html_())
    assert last["text/plain"].endswith("\nTABLE 3/3")
    # The same cell's displayhook shows nothing for the returned status; anything else as usual.
    assert shell.displayhook.compute_format_data(final) == ({}, {})
    other = tfk8s.TFClusterStatus(cluster_raw(3))
    assert other == final and shell.displayhook.compute_format_data(other)[0]
    shell.events.trigger("post_run_cell")  # the cell ended: a later cell shows it
    assert shell.displayhook.compute_format_data(final)[0]["text/html"] == final._repr_html_()
    # A second wait in that shell installs no second filter.
    with _progress.showing(True, tfk8s.TFClusterStatus, "TFCluster team/m", 3) as p:
        p.result(tfk8s.TFClusterStatus(cluster_raw(3)))
    assert len(shell.events.callbacks["post_run_cell"]) == 1


def test_html_updates_send_only_changes_and_render_each_status_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10-second wait as the notebook sees it: the C++ wait reports at 0.2 s (and the same
    again at 0.4 s), 3.5 s (again at 3.6 s and 7.2 s), the ticker every second, the result at
    10.3 s. The display is created once and updated 13 times (each tick changes the seconds;
    the repeats change nothing), and a status's HTML is rendered once per different status:
    3 times. (Before: 17 display calls and 16 renders of the status HTML, 47 kB sent instead of
    38 kB; Jupyter replaces a display whole, so a tick still sends the whole bundle.)"""
    renders: List[int] = []
    rendered = tfk8s.TFClusterStatus._repr_html_
    monkeypatch.setattr(tfk8s.TFClusterStatus, "_repr_html_",
                        lambda self: renders.append(1) or rendered(self))
    screen, clock = FakeDisplay(), Clock()
    p = progress(HtmlView(ColabShell(), screen.display, screen.update_display), clock)
    start = clock.now
    reports = {0.2: 1, 0.4: 1, 3.5: 2, 3.6: 2, 7.2: 2}
    events = sorted([(at, "status") for at in reports] + [(float(s), "tick") for s in range(1, 11)])
    for at, what in events:
        clock.now = start + at
        if what == "tick":
            p.tick()
        else:
            p.update(cluster_raw(reports[at]))
    p.tick()  # a second tick in the same second: nothing new
    clock.now = start + 10.3
    final = p.result(tfk8s.TFClusterStatus(cluster_raw(3)))
    kinds = [kind for kind, _, _ in screen.calls]
    assert kinds == ["display"] + ["update"] * 13
    bundles = [bundle for _, bundle, _ in screen.calls]
    assert all(a != b for a, b in zip(bundles, bundles[1:]))  # nothing sent twice
    seconds = [re.findall(r"· (\d+) s", b["text/plain"])[0] for b in bundles]
    # start, 0.2 s, the ticks of 1-3 s, 3.5 s, the ticks of 4-10 s, the result at 10.3 s
    assert seconds == ["0", "0", "1", "2", "3", "3"] + [str(s) for s in range(4, 11)] + ["10"]
    assert len(renders) == 3  # the statuses with 1, 2 and 3 ready
    assert bundles[-1]["text/html"].endswith(final._repr_html_())
    assert '<progress value="3" max="3">' in bundles[-1]["text/html"]


def test_a_failed_wait_leaves_the_failing_status_in_the_display(
        monkeypatch: pytest.MonkeyPatch) -> None:
    screen, shell = FakeDisplay(), ColabShell()
    fake_ipython(monkeypatch, shell, screen)
    no_widgets(monkeypatch)
    error = tfk8s.WorkloadFailed("cannot start")
    error.status = tfk8s.DevInstanceStatus(dev_raw("Failed", "ErrImagePull"))
    with pytest.raises(tfk8s.WorkloadFailed):
        with _progress.showing(True, tfk8s.DevInstanceStatus, "DevInstance team/lab") as p:
            p.update(dev_raw("Pending", "Unschedulable: 0/1 nodes"))
            raise error
    assert not p.ticker or not p.ticker.is_alive()
    check_bundles(screen)
    (last,) = screen.shown.values()
    assert 'data-state="failed"' in last["text/html"] and "ErrImagePull" in last["text/html"]
    assert last["text/html"].count("<table") == 1 and "Unschedulable" not in last["text/html"]
    assert last["text/plain"].startswith(
        "DevInstance team/lab: [....................] 0/1 ready · ")
    assert "Failed · failed · ErrImagePull" in last["text/plain"]


def test_the_widget_display_is_live_then_static(monkeypatch: pytest.MonkeyPatch) -> None:
    import ipywidgets

    screen, clock = FakeDisplay(), Clock()
    monkeypatch.setattr(_progress, "_shown", [])
    view = WidgetView(ColabShell(), screen.display, screen.update_display, ipywidgets)
    p = progress(view, clock)
    ((kind, first, display_id),) = screen.calls
    assert first["application/vnd.jupyter.widget-view+json"]["model_id"] == view.box.model_id
    assert "0/3 ready" in first["text/plain"] and HTML_OBJECT not in first["text/plain"]
    assert "<progress " in first["text/html"]
    assert "tfk8s-progress" in view.box._dom_classes
    clock.now += 3
    p.update(cluster_raw(2))
    assert len(screen.calls) == 1  # the widgets change, the display stays
    assert (view.bar.value, view.bar.max, view.bar.bar_style) == (2, 3, "danger")
    assert "2/3 ready · 3 s" in view.label.value and "&lt;b&gt;" in view.label.value
    assert view.table.value.count("<table") == 1
    p.result(tfk8s.TFClusterStatus(cluster_raw(3)))
    kind, last, same_id = screen.calls[-1]
    assert (kind, same_id) == ("update", display_id)
    assert "application/vnd.jupyter.widget-view+json" not in last
    assert last["text/html"].count("<table") == 1 and "<progress " in last["text/html"]
    assert all(w.comm is None for w in view.widgets)  # closed


def test_the_ticker_refreshes_the_elapsed_time() -> None:
    ticked = threading.Event()

    class Recorder(_progress.View):
        def show(self, snap: _progress.Snapshot) -> None:
            pass

        def tick(self, snap: _progress.Snapshot) -> None:
            ticked.set()

    p = Progress(Recorder(), tfk8s.TFClusterStatus, "t", tick_seconds=0.01)
    assert ticked.wait(30)
    p.result(tfk8s.TFClusterStatus(cluster_raw(3)))
    assert p.ticker is not None and not p.ticker.is_alive()


# ---- a real kernel: the displayhook filter ----------------------------------------------------
KERNEL_SETUP = '''
import tfk8s
from tfk8s.testing import FakeCluster

def replica(index, phase, reason=""):
    return {"role": "worker", "index": index, "pod": f"m-worker-{index}", "phase": phase,
            "node": "", "restarts": 0, "reason": reason}

class Core:
    """A C++ TFCluster stand-in: one progress report, then Running."""
    spec = {"name": "m", "namespace": "team", "worker": {"replicas": 2}}

    def wait(self, until, timeout, on_progress):
        if on_progress is not None:
            on_progress({"name": "m", "namespace": "team", "phase": "Pending", "message": "",
                         "not_ready": 1, "session": None, "events": [], "table": "T1",
                         "replicas": [replica(0, "Running"),
                                      replica(1, "Pending", "Unschedulable: 0/1 nodes")]})
        return {"name": "m", "namespace": "team", "phase": "Running",
                "message": "2 replicas running", "not_ready": 0, "session": None, "events": [],
                "table": "T2", "replicas": [replica(0, "Running"), replica(1, "Running")]}

cluster = tfk8s.TFCluster(FakeCluster().client("team"), _core_cluster=Core())
'''


def test_in_a_kernel_the_wait_display_is_the_result() -> None:
    cells = [
        KERNEL_SETUP,
        "status = cluster.wait()\nstatus",  # the live display is the result
        "again = cluster.wait()\ndisplay(again)\nagain",  # an explicit display shows it
        "status",  # a later cell shows it
        "cluster.wait(progress=False)",  # no progress: the result as usual
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = [[o for o in cell.outputs if o.output_type != "stream"] for cell in nb.cells]
    for cell in nb.cells:
        for o in cell.outputs:
            assert HTML_OBJECT not in str(o.get("data", {}).get("text/plain", "")), o
            assert o.output_type != "stream" or "Traceback" not in o.text, o.text

    def kinds(cell: List[Any]) -> List[Tuple[str, bool, int]]:
        return [(o.output_type, "tfk8s-progress" in o.data.get("text/html", ""),
                 o.data.get("text/html", "").count("<table")) for o in cell]

    assert outputs[0] == []
    assert kinds(outputs[1]) == [("display_data", True, 1)]
    assert 'data-state="done"' in outputs[1][0].data["text/html"]
    assert "2/2 ready" in outputs[1][0].data["text/plain"]
    assert "Unschedulable" not in outputs[1][0].data["text/html"]  # nothing stale
    assert kinds(outputs[2]) == [("display_data", True, 1), ("display_data", False, 1)]
    assert kinds(outputs[3]) == [("execute_result", False, 1)]
    assert kinds(outputs[4]) == [("execute_result", False, 1)]
