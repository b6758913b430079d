"""The one HTML renderer of the package: every ``_repr_html_`` that Python builds (Jupyter's
rich display of statuses, usages, inventories, pre-flight results and runs) goes through these
few functions, so escaping and the look are decided once.

Functions that take ``value``/``text`` escape it; functions that take ``fragments`` expect HTML
made by the other functions here (or precomputed by the C++ core) and do not escape it again.
"""

from __future__ import annotations

import html as _html
from typing import Any, Iterable, Optional, Sequence, Tuple

__all__ = [
    "escape",
    "code",
    "badge",
    "header",
    "line",
    "table",
    "fields",
    "items",
    "is_ok_phase",
]

#: Phases (and run results) that are shown as fine; any other is highlighted.
OK_PHASES = frozenset({"Running", "Succeeded"})

_ALERT = ' style="color:#b00"'


def escape(value: Any) -> str:
    """``value`` as HTML text: ``None`` is empty, anything else its ``str()`` with ``& < > " '``
    escaped (safe in element content and in quoted attributes)."""
    return "" if value is None else _html.escape(str(value), quote=True)


def is_ok_phase(phase: Optional[str]) -> bool:
    """True for a phase or run result that needs no attention (Running, Succeeded)."""
    return phase in OK_PHASES


def code(value: Any) -> str:
    """``value`` in a ``<code>`` element."""
    return f"<code>{escape(value)}</code>"


def badge(text: Any, ok: bool) -> str:
    """A status word in bold; red when not ``ok``."""
    return f"<b{'' if ok else _ALERT}>{escape(text)}</b>"


def line(*fragments: str) -> str:
    """One ``<div>`` line of HTML fragments."""
    return f"<div>{''.join(fragments)}</div>"


def header(status: Any, message: Any = "", ok: Optional[bool] = None) -> str:
    """The first line of a status: the status word as a :func:`badge` (``ok`` defaults to
    :func:`is_ok_phase`), then the message."""
    if ok is None:
        ok = is_ok_phase(str(status))
    detail = escape(message)
    return line(badge(status, ok), f" {detail}" if detail else "")


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    alerts: Optional[Iterable[bool]] = None,
) -> str:
    """A ``<table>`` with a header row and one row per item of ``rows`` (each cell escaped).
    ``alerts`` (one bool per row) highlights the rows that need attention."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    flags = iter(alerts) if alerts is not None else None
    body = []
    for row in rows:
        alert = next(flags, False) if flags is not None else False
        cells = "".join(f"<td>{escape(v)}</td>" for v in row)
        body.append(f"<tr{_ALERT if alert else ''}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def fields(pairs: Iterable[Tuple[str, Any]]) -> str:
    """A two-column table (FIELD, VALUE) of ``(name, value)`` pairs."""
    return table(("FIELD", "VALUE"), pairs)


def items(values: Iterable[Any]) -> str:
    """A ``<ul>`` list (empty string for no values)."""
    entries = "".join(f"<li>{escape(v)}</li>" for v in values)
    return f"<ul>{entries}</ul>" if entries else ""
