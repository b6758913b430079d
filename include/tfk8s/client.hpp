#pragma once
/// @file
/// The generic Kubernetes API client: any resource (custom resources included), discovery,
/// server-side apply, watches and pod logs. Objects are nlohmann::json values in the API's own
/// shape (apiVersion, kind, metadata, spec, status).

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tfk8s/config.hpp"
#include "tfk8s/error.hpp"

namespace tfk8s {

using Json = nlohmann::json;

class Client;
struct ClientConfig;
namespace internal {
class Connection;
class HttpTransport;
/// Internal (src/client): a client over a given transport (the fake cluster, unit tests).
Client ClientOver(ClientConfig config, std::shared_ptr<HttpTransport> transport);
/// Internal (src/client): the connection a client shares with its copies.
const std::shared_ptr<Connection>& ConnectionOf(const Client& client);
}  // namespace internal

/// One kind of resource as the server serves it (from discovery or written by hand).
struct ResourceType {
  std::string group;       ///< "" for the core group.
  std::string version;     ///< e.g. "v1".
  std::string kind;        ///< e.g. "StatefulSet".
  std::string plural;      ///< URL segment, e.g. "statefulsets".
  bool namespaced = true;  ///< Whether objects live in a namespace.

  /// "apps/v1", or "v1" for the core group.
  [[nodiscard]] std::string ApiVersion() const;
  /// "/api/v1" or "/apis/apps/v1". Throws ValidationError when group or version cannot be a
  /// path segment.
  [[nodiscard]] std::string GroupVersionPath() const;
  /// The collection path, e.g. "/apis/apps/v1/namespaces/ns/statefulsets" (ns ignored when the
  /// resource is cluster-scoped; empty ns on a namespaced resource means all namespaces).
  /// Throws ValidationError, naming the argument and the value, when a segment is unsafe: ns not
  /// a namespace name (DNS-1123 label), plural empty, '.', '..' or holding '/', '%' or a
  /// control character.
  [[nodiscard]] std::string CollectionPath(std::string_view ns) const;
  /// The object path, with an optional subresource ("status", "scale", "log"). Throws
  /// ValidationError when the name is empty (never a collection path), '.' or '..', or holds
  /// '/', '%' or a control character; when a namespaced resource gets no namespace; or when a
  /// subresource segment is unsafe likewise. Other characters are percent-encoded.
  [[nodiscard]] std::string ObjectPath(std::string_view ns, std::string_view name,
                                       std::string_view subresource = {}) const;
  bool operator==(const ResourceType&) const = default;
};

/// Options of list calls.
struct ListOptions {
  std::string label_selector;          ///< e.g. "app=web,tier!=db".
  std::string field_selector;          ///< e.g. "spec.nodeName=node-1".
  std::int64_t limit = 0;              ///< Page size; 0 = server default (no paging).
  std::string continue_token;          ///< From the previous page's metadata.continue.
  std::string resource_version;        ///< "" (most recent, quorum read), "0" (any, cache) or a RV.
  std::string resource_version_match;  ///< "NotOlderThan" or "Exact" (with resource_version).
  std::optional<int> timeout_seconds;  ///< Server-side bound of the call.
};

/// Options shared by write calls.
struct WriteOptions {
  bool dry_run = false;       ///< Send dryRun=All: validated and admitted, not persisted.
  std::string field_manager;  ///< Recorded in managedFields; "" = server default.
};

/// Options of server-side apply.
struct ApplyOptions {
  std::string field_manager = "tfk8s";  ///< The owner of the applied fields.
  bool force = false;                   ///< Take over fields owned by other managers.
  bool dry_run = false;                 ///< dryRun=All.
};

/// How a patch body is interpreted.
enum class PatchType { kMerge, kStrategicMerge, kJson };

/// Options of delete calls.
struct DeleteOptions {
  std::string propagation_policy;  ///< "Foreground", "Background", "Orphan" or "".
  std::optional<std::int64_t> grace_period_seconds;
  std::string precondition_uid;               ///< Delete only this incarnation.
  std::string precondition_resource_version;  ///< Delete only this version.
  bool dry_run = false;
};

/// Options of pod log calls.
struct LogOptions {
  std::string container;                   ///< Required when the pod has several containers.
  bool follow = false;                     ///< Stream until the container ends.
  std::optional<std::int64_t> tail_lines;  ///< Only the last N lines.
  std::optional<std::int64_t> since_seconds;
  std::optional<std::int64_t> limit_bytes;
  bool timestamps = false;  ///< Prefix each line with an RFC 3339 timestamp.
  bool previous = false;    ///< The previous (crashed) instance.
};

/// Options of Client::Exec.
struct ExecOptions {
  std::string container;  ///< Required when the pod has several containers.
  /// Bytes for the command's standard input; none: the command gets no stdin. The end of the
  /// input reaches the command only on servers that speak v5.channel.k8s.io (Kubernetes 1.30+);
  /// on older servers stdin stays open until the command exits, so give such a command a way
  /// to stop reading (e.g. `head -c N`).
  std::optional<std::string> stdin_data;
  bool tty = false;  ///< A terminal: stderr is merged into stdout.
  /// Bounds the whole call; 0: none. On expiry the call throws Timeout and closes the stream
  /// (the command itself may go on running in the container).
  std::chrono::milliseconds timeout{0};
  /// When set, output is passed here as it arrives (`fd` 1 for stdout, 2 for stderr) instead of
  /// being collected into ExecResult. Called on the calling thread.
  std::function<void(int fd, std::string_view data)> on_output;
  /// Polled about every 100 ms on the calling thread when set: returning true closes the
  /// stream and makes the call throw CancelledError (the command may go on running).
  std::function<bool()> cancelled;
};

/// What a command run by Client::Exec returned.
struct ExecResult {
  int exit_code = 0;     ///< 0 for success.
  std::string out;       ///< Standard output (empty with ExecOptions::on_output).
  std::string err;       ///< Standard error (empty with a tty or on_output).
  std::string protocol;  ///< The streaming protocol the server spoke (v4.channel.k8s.io …).
};

/// Options of Client::ForwardPort.
struct PortForwardOptions {
  int local_port = 0;  ///< Port on 127.0.0.1 to listen on; 0: any free port.
  /// Open (and close) one stream before listening, so that a forward that cannot work fails
  /// here: pods/portforward not allowed (Forbidden), no reachable kubelet (ServerError …). The
  /// kubelet dials the pod's port for it, so the application sees one connection that closes
  /// at once.
  bool verify = true;
};

class PortForward;

/// The type of a watch event.
enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError, kUnknown };
/// "ADDED", "MODIFIED" …
std::string_view ToString(WatchEventType type);
/// Parses "ADDED" … (anything else is kUnknown).
WatchEventType ParseWatchEventType(std::string_view text);

/// One event of a watch.
struct WatchEvent {
  WatchEventType type = WatchEventType::kUnknown;
  Json object;  ///< The object (a Status object for kError).
};

/// Options of watches.
struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;        ///< Start after this version ("" = list first / now).
  bool allow_bookmarks = true;         ///< Ask for BOOKMARK events (kept internally for resume).
  std::optional<int> timeout_seconds;  ///< Server-side duration of one watch request.
};

/// One result of ApplyAll().
struct ApplyResult {
  Json object;               ///< What the server returned (empty on error).
  std::exception_ptr error;  ///< Set when this object failed.
  [[nodiscard]] bool ok() const { return !error; }
  /// The error's message, or "".
  [[nodiscard]] std::string error_message() const;
};

class WatchStream;
class LogStream;
class Informer;

/// A Kubernetes API client. A cheap, copyable handle: copies share one connection pool, one
/// credential source, one rate limiter and one discovery cache. Thread-safe.
class Client {
 public:
  /// Connects with an explicit configuration. Throws ConfigError when it is inconsistent.
  explicit Client(ClientConfig config);
  /// Loads the configuration automatically (kubeconfig, then in-cluster); see LoadDefaultConfig.
  static Client FromDefault(const KubeconfigOptions& options = {});
  /// The configuration in use (secrets intact; print it with ToString()).
  [[nodiscard]] const ClientConfig& config() const;
  /// The namespace used when a call gets "" for a namespaced resource.
  [[nodiscard]] const std::string& default_namespace() const;

  // ---- discovery -------------------------------------------------------------------------
  /// The resource type for apiVersion + kind, from discovery (cached). Throws NotFound when the
  /// server does not serve it.
  ResourceType Resolve(std::string_view api_version, std::string_view kind);
  /// The first of `versions` (in order of preference) in which the server serves group/kind,
  /// e.g. ResolvePreferred("batch", "CronJob", {"v1", "v1beta1"}).
  ResourceType ResolvePreferred(std::string_view group, std::string_view kind,
                                const std::vector<std::string>& versions);
  /// Every group version the server serves ("v1", "apps/v1", …), preferred versions first.
  std::vector<std::string> ServerGroupVersions();
  /// The server's /version document.
  Json ServerVersion();
  /// Forgets cached discovery (after installing a CRD, say).
  void InvalidateDiscovery();

  // ---- reads ---------------------------------------------------------------------------
  /// GET one object (or a subresource such as "status" or "scale").
  Json Get(const ResourceType& type, std::string_view ns, std::string_view name,
           std::string_view subresource = {});
  /// One page of a list (the List object, with metadata.continue / resourceVersion).
  Json List(const ResourceType& type, std::string_view ns, const ListOptions& options = {});
  /// Every page of a list, concatenated; the result's metadata.resourceVersion is the first
  /// page's, as a list-then-watch needs. `page_size` 0 means one request.
  Json ListAll(const ResourceType& type, std::string_view ns, ListOptions options = {},
               std::int64_t page_size = 500);
  /// ListAll() that hands each item to `each_item` as soon as its page is decoded, before the
  /// next page is read: a caller that keeps a few fields of each object (an informer's
  /// transform) never holds the whole decoded list. Items carry no apiVersion or kind.
  Json ListAll(const ResourceType& type, std::string_view ns, ListOptions options,
               std::int64_t page_size, const std::function<void(Json& item)>& each_item);
  /// List() without decoding: the page exactly as the server sent it (JSON text), for callers
  /// with their own decoder (the Python binding builds Python objects straight from it).
  /// Errors are raised as by List().
  std::string ListText(const ResourceType& type, std::string_view ns,
                       const ListOptions& options = {});
  /// ListAll()'s paging without decoding: calls `on_page` with each page's JSON text, in order;
  /// `on_page` decodes it and returns the page's metadata.continue ("" ends the list). The
  /// first page carries `options`' version constraint, later ones only the continue token.
  void ListPages(const ResourceType& type, std::string_view ns, ListOptions options,
                 std::int64_t page_size,
                 const std::function<std::string(std::string page)>& on_page);

  // ---- writes ----------------------------------------------------------------------------
  /// POST a new object (namespace from `ns`, else metadata.namespace, else the default).
  Json Create(const ResourceType& type, std::string_view ns, const Json& object,
              const WriteOptions& options = {});
  /// PUT an object; metadata.resourceVersion, when present, makes it conditional (Conflict).
  Json Replace(const ResourceType& type, std::string_view ns, const Json& object,
               const WriteOptions& options = {}, std::string_view subresource = {});
  /// PATCH an object (or a subresource).
  Json Patch(const ResourceType& type, std::string_view ns, std::string_view name, PatchType type_,
             const Json& patch, const WriteOptions& options = {},
             std::string_view subresource = {});
  /// DELETE an object; returns the server's answer (the object, or a Status).
  Json Delete(const ResourceType& type, std::string_view ns, std::string_view name,
              const DeleteOptions& options = {});
  /// DELETE every object matching the selectors in a namespace (deletecollection).
  Json DeleteCollection(const ResourceType& type, std::string_view ns, const ListOptions& selectors,
                        const DeleteOptions& options = {});
  /// Server-side apply of one complete object (apiVersion, kind, metadata.name required).
  Json Apply(const Json& object, const ApplyOptions& options = {});
  /// Server-side apply of many objects at once, concurrently (bounded by `max_in_flight` and the
  /// rate limiter). One result per object, in input order; failures are reported per object.
  std::vector<ApplyResult> ApplyAll(const std::vector<Json>& objects,
                                    const ApplyOptions& options = {}, int max_in_flight = 32);

  // ---- object conveniences (type from apiVersion/kind) ----------------------------------------
  /// Get by apiVersion/kind/namespace/name.
  Json Get(std::string_view api_version, std::string_view kind, std::string_view ns,
           std::string_view name);
  /// Delete by apiVersion/kind/namespace/name.
  Json Delete(std::string_view api_version, std::string_view kind, std::string_view ns,
              std::string_view name, const DeleteOptions& options = {});

  // ---- streams ---------------------------------------------------------------------------
  /// A raw watch from options.resource_version (no relist; see Informer for that).
  WatchStream Watch(const ResourceType& type, std::string_view ns, const WatchOptions& options);
  /// A pod's logs, whole (not follow).
  std::string ReadLogs(std::string_view ns, std::string_view pod, LogOptions options = {});
  /// A pod's logs as a stream of lines (follow or not).
  LogStream StreamLogs(std::string_view ns, std::string_view pod, const LogOptions& options = {});

  // ---- exec and port-forward (WebSocket streaming: v5/v4.channel.k8s.io) ----------------
  /// Runs `command` (an argv; no shell) in a running pod's container and waits for it:
  /// its output and exit code. A non-zero exit code is a result, not an error. Throws
  /// ValidationError for an empty command, NotFound / Forbidden / BadRequest (e.g. the pod is
  /// not running, or several containers and none named) as the server answers, Timeout
  /// past options.timeout, ServerError when the command could not be started (not found …),
  /// ResponseTooLarge when collected output passes ClientConfig::max_response_bytes.
  ExecResult Exec(std::string_view ns, std::string_view pod,
                  const std::vector<std::string>& command, const ExecOptions& options = {});
  /// Listens on a loopback port and forwards every connection made to it to `remote_port` of
  /// the pod (each connection is one WebSocket to the pod's portforward subresource). Lives as
  /// long as the returned handle. Throws NotFound when the pod does not exist, Conflict when it
  /// is not Running, ValidationError for a port outside 1-65535, TransportError when the local
  /// port cannot be bound, and (options.verify) the error of a first stream that fails.
  PortForward ForwardPort(std::string_view ns, std::string_view pod, int remote_port,
                          const PortForwardOptions& options = {});

 private:
  Client(ClientConfig config, std::shared_ptr<internal::HttpTransport> transport);
  friend Client internal::ClientOver(ClientConfig config,
                                     std::shared_ptr<internal::HttpTransport> transport);
  friend const std::shared_ptr<internal::Connection>& internal::ConnectionOf(const Client& client);
  std::shared_ptr<internal::Connection> conn_;
};

/// A forwarded port (Client::ForwardPort): 127.0.0.1:local_port() reaches the pod's
/// remote_port() while the handle lives. Move-only; Close() (or the destructor) stops listening
/// and ends open connections. Thread-safe.
class PortForward {
 public:
  PortForward(PortForward&&) noexcept;
  PortForward& operator=(PortForward&&) noexcept;
  ~PortForward();

  [[nodiscard]] int local_port() const;   ///< The loopback port listened on.
  [[nodiscard]] int remote_port() const;  ///< The pod's port.
  [[nodiscard]] const std::string& pod() const;
  [[nodiscard]] const std::string& namespace_() const;
  /// Whether it still listens (false after Close()).
  [[nodiscard]] bool is_open() const;
  /// Connections accepted so far.
  [[nodiscard]] int connections() const;
  /// Why the last failed connection failed (e.g. nothing listens on the pod's port); "" when
  /// none failed.
  [[nodiscard]] std::string last_error() const;
  /// Stops listening and closes every forwarded connection. Idempotent.
  void Close();

 private:
  friend class Client;
  struct Impl;
  explicit PortForward(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// A raw watch: events in order as the server sends them. Move-only; Cancel() from any thread.
class WatchStream {
 public:
  WatchStream(WatchStream&&) noexcept;
  WatchStream& operator=(WatchStream&&) noexcept;
  ~WatchStream();
  /// The next event; nullopt on timeout or when the stream ended (then ended() is true and
  /// the transport error, if any, has been thrown). Server ERROR events are returned as events.
  /// Throws TransportError (kind kTimeout) when no byte arrived for
  /// ClientConfig::watch_idle_timeout, ResponseTooLarge for an event over
  /// max_stream_line_bytes and DecodeError for an undecodable one; the stream has then ended.
  std::optional<WatchEvent> Next(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// True once the server closed the stream or it was cancelled.
  [[nodiscard]] bool ended() const;
  /// Stops the stream; Next() then returns nullopt. Thread-safe, idempotent.
  void Cancel();

 private:
  friend class Client;
  struct Impl;
  explicit WatchStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Pod log lines as they arrive. Move-only; Cancel() from any thread.
class LogStream {
 public:
  LogStream(LogStream&&) noexcept;
  LogStream& operator=(LogStream&&) noexcept;
  ~LogStream();
  /// The next complete line (without '\n'); nullopt on timeout or at the end (see ended()).
  /// Throws TransportError (kind kTimeout) when no byte arrived for
  /// ClientConfig::log_idle_timeout (off by default) and ResponseTooLarge for a line over
  /// max_stream_line_bytes; the stream has then ended.
  std::optional<std::string> NextLine(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// True when the log is finished (container ended, not following, or cancelled).
  [[nodiscard]] bool ended() const;
  /// Stops the stream. Thread-safe, idempotent.
  void Cancel();

 private:
  friend class Client;
  struct Impl;
  explicit LogStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// One failed list or watch of an Informer, as Informer::last_error() and the error handler
/// (Informer::set_error_handler) report it.
struct InformerFailure {
  /// The typed error (rethrow it to inspect: TlsError, DecodeError, ServerError, Forbidden …).
  std::exception_ptr error;
  ErrorKind kind = ErrorKind::kUnknown;  ///< The error's kind (kUnknown: not a tfk8s::Error).
  std::string message;                   ///< The error's what().
  /// Whether retrying may fix it: connection refused, reset or timed out, DNS, 429, 5xx, 504.
  /// The informer retries those for ever, with backoff; failures that are not transient (a
  /// certificate, an oversized list, an undecodable answer) end Next() once
  /// Informer::failure_limit() of them come in a row.
  bool transient = true;
  /// Failures since the last success (a list read, or a watch event received), this one
  /// included.
  int consecutive = 0;
  /// Whether Next() threw this error: the informer has given up.
  bool fatal = false;
  std::chrono::system_clock::time_point time;  ///< When it happened.
  /// {"kind" (ErrorKind's name, "Unknown" for other exceptions), "message", "transient",
  /// "consecutive", "fatal", "time" (seconds since the epoch, with milliseconds)}.
  [[nodiscard]] Json ToJson() const;
};

/// List-then-watch with resume: lists (paginated), then watches from the list's
/// resourceVersion with bookmarks; after a clean close it resumes from the last seen version
/// without redelivering events; on 410 Gone it relists and emits only the differences against
/// what it already delivered (ADDED / MODIFIED / DELETED); on failures it backs off
/// exponentially with jitter, like client-go's reflector, and gives up on failures that retrying
/// cannot fix (see Next()). Cancel() from any thread.
class Informer {
 public:
  /// Default of set_failure_limit(): at the default backoff, five failures in a row take 6-18 s.
  static constexpr int kDefaultFailureLimit = 5;

  /// Watches `type` in `ns` ("" = all namespaces for namespaced types) with the selectors of
  /// `selectors`. When selectors.resource_version is set, no initial list is made: the watch
  /// resumes from that version (e.g. one saved before a restart), and if the server has
  /// compacted it away (410 Gone) the informer relists.
  Informer(Client client, ResourceType type, std::string ns, ListOptions selectors = {});
  Informer(Informer&&) noexcept;
  Informer& operator=(Informer&&) noexcept;
  ~Informer();

  /// The next event; nullopt on timeout or after Cancel(). The first call lists: it returns
  /// once the list is taken and the watch that follows it is open (the server has accepted
  /// the watch), so a change made after the caller has read the list's events is already on
  /// its way. BOOKMARK events are consumed internally.
  ///
  /// Failures of a list or a watch (a silent or short watch, a relist after 410 that fails …)
  /// are recorded (last_error(), the error handler) and then:
  /// - transient ones (connection refused, reset or timed out, DNS, 429, 5xx, 504) back off and
  ///   retry for ever;
  /// - TlsError, ResponseTooLarge and DecodeError (an undecodable list or event, a transform
  ///   that throws nlohmann's exceptions) back off and retry too, but once failure_limit() of
  ///   them come in a row (no success and no transient failure between them), Next() throws the
  ///   last one, its what() ending " (after N attempts)";
  /// - any other error (Forbidden, Unauthorized, NotFound, ConfigError …) is thrown at once.
  /// The informer stays usable after a throw: a later Next() tries again (the count of failures
  /// in a row starts over), keeping what it has delivered.
  std::optional<WatchEvent> Next(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// Runs until `on_event` returns false or Cancel() is called.
  void Run(const std::function<bool(const WatchEvent&)>& on_event);
  /// Stops Next()/Run(). Thread-safe, idempotent.
  void Cancel();
  /// The objects currently known, keyed "namespace/name".
  [[nodiscard]] std::vector<Json> Snapshot() const;
  /// The last resourceVersion seen (from an event, a bookmark or a list).
  [[nodiscard]] std::string resource_version() const;
  /// How many times the informer had to relist (first list excluded).
  [[nodiscard]] int relist_count() const;
  /// The most recent failure (kept after a later success: see consecutive_failures()); nullopt
  /// when nothing has failed yet. Thread-safe.
  [[nodiscard]] std::optional<InformerFailure> last_error() const;
  /// Failures since the last success (a list read, a watch event received); 0 when healthy.
  /// Thread-safe.
  [[nodiscard]] int consecutive_failures() const;
  /// How many failures that are not transient, in a row, make Next() throw (see Next()).
  [[nodiscard]] int failure_limit() const;

  /// Server-side duration of each watch request (a random value in [min, 2*min) like
  /// client-go's reflector). Set before the first Next().
  void set_watch_timeout(std::chrono::seconds min_timeout);
  /// A function applied to every object as it is decoded (each item of a list, the object of
  /// each ADDED, MODIFIED and DELETED watch event), before the informer stores it or returns it
  /// from Next() or Snapshot(), like client-go's SharedIndexInformer.SetTransform: drop what the
  /// caller never reads (managedFields, pod specs, …) so that neither the store nor the events
  /// carry it. It must keep metadata.namespace, name and resourceVersion. A transform that
  /// throws nlohmann's exceptions is treated like an undecodable event (the watch backs off and
  /// reopens). Set before the first Next().
  void set_transform(std::function<void(Json&)> transform);
  /// false: the store keeps only each object's metadata.namespace, name and resourceVersion
  /// (what the informer needs to report the differences after a relist and to skip replayed
  /// events), for a caller that keeps its own copy of what Next() returns: Snapshot() and the
  /// DELETED events of a relist then carry only those fields (and apiVersion/kind). Default
  /// true (the whole object). Set before the first Next().
  void set_keep_objects(bool keep);
  /// How many failures that are not transient, in a row, make Next() throw (at least 1;
  /// default kDefaultFailureLimit). Set before the first Next().
  void set_failure_limit(int limit);
  /// The backoff after a failure: `initial` (default 800 ms) doubling up to `max` (default
  /// 30 s), with jitter in [0.5, 1.5), as client-go's reflector does. Shorter waits are for
  /// tests; both are at least 1 ms, and max at least initial. Set before the first Next().
  void set_backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max);
  /// Called for every failure, on the thread running Next(), before the informer backs off
  /// or throws (like client-go's SetWatchErrorHandler): to log, count or surface failures as
  /// they happen. It must not block for long; what it throws is ignored. Set before the first
  /// Next().
  void set_error_handler(std::function<void(const InformerFailure&)> handler);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfk8s
