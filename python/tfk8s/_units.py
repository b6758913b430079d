"""Human units for display: CPU as cores (``"31500m"`` -> ``"31.5 cores"``), memory and storage
as binary bytes (``"134217728Ki"`` -> ``"128 GiB"``), counts as they are. Quantities are parsed
with :class:`tfk8s.Quantity` (the C++ parser), so every Kubernetes spelling (``"1.5Gi"``,
``"2e9"``, ``"500m"``) is understood; text that is not a quantity is returned unchanged.

Display only: results keep the API's strings (``usage.find("requests.cpu")["used"]`` is
``"31500m"``); the HTML views and nothing else show these.
"""

from __future__ import annotations

from typing import Any, Optional

from tfk8s import _core

__all__ = ["cores", "binary_bytes", "human", "kind_of"]

_BINARY = (("TiB", 1024.0**4), ("GiB", 1024.0**3), ("MiB", 1024.0**2), ("KiB", 1024.0))


def _number(value: float) -> str:
    """``value`` with at most 2 decimals below 10, 1 below 100, none above; no trailing zeros."""
    magnitude = abs(value)
    decimals = 2 if magnitude < 10 else 1 if magnitude < 100 else 0
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _quantity(value: Any) -> Optional[Any]:
    """``value`` (a Quantity, an int, a float or quantity text) as a Quantity, or None."""
    if isinstance(value, _core.Quantity):
        return value
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return _core.Quantity(value)
    if isinstance(value, float):
        return _core.Quantity.from_milli(int(round(value * 1000)))
    text = str(value).strip()
    return _core.Quantity.try_parse(text) if text else None


def cores(value: Any) -> str:
    """CPU as cores: ``"31500m"`` -> ``"31.5 cores"``, ``"1"`` -> ``"1 core"``, ``"250m"`` ->
    ``"0.25 cores"``. Not a quantity: ``str(value)`` ("" for None)."""
    q = _quantity(value)
    if q is None:
        return "" if value is None else str(value)
    amount = q.milli_value() / 1000.0
    text = _number(amount)
    return f"{text} {'core' if text == '1' else 'cores'}"


def binary_bytes(value: Any) -> str:
    """Bytes in binary units: ``"128Gi"`` -> ``"128 GiB"``, ``"1536Mi"`` -> ``"1.5 GiB"``,
    ``"2e9"`` -> ``"1.86 GiB"``, ``"512"`` -> ``"512 B"``. Not a quantity: ``str(value)``."""
    q = _quantity(value)
    if q is None:
        return "" if value is None else str(value)
    amount = q.as_float()
    for unit, size in _BINARY:
        if abs(amount) >= size:
            return f"{_number(amount / size)} {unit}"
    return f"{_number(amount)} B"


def kind_of(resource: str) -> str:
    """What a resource name measures: ``"cpu"`` (cpu, requests.cpu, limits.cpu), ``"bytes"``
    (memory, ephemeral-storage, storage and their requests./limits. forms) or ``"count"``
    (pods, GPUs, object counts, anything else)."""
    name = resource
    if resource.startswith(("requests.", "limits.")):
        name = resource.split(".", 1)[1]
    if name == "cpu":
        return "cpu"
    if name in ("memory", "storage", "ephemeral-storage") or resource.endswith(".storage"):
        return "bytes"
    return "count"


def human(resource: str, value: Any) -> str:
    """``value`` of ``resource`` in human units (:func:`cores`, :func:`binary_bytes`, or the
    count as it is): ``human("requests.cpu", "31500m")`` is ``"31.5 cores"``."""
    kind = kind_of(resource)
    if kind == "cpu":
        return cores(value)
    if kind == "bytes":
        return binary_bytes(value)
    q = _quantity(value)
    if q is None or q.milli_value() % 1000:
        return "" if value is None else str(value)
    return str(q.value())
