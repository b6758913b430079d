"""YAML in and out of plain dicts. PyYAML is imported on first use only, so ``import tfk8s``
stays light."""

from __future__ import annotations

from typing import IO, Any, Dict, Iterable, List, Mapping, Union


def load_yaml(source: Union[str, bytes, IO[str], IO[bytes]]) -> List[Dict[str, Any]]:
    """Every document of a YAML text or open file, as dicts (empty documents skipped).

    A ``kind: List`` document is flattened into its items, as kubectl does.
    """
    import yaml  # noqa: PLC0415 - deliberately lazy

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    objects: List[Dict[str, Any]] = []
    for document in yaml.load_all(source, Loader=loader):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ValueError(f"a YAML document is a {type(document).__name__}, not a mapping")
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            objects.extend(document["items"])
        else:
            objects.append(document)
    return objects


def dump_yaml(objects: Union[Mapping[str, Any], Iterable[Mapping[str, Any]]]) -> str:
    """YAML text for one object or several (as ``---``-separated documents), keys in their
    order. Objects with a ``to_dict()`` method are converted first."""
    import yaml  # noqa: PLC0415 - deliberately lazy

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    def plain(obj: Any) -> Any:
        to_dict = getattr(obj, "to_dict", None)
        if callable(to_dict) and not isinstance(obj, Mapping):
            obj = to_dict()
        if isinstance(obj, Mapping):
            return {str(k): plain(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [plain(v) for v in obj]
        if obj is None or isinstance(obj, (str, int, float, bool)):
            return obj
        return str(obj)  # Quantity and other value types print as their canonical text

    single = isinstance(objects, Mapping) or callable(getattr(objects, "to_dict", None))
    if single:
        documents = [plain(objects)]
    else:
        documents = [plain(o) for o in objects]
    return yaml.dump_all(documents, Dumper=dumper, sort_keys=False, default_flow_style=False)
