"""tfk8s: Kubernetes from Python, fast, with the C++ tfk8s library underneath.

Quick start::

    import tfk8s

    client = tfk8s.Client()                      # kubeconfig, else in-cluster
    client.apply({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "settings"}, "data": {"lr": "0.01"}})
    pods = client.list("v1", "Pod", label_selector="app=web")["items"]
    with client.watch("v1", "Pod") as events:
        for event in events:
            print(event.type, event.name)

Objects are plain dicts. Errors are subclasses of :class:`tfk8s.Error` carrying the HTTP code,
the Kubernetes reason, the server's message and the field causes. See docs/python.md.
"""

from tfk8s import validation
from tfk8s._client import (
    ApplyResult,
    Client,
    Informer,
    LogLines,
    Object,
    Watch,
    WatchEvent,
)
from tfk8s._core import (
    AlreadyExists,
    ApiError,
    BadRequest,
    CancelledError,
    ClientConfig,
    ConfigError,
    Conflict,
    Error,
    ExecConfig,
    Forbidden,
    Gone,
    Invalid,
    MethodNotAllowed,
    NotFound,
    Quantity,
    QuotaExceeded,
    RateLimit,
    ResourceType,
    RetryPolicy,
    ServerError,
    StatusCause,
    Timeout,
    TlsError,
    TooManyRequests,
    TransportError,
    Unauthorized,
    ValidationError,
    __version__,
    load_default_config,
    load_in_cluster_config,
    load_kubeconfig,
    load_kubeconfig_from_string,
)
from tfk8s._yaml import dump_yaml, load_yaml

__all__ = [
    # client
    "Client",
    "Watch",
    "Informer",
    "LogLines",
    "WatchEvent",
    "ApplyResult",
    "Object",
    "ResourceType",
    # configuration
    "ClientConfig",
    "ExecConfig",
    "RetryPolicy",
    "RateLimit",
    "load_default_config",
    "load_kubeconfig",
    "load_kubeconfig_from_string",
    "load_in_cluster_config",
    # values
    "Quantity",
    "validation",
    "load_yaml",
    "dump_yaml",
    # errors
    "Error",
    "StatusCause",
    "ValidationError",
    "ConfigError",
    "TransportError",
    "TlsError",
    "CancelledError",
    "ApiError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "QuotaExceeded",
    "NotFound",
    "MethodNotAllowed",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "TooManyRequests",
    "Timeout",
    "ServerError",
    "__version__",
]
