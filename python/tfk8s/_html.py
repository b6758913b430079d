"""The one HTML renderer of the package: every ``_repr_html_`` that Python builds (Jupyter's
rich display of the client, the workloads, statuses, usages, inventories, pre-flight results and
runs) goes through these few functions, so escaping and the look are decided once.

Every view is a :func:`view`: one :func:`header` (a title, a kind badge, a phase badge coloured
by :func:`phase_level`, a one-line message), then tables with Title Case headers, bars and
links. The look is carried twice: CSS classes with the ``tfk8s-`` prefix (``tfk8s-badge
tfk8s-ok``) for anyone who styles them, and inline styles that need no stylesheet, so it holds in
JupyterLab's sanitized output and in nbconvert's HTML (table cells say ``text-align:left``:
both right-align the cells of HTML outputs). Badges and bars are filled with colours
that carry their own white text, and frames are borders without a colour (so the text's), so
they read on light and dark themes alike.

JupyterLab's sanitizer checks every inline declaration against a pattern (its
``packages/apputils/src/sanitizer.ts``) and drops what does not match: colours are hex,
``rgb()``/``rgba()`` (an alpha with its leading zero: ``0.14``) or names (``currentColor`` is
not one), hence the plain values here; ``tests/python/test_html.py`` holds every view to that.

Functions that take ``value``/``text`` escape it; a :class:`Html` value (HTML made by the
functions here) is passed through as it is, wherever a value goes (a table cell, a field, a
message).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Tuple

__all__ = [
    "Html",
    "escape",
    "code",
    "link",
    "badge",
    "phase_level",
    "header",
    "line",
    "table",
    "fields",
    "items",
    "bar",
    "bar_level",
    "view",
    "kind_badge",
    "label",
    "is_ok_phase",
]

#: The prefix of every CSS class the views use.
PREFIX = "tfk8s"

#: Phases, results and states by meaning; anything else is neutral.
OK_PHASES = frozenset({
    "Running", "Ready", "Succeeded", "Complete", "Completed", "Scheduled", "Active", "Bound",
    "Fits", "Yes",
})
PROGRESSING_PHASES = frozenset({
    "Pending", "Creating", "Starting", "ContainerCreating", "PodInitializing", "Waiting",
    "Terminating", "Stopping", "Restarting", "Scaling", "Updating",
})
FAILED_PHASES = frozenset({
    "Failed", "Error", "Unschedulable", "ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff",
    "OOMKilled", "CreateContainerConfigError", "CreateContainerError", "InvalidImageName",
    "RunContainerError", "BackoffLimitExceeded", "DeadlineExceeded", "TimedOut", "Evicted",
    "Full", "Does not fit", "NotReady",
})

#: Badge colours (white text on each: contrast of at least 4.5:1, on any page background).
_FILL = {
    "ok": "#1a7f37",
    "progress": "#9a6700",
    "failed": "#cf222e",
    "neutral": "#6e7781",
}
_BADGE = ("display:inline-block;padding:0 .5em;border-radius:.8em;font-size:.85em;"
          "font-weight:600;line-height:1.5;vertical-align:baseline;white-space:nowrap")
_KIND = ("display:inline-block;padding:0 .5em;border-radius:.8em;font-size:.85em;"
         "line-height:1.4;border:1px solid;opacity:0.8;white-space:nowrap")
_TABLE = "border-collapse:collapse;margin:.2em 0 .6em 0"
# On every cell: JupyterLab's and nbconvert's stylesheet right-aligns the cells of rendered HTML
# (``:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td, th, tr``), which a style on the table
# does not override (the cells' own rule wins over what they inherit).
_CELL = "text-align:left"
_ALERT_ROW = "background:rgba(207,34,46,0.14)"


class Html(str):
    """A fragment of HTML made by this module: never escaped again."""

    __slots__ = ()


def escape(value: Any) -> str:
    """``value`` as HTML text: ``None`` is empty, :class:`Html` is passed through, anything
    else its ``str()`` with ``& < > " '`` escaped (safe in element content and in quoted
    attributes)."""
    if isinstance(value, Html):
        return value
    return "" if value is None else str(value).translate(_ESCAPES)


# What html.escape(quote=True) replaces, with the same entities: importing the html module would
# load html.entities (2,231 named references, 0.6 MB of the process) that escaping never reads.
_ESCAPES = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord('"'): "&quot;",
            ord("'"): "&#x27;"}


def label(key: str) -> str:
    """A field key as a Title Case label: ``"not_ready"`` -> ``"Not Ready"``."""
    return " ".join(w[:1].upper() + w[1:] for w in key.replace("_", " ").split())


def phase_level(phase: Any) -> str:
    """What a phase (or run result, state, reason) means: ``"ok"`` (Running, Ready, Succeeded,
    Complete, ...), ``"progress"`` (Pending, Creating, Starting, ...), ``"failed"`` (Failed,
    Error, Unschedulable, ImagePullBackOff, ...) or ``"neutral"`` (Stopped, Suspended,
    Unknown and anything else)."""
    text = "" if phase is None else str(phase)
    if text in OK_PHASES:
        return "ok"
    if text in PROGRESSING_PHASES:
        return "progress"
    if text in FAILED_PHASES or text.endswith(("BackOff", "Error", "Failed")):
        return "failed"
    return "neutral"


def is_ok_phase(phase: Optional[str]) -> bool:
    """True for a phase or run result that needs no attention (:func:`phase_level` ok)."""
    return phase_level(phase) == "ok"


def code(value: Any) -> Html:
    """``value`` in a ``<code>`` element."""
    return Html(f"<code>{escape(value)}</code>")


def link(url: Any, text: Any = None) -> Html:
    """``url`` as a link opening in a new tab when it is ``http(s)://``; anything else (a
    ``javascript:`` URL included) as escaped text."""
    target = "" if url is None else str(url)
    shown = escape(target if text is None else text)
    if not target.lower().startswith(("http://", "https://")):
        return Html(shown)
    return Html(f'<a class="{PREFIX}-link" href="{escape(target)}" target="_blank" '
                f'rel="noopener noreferrer">{shown}</a>')


def badge(text: Any, level: Any = None) -> Html:
    """A status word as a coloured badge. ``level`` is "ok", "progress", "failed" or
    "neutral" (a bool means ok/failed); None: :func:`phase_level` of ``text``."""
    if isinstance(level, bool):
        level = "ok" if level else "failed"
    if level not in _FILL:
        level = phase_level(text)
    return Html(
        f'<span class="{PREFIX}-badge {PREFIX}-{level}" '
        f'style="{_BADGE};background:{_FILL[level]};color:#fff">{escape(text)}</span>'
    )


def kind_badge(kind: Any) -> Html:
    """What an object is (``TFCluster``, ``Quota``) as an outlined badge in the text colour."""
    return Html(f'<span class="{PREFIX}-badge {PREFIX}-kind" style="{_KIND}">{escape(kind)}'
                "</span>")


def line(*fragments: str) -> Html:
    """One ``<div>`` line of HTML fragments."""
    return Html(f"<div>{''.join(fragments)}</div>")


def header(
    title: Any,
    kind: Any = "",
    phase: Any = None,
    message: Any = "",
    level: Any = None,
) -> Html:
    """The one header of every view: ``title`` in bold, the ``kind`` badge, the ``phase`` badge
    (coloured by ``level``, default :func:`phase_level`), then the one-line ``message``."""
    parts = [f'<b class="{PREFIX}-title" style="font-size:1.05em">{escape(title)}</b>']
    if kind:
        parts.append(kind_badge(kind))
    if phase is not None and phase != "":
        parts.append(badge(phase, level))
    text = escape(message)
    if text:
        parts.append(f'<span class="{PREFIX}-message">{text}</span>')
    return Html(f'<div class="{PREFIX}-header" style="margin:0 0 .35em 0">'
                f"{' '.join(parts)}</div>")


def view(kind: str, *fragments: str) -> Html:
    """A whole view: its fragments (a :func:`header` first) in one ``<div>`` with the classes
    ``tfk8s-view`` and ``tfk8s-<kind>``."""
    name = escape(kind.lower())
    return Html(f'<div class="{PREFIX}-view {PREFIX}-{name}">{"".join(fragments)}</div>')


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    alerts: Optional[Iterable[bool]] = None,
) -> Html:
    """A ``<table>`` with a header row (Title Case, given by the caller) and one row per item
    of ``rows`` (each cell escaped unless :class:`Html`), every cell left-aligned. ``alerts``
    (one bool per row) tints the rows that need attention (class ``tfk8s-alert``)."""
    head = "".join(f'<th style="{_CELL}">{escape(h)}</th>' for h in headers)
    flags = iter(alerts) if alerts is not None else None
    body = []
    for row in rows:
        alert = next(flags, False) if flags is not None else False
        cells = "".join(f'<td style="{_CELL}">{escape(v)}</td>' for v in row)
        attrs = f' class="{PREFIX}-alert" style="{_ALERT_ROW}"' if alert else ""
        body.append(f"<tr{attrs}>{cells}</tr>")
    return Html(
        f'<table class="{PREFIX}-table" style="{_TABLE}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def fields(pairs: Iterable[Tuple[str, Any]]) -> Html:
    """A two-column table of ``(label, value)`` pairs: the labels (Title Case, given by the
    caller) as row headers, the values escaped unless :class:`Html`, both left-aligned. Empty
    for no pairs."""
    rows = "".join(
        f'<tr><th scope="row" style="{_CELL}">{escape(k)}</th>'
        f'<td style="{_CELL}">{escape(v)}</td></tr>'
        for k, v in pairs
    )
    if not rows:
        return Html("")
    return Html(f'<table class="{PREFIX}-table {PREFIX}-fields" style="{_TABLE}">'
                f"<tbody>{rows}</tbody></table>")


def items(values: Iterable[Any], title: str = "") -> Html:
    """A ``<ul>`` list, after a bold ``title`` when given (empty string for no values)."""
    entries = "".join(f"<li>{escape(v)}</li>" for v in values)
    if not entries:
        return Html("")
    head = f"<div><b>{escape(title)}</b></div>" if title else ""
    return Html(f'{head}<ul class="{PREFIX}-list" style="margin:.1em 0 .5em 0">{entries}</ul>')


def bar_level(fraction: float) -> str:
    """The colour level of a usage: ``"ok"`` below 70 %, ``"warn"`` below 90 %, else
    ``"full"``."""
    if fraction < 0.7:
        return "ok"
    return "warn" if fraction < 0.9 else "full"


_BAR_FILL = {"ok": _FILL["ok"], "warn": _FILL["progress"], "full": _FILL["failed"]}


def bar(fraction: Optional[float], text: Any = None) -> Html:
    """A usage bar: a frame (in the text's colour) filled to ``fraction`` (clamped to 0..1) in the
    colour of :func:`bar_level` (classes ``tfk8s-bar tfk8s-bar-<level>``), then ``text``
    (default: the percentage). None (no limit): only the text, or "-"."""
    if fraction is None:
        return Html(escape("-" if text is None else text))
    level = bar_level(fraction)
    width = max(0.0, min(1.0, fraction)) * 100
    shown = f"{fraction * 100:.0f}%" if text is None else text
    return Html(
        f'<span class="{PREFIX}-bar {PREFIX}-bar-{level}" title="{escape(shown)}" '
        'style="display:inline-block;width:8em;height:.75em;border:1px solid;'
        'border-radius:.2em;vertical-align:middle;overflow:hidden;margin-right:.4em">'
        f'<span style="display:block;height:100%;width:{width:.1f}%;'
        f'background:{_BAR_FILL[level]}"></span></span>{escape(shown)}'
    )
