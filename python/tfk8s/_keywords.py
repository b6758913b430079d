"""Renamed keyword arguments (and renamed keyword values) of the workload constructors.

The keywords of ``TFCluster``, ``DevInstance`` and ``ScheduledJob`` are the snake_case of the
spec keys they set (``entry_path`` sets ``entryPath``, ``worker`` the ``worker`` role, …). The
names they had before keep working for one release: :func:`renamed_keywords` wraps a function so
that an old keyword is moved to its new name with a ``DeprecationWarning``, passing both the old
and the new name is a ``TypeError``, and old values of a keyword (e.g. the tool
``"code-server"``, now ``"code_server"``) are replaced with a ``DeprecationWarning`` too.

The warnings are raised from the wrapper itself with ``stacklevel=2``, so they point at the
caller's line.

Keywords that several functions share are declared once, as a ``TypedDict``, and taken as
``**keywords: Unpack[That]`` (PEP 692): :func:`shared_keywords` makes them behave, for callers,
``help()`` and ``inspect.signature``, as if each were written out in every signature.
"""

from __future__ import annotations

import functools
import re
import warnings
from typing import (
    Any,
    Callable,
    Dict,
    ForwardRef,
    Iterable,
    List,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
)

__all__ = ["renamed_keywords", "shared_keywords", "spec_key"]

F = TypeVar("F", bound=Callable[..., Any])


def spec_key(keyword: str) -> str:
    """The camelCase spec key of a snake_case keyword (``entry_path`` -> ``entryPath``)."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), keyword)


def _display_name(fn: Callable[..., Any]) -> str:
    """``tfk8s.TFCluster`` for a class's ``__init__``, ``tfk8s.f`` for a function."""
    qualname = fn.__qualname__
    if qualname.endswith(".__init__"):
        qualname = qualname[: -len(".__init__")]
    return f"tfk8s.{qualname}"


def _renamed_value(value: Any, renames: Mapping[str, str]) -> Tuple[Any, List[str]]:
    """``value`` (a string, or an iterable of strings) with old values replaced, and the old
    values found. A list, tuple or set keeps its type (and is the same object when nothing is
    replaced); another iterable becomes a list. Other values are returned unchanged."""
    if isinstance(value, str):
        return (renames[value], [value]) if value in renames else (value, [])
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        if not isinstance(value, (list, tuple, set, frozenset)):
            value = list(value)  # e.g. a generator: read it once, here
        found = [v for v in value if isinstance(v, str) and v in renames]
        if not found:
            return value, []  # nothing to rename: keep the caller's object as it is
        return type(value)(renames.get(v, v) if isinstance(v, str) else v for v in value), found
    return value, []


def renamed_keywords(
    renames: Mapping[str, str],
    values: Optional[Mapping[str, Mapping[str, str]]] = None,
) -> Callable[[F], F]:
    """Decorator: accepts each old keyword of ``renames`` (old -> new) as its new name, with a
    ``DeprecationWarning`` naming the new keyword; both at once is a ``TypeError``. ``values``
    maps a (new) keyword to its renamed values (old value -> new value), for a string or an
    iterable of strings. The wrapped function's signature (``help()``,
    ``inspect.signature``) is the new one."""
    renames = dict(renames)
    value_renames: Dict[str, Dict[str, str]] = {k: dict(v) for k, v in (values or {}).items()}

    def decorate(fn: F) -> F:
        where = _display_name(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(
                        f"{where}() got both {old!r} and {new!r}; {old!r} is the deprecated "
                        f"name of {new!r}: pass only {new!r}"
                    )
                warnings.warn(
                    f"{where}(): keyword {old!r} is deprecated; use {new!r} "
                    f"(it sets the spec key {spec_key(new)!r})",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            for keyword, table in value_renames.items():
                if kwargs.get(keyword) is None:
                    continue
                kwargs[keyword], found = _renamed_value(kwargs[keyword], table)
                for v in dict.fromkeys(found):
                    warnings.warn(
                        f"{where}(): the {keyword} value {v!r} is deprecated; use {table[v]!r}",
                        DeprecationWarning,
                        stacklevel=2,
                    )
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def shared_keywords(
    declared: type, defaults: Optional[Mapping[str, Any]] = None
) -> Callable[[F], F]:
    """Decorator for ``fn(..., **keywords: Unpack[declared])``, where ``declared`` is a
    ``TypedDict`` (``total=False``) of keywords several functions share.

    Callers see the keywords as if ``fn`` declared each of them keyword-only: ``help()`` and
    ``inspect.signature`` list them (their annotations, and as default ``defaults[name]``, else
    None), right after ``fn``'s own positional parameters; any other keyword is a ``TypeError``
    naming it, as Python raises for a written-out signature. ``fn`` receives every one of them
    in ``keywords`` (the default when not passed), so it can index them."""
    names = list(declared.__annotations__)  # a TypedDict's keys, its bases' first
    given_defaults = dict(defaults or {})
    unknown = set(given_defaults) - set(names)
    if unknown:
        raise TypeError(f"shared_keywords: defaults for undeclared keywords {sorted(unknown)}")

    def decorate(fn: F) -> F:
        where = _display_name(fn)
        own = _own_parameters(fn)
        if own is None:
            raise TypeError(f"shared_keywords: {where} takes no **keywords")
        positional, positional_only, keyword_only = own
        clash = (set(positional) | set(keyword_only)) & set(names)
        if clash:
            raise TypeError(f"shared_keywords: {where} declares {sorted(clash)} itself")
        accepted = set(positional[positional_only:]) | set(keyword_only)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {name: kwargs.pop(name, given_defaults.get(name)) for name in names}
            for name in kwargs:
                if name not in accepted:
                    raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
            return fn(*args, **kwargs, **values)

        # inspect.signature() follows __wrapped__ to the first object with a __signature__:
        # this one builds it when first asked (help(), a notebook's completion), not at import.
        wrapper.__wrapped__ = _SharedSignature(  # type: ignore[attr-defined]
            fn, declared, names, given_defaults)
        return wrapper  # type: ignore[return-value]

    return decorate


def _own_parameters(fn: Callable[..., Any]) -> Optional[Tuple[List[str], int, List[str]]]:
    """``fn``'s positional parameter names (with ``*args`` last, if any), how many of them are
    positional-only, and its keyword-only names; None when it takes no ``**keywords``. Read from
    the code object: the inspect module costs 1.2 MB of every process that imports tfk8s."""
    while hasattr(fn, "__wrapped__"):  # what inspect.signature(fn) would read
        fn = fn.__wrapped__
    code = fn.__code__
    var_positional, var_keyword = 0x04, 0x08  # CO_VARARGS, CO_VARKEYWORDS
    if not code.co_flags & var_keyword:
        return None
    n, k = code.co_argcount, code.co_kwonlyargcount
    positional = list(code.co_varnames[:n])
    if code.co_flags & var_positional:
        positional.append(code.co_varnames[n + k])
    return positional, code.co_posonlyargcount, list(code.co_varnames[n:n + k])


class _SharedSignature:
    """The ``__wrapped__`` of a :func:`shared_keywords` wrapper: its ``__signature__`` is
    ``fn``'s with the shared keywords (keyword-only, after ``fn``'s positional parameters) in
    place of ``**keywords``, built on first use."""

    __slots__ = ("_fn", "_declared", "_names", "_defaults", "_signature")

    def __init__(
        self, fn: Callable[..., Any], declared: type, names: List[str], defaults: Dict[str, Any]
    ) -> None:
        self._fn, self._declared, self._names, self._defaults = fn, declared, names, defaults
        self._signature: Any = None

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        # inspect.unwrap() (getsource, a debugger) goes on to fn, as from a functools.wraps.
        return self._fn

    @property
    def __signature__(self) -> Any:
        if self._signature is None:
            import inspect

            def annotation(value: Any) -> Any:
                # `from __future__ import annotations` leaves them as ForwardRefs: their text.
                return value.__forward_arg__ if isinstance(value, ForwardRef) else value

            shared = [
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=self._defaults.get(name),
                    annotation=annotation(self._declared.__annotations__[name]),
                )
                for name in self._names
            ]
            signature = inspect.signature(self._fn)
            own = list(signature.parameters.values())[:-1]  # without **keywords
            split = next(
                (i for i, p in enumerate(own) if p.kind is inspect.Parameter.KEYWORD_ONLY),
                len(own),
            )
            self._signature = signature.replace(parameters=own[:split] + shared + own[split:])
        return self._signature
