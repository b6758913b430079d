"""The JSON nesting bound (512 levels) on the Python side: the converters between Python and C++
values and the list path, which decodes pages with CPython's json.loads (issue #35). No cluster:
the list runs against tfk8s.testing.FakeCluster."""

from __future__ import annotations

from typing import Any

import pytest

import tfk8s
from tfk8s import _core
from tfk8s.testing import FakeCluster


def nested(levels: int) -> Any:
    """``levels`` lists, one inside the other."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_converters_take_512_levels_and_refuse_513() -> None:
    assert _core.json_roundtrip(nested(512)) == nested(512)
    with pytest.raises(ValueError, match="nested deeper than 512 levels"):
        _core.json_roundtrip(nested(513))
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(ValueError, match="contain itself"):
        _core.json_roundtrip(looped)


def test_a_list_page_deeper_than_512_levels_is_a_transport_error() -> None:
    fake = FakeCluster()
    fake.add_resource("example.com/v1", "Widget", "widgets")
    client = fake.client()
    # The object is 511 levels deep (itself and its field), so one GET of it is 511 levels;
    # a list page adds two (the list and its items): 513.
    fake.add({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
              "deep": nested(510)})
    assert client.get("example.com/v1", "Widget", "w", "default")["deep"] == nested(510)
    with pytest.raises(tfk8s.TransportError, match="nested deeper than 512 levels"):
        client.list("example.com/v1", "Widget", "default")
    fake.add({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
              "deep": nested(509)})
    assert client.list("example.com/v1", "Widget", "default")["items"][0]["deep"] == nested(509)
