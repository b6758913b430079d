"""How Python values cross into the C++ core and back (every object sent or received does)."""

from __future__ import annotations

import collections
import math
from typing import Any, Dict

import pytest

import tfk8s
from tfk8s import _core


@pytest.mark.parametrize(
    "value",
    [
        None, True, False, 0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 1.5, -0.25, "", "text",
        "ünïcødé ✓ 中文", [], {}, [1, "a", None, [2, {"b": False}]],
        {"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"replicas": 3}},
    ],
)
def test_round_trip(value: Any) -> None:
    assert _core.json_roundtrip(value) == value
    assert _core.json_roundtrip(value, repeat=3) == value


def test_containers_convert() -> None:
    assert _core.json_roundtrip((1, 2)) == [1, 2]
    assert _core.json_roundtrip(collections.OrderedDict(a=1)) == {"a": 1}
    mapping = collections.ChainMap({"a": 1}, {"b": 2})  # a Mapping, not a dict
    assert _core.json_roundtrip(mapping) == {"a": 1, "b": 2}
    assert _core.json_roundtrip({"q": tfk8s.Quantity("1.5Gi")}) == {"q": "1536Mi"}

    class Spec:
        def to_dict(self) -> Dict[str, Any]:
            return {"kind": "Thing", "n": 1}

    assert _core.json_roundtrip([Spec()]) == [{"kind": "Thing", "n": 1}]


def test_int_like_objects_convert() -> None:
    class Index:
        def __index__(self) -> int:
            return 7

    assert _core.json_roundtrip({"n": Index()}) == {"n": 7}


@pytest.mark.parametrize(
    "value,error,where",
    [
        ({"a": {"b": [1, {2, 3}]}}, TypeError, "a.b[1]"),
        ({1: "x"}, TypeError, "keys must be str"),
        ({"n": 2**64}, ValueError, "n"),
        ({"f": math.nan}, ValueError, "f"),
        ({"f": math.inf}, ValueError, "f"),
        ({"data": b"bytes"}, TypeError, "base64"),
        (object(), TypeError, "object"),
    ],
)
def test_unconvertible_values_name_the_path(value: Any, error: type, where: str) -> None:
    with pytest.raises(error) as info:
        _core.json_roundtrip(value)
    assert where in str(info.value)


def test_cycles_are_rejected() -> None:
    looped: Dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(ValueError):
        _core.json_roundtrip(looped)


def test_big_lists_share_key_strings() -> None:
    items = [{"metadata": {"name": f"n{i}"}} for i in range(1000)]
    back = _core.json_roundtrip(items)
    assert back == items
    first, second = (next(iter(o)) for o in back[:2])
    assert first is second  # one str object per distinct key
