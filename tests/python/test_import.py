"""The package imports cheaply and exposes what it documents."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import tfk8s
from tfk8s import _core


def test_import_is_light() -> None:
    # A fresh interpreter: pytest itself has imported json and friends into this one.
    code = (
        "import sys, json as _probe\n"
        "del sys.modules['json']\n"
        "for name in [m for m in sys.modules if m == 'json' or m.startswith('json.')]:\n"
        "    del sys.modules[name]\n"
        "before = set(sys.modules)\n"
        "import tfk8s\n"
        "new = sorted(set(sys.modules) - before)\n"
        "print(' '.join(new))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, check=True,
        env=dict(os.environ),
    ).stdout.split()
    # inspect (with ast, dis, tokenize) and html (its entity table) cost 1.7 MB of every process
    # that imports tfk8s (docs/benchmarks.md, section 5): loaded only when used.
    heavy = [m for m in out if m.split(".")[0] in {"yaml", "json", "urllib", "http", "ssl",
                                                   "asyncio", "email", "kubernetes", "numpy",
                                                   "inspect", "ast", "dis", "tokenize", "html"}]
    assert heavy == [], f"import tfk8s loaded {heavy}"
    assert "tfk8s._core" in out


def test_version() -> None:
    assert tfk8s.__version__ == _core.__version__
    assert tfk8s.__version__.count(".") == 2


def test_all_names_exist() -> None:
    for name in tfk8s.__all__:
        assert hasattr(tfk8s, name), name
    for name in tfk8s.validation.__all__:
        assert hasattr(tfk8s.validation, name), name


def test_all_lists_each_module_export() -> None:
    # tfk8s.__all__ adds each module's __all__ (type checkers follow `__all__ += m.__all__`):
    # every name a module exports is the package's too, as the same object.
    for module in (tfk8s.tfcluster, tfk8s.devinstance, tfk8s.scheduledjob, tfk8s.quota,
                   tfk8s.fleet):
        missing = [n for n in module.__all__ if n not in tfk8s.__all__]
        assert missing == [], f"{module.__name__}.__all__ not in tfk8s.__all__: {missing}"
        for name in module.__all__:
            assert getattr(tfk8s, name) is getattr(module, name), name
    assert len(tfk8s.__all__) == len(set(tfk8s.__all__))


def test_help_reads_well() -> None:
    assert "kubeconfig" in (tfk8s.Client.__doc__ or "")
    for name in ["get", "list", "create", "replace", "patch", "apply", "apply_all", "delete",
                 "watch", "informer", "logs", "stream_logs"]:
        assert getattr(tfk8s.Client, name).__doc__, name


def test_yaml_round_trip() -> None:
    text = tfk8s.dump_yaml([{"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "a"}, "data": {"x": "1"}},
                            {"kind": "Secret", "q": tfk8s.Quantity("1.5Gi")}])
    assert text.startswith("apiVersion: v1\n")
    objects = tfk8s.load_yaml(text)
    assert objects[0]["data"] == {"x": "1"}
    assert objects[1]["q"] == "1536Mi"
    flattened = tfk8s.load_yaml("kind: List\nitems:\n- {kind: A}\n- {kind: B}\n---\n")
    assert [o["kind"] for o in flattened] == ["A", "B"]
    assert json.loads(json.dumps(objects))  # plain data only
