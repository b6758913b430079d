"""The shipped stubs (tfk8s/_core.pyi) describe the compiled module exactly: the same public
names, the same class members and bases, and the same argument names (read from the signatures
pybind11 writes into every docstring)."""

from __future__ import annotations

import ast
import inspect
import os
import re
from typing import Dict, List, Optional, Set, Tuple

import pytest

import tfk8s
from tfk8s import _core

Signature = Tuple[str, ...]


def stub_path() -> str:
    beside = os.path.join(os.path.dirname(_core.__file__), "_core.pyi")
    if os.path.exists(beside):
        return beside
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(repo, "python", "tfk8s", "_core.pyi")


def public(name: str) -> bool:
    return not name.startswith("_") or name in {"__init__", "__version__"}


# ---- the stub side --------------------------------------------------------------------------
class StubScope:
    """Names declared in a module or class body of the stub, with function signatures."""

    def __init__(self, body: List[ast.stmt], bases: Optional[List[str]] = None) -> None:
        self.bases = bases or []
        self.names: Set[str] = set()
        self.functions: Dict[str, List[Signature]] = {}
        self.classes: Dict[str, StubScope] = {}
        for node in body:
            if isinstance(node, ast.ClassDef):
                # `_Stream[str]` is the runtime base `_Stream`; `Generic[...]` exists only for
                # the type checker (the compiled class has no such base).
                bases = [ast.unparse(b.value if isinstance(b, ast.Subscript) else b)
                         for b in node.bases]
                bases = [b.split(".")[-1] for b in bases if b not in ("Generic", "typing.Generic")]
                self.classes[node.name] = StubScope(node.body, bases)
                self.names.add(node.name)
            elif isinstance(node, ast.FunctionDef):
                self.names.add(node.name)
                decorators = [ast.unparse(d) for d in node.decorator_list]
                if any(d == "property" or d.endswith(".setter") for d in decorators):
                    continue
                args = node.args
                names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
                if names and names[0] in ("self", "cls") and "staticmethod" not in decorators:
                    names = names[1:]
                if args.vararg:
                    names.append("*" + args.vararg.arg)
                if args.kwarg:
                    names.append("**" + args.kwarg.arg)
                signatures = self.functions.setdefault(node.name, [])
                if tuple(names) not in signatures:
                    signatures.append(tuple(names))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.names.add(node.target.id)
            elif isinstance(node, ast.Assign):
                self.names.update(t.id for t in node.targets if isinstance(t, ast.Name))


STUB = StubScope(ast.parse(open(stub_path()).read()).body)


def stub_names_with_bases(scope: StubScope) -> Set[str]:
    names = set(scope.names)
    for base in scope.bases:
        if base in STUB.classes:
            names |= stub_names_with_bases(STUB.classes[base])
    return names


# ---- the runtime side -----------------------------------------------------------------------
def split_top_level(text: str) -> List[str]:
    parts, depth, quote, current = [], 0, "", ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def runtime_signatures(name: str, function: object, is_method: bool) -> List[Signature]:
    """Argument names of every overload, from pybind11's docstring signatures."""
    doc = getattr(function, "__doc__", None) or ""
    pattern = re.compile(r"^(?:\d+\. )?" + re.escape(name) + r"\((.*)\) -> ", re.MULTILINE)
    signatures: List[Signature] = []
    for match in pattern.finditer(doc):
        if match.group(1) == "*args, **kwargs":  # the header of an overloaded function
            continue
        names = [p.split(":")[0].split("=")[0].strip() for p in split_top_level(match.group(1))]
        if is_method and names and names[0] in ("self", "arg0"):
            names = names[1:]
        signatures.append(tuple(names))
    return signatures


def is_pybind_function(value: object) -> bool:
    return type(value).__name__ in ("builtin_function_or_method", "instancemethod")


# ---- the tests ------------------------------------------------------------------------------
def test_module_names_match() -> None:
    runtime = {n for n in dir(_core) if public(n) and n != "__init__"}
    stub = {n for n in STUB.names if public(n)}
    assert runtime - stub == set(), "in _core but missing from _core.pyi"
    assert stub - runtime == set(), "in _core.pyi but not in _core"


def test_module_function_arguments_match() -> None:
    for name in sorted(STUB.functions):
        value = getattr(_core, name)
        assert runtime_signatures(name, value, is_method=False) == STUB.functions[name], name


def classes(scope: StubScope, owner: object, prefix: str = ""):
    for name, sub in scope.classes.items():
        cls = getattr(owner, name)
        yield prefix + name, cls, sub
        yield from classes(sub, cls, prefix + name + ".")


@pytest.mark.parametrize("qualname,cls,scope", list(classes(STUB, _core)),
                         ids=[q for q, _, _ in classes(STUB, _core)])
def test_class_matches(qualname: str, cls: type, scope: StubScope) -> None:
    assert inspect.isclass(cls), qualname
    runtime_bases = [b.__name__ for b in cls.__bases__ if b.__name__ not in ("object",
                                                                             "pybind11_object")]
    if issubclass(cls, BaseException) or scope.bases not in ([], ["enum.Enum"], ["Enum"]):
        assert runtime_bases == scope.bases, f"{qualname} bases"

    # Members: everything public the class defines is in the stub, and vice versa.
    runtime_members = {n for n in vars(cls) if public(n)}
    stub_members = stub_names_with_bases(scope)
    init = vars(cls).get("__init__")
    if issubclass(cls, BaseException) or not runtime_signatures("__init__", init, True):
        runtime_members.discard("__init__")  # no constructor callable from Python
    missing = runtime_members - stub_members
    assert missing == set(), f"{qualname}: members missing from the stub"
    extra = {n for n in scope.names if public(n) and not hasattr(cls, n)}
    assert extra == set(), f"{qualname}: stub members the class does not have"

    # Argument names of every method and overload.
    for name, stub_signatures in scope.functions.items():
        value = inspect.getattr_static(cls, name)
        if isinstance(value, staticmethod):
            value, is_method = value.__func__, False
        else:
            is_method = True
        if not is_pybind_function(value):
            continue
        runtime = runtime_signatures(name, getattr(cls, name), is_method)
        if not runtime:  # pybind11's own slots (e.g. enum __eq__) have no signature to compare
            continue
        assert sorted(runtime) == sorted(stub_signatures), f"{qualname}.{name}"


def test_typed_package_marker() -> None:
    assert os.path.exists(os.path.join(os.path.dirname(tfk8s.__file__), "py.typed"))
