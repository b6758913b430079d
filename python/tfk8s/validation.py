"""Kubernetes' name and label rules (the same checks and messages as the API server's), to
catch bad input before anything is sent.

The ``is_*`` functions return a list of problems (empty when valid); the ``require_*``
functions raise :class:`tfk8s.ValidationError` naming the field.
"""

from tfk8s._core import (
    DNS1123_LABEL_MAX_LENGTH,
    DNS1123_SUBDOMAIN_MAX_LENGTH,
    LABEL_VALUE_MAX_LENGTH,
    STATEFULSET_NAME_MAX_LENGTH,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
    is_valid_path_segment_name,
    require_dns1035_label,
    require_dns1123_label,
    require_dns1123_subdomain,
    require_label_key,
    require_label_value,
    require_namespace_name,
    require_path_segment,
    require_statefulset_name,
)

__all__ = [
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "STATEFULSET_NAME_MAX_LENGTH",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "is_valid_path_segment_name",
    "require_dns1035_label",
    "require_dns1123_label",
    "require_dns1123_subdomain",
    "require_label_key",
    "require_label_value",
    "require_namespace_name",
    "require_path_segment",
    "require_statefulset_name",
]
