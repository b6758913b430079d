"""Type stubs of tfk8s._core, the pybind11 extension (the C++ library, close to its C++ API).

Most code uses the pure-Python front end (tfk8s.Client and friends); this module is what it is
built on. tests/python/test_stubs.py checks that these stubs match the compiled module.
"""

import datetime
import enum
from typing import Any, ClassVar, Iterator, overload

__version__: str

_Object = dict[str, Any]
_Seconds = datetime.timedelta | float

# ---- errors ---------------------------------------------------------------------------------

class StatusCause:
    """One entry of a Kubernetes Status's details.causes."""

    def __init__(self, field: str = "", reason: str = "", message: str = "") -> None: ...
    @property
    def field(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def message(self) -> str: ...
    def __eq__(self, arg0: object) -> bool: ...
    def __hash__(self) -> int: ...

class Error(Exception):
    """Base class of every tfk8s error."""

    kind: str
    http_code: int
    reason: str
    message: str
    causes: list[StatusCause] | tuple[()]
    retry_after_seconds: int | None

class ValidationError(Error, ValueError):
    """A client-side check failed; nothing was sent."""

    field: str
    value: str

class ConfigError(Error):
    """The configuration is missing or inconsistent."""

    source: str
    field: str

class TransportError(Error):
    """No usable HTTP response."""

    sent_request: bool

class TlsError(TransportError):
    """The TLS handshake or certificate verification failed."""

class CancelledError(Error):
    """The operation was cancelled by the caller."""

class ApiError(Error):
    """Base class of errors built from an API server response."""

class BadRequest(ApiError):
    """HTTP 400."""

class Unauthorized(ApiError):
    """HTTP 401."""

class Forbidden(ApiError):
    """HTTP 403."""

class QuotaExceeded(Forbidden):
    """HTTP 403 caused by a ResourceQuota."""

    resources: list[str] | tuple[()]

class NotFound(ApiError):
    """HTTP 404."""

class MethodNotAllowed(ApiError):
    """HTTP 405."""

class AlreadyExists(ApiError):
    """HTTP 409, reason AlreadyExists."""

class Conflict(ApiError):
    """HTTP 409, reason Conflict."""

class Gone(ApiError):
    """HTTP 410."""

class Invalid(ApiError):
    """HTTP 422."""

class TooManyRequests(ApiError):
    """HTTP 429."""

class Timeout(ApiError):
    """HTTP 504 or a client-side deadline."""

class ServerError(ApiError):
    """Any other HTTP 5xx."""

def api_error(
    http_code: int, body: str, context: str = "", retry_after_seconds: int | None = None
) -> Error:
    """The typed exception (not raised) for an API server response."""

def parse_quota_exceeded_resources(message: str) -> list[str]:
    """The resource names in an apiserver 'exceeded quota' message."""

def json_roundtrip(value: Any, repeat: int = 1) -> Any:
    """value converted to C++ JSON and back, as every object sent or received is."""

# ---- quantities -----------------------------------------------------------------------------

class Quantity:
    """A Kubernetes resource quantity with exact arithmetic."""

    class Format(enum.Enum):
        DECIMAL_SI: ClassVar[Quantity.Format]
        BINARY_SI: ClassVar[Quantity.Format]
        DECIMAL_EXPONENT: ClassVar[Quantity.Format]
        def __init__(self, value: int) -> None: ...
        @property
        def name(self) -> str: ...
        @property
        def value(self) -> int: ...

    @overload
    def __init__(self) -> None: ...
    @overload
    def __init__(self, text: str) -> None: ...
    @overload
    def __init__(self, value: int) -> None: ...
    @staticmethod
    def parse(text: str) -> Quantity: ...
    @staticmethod
    def try_parse(text: str) -> Quantity | None: ...
    @staticmethod
    def why_invalid(text: str) -> str | None: ...
    @staticmethod
    def from_int(value: int, format: Quantity.Format = ...) -> Quantity: ...
    @staticmethod
    def from_milli(milli: int) -> Quantity: ...
    @property
    def format(self) -> Quantity.Format: ...
    def value(self) -> int: ...
    def milli_value(self) -> int: ...
    def as_float(self) -> float: ...
    def sign(self) -> int: ...
    def is_zero(self) -> bool: ...
    def times(self, n: int) -> Quantity: ...
    def compare(self, other: Quantity | str | int) -> int: ...
    def __float__(self) -> float: ...
    def __bool__(self) -> bool: ...
    def __add__(self, arg0: Quantity | str | int) -> Quantity: ...
    def __radd__(self, arg0: Quantity | str | int) -> Quantity: ...
    def __sub__(self, arg0: Quantity | str | int) -> Quantity: ...
    def __rsub__(self, arg0: Quantity | str | int) -> Quantity: ...
    def __mul__(self, arg0: int) -> Quantity: ...
    def __rmul__(self, arg0: int) -> Quantity: ...
    def __neg__(self) -> Quantity: ...
    def __eq__(self, arg0: object) -> bool: ...
    def __ne__(self, arg0: object) -> bool: ...
    def __lt__(self, arg0: Quantity | str | int) -> bool: ...
    def __le__(self, arg0: Quantity | str | int) -> bool: ...
    def __gt__(self, arg0: Quantity | str | int) -> bool: ...
    def __ge__(self, arg0: Quantity | str | int) -> bool: ...
    def __hash__(self) -> int: ...

# ---- validation -----------------------------------------------------------------------------

DNS1123_LABEL_MAX_LENGTH: int
DNS1123_SUBDOMAIN_MAX_LENGTH: int
LABEL_VALUE_MAX_LENGTH: int
STATEFULSET_NAME_MAX_LENGTH: int

def is_dns1123_label(value: str) -> list[str]: ...
def is_dns1123_subdomain(value: str) -> list[str]: ...
def is_qualified_name(value: str) -> list[str]: ...
def is_valid_label_value(value: str) -> list[str]: ...
def require_dns1123_label(field: str, value: str) -> None: ...
def require_dns1123_subdomain(field: str, value: str) -> None: ...
def require_label_key(field: str, value: str) -> None: ...
def require_label_value(field: str, value: str) -> None: ...
def require_statefulset_name(field: str, name: str) -> None: ...

# ---- configuration --------------------------------------------------------------------------

class RetryPolicy:
    """When and how long to wait before repeating a request."""

    class Attempt:
        number: int
        idempotent: bool
        http_code: int
        request_may_have_been_sent: bool
        retry_after_seconds: int | None
        def __init__(self) -> None: ...

    max_attempts: int
    jitter: float
    def __init__(self) -> None: ...
    @property
    def initial_backoff(self) -> datetime.timedelta: ...
    @initial_backoff.setter
    def initial_backoff(self, value: _Seconds) -> None: ...
    @property
    def max_backoff(self) -> datetime.timedelta: ...
    @max_backoff.setter
    def max_backoff(self, value: _Seconds) -> None: ...
    def decide(
        self, attempt: RetryPolicy.Attempt, random01: float
    ) -> datetime.timedelta | None: ...
    def __copy__(self) -> RetryPolicy: ...
    def __deepcopy__(self, memo: dict) -> RetryPolicy: ...

class RateLimit:
    """Client-side token bucket."""

    qps: float
    burst: int
    def __init__(self, qps: float = 5.0, burst: int = 10) -> None: ...
    def __copy__(self) -> RateLimit: ...
    def __deepcopy__(self, memo: dict) -> RateLimit: ...

class ExecConfig:
    """An exec credential plugin."""

    api_version: str
    command: str
    args: list[str]
    env: list[tuple[str, str]]
    install_hint: str
    interactive_mode: str
    provide_cluster_info: bool
    def __init__(self) -> None: ...
    def __copy__(self) -> ExecConfig: ...
    def __deepcopy__(self, memo: dict) -> ExecConfig: ...

class ClientConfig:
    """Everything a Client needs to reach and authenticate to one API server."""

    server: str
    ca_pem: str
    ca_file: str
    insecure_skip_tls_verify: bool
    tls_server_name: str
    proxy_url: str
    token: str
    token_file: str
    client_cert_pem: str
    client_key_pem: str
    username: str
    password: str
    exec: ExecConfig | None
    default_namespace: str
    context: str
    source: str
    retry: RetryPolicy
    rate_limit: RateLimit
    user_agent: str
    def __init__(self) -> None: ...
    @property
    def connect_timeout(self) -> datetime.timedelta: ...
    @connect_timeout.setter
    def connect_timeout(self, value: _Seconds) -> None: ...
    @property
    def request_timeout(self) -> datetime.timedelta: ...
    @request_timeout.setter
    def request_timeout(self, value: _Seconds) -> None: ...
    @property
    def token_file_refresh(self) -> datetime.timedelta: ...
    @token_file_refresh.setter
    def token_file_refresh(self, value: _Seconds) -> None: ...
    def validate(self) -> None: ...
    def to_string(self) -> str: ...
    def __copy__(self) -> ClientConfig: ...
    def __deepcopy__(self, memo: dict) -> ClientConfig: ...

def load_kubeconfig(path: str = "", context: str = "", namespace: str = "") -> ClientConfig: ...
def load_kubeconfig_from_string(
    yaml: str, origin: str = "<string>", context: str = "", namespace: str = ""
) -> ClientConfig: ...
def load_in_cluster_config(
    service_account_dir: str | None = None, env: dict[str, str] | None = None
) -> ClientConfig: ...
def load_default_config(path: str = "", context: str = "", namespace: str = "") -> ClientConfig: ...

# ---- client ---------------------------------------------------------------------------------

class ResourceType:
    """One kind of resource as the server serves it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    def __init__(
        self, group: str, version: str, kind: str, plural: str, namespaced: bool = True
    ) -> None: ...
    @property
    def api_version(self) -> str: ...
    def collection_path(self, namespace: str) -> str: ...
    def object_path(self, namespace: str, name: str, subresource: str = "") -> str: ...
    def __eq__(self, arg0: object) -> bool: ...
    def __hash__(self) -> int: ...

class ListOptions:
    label_selector: str
    field_selector: str
    limit: int
    continue_token: str
    resource_version: str
    resource_version_match: str
    timeout_seconds: int | None
    def __init__(self) -> None: ...

class WriteOptions:
    dry_run: bool
    field_manager: str
    def __init__(self) -> None: ...

class ApplyOptions:
    field_manager: str
    force: bool
    dry_run: bool
    def __init__(self) -> None: ...

class DeleteOptions:
    propagation_policy: str
    grace_period_seconds: int | None
    precondition_uid: str
    precondition_resource_version: str
    dry_run: bool
    def __init__(self) -> None: ...

class PatchType(enum.Enum):
    MERGE: ClassVar[PatchType]
    STRATEGIC_MERGE: ClassVar[PatchType]
    JSON: ClassVar[PatchType]
    def __init__(self, value: int) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

class WatchOptions:
    label_selector: str
    field_selector: str
    resource_version: str
    allow_bookmarks: bool
    timeout_seconds: int | None
    def __init__(self) -> None: ...

class LogOptions:
    container: str
    follow: bool
    tail_lines: int | None
    since_seconds: int | None
    limit_bytes: int | None
    timestamps: bool
    previous: bool
    def __init__(self) -> None: ...

class WatchStream:
    """A raw watch: (type, object) tuples."""

    def next(self, timeout: float | None = None) -> tuple[str, _Object] | None: ...
    def __iter__(self) -> Iterator[tuple[str, _Object]]: ...
    def __next__(self) -> tuple[str, _Object]: ...
    def cancel(self) -> None: ...
    @property
    def ended(self) -> bool: ...
    def __enter__(self) -> WatchStream: ...
    def __exit__(self, *args: object) -> None: ...

class LogStream:
    """Pod log lines."""

    def next(self, timeout: float | None = None) -> str | None: ...
    def __iter__(self) -> Iterator[str]: ...
    def __next__(self) -> str: ...
    def cancel(self) -> None: ...
    @property
    def ended(self) -> bool: ...
    def __enter__(self) -> LogStream: ...
    def __exit__(self, *args: object) -> None: ...

class Informer:
    """List-then-watch with resume: (type, object) tuples."""

    def __init__(
        self,
        client: Client,
        type: ResourceType,
        namespace: str,
        selectors: ListOptions = ...,
    ) -> None: ...
    def snapshot(self) -> list[_Object]: ...
    @property
    def resource_version(self) -> str: ...
    @property
    def relist_count(self) -> int: ...
    def set_watch_timeout(self, min_timeout: float) -> None: ...
    def next(self, timeout: float | None = None) -> tuple[str, _Object] | None: ...
    def __iter__(self) -> Iterator[tuple[str, _Object]]: ...
    def __next__(self) -> tuple[str, _Object]: ...
    def cancel(self) -> None: ...
    @property
    def ended(self) -> bool: ...
    def __enter__(self) -> Informer: ...
    def __exit__(self, *args: object) -> None: ...

class Client:
    """The C++ client (thread-safe; network calls release the GIL)."""

    def __init__(self, config: ClientConfig) -> None: ...
    @staticmethod
    def from_default(path: str = "", context: str = "", namespace: str = "") -> Client: ...
    @property
    def config(self) -> ClientConfig: ...
    @property
    def default_namespace(self) -> str: ...
    def resolve(self, api_version: str, kind: str) -> ResourceType: ...
    def resolve_preferred(self, group: str, kind: str, versions: list[str]) -> ResourceType: ...
    def server_group_versions(self) -> list[str]: ...
    def server_version(self) -> _Object: ...
    def invalidate_discovery(self) -> None: ...
    def get(
        self, type: ResourceType, namespace: str, name: str, subresource: str = ""
    ) -> _Object: ...
    def get_by_kind(self, api_version: str, kind: str, namespace: str, name: str) -> _Object: ...
    def list(self, type: ResourceType, namespace: str, options: ListOptions = ...) -> _Object: ...
    def list_all(
        self,
        type: ResourceType,
        namespace: str,
        options: ListOptions = ...,
        page_size: int = 500,
    ) -> _Object: ...
    def create(
        self, type: ResourceType, namespace: str, object: Any, options: WriteOptions = ...
    ) -> _Object: ...
    def replace(
        self,
        type: ResourceType,
        namespace: str,
        object: Any,
        options: WriteOptions = ...,
        subresource: str = "",
    ) -> _Object: ...
    def patch(
        self,
        type: ResourceType,
        namespace: str,
        name: str,
        patch_type: PatchType,
        patch: Any,
        options: WriteOptions = ...,
        subresource: str = "",
    ) -> _Object: ...
    def delete(
        self, type: ResourceType, namespace: str, name: str, options: DeleteOptions = ...
    ) -> _Object: ...
    def delete_by_kind(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        options: DeleteOptions = ...,
    ) -> _Object: ...
    def delete_collection(
        self,
        type: ResourceType,
        namespace: str,
        selectors: ListOptions,
        options: DeleteOptions = ...,
    ) -> _Object: ...
    def apply(self, object: Any, options: ApplyOptions = ...) -> _Object: ...
    def apply_all(
        self, objects: list[Any], options: ApplyOptions = ..., max_in_flight: int = 32
    ) -> list[tuple[_Object | None, Error | None]]: ...
    def watch(
        self, type: ResourceType, namespace: str, options: WatchOptions = ...
    ) -> WatchStream: ...
    def read_logs(self, namespace: str, pod: str, options: LogOptions = ...) -> str: ...
    def stream_logs(self, namespace: str, pod: str, options: LogOptions = ...) -> LogStream: ...
