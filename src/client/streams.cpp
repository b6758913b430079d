// Watches, informers and pod logs: everything that reads a response as it arrives.

#include <fmt/format.h>

#include <atomic>
#include <deque>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "client/connection.hpp"
#include "tfk8s/client.hpp"

namespace tfk8s {

using internal::HttpStream;
using internal::Query;
using internal::RequestSpec;

namespace {

// What WatchStream and LogStream share: the open response, and whether it ended or was
// cancelled. Destroying it aborts the response.
struct OpenResponse {
  std::shared_ptr<HttpStream> stream;
  std::atomic<bool> cancelled{false};
  bool ended = false;
  std::string context;  // e.g. "watch pods in ns", for messages
  // No byte at all for this long ends the stream with a timeout (0: never).
  std::chrono::milliseconds idle_timeout{0};
  const char* idle_setting = "";  // the configuration field, for messages
  std::chrono::steady_clock::time_point last_data = std::chrono::steady_clock::now();

  OpenResponse() = default;
  OpenResponse(const OpenResponse&) = delete;
  OpenResponse& operator=(const OpenResponse&) = delete;
  ~OpenResponse() {
    if (stream) stream->Cancel();
  }

  // Thread-safe, idempotent: the reader sees `cancelled`, and Read() returns kEnd.
  void Cancel() {
    cancelled = true;
    stream->Cancel();
  }

  // Reads what arrived (waiting up to `wait`), keeping track of the last byte; throws a
  // TransportError of kind kTimeout, and ends the stream, when the idle bound is exceeded.
  HttpStream::ReadResult ReadSome(std::string* out, std::chrono::milliseconds wait) {
    const std::size_t before = out->size();
    auto r = stream->Read(out, wait);
    auto now = std::chrono::steady_clock::now();
    if (out->size() > before) {
      last_data = now;
    } else if (r == HttpStream::ReadResult::kTimeout && idle_timeout.count() > 0 &&
               now - last_data > idle_timeout) {
      // A silent peer (a dead connection the kernel has not noticed, a stuck proxy): give up
      // so the caller (an Informer) reconnects and resumes.
      ended = true;
      stream->Cancel();
      throw TransportError(fmt::format("timed out: {}: no data for {} ms ({})", context,
                                       idle_timeout.count(), idle_setting),
                           /*sent_request=*/true, ErrorKind::kTimeout);
    }
    return r;
  }
};

}  // namespace

// ---- WatchStream --------------------------------------------------------------------------

struct WatchStream::Impl : OpenResponse {
  explicit Impl(std::size_t max_line) : decoder(max_line) {}
  internal::WatchDecoder decoder;
  std::deque<WatchEvent> ready;
};

WatchStream::WatchStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WatchStream::WatchStream(WatchStream&&) noexcept = default;
WatchStream& WatchStream::operator=(WatchStream&&) noexcept = default;
WatchStream::~WatchStream() = default;

bool WatchStream::ended() const { return impl_->ended; }

void WatchStream::Cancel() { impl_->Cancel(); }

std::optional<WatchEvent> WatchStream::Next(std::chrono::milliseconds timeout) {
  if (impl_->cancelled) {
    impl_->ended = true;
    return std::nullopt;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (impl_->ready.empty()) {
    if (impl_->ended || impl_->cancelled) {
      impl_->ended = true;
      return std::nullopt;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    std::string chunk;
    auto r = impl_->ReadSome(&chunk, std::min(left, std::chrono::milliseconds(250)));
    if (!chunk.empty()) {
      std::vector<WatchEvent> events;
      try {
        events = impl_->decoder.Feed(chunk);
      } catch (const TransportError&) {
        // Undecodable or oversized: the rest of this stream cannot be trusted either.
        impl_->ended = true;
        impl_->stream->Cancel();
        throw;
      }
      for (auto& ev : events) impl_->ready.push_back(std::move(ev));
    }
    if (r == HttpStream::ReadResult::kEnd) {
      impl_->ended = true;
      if (impl_->ready.empty()) {
        if (auto error = impl_->stream->error(); error && !impl_->cancelled) {
          std::rethrow_exception(error);
        }
        return std::nullopt;
      }
    }
  }
  WatchEvent ev = std::move(impl_->ready.front());
  impl_->ready.pop_front();
  return ev;
}

WatchStream Client::Watch(const ResourceType& type, std::string_view ns,
                          const WatchOptions& options) {
  std::string n = type.namespaced ? std::string(ns) : std::string();
  Query q;
  q.Add("watch", "true");
  q.AddIf(!options.label_selector.empty(), "labelSelector", options.label_selector);
  q.AddIf(!options.field_selector.empty(), "fieldSelector", options.field_selector);
  q.AddIf(!options.resource_version.empty(), "resourceVersion", options.resource_version);
  q.AddIf(options.allow_bookmarks, "allowWatchBookmarks", "true");
  if (options.timeout_seconds) q.Add("timeoutSeconds", std::to_string(*options.timeout_seconds));
  RequestSpec spec;
  spec.path = type.CollectionPath(n) + q.str();
  spec.idempotent = true;
  spec.context = fmt::format("watch {}{}{}", type.plural, n.empty() ? "" : " in ", n);
  const ClientConfig& cfg = config();
  auto impl = std::make_unique<WatchStream::Impl>(cfg.max_stream_line_bytes);
  impl->context = spec.context;
  impl->idle_timeout = cfg.watch_idle_timeout;
  impl->idle_setting = "watch_idle_timeout";
  if (impl->idle_timeout.count() > 0 && options.timeout_seconds && *options.timeout_seconds > 0) {
    // The server ends such a watch after timeoutSeconds: silence well past that means the
    // connection is dead, whatever the configured bound.
    impl->idle_timeout = std::min<std::chrono::milliseconds>(
        impl->idle_timeout,
        std::chrono::seconds(*options.timeout_seconds) + std::chrono::seconds(30));
    impl->idle_setting = "watch_idle_timeout, or timeoutSeconds + 30 s";
  }
  impl->stream = conn_->OpenStream(spec);
  impl->last_data = std::chrono::steady_clock::now();
  return WatchStream(std::move(impl));
}

// ---- logs -----------------------------------------------------------------------------------

namespace {

// The request for the log of pod ns/pod.
RequestSpec LogRequest(std::string_view ns, std::string_view pod, const LogOptions& o) {
  Query q;
  q.AddIf(!o.container.empty(), "container", o.container);
  q.AddIf(o.follow, "follow", "true");
  if (o.tail_lines) q.Add("tailLines", std::to_string(*o.tail_lines));
  if (o.since_seconds) q.Add("sinceSeconds", std::to_string(*o.since_seconds));
  if (o.limit_bytes) q.Add("limitBytes", std::to_string(*o.limit_bytes));
  q.AddIf(o.timestamps, "timestamps", "true");
  q.AddIf(o.previous, "previous", "true");
  static const ResourceType kPods{"", "v1", "Pod", "pods", true};
  RequestSpec spec;
  spec.path = kPods.ObjectPath(ns, pod, "log") + q.str();
  spec.accept = "*/*";
  spec.idempotent = true;
  spec.context = fmt::format("logs of pod {}/{}", ns, pod);
  return spec;
}

}  // namespace

std::string Client::ReadLogs(std::string_view ns, std::string_view pod, LogOptions options) {
  options.follow = false;
  std::string n = ns.empty() ? default_namespace() : std::string(ns);
  return conn_->Execute(LogRequest(n, pod, options)).body;
}

struct LogStream::Impl : OpenResponse {
  std::string buffer;
  std::size_t max_line = 0;
};

LogStream::LogStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LogStream::LogStream(LogStream&&) noexcept = default;
LogStream& LogStream::operator=(LogStream&&) noexcept = default;
LogStream::~LogStream() = default;

bool LogStream::ended() const { return impl_->ended; }

void LogStream::Cancel() { impl_->Cancel(); }

std::optional<std::string> LogStream::NextLine(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto nl = impl_->buffer.find('\n');
    if (nl != std::string::npos) {
      std::string line = impl_->buffer.substr(0, nl);
      impl_->buffer.erase(0, nl + 1);
      return line;
    }
    if (impl_->ended || impl_->cancelled) {
      impl_->ended = true;
      if (!impl_->buffer.empty() && !impl_->cancelled) {  // a last line without '\n'
        std::string line;
        line.swap(impl_->buffer);
        return line;
      }
      return std::nullopt;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    const std::size_t scanned = impl_->buffer.size();
    auto r = impl_->ReadSome(&impl_->buffer, std::min(left, std::chrono::milliseconds(250)));
    if (impl_->max_line > 0 && impl_->buffer.size() > impl_->max_line &&
        impl_->buffer.find('\n', scanned) > impl_->max_line) {
      // The first line (nothing before `scanned` holds a newline) is already over the limit.
      impl_->ended = true;
      impl_->stream->Cancel();
      impl_->buffer.clear();
      throw ResponseTooLarge(
          fmt::format("{}: a line is larger than max_stream_line_bytes ({} bytes)", impl_->context,
                      impl_->max_line),
          "max_stream_line_bytes", impl_->max_line);
    }
    if (r == HttpStream::ReadResult::kEnd) {
      impl_->ended = true;
      if (auto error = impl_->stream->error(); error && !impl_->cancelled) {
        std::rethrow_exception(error);
      }
    }
  }
}

LogStream Client::StreamLogs(std::string_view ns, std::string_view pod, const LogOptions& options) {
  std::string n = ns.empty() ? default_namespace() : std::string(ns);
  const ClientConfig& cfg = config();
  auto impl = std::make_unique<LogStream::Impl>();
  RequestSpec spec = LogRequest(n, pod, options);
  impl->context = spec.context;
  impl->max_line = cfg.max_stream_line_bytes;
  impl->idle_timeout = cfg.log_idle_timeout;
  impl->idle_setting = "log_idle_timeout";
  impl->stream = conn_->OpenStream(spec);
  impl->last_data = std::chrono::steady_clock::now();
  return LogStream(std::move(impl));
}

// ---- Informer ------------------------------------------------------------------------------

namespace {

// Server objects are checked field by field here, so that a field of the wrong JSON type is a
// DecodeError naming it (the Informer backs off and retries) and never an nlohmann exception.
constexpr std::string_view kDecodeContext = "informer";

[[noreturn]] void WrongType(std::string_view field, const Json& value, std::string_view want) {
  throw DecodeError(fmt::format("{}: the server's field \"{}\" is {}, not {}", kDecodeContext,
                                field, value.type_name(), want),
                    std::string(field));
}

const Json& MetadataOf(const Json& object) {
  static const Json kEmpty = Json::object();
  if (!object.is_object()) WrongType("object", object, "an object");
  auto m = object.find("metadata");
  if (m == object.end() || m->is_null()) return kEmpty;
  if (!m->is_object()) WrongType("metadata", *m, "an object");
  return *m;
}

std::string StringAt(const Json& parent, const std::string& key, std::string_view path) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return {};
  if (!it->is_string()) WrongType(path, *it, "a string");
  return it->get<std::string>();
}

std::string KeyOf(const Json& object) {
  const Json& m = MetadataOf(object);
  std::string ns = StringAt(m, "namespace", "metadata.namespace");
  std::string name = StringAt(m, "name", "metadata.name");
  return ns.empty() ? name : ns + "/" + name;
}

std::string VersionOf(const Json& object) {
  return StringAt(MetadataOf(object), "resourceVersion", "metadata.resourceVersion");
}

// The HTTP code of a watch ERROR event's Status object (0 when absent).
int StatusCodeOf(const Json& status) {
  if (!status.is_object()) return 0;
  auto it = status.find("code");
  if (it == status.end() || it->is_null()) return 0;
  if (!it->is_number_integer()) WrongType("code", *it, "an integer");
  return it->get<int>();
}

// What the informer does after a failure. client-go's reflector retries every failure for ever
// and only logs it; tfk8s retries for ever only what time can heal, so that a certificate, a
// list over the size limit or an answer it cannot decode reaches the caller instead of
// stalling it silently.
enum class FailureClass {
  kTransient,  // the server or the network is down, slow or busy: retry for ever
  kBounded,    // retrying rarely helps: retry, but give up after failure_limit in a row
  kFatal,      // retrying cannot help (Forbidden, NotFound, a bad configuration …): give up now
};

FailureClass Classify(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const TlsError&) {
    // A wrong certificate never heals, but a handshake cut by a restarting server does: bounded,
    // not fatal at once.
    return FailureClass::kBounded;
  } catch (const ResponseTooLarge&) {
    return FailureClass::kBounded;  // the list will be as large next time, unless it shrinks
  } catch (const DecodeError&) {
    return FailureClass::kBounded;  // the same object comes back with the next list or watch
  } catch (const TransportError&) {
    return FailureClass::kTransient;  // refused, reset, DNS, timed out
  } catch (const TooManyRequests&) {
    return FailureClass::kTransient;
  } catch (const ServerError&) {
    return FailureClass::kTransient;
  } catch (const Timeout&) {  // 504 / reason Timeout: the server was too slow this time
    return FailureClass::kTransient;
  } catch (...) {
    return FailureClass::kFatal;
  }
}

}  // namespace

Json InformerFailure::ToJson() const {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch());
  return {{"kind", std::string(ToString(kind))},
          {"message", message},
          {"transient", transient},
          {"consecutive", consecutive},
          {"fatal", fatal},
          {"time", static_cast<double>(ms.count()) / 1000.0}};
}

struct Informer::Impl {
  Client client;
  ResourceType type;
  std::string ns;
  ListOptions selectors;
  std::chrono::seconds min_watch_timeout{300};
  std::function<void(Json&)> transform;  // applied to every decoded object (set_transform)
  bool keep_objects = true;              // false: the store keeps names and versions only
  bool backoff_before_watch = false;     // the watch opened right after a list failed

  mutable std::mutex mu;              // guards store, resource_version, watch
  std::map<std::string, Json> store;  // what the caller has been told about
  std::string resource_version;
  std::optional<WatchStream> watch;
  std::atomic<bool> cancelled{false};
  std::deque<WatchEvent> pending;  // events produced by a (re)list
  bool listed = false;
  // Set when the watch's version is gone (410): the next step is a relist, retried (with
  // backoff) until it succeeds, never a watch from the expired version.
  bool need_relist = false;
  int relists = 0;
  // What the caller is told of failures (last_error(), the error handler) and when Next() gives
  // up: failures since the last success, and failures that are not transient in a row.
  std::optional<InformerFailure> last_error;  // guarded by mu
  std::atomic<int> failures_since_success{0};
  int bounded_in_a_row = 0;
  int failure_limit = kDefaultFailureLimit;
  std::function<void(const InformerFailure&)> error_handler;
  // Failures in a row (watches that could not open, failed, or closed at once), and when the
  // last one was: the backoff grows with them and starts over after a healthy period.
  int consecutive_failures = 0;
  std::chrono::steady_clock::time_point last_failure{};
  std::chrono::steady_clock::time_point watch_opened{};
  bool watch_delivered = false;  // the current watch produced at least one event

  Impl(Client c, ResourceType t, std::string n, ListOptions s)
      : client(std::move(c)), type(std::move(t)), ns(std::move(n)), selectors(std::move(s)) {
    // Resuming from a saved version: the caller already has the state up to it.
    if (!selectors.resource_version.empty()) {
      resource_version = selectors.resource_version;
      listed = true;
    }
  }

  // What the store keeps of an object: all of it, or (keep_objects false) its identity.
  Json Stored(const Json& object) const {
    if (keep_objects) return object;
    const Json& m = MetadataOf(object);
    Json meta = Json::object();
    for (const char* k : {"namespace", "name", "resourceVersion"}) {
      if (auto it = m.find(k); it != m.end()) meta[k] = *it;
    }
    Json out = Json::object();
    for (const char* k : {"apiVersion", "kind"}) {
      if (auto it = object.find(k); it != object.end()) out[k] = *it;
    }
    out["metadata"] = std::move(meta);
    return out;
  }

  // Lists everything and queues the differences against the store as events.
  void Relist() {
    ListOptions o = selectors;
    o.resource_version.clear();  // a (re)list reads the latest state
    o.resource_version_match.clear();
    // Each item is completed and transformed as its page is decoded, so a transform that
    // trims objects keeps the decoded list small.
    Json list = client.ListAll(type, ns, o, 500, [this](Json& item) {
      if (!item.is_object()) WrongType("items[]", item, "an object");
      // List items carry no apiVersion/kind; restore them so events look like watch events.
      item["apiVersion"] = type.ApiVersion();
      item["kind"] = type.kind;
      if (transform) transform(item);
    });
    std::map<std::string, Json> fresh;
    if (!list.is_object()) WrongType("list", list, "an object");
    const std::string list_version = VersionOf(list);
    Json& items = list["items"];
    if (items.is_null()) items = Json::array();
    if (!items.is_array()) WrongType("items", items, "an array");
    for (auto& item : items) {
      std::string key = KeyOf(item);
      fresh.emplace(std::move(key), std::move(item));
    }
    list = Json();  // the rest of the list (its metadata) is not needed any more
    std::map<std::string, Json> next;
    std::lock_guard lock(mu);
    for (auto& [key, obj] : fresh) {
      auto it = store.find(key);
      Json stored = Stored(obj);
      if (it == store.end()) {
        pending.push_back({WatchEventType::kAdded, std::move(obj)});
      } else if (VersionOf(it->second) != VersionOf(obj)) {
        pending.push_back({WatchEventType::kModified, std::move(obj)});
      }
      next.emplace(key, std::move(stored));
    }
    for (auto& [key, obj] : store) {
      if (!next.count(key)) pending.push_back({WatchEventType::kDeleted, obj});
    }
    store = std::move(next);
    resource_version = list_version;
    if (listed) ++relists;
    listed = true;
  }

  void OpenWatch() {
    WatchOptions w;
    w.label_selector = selectors.label_selector;
    w.field_selector = selectors.field_selector;
    {
      std::lock_guard lock(mu);
      w.resource_version = resource_version;
    }
    w.allow_bookmarks = true;
    // Spread reconnects of many informers, like client-go's reflector.
    auto min = min_watch_timeout.count();
    w.timeout_seconds =
        static_cast<int>(min + static_cast<long>(internal::ConnectionOf(client)->Random01() *
                                                 static_cast<double>(min)));
    WatchStream s = client.Watch(type, ns, w);
    std::lock_guard lock(mu);
    watch_opened = std::chrono::steady_clock::now();
    watch_delivered = false;
    watch.emplace(std::move(s));
    if (cancelled) watch->Cancel();
  }

  // client-go's reflector: 0.8 s doubling to 30 s, with jitter; forgotten after 2 healthy
  // minutes (no failure), so one hiccup a day never waits long.
  static constexpr std::chrono::milliseconds kInitialBackoff{800};
  static constexpr std::chrono::milliseconds kMaxBackoff{30'000};
  static constexpr std::chrono::minutes kBackoffReset{2};
  std::chrono::milliseconds initial_backoff = kInitialBackoff;  // set_backoff
  std::chrono::milliseconds max_backoff = kMaxBackoff;
  // A watch the server ends sooner than this without sending anything is a failure (a
  // struggling server, a proxy cutting streams): reopening it at once would be a hot loop.
  static constexpr std::chrono::seconds kShortWatch{1};

  // The wait before the next attempt after a failure (counted here).
  std::chrono::milliseconds NextBackoff() {
    auto now = std::chrono::steady_clock::now();
    if (consecutive_failures > 0 && now - last_failure > kBackoffReset) consecutive_failures = 0;
    last_failure = now;
    ++consecutive_failures;
    auto base = std::min<std::chrono::milliseconds>(
        initial_backoff * (1 << std::min(consecutive_failures - 1, 6)), max_backoff);
    // Jitter in [0.5, 1.5) spreads the reconnects of many informers.
    return std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(
            static_cast<std::int64_t>(static_cast<double>(base.count()) *
                                      (0.5 + internal::ConnectionOf(client)->Random01()))),
        max_backoff);
  }

  void DropWatch() {
    std::lock_guard lock(mu);
    watch.reset();
  }

  // A list read, or a watch event received and applied: failures are no longer "in a row".
  void Succeeded() {
    bounded_in_a_row = 0;
    failures_since_success.store(0, std::memory_order_relaxed);
  }

  // Records a failure and tells the error handler; with `may_throw`, rethrows it when the
  // informer gives up on it (see Informer::Next()). Called on the thread running Next().
  void Failed(std::exception_ptr error, bool may_throw) {
    try {
      std::rethrow_exception(error);
    } catch (const Json::exception& e) {
      // Defence in depth: decoding is checked field by field, but a server answer (or a
      // transform) must never end the informer's caller with a JSON library exception.
      error = std::make_exception_ptr(DecodeError(
          fmt::format("{} {}: {}", kDecodeContext, type.plural, e.what()), std::string()));
    } catch (...) {
    }
    const FailureClass what_to_do = Classify(error);
    InformerFailure failure;
    failure.transient = what_to_do == FailureClass::kTransient;
    failure.consecutive = failures_since_success.fetch_add(1, std::memory_order_relaxed) + 1;
    // A transient failure between two others means the server's state changed (a restart
    // cutting a handshake, say): the run of failures that retrying cannot fix starts over.
    bounded_in_a_row = failure.transient ? 0 : bounded_in_a_row + 1;
    failure.fatal =
        may_throw && (what_to_do == FailureClass::kFatal ||
                      (what_to_do == FailureClass::kBounded && bounded_in_a_row >= failure_limit));
    if (failure.fatal && what_to_do == FailureClass::kBounded) {
      try {
        std::rethrow_exception(error);
      } catch (Error& e) {
        // Not yet shared with any other thread: the caller learns how often it was tried.
        e.set_attempts(bounded_in_a_row);
      }
    }
    std::tie(failure.kind, failure.message) = DescribeError(error);
    failure.error = error;
    failure.time = std::chrono::system_clock::now();
    {
      std::lock_guard lock(mu);
      last_error = failure;
    }
    if (error_handler) {
      try {
        error_handler(failure);
      } catch (...) {
        // The handler's failure is its own; the informer goes on.
      }
    }
    if (failure.fatal) {
      bounded_in_a_row = 0;  // a later Next() starts over
      std::rethrow_exception(error);
    }
  }

  void Backoff() {
    auto until = std::chrono::steady_clock::now() + NextBackoff();
    while (!cancelled && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // Applies a watch event to the store; returns false for events to swallow.
  bool Apply(WatchEvent& ev) {
    std::lock_guard lock(mu);
    std::string rv = VersionOf(ev.object);
    if (!rv.empty()) resource_version = rv;
    switch (ev.type) {
      case WatchEventType::kBookmark:
        return false;
      case WatchEventType::kAdded:
      case WatchEventType::kModified: {
        std::string key = KeyOf(ev.object);
        auto it = store.find(key);
        // After a resume, the server may replay an event we already reflected from a relist.
        if (it != store.end() && VersionOf(it->second) == rv) return false;
        ev.type = it == store.end() ? WatchEventType::kAdded : WatchEventType::kModified;
        store[key] = Stored(ev.object);
        return true;
      }
      case WatchEventType::kDeleted:
        return store.erase(KeyOf(ev.object)) > 0;
      default:
        return true;
    }
  }
};

Informer::Informer(Client client, ResourceType type, std::string ns, ListOptions selectors)
    : impl_(std::make_unique<Impl>(std::move(client), std::move(type), std::move(ns),
                                   std::move(selectors))) {}
Informer::Informer(Informer&&) noexcept = default;
Informer& Informer::operator=(Informer&&) noexcept = default;
Informer::~Informer() {
  if (impl_) Cancel();
}

void Informer::set_watch_timeout(std::chrono::seconds min_timeout) {
  impl_->min_watch_timeout = std::max(std::chrono::seconds(1), min_timeout);
}

void Informer::set_transform(std::function<void(Json&)> transform) {
  impl_->transform = std::move(transform);
}

void Informer::set_keep_objects(bool keep) { impl_->keep_objects = keep; }

void Informer::set_failure_limit(int limit) { impl_->failure_limit = std::max(1, limit); }

void Informer::set_backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max) {
  impl_->initial_backoff = std::max(std::chrono::milliseconds(1), initial);
  impl_->max_backoff = std::max(impl_->initial_backoff, max);
}

void Informer::set_error_handler(std::function<void(const InformerFailure&)> handler) {
  impl_->error_handler = std::move(handler);
}

void Informer::Cancel() {
  impl_->cancelled = true;
  std::lock_guard lock(impl_->mu);
  if (impl_->watch) impl_->watch->Cancel();
}

std::vector<Json> Informer::Snapshot() const {
  std::lock_guard lock(impl_->mu);
  std::vector<Json> out;
  for (const auto& [key, obj] : impl_->store) out.push_back(obj);
  return out;
}

std::string Informer::resource_version() const {
  std::lock_guard lock(impl_->mu);
  return impl_->resource_version;
}

int Informer::relist_count() const {
  std::lock_guard lock(impl_->mu);
  return impl_->relists;
}

std::optional<InformerFailure> Informer::last_error() const {
  std::lock_guard lock(impl_->mu);
  return impl_->last_error;
}

int Informer::consecutive_failures() const {
  return impl_->failures_since_success.load(std::memory_order_relaxed);
}

int Informer::failure_limit() const { return impl_->failure_limit; }

std::optional<WatchEvent> Informer::Next(std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!d.cancelled) {
    {
      std::lock_guard lock(d.mu);
      if (!d.pending.empty()) {
        WatchEvent ev = std::move(d.pending.front());
        d.pending.pop_front();
        return ev;
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;

    try {
      if (!d.listed || d.need_relist) {
        d.Relist();
        d.need_relist = false;
        d.Succeeded();
        // The watch is opened before the caller gets the list's events: once it has read them
        // (a Fleet's WaitForSync, say), a change the server accepts is already on its way,
        // not held until a later call opens the watch. A failure here does not hold the
        // list's events back: the next turn backs off first, then opens the watch again with
        // the usual handling (typed errors, relist on 410).
        try {
          d.OpenWatch();
        } catch (const Gone&) {
          d.need_relist = true;
        } catch (const Error&) {
          if (d.cancelled) break;
          d.Failed(std::current_exception(), /*may_throw=*/false);
          d.backoff_before_watch = true;
        }
        continue;
      }
      bool have_watch;
      {
        std::lock_guard lock(d.mu);
        have_watch = d.watch.has_value() && !d.watch->ended();
      }
      if (!have_watch) {
        if (d.backoff_before_watch) {
          d.backoff_before_watch = false;
          d.Backoff();
          continue;
        }
        d.OpenWatch();
        continue;
      }
      std::optional<WatchEvent> ev = d.watch->Next(std::min(left, std::chrono::milliseconds(500)));
      if (!ev) {
        if (d.watch->ended()) {
          // A clean close (server timeout): resume from the last version, nothing redelivered.
          auto lived = std::chrono::steady_clock::now() - d.watch_opened;
          bool short_lived = !d.watch_delivered && lived < Impl::kShortWatch;
          d.DropWatch();
          if (short_lived && !d.cancelled) {
            d.Failed(
                std::make_exception_ptr(TransportError(
                    fmt::format(
                        "watch {}: the server ended it after {} ms without an event", d.type.plural,
                        std::chrono::duration_cast<std::chrono::milliseconds>(lived).count()),
                    /*sent_request=*/true)),
                /*may_throw=*/false);
            d.Backoff();
          }
        }
        continue;
      }
      d.watch_delivered = true;
      if (ev->type == WatchEventType::kError) {
        int code = StatusCodeOf(ev->object);
        if (code == 410) {
          // Our resourceVersion was compacted away: list again (next turn, inside this try,
          // so a failing relist backs off like any failure) and report the differences.
          d.DropWatch();
          d.need_relist = true;
          continue;
        }
        ThrowApiError(code, ev->object.dump(), "watch " + d.type.plural);
      }
      const bool has_object = ev->type == WatchEventType::kAdded ||
                              ev->type == WatchEventType::kModified ||
                              ev->type == WatchEventType::kDeleted;
      if (d.transform && has_object) d.transform(ev->object);
      const bool deliver = d.Apply(*ev);
      // Only now, once the event is transformed and stored: an event that fails there comes
      // back when the watch is reopened, and must count as failing each time.
      d.Succeeded();
      if (deliver) return ev;
    } catch (const Gone&) {
      d.DropWatch();
      d.need_relist = true;
    } catch (...) {
      if (d.cancelled) break;
      d.DropWatch();
      d.Failed(std::current_exception(), /*may_throw=*/true);
      d.Backoff();
    }
  }
  return std::nullopt;
}

void Informer::Run(const std::function<bool(const WatchEvent&)>& on_event) {
  while (!impl_->cancelled) {
    auto ev = Next(std::chrono::seconds(1));
    if (ev && !on_event(*ev)) return;
  }
}

}  // namespace tfk8s
