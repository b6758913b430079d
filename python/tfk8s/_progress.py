"""The live progress of a wait (``TFCluster.wait``, ``DevInstance.wait``,
``ScheduledJob.wait_for_run``): a progress bar with ``ready/total`` (a run: ``finished/1``), the
elapsed seconds, the phase and the current blocker (``worker-1: Unschedulable: 0/1 nodes have
enough cpu``), shown where the user looks.

Where it goes is decided by capability, not by class names:

- a rich-display frontend (IPython imported, ``get_ipython()`` has a ``kernel``: Jupyter,
  JupyterLab, VS Code, Colab-like kernels): one live display per wait, an ``ipywidgets``
  progress bar when ipywidgets (7 or later: widget protocol 2) imports, else HTML (a
  ``<progress>`` element in a ``<div class="tfk8s-progress">``) — every bundle with a
  text/plain line as its fallback;
- a terminal (stderr is a tty): one line rewritten in place (``\\r\\x1b[K``), ended by a
  newline;
- anything else (logs, nohup, CI): plain lines without control characters, one whenever the
  ready count or the phase changes and otherwise at most every :data:`LOG_INTERVAL` seconds,
  and a final line unless the last one said the same.

One display that becomes the result. The notebook display is created when the wait starts
(display id), updated on every status the C++ wait reports and every second for the elapsed
time (a ticker thread; ipykernel's display publisher is safe to call from it), and at the end
replaced by the final bundle. Updates are cheap: the status's own HTML and text table are
rendered once per status that differs from the last (a tick re-renders only the bar line), and
a bundle equal to the one on screen is not sent again (the C++ wait often reports the same
status twice; a tick in the same second as a status says nothing new). Jupyter replaces a
display whole, so a tick that changed the seconds still sends the whole bundle. The final
bundle is the finished bar followed by the returned status's own HTML (its
``_repr_html_``), or by the status carried by the error when the wait raised. A widget is only
the live view: the final bundle is static HTML, so a saved notebook shows it without a widget
manager, and the widgets are closed. The status the wait returns is then already on screen, so
rendering it again as the same cell's result would duplicate it: the wait registers the
returned object, and a filter installed once on the shell's displayhook
(``compute_format_data``) returns no data for exactly that object, so the displayhook sends
nothing (``_`` and ``Out`` are still set). The registration ends with the cell (the shell's
``post_run_cell`` event), and ``display(status)`` does not go through the displayhook, so an
explicit display in the same cell and any later cell show the status as usual.
"""

from __future__ import annotations

import abc
import contextlib
import os
import re
import sys
import threading
import time
from typing import (
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    TextIO,
    Tuple,
    Type,
    TypeVar,
)

from tfk8s import _html

__all__ = ["Progress", "measure", "measure_run", "rich_display_shell", "showing"]

#: Seconds between two plain progress lines when nothing but the elapsed time changed.
LOG_INTERVAL = 10.0
#: Seconds between two refreshes of the elapsed time (notebook, terminal).
TICK_SECONDS = 1.0
#: Characters of the text bar.
BAR_WIDTH = 20
#: The CSS class of the HTML progress display.
CSS_CLASS = "tfk8s-progress"

_OK_PHASES = frozenset({"Running", "Succeeded"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")

Bundle = Dict[str, Any]
R = TypeVar("R")


# ---- what a status says -----------------------------------------------------------------------
Measure = Callable[[Any, int], Tuple[int, int, str, str]]


def measure(status: Any, expected_total: int) -> Tuple[int, int, str, str]:
    """``(ready, total, phase, blocker)`` of a status record: for a TFClusterStatus the replicas
    Running (or Succeeded) of all (``expected_total`` while no replica is listed yet) and the
    first replica's reason; for a DevInstanceStatus its one pod and the reason. When the phase
    is not fine and nothing names a blocker, the message is the blocker."""
    phase = str(getattr(status, "phase", ""))
    replicas = getattr(status, "replicas", None)
    if isinstance(replicas, list):
        total = len(replicas) or expected_total
        ready = int(getattr(status, "ready", 0)) if replicas else 0
        blocker = next((f"{r.get('role')}-{r.get('index')}: {r['reason']}"
                        for r in replicas if r.get("reason")), "")
    else:
        total = expected_total or 1
        ready = total if phase == "Running" else 0
        blocker = "" if phase == "Running" else str(getattr(status, "reason", "") or "")
    if not blocker and phase not in _OK_PHASES:
        blocker = str(getattr(status, "message", "") or "")
    return ready, total, phase, blocker


def measure_run(run: Any, expected_total: int = 1) -> Tuple[int, int, str, str]:
    """``(finished, 1, result, blocker)`` of a ScheduledJobRun: one run, counted once it
    finished (succeeded, failed or timed out: a retry is not progress towards success, so
    attempts are no fraction of it). The phase is the run's result; the blocker its reason (or
    message) once it failed, and while it retries how many attempts failed so far."""
    result = str(getattr(run, "result", "") or "")
    finished = bool(getattr(run, "finished", False))
    failed = int(run.get("failed", 0) or 0) if hasattr(run, "get") else 0
    attempts = int(getattr(run, "attempts", 0) or 0)
    blocker = ""
    if finished and result != "Succeeded":
        blocker = str(getattr(run, "reason", "") or getattr(run, "message", "") or "")
    elif not finished and failed:
        blocker = f"{failed} of {attempts} attempts failed, retrying"
    return (1 if finished else 0), 1, result, blocker


def expected_total(spec: Mapping[str, Any]) -> int:
    """The replicas a TFCluster spec asks for (the roles' ``replicas``); 1 for any other spec
    (a DevInstance is one pod)."""
    total = 0
    for role in ("ps", "worker", "chief", "evaluator"):
        value = spec.get(role)
        if isinstance(value, Mapping):
            total += int(value.get("replicas", 0) or 0)
    return total or 1


def plain(text: str) -> str:
    """``text`` on one line without control characters (each run of them one space)."""
    return _CONTROL.sub(" ", text)


class Snapshot:
    """What every view renders: the title, the latest status (None before the first), its
    measure, the elapsed seconds and, once finished, the outcome ("" for success). ``word``
    says what the count counts ("ready"; a run's "finished")."""

    __slots__ = ("title", "status", "ready", "total", "phase", "blocker", "elapsed", "finished",
                 "outcome", "word")

    def __init__(self, title: str, status: Any, expected: int, elapsed: float,
                 finished: bool = False, outcome: str = "", how: Measure = measure,
                 word: str = "ready") -> None:
        self.title = title
        self.status = status
        if status is None:
            self.ready, self.total, self.phase, self.blocker = 0, expected, "", ""
        else:
            self.ready, self.total, self.phase, self.blocker = how(status, expected)
        self.elapsed = elapsed
        self.finished = finished
        self.outcome = outcome
        self.word = word

    @property
    def ok(self) -> bool:
        return self.finished and not self.outcome

    def counts(self) -> str:
        """``4/6 ready · 12 s``."""
        return f"{self.ready}/{self.total} {self.word} · {int(self.elapsed)} s"

    def details(self) -> List[str]:
        """Phase (or ``waiting``), the outcome of a failed wait, the blocker (if any)."""
        parts = [self.phase or "waiting"]
        if self.outcome:
            parts.append(self.outcome)
        if self.blocker:
            parts.append(self.blocker)
        return parts

    def line(self, sep: str = " · ") -> str:
        """One plain line: ``TFCluster team/m: [#####...] 4/6 ready · 12 s · Pending · …``."""
        filled = BAR_WIDTH * self.ready // self.total if self.total > 0 else 0
        bar = "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]"
        counts = self.counts().replace(" · ", sep)
        return plain(f"{self.title}: {bar} {counts}{sep}" + sep.join(self.details()))

    def html(self) -> str:
        """The bar as HTML: ``<div class="tfk8s-progress">`` with a ``<progress>`` element."""
        state = "done" if self.ok else "failed" if self.finished else "waiting"
        blocker = ""
        if self.blocker:
            blocker = f'<div style="color:#b00">{_html.escape(self.blocker)}</div>'
        outcome = f' <b style="color:#b00">{_html.escape(self.outcome)}</b>' if self.outcome else ""
        return (
            f'<div class="{CSS_CLASS}" data-state="{state}"><div><b>{_html.escape(self.title)}'
            f'</b> <progress value="{self.ready}" max="{max(self.total, 1)}">'
            f"{self.ready}/{self.total}</progress> {_html.escape(self.counts())} · "
            f"{_html.escape(self.phase or 'waiting')}{outcome}</div>{blocker}</div>"
        )

    def status_parts(self) -> Tuple[str, str]:
        """What the bundle shows below the bar: ``("\\n" + the status's text table, its
        HTML)``; empty before the first status."""
        if self.status is None:
            return "", ""
        table = getattr(self.status, "table", None)
        text = table() if callable(table) else repr(self.status)
        return "\n" + text, self.status._repr_html_()

    def bundle(self, parts: Optional[Tuple[str, str]] = None) -> Bundle:
        """The display's MIME bundle: the bar, then the status's HTML; its text/plain is the
        line, then the status's text table. ``parts``: :meth:`status_parts`, when the caller
        has them already."""
        text, html = self.status_parts() if parts is None else parts
        return {"text/plain": self.line() + text, "text/html": self.html() + html}


# ---- the views --------------------------------------------------------------------------------
class View(abc.ABC):
    """Where a snapshot goes: ``show`` on each status, ``tick`` for the elapsed time (the
    ticker thread; may be ignored), ``finish`` once at the end. Abstract: the views below
    (terminal, log, HTML, widgets) each define ``show``."""

    ticks = True

    @abc.abstractmethod
    def show(self, snap: Snapshot) -> None:
        """Renders one snapshot."""

    def tick(self, snap: Snapshot) -> None:
        self.show(snap)

    def finish(self, snap: Snapshot) -> None:
        self.show(snap)


def _separator(stream: TextIO) -> str:
    """`` · `` when the stream's encoding (default UTF-8) has it, else `` | ``."""
    try:
        " · ".encode(getattr(stream, "encoding", None) or "utf-8")
        return " · "
    except (LookupError, UnicodeEncodeError):
        return " | "


def terminal_columns(stream: TextIO, fallback: int = 100) -> int:
    """The width of the terminal ``stream`` writes to: ``COLUMNS`` when set, else the
    terminal's own, else ``fallback``. (Not shutil's: importing shutil costs ``import tfk8s``
    several milliseconds, and it asks stdout, not the stream the line goes to.)"""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(stream.fileno()).columns or fallback
    except (AttributeError, ValueError, OSError):
        return fallback


class TerminalView(View):
    """One line on a terminal rewritten in place; the finish ends it with a newline."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.sep = _separator(stream)
        self.last = ""

    def show(self, snap: Snapshot) -> None:
        columns = terminal_columns(self.stream)
        text = snap.line(self.sep)[: max(columns - 1, 20)]
        if text != self.last:
            self.last = text
            self.stream.write("\r\x1b[K" + text)
            self.stream.flush()

    def finish(self, snap: Snapshot) -> None:
        self.show(snap)
        self.stream.write("\n")
        self.stream.flush()


class LogView(View):
    """Plain lines for a log: on a change of the ready count or the phase, else at most every
    ``interval`` seconds; then the final one (unless the last line said just that)."""

    def __init__(self, stream: TextIO, interval: float = LOG_INTERVAL) -> None:
        self.stream = stream
        self.sep = _separator(stream)
        self.interval = interval
        self.key: Optional[Tuple[int, int, str]] = None
        self.printed_at: Optional[float] = None
        self.last = ""

    def _write(self, snap: Snapshot) -> None:
        self.key = (snap.ready, snap.total, snap.phase)
        self.printed_at = snap.elapsed
        self.last = snap.line(self.sep)
        self.stream.write(self.last + "\n")
        self.stream.flush()

    def show(self, snap: Snapshot) -> None:
        changed = snap.status is not None and (snap.ready, snap.total, snap.phase) != self.key
        due = snap.elapsed - (self.printed_at or 0.0) >= self.interval
        if changed or due:
            self._write(snap)

    def finish(self, snap: Snapshot) -> None:
        if snap.line(self.sep) != self.last:
            self._write(snap)


class HtmlView(View):
    """A notebook display (HTML bar and status table, text/plain fallback) updated in place;
    the finish leaves the final bundle and marks the returned status as shown. The status's
    parts are rendered once per status that differs from the last one, and a bundle equal to
    the one shown is not sent."""

    def __init__(self, shell: Any, display: Callable[..., Any],
                 update_display: Callable[..., Any]) -> None:
        self.shell = shell
        self.display = display
        self.update_display = update_display
        self.display_id = "tfk8s-progress-" + os.urandom(16).hex()
        self.started = False
        self.shown: Optional[Bundle] = None
        self.parts_of: Any = None
        self.parts: Tuple[str, str] = ("", "")

    def status_parts(self, snap: Snapshot) -> Tuple[str, str]:
        """``snap.status_parts()``, rendered again only for a status unlike the last one (each
        report is a new record; records compare by content)."""
        status = snap.status
        if status is not self.parts_of and (status is None or status != self.parts_of):
            self.parts = snap.status_parts()
        self.parts_of = status
        return self.parts

    def send(self, bundle: Bundle) -> None:
        """Shows ``bundle``: the display the first time, then an update unless it is what the
        display shows already."""
        if self.started and bundle == self.shown:
            return
        self.shown = bundle
        if self.started:
            self.update_display(bundle, raw=True, display_id=self.display_id)
        else:
            self.display(bundle, raw=True, display_id=self.display_id)
            self.started = True

    def show(self, snap: Snapshot) -> None:
        self.send(snap.bundle(self.status_parts(snap)))

    def finish(self, snap: Snapshot) -> None:
        self.send(snap.bundle(self.status_parts(snap)))
        self.close()

    def close(self) -> None:
        """Releases what only the live display needed."""


class WidgetView(HtmlView):
    """The live display as ipywidgets (an ``IntProgress`` bar, a label, the status's HTML); the
    displayed bundle also carries the HTML and the text line for frontends without widgets. The
    finish replaces it with the static final bundle and closes the widgets."""

    def __init__(self, shell: Any, display: Callable[..., Any],
                 update_display: Callable[..., Any], widgets: Any) -> None:
        super().__init__(shell, display, update_display)
        self.bar = widgets.IntProgress(value=0, min=0, max=1)
        self.label = widgets.HTML(value="")
        self.table = widgets.HTML(value="")
        self.box = widgets.VBox([widgets.HBox([self.bar, self.label]), self.table])
        self.box.add_class(CSS_CLASS)
        self.widgets = [self.bar, self.label, self.table, self.box.children[0], self.box]

    def show(self, snap: Snapshot) -> None:
        self.bar.max = max(snap.total, 1)
        self.bar.value = min(snap.ready, self.bar.max)
        self.bar.bar_style = "danger" if snap.blocker else "info"
        details = " · ".join(snap.details())
        self.label.value = (f"<b>{_html.escape(snap.title)}</b> {_html.escape(snap.counts())} "
                            f"· {_html.escape(details)}")
        if snap.status is not None:
            self.table.value = self.status_parts(snap)[1]
        if not self.started:
            bundle = snap.bundle(self.status_parts(snap))
            bundle["application/vnd.jupyter.widget-view+json"] = {
                "version_major": 2, "version_minor": 0, "model_id": self.box.model_id}
            self.display(bundle, raw=True, display_id=self.display_id)
            self.started = True

    def close(self) -> None:
        for w in self.widgets:
            w.close()


# ---- the displayhook filter -------------------------------------------------------------------
_shown: List[Any] = []  # the statuses a finished live display already shows, this cell


def _forget_shown(*_: Any) -> None:
    del _shown[:]


def install_result_filter(shell: Any) -> bool:
    """Makes ``shell``'s displayhook send nothing for a status in :data:`_shown` (once per
    shell); False when the shell has no such displayhook."""
    hook: Any = getattr(shell, "displayhook", None)
    original: Any = getattr(hook, "compute_format_data", None)
    if original is None:
        return False
    if getattr(hook, "_tfk8s_result_filter", False):
        return True

    def compute_format_data(result: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        if any(result is s for s in _shown):
            return {}, {}
        data: Tuple[Dict[str, Any], Dict[str, Any]] = original(result)
        return data

    hook.compute_format_data = compute_format_data
    hook._tfk8s_result_filter = True
    shell.events.register("post_run_cell", _forget_shown)
    return True


# ---- the progress of one wait -----------------------------------------------------------------
class Progress:
    """The progress of one wait: ``callback`` is the wait's ``on_progress`` (None when nothing
    is shown), :meth:`result` takes the returned status, :meth:`fail` the wait's error."""

    def __init__(self, view: Optional[View], status_type: Type[Any], title: str,
                 expected: int = 1, clock: Callable[[], float] = time.monotonic,
                 tick_seconds: Optional[float] = TICK_SECONDS, how: Measure = measure,
                 word: str = "ready") -> None:
        self.view = view
        self.status_type = status_type
        self.title = title
        self.expected = expected
        self.how = how
        self.word = word
        self.clock = clock
        self.started = clock()
        self.status: Any = None
        self.finished = False
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.ticker: Optional[threading.Thread] = None
        if view is None:
            return
        self._render(view.show)
        if tick_seconds and view.ticks:
            self.ticker = threading.Thread(target=self._tick_loop, args=(tick_seconds,),
                                           name="tfk8s-progress", daemon=True)
            self.ticker.start()

    @property
    def callback(self) -> Optional[Callable[[Mapping[str, Any]], None]]:
        return None if self.view is None else self.update

    def snapshot(self, outcome: Optional[str] = None) -> Snapshot:
        return Snapshot(self.title, self.status, self.expected, self.clock() - self.started,
                        outcome is not None, outcome or "", self.how, self.word)

    def _render(self, how: Callable[[Snapshot], None], outcome: Optional[str] = None) -> None:
        with self.lock:
            if not self.finished:
                self.finished = outcome is not None
                how(self.snapshot(outcome))

    def update(self, raw: Mapping[str, Any]) -> None:
        """The wait's ``on_progress``: the status as the C++ wait reports it."""
        self.status = self.status_type(raw)
        assert self.view is not None
        self._render(self.view.show)

    def tick(self) -> None:
        """Refreshes the elapsed time (what the ticker thread calls)."""
        if self.view is not None:
            self._render(self.view.tick)

    def _tick_loop(self, seconds: float) -> None:
        while not self.stop.wait(seconds):
            self.tick()

    def _finish(self, outcome: str) -> None:
        self.stop.set()
        if self.ticker is not None and self.ticker is not threading.current_thread():
            self.ticker.join()
        if self.view is not None:
            self._render(self.view.finish, outcome)

    def result(self, status: R, outcome: str = "") -> R:
        """Ends the display with the wait's returned ``status`` and returns it; in a notebook
        the same cell's displayhook then does not render it a second time. ``outcome``: what
        went wrong when the returned status is no success ("failed": a run that failed)."""
        self.status = status
        if self.view is not None and not self.finished:
            self._finish(outcome)
            if isinstance(self.view, HtmlView) and install_result_filter(self.view.shell):
                _shown.append(status)
        return status

    def fail(self, error: BaseException) -> None:
        """Ends the display with the wait's error (its ``status`` when it carries one)."""
        if self.finished:
            return
        status = getattr(error, "status", None)
        if isinstance(status, self.status_type):
            self.status = status
        if isinstance(error, KeyboardInterrupt) or type(error).__name__ == "CancelledError":
            outcome = "cancelled"
        elif type(error).__name__ == "Timeout":
            outcome = "timed out"
        elif type(error).__name__ == "WorkloadFailed":
            outcome = "failed"
        else:
            outcome = f"stopped by {type(error).__name__}"
        self._finish(outcome)


# ---- choosing the view ------------------------------------------------------------------------
def rich_display_shell() -> Any:
    """The IPython shell when IPython is imported and its shell has a kernel, i.e. a frontend
    that renders rich displays (Jupyter, VS Code, Colab, …); else None."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
    except Exception:
        return None
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    return shell


def _import_widgets() -> Any:
    """The ipywidgets module when it imports and speaks the widget protocol 2 (ipywidgets 7 and
    later, what JupyterLab, VS Code and nbclient render), else None. Debian 12's ipywidgets 6.0
    still opens its comms in protocol 1 (no ``state``): nbclient fails on it with a KeyError and
    current frontends show nothing, so with it the display is HTML."""
    try:
        import ipywidgets  # type: ignore[import]
    except Exception:
        return None
    protocol = str(getattr(ipywidgets, "__protocol_version__", "0"))
    major = protocol.split(".")[0]
    if not major.isdigit() or int(major) < 2:
        return None
    return ipywidgets


def choose_view() -> View:
    """The view for this process: notebook (widgets or HTML), terminal or log."""
    shell = rich_display_shell()
    if shell is not None:
        try:
            from IPython.display import display, update_display  # type: ignore[import]
        except Exception:
            shell = None
        else:
            widgets = _import_widgets()
            if widgets is not None:
                try:
                    return WidgetView(shell, display, update_display, widgets)
                except Exception:
                    pass  # a widget library that does not work here: HTML it is
            return HtmlView(shell, display, update_display)
    stream = sys.stderr
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return TerminalView(stream)
    return LogView(stream)


@contextlib.contextmanager
def showing(enabled: bool, status_type: Type[Any], title: str, expected: int = 1,
            how: Measure = measure, word: str = "ready") -> Iterator[Progress]:
    """The progress of a wait: ``callback`` for the wait, ``result(status)`` for what it
    returns; an error ends the display with its outcome and is re-raised. Disabled: a Progress
    that shows nothing (its callback is None). ``how`` measures a status (:func:`measure`, a
    run's :func:`measure_run`); ``word`` names the count ("ready", "finished")."""
    progress = Progress(choose_view() if enabled else None, status_type, title, expected,
                        how=how, word=word)
    try:
        yield progress
    except BaseException as error:
        progress.fail(error)
        raise
    else:
        if not progress.finished and progress.view is not None:
            progress._finish("")  # the wait returned without result(): end the display anyway
    finally:
        progress.stop.set()
