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
    InformerFailure,
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
    PodSecurityWarning,
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
    WorkloadFailed,
    __version__,
    check_pod_security,
    load_default_config,
    load_in_cluster_config,
    load_kubeconfig,
    load_kubeconfig_from_string,
)
from tfk8s._yaml import dump_yaml, load_yaml
from tfk8s.quota import (  # noqa: F401 (exported by quota.__all__)
    Inventory,
    QuotaUsage,
    apply_quota,
    check_placement,
    check_quota,
    delete_quota,
    get_quota,
    inventory,
    list_queues,
    quota_demand,
    quota_usage,
    remove_node_labels,
    render_quota,
    set_node_labels,
    update_node_labels,
    where_fits,
)
from tfk8s._logs import WorkloadLogs
from tfk8s._pod_streams import CommandFailed, ExecResult, PortForward
from tfk8s._records import WorkloadRef
from tfk8s.tfcluster import (  # noqa: F401 (in tfcluster.__all__)
    FitResult,
    TFCluster,
    TFClusterStatus,
)
from tfk8s.devinstance import (  # noqa: F401 (exported by devinstance.__all__)
    DevAccess,
    DevActivity,
    DevCredentials,
    DevCullDecision,
    DevInstance,
    DevInstanceStatus,
    create_volume,
    cull_idle,
    share_volume,
    unshare_volume,
    volume_grants,
)
from tfk8s.scheduledjob import (  # noqa: F401 (exported by scheduledjob.__all__)
    ScheduledJob,
    ScheduledJobRun,
    ScheduledJobStatus,
    ScheduledJobWatcher,
)
from tfk8s.fleet import Fleet, FleetChange, FleetEntry, FleetError  # noqa: F401 (in fleet.__all__)
from tfk8s import devinstance, fleet, quota, scheduledjob, tfcluster

__all__ = [
    # client
    "Client",
    "Watch",
    "Informer",
    "InformerFailure",
    "LogLines",
    "WatchEvent",
    "ApplyResult",
    "Object",
    "ResourceType",
    "ExecResult",
    "PortForward",
    "CommandFailed",
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
    # security
    "check_pod_security",
    "PodSecurityWarning",
    # workloads
    "WorkloadLogs",
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
    "WorkloadFailed",
    "WorkloadRef",
    "__version__",
]
# Each workload module's own exports (type checkers and linters follow these additions).
__all__ += tfcluster.__all__
__all__ += devinstance.__all__
__all__ += scheduledjob.__all__
__all__ += quota.__all__
__all__ += fleet.__all__
