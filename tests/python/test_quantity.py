"""tfk8s.Quantity: parsing, canonical text, exact arithmetic, comparisons."""

from __future__ import annotations

import copy
import pickle

import pytest

import tfk8s
from tfk8s import Quantity


def test_parse_and_str() -> None:
    assert str(Quantity("1.5Gi")) == "1536Mi"
    assert str(Quantity("0.5")) == "500m"
    assert str(Quantity("1e3")) == "1e3"
    assert str(Quantity()) == "0"
    assert str(Quantity(4)) == "4"
    assert repr(Quantity("100m")) == "Quantity('100m')"
    assert Quantity.parse("2Ki").format == Quantity.Format.BINARY_SI


def test_invalid_text_is_a_validation_error() -> None:
    with pytest.raises(tfk8s.ValidationError) as info:
        Quantity("ten")
    assert info.value.field == "quantity"
    assert info.value.value == "ten"
    assert isinstance(info.value, ValueError)
    assert Quantity.try_parse("ten") is None
    assert Quantity.try_parse("10") == 10
    assert Quantity.why_invalid("10") is None
    assert Quantity.why_invalid("ten")


def test_arithmetic_is_exact() -> None:
    a = Quantity("1.5Gi")
    assert str(a + Quantity("512Mi")) == "2Gi"
    assert str(a - "512Mi") == "1Gi"
    assert str(a * 2) == "3Gi"
    assert str(3 * Quantity("100m")) == "300m"
    assert str(a.times(4)) == "6Gi"
    assert str(-Quantity("1")) == "-1"
    assert str(sum([Quantity("100m"), Quantity("200m")])) == "300m"
    assert str(Quantity("0.1") + "0.2") == "300m"
    b = a
    b = b + "1Gi"  # a new object: quantities behave as values
    assert str(a) == "1536Mi" and str(b) == "2560Mi"


def test_comparisons_and_hash() -> None:
    assert Quantity("1Gi") == Quantity("1024Mi")
    assert Quantity("1Gi") == "1024Mi"
    assert Quantity("1") == 1
    assert Quantity("999m") < 1 <= Quantity("1000m")
    assert Quantity("2") > "1500m" >= Quantity("1.5")
    assert Quantity("1") != "2"
    assert Quantity("1").compare("2") == -1
    assert hash(Quantity("1Gi")) == hash(Quantity("1024Mi"))
    assert len({Quantity("1k"), Quantity("1000"), Quantity("1e3")}) == 1
    assert not Quantity("0") and Quantity("1m")
    # Text that is no quantity, and foreign types, compare unequal instead of raising.
    assert (Quantity("1") != "not a quantity") is True
    assert (Quantity("1") == "not a quantity") is False
    assert (Quantity("1") == object()) is False
    assert (Quantity("1") != None) is True  # noqa: E711 (the operator itself is under test)


def test_values() -> None:
    q = Quantity("1.2")
    assert q.value() == 2  # rounded up like Kubernetes
    assert q.milli_value() == 1200
    assert float(Quantity("250m")) == 0.25
    assert Quantity("-3").sign() == -1
    assert Quantity("0").is_zero()
    assert str(Quantity.from_int(1024, Quantity.Format.BINARY_SI)) == "1Ki"
    assert str(Quantity.from_int(1000)) == "1k"
    assert str(Quantity.from_milli(500)) == "500m"


def test_pickle_and_copy() -> None:
    q = Quantity("1.5Gi")
    assert pickle.loads(pickle.dumps(q)) == q
    assert str(pickle.loads(pickle.dumps(q))) == "1536Mi"
    assert copy.deepcopy({"q": q})["q"] == q


def test_out_of_range() -> None:
    with pytest.raises(tfk8s.ValidationError):
        Quantity("1e40")
