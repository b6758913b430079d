"""The one record base of the package: every result and status object (FitResult,
TFClusterStatus, DevInstanceStatus, DevAccess, DevCredentials, QuotaUsage, Inventory,
ScheduledJobRun, ScheduledJobStatus) is a :class:`Record` built from the dict the C++ bindings
return.

A record keeps that dict (with the declared fields converted, e.g. times to datetimes) and
gives typed attributes over it (:func:`field`), ``to_dict()``, equality, a ``repr`` and a
Jupyter ``_repr_html_`` through the one HTML renderer (:mod:`tfk8s._html`). Keys listed in
``_secret_keys`` (a password) are never shown: not by ``repr``/``str``/HTML, not by
``to_dict()``.
"""

from __future__ import annotations

import datetime as _dt
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    FrozenSet,
    Generic,
    Iterator,
    List,
    Mapping,
    Optional,
    TypeVar,
    overload,
)

from tfk8s import _html, _units

__all__ = ["Record", "MappingRecord", "FitResult", "WorkloadRef", "field"]

T = TypeVar("T")


class Field(Generic[T]):
    """A typed, read-only attribute of a record: the record's value under ``key`` (default:
    the attribute's name), converted once when the record is built."""

    __slots__ = ("convert", "key", "name")

    def __init__(self, convert: Callable[[Any], T], key: Optional[str] = None) -> None:
        self.convert = convert
        self.key = key or ""
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        if not self.key:
            self.key = name

    @overload
    def __get__(self, obj: None, owner: Optional[type] = None) -> "Field[T]": ...

    @overload
    def __get__(self, obj: "Record", owner: Optional[type] = None) -> T: ...

    def __get__(self, obj: Optional["Record"], owner: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return obj._data[self.key]

    def __set__(self, obj: "Record", value: Any) -> None:
        raise AttributeError(f"{type(obj).__name__}.{self.name} is read-only")


def field(convert: Callable[[Any], T], key: Optional[str] = None) -> Any:
    """Declares a record attribute (see :class:`Field`). Typed as the converter's result."""
    return Field(convert, key)


# ---- converters used by the records ---------------------------------------------------------
def text(value: Any) -> str:
    return "" if value is None else str(value)


def dicts(value: Any) -> List[Dict[str, Any]]:
    return list(value)


def strings(value: Any) -> List[str]:
    return [str(v) for v in value]


def optional_time(value: Any) -> Optional[_dt.datetime]:
    """Seconds since the epoch (what the bindings send) as a timezone-aware UTC datetime."""
    if value is None or isinstance(value, _dt.datetime):
        return value
    return _dt.datetime.fromtimestamp(value, tz=_dt.timezone.utc)


def optional_rfc3339(value: Any) -> Optional[_dt.datetime]:
    """An RFC 3339 time in UTC ("2026-12-02T15:46:43Z", what the bindings send for times
    they read from the cluster) as a timezone-aware datetime."""
    if value is None or isinstance(value, _dt.datetime):
        return value
    return _dt.datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc)


def optional_float(value: Any) -> Optional[float]:
    return None if value is None else float(value)


class Record:
    """Base of every result and status object: built from the raw dict of the C++ bindings.

    Subclasses declare their attributes with :func:`field` (converted on construction; a
    missing key is a ``KeyError`` then), say what ``repr`` shows in :meth:`_repr_inner`
    (default: every shown key) and what Jupyter shows in :meth:`_html_body` (default: a table
    of the shown keys), built with :mod:`tfk8s._html`.
    """

    __slots__ = ("_data",)

    #: Keys never shown by repr/str/HTML nor returned by to_dict() (e.g. a password).
    _secret_keys: ClassVar[FrozenSet[str]] = frozenset()
    _fields: ClassVar[Dict[str, Field[Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared: Dict[str, Field[Any]] = {}
        for klass in reversed(cls.__mro__):
            for value in vars(klass).values():
                if isinstance(value, Field):
                    declared[value.key] = value
        cls._fields = declared

    def __init__(self, raw: Mapping[str, Any]) -> None:
        data = dict(raw)
        for key, f in self._fields.items():
            data[key] = f.convert(raw[key])
        self._data: Dict[str, Any] = data

    # ---- plain data ---------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """What the record holds as a plain dict (a copy; nested records as dicts too; secret
        keys left out)."""
        return {
            k: (v.to_dict() if isinstance(v, Record) else v)
            for k, v in self._data.items()
            if k not in self._secret_keys
        }

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Record)
        return self._data == other._data

    __hash__ = None  # type: ignore[assignment]  # records compare by value and are not frozen

    # ---- display ------------------------------------------------------------------------
    def _repr_inner(self) -> str:
        return ", ".join(
            f"{k}={v!r}" for k, v in self._data.items() if k not in self._secret_keys
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._repr_inner()})"

    def _html_body(self) -> str:
        """The HTML of the record (default: a header with the class name and a table of its
        shown fields); one :func:`tfk8s._html.view`."""
        return _html.view(
            type(self).__name__,
            _html.header(type(self).__name__),
            _html.fields(
                (_html.label(k), v) for k, v in self._data.items() if k not in self._secret_keys
            ),
        )

    def _repr_html_(self) -> str:
        """Jupyter's rich display."""
        return str(self._html_body())


class MappingRecord(Record, Mapping[str, Any]):
    """A record that also reads like the dict it was made from (``r["name"]``, ``r.get``,
    ``in``, ``dict(r)``, equal to a dict with the same items): for results that were plain
    dicts before they became records."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping) and not isinstance(other, Record):
            return self._data == dict(other)
        return Record.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]


class WorkloadRef(Record):
    """One workload found by ``refs()``: ``namespace``, ``name``, ``owner`` ("" when the
    workload has none) and ``created`` (when its oldest root object was created, a UTC
    datetime; None when unknown). Listing every namespace returns these, since names alone
    would be ambiguous."""

    __slots__ = ()

    namespace: str = field(text)
    name: str = field(text)
    owner: str = field(text)
    created: Optional[_dt.datetime] = field(optional_rfc3339)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _html_body(self) -> str:
        return _html.view(
            "WorkloadRef",
            _html.header(str(self), "Workload"),
            _html.fields([("Namespace", self.namespace), ("Name", self.name),
                          ("Owner", self.owner)]),
        )


class FitResult(Record):
    """Result of a pre-flight check: ``fits``, ``shortfalls`` (dicts with resource, quota,
    requested, used, hard, remaining as strings), ``problems`` (strings), ``notes`` (what could
    not be checked, e.g. nodes the credentials cannot list, and warnings that do not stop it,
    e.g. the pods a priority class would preempt) and ``message``. True when it fits; the repr
    of a result that fits shows its notes."""

    __slots__ = ()

    fits: bool = field(bool)
    shortfalls: List[Dict[str, str]] = field(dicts)
    problems: List[str] = field(strings)
    notes: List[str] = field(strings)
    message: str = field(text)

    def __bool__(self) -> bool:
        return self.fits

    def _repr_inner(self) -> str:
        if self.fits:
            return f"fits=True, notes={self.notes!r}" if self.notes else "fits=True"
        return f"fits=False, message={self.message!r}"

    def _html_body(self) -> str:
        phase = "Fits" if self.fits else "Does not fit"
        parts = [_html.header("Pre-flight", "FitResult", phase, self.message)]
        if self.shortfalls:
            amounts = ("requested", "used", "hard", "remaining")
            parts.append(
                _html.table(
                    ("Resource", "Quota", "Requested", "Used", "Hard", "Remaining"),
                    (
                        [s.get("resource", ""), s.get("quota", "")]
                        + [_units.human(s.get("resource", ""), s.get(c, "")) for c in amounts]
                        for s in self.shortfalls
                    ),
                )
            )
        parts.append(_html.items(self.problems, "Problems"))
        parts.append(_html.items(self.notes, "Notes"))
        return _html.view("FitResult", *parts)
