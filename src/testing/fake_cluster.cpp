// tfk8s::testing::FakeCluster: an in-memory API server behind the HttpTransport interface, so a
// real tfk8s::Client (discovery cache, error mapping, watches, ApplyAll's threads) runs against
// it unchanged. Everything the server holds is guarded by one mutex: requests are short and
// tests are small, so simplicity beats concurrency here.

#include "tfk8s/testing/fake_cluster.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <deque>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "http/transport.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/yaml.hpp"

namespace tfk8s::testing {

namespace {

using internal::BufferedStream;
using internal::HttpRequest;
using internal::HttpResponse;

// A host that can never resolve (RFC 6761), so a request that somehow escaped the fake fails.
constexpr std::string_view kServerUrl = "http://fake-cluster.tfk8s.invalid";
constexpr const char* kJson = "application/json";
constexpr const char* kApplyPatch = "application/apply-patch+yaml";
// Watch history kept for resuming watches; older versions answer 410 Gone, like a compacted etcd.
constexpr std::size_t kMaxHistory = 10'000;

/// One kind the fake serves.
struct Resource {
  ResourceType type;
  bool has_status = false;      // a status subresource: writes to the object keep the status
  bool has_generation = false;  // metadata.generation counts spec changes (apps, batch, CRDs)
  [[nodiscard]] std::string storage_key() const { return type.group + "/" + type.plural; }
  // "jobs.batch", as the server names resources in messages.
  [[nodiscard]] std::string qualified() const {
    return type.group.empty() ? type.plural : type.plural + "." + type.group;
  }
};

// Answers a request with an error: thrown inside the server, turned into a Status response.
struct ApiFailure {
  int code;
  Json status;
};

Json StatusJson(int code, std::string_view reason, std::string_view message,
                Json details = nullptr) {
  Json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = std::move(details);
  return s;
}

[[noreturn]] void Fail(int code, std::string_view reason, std::string_view message,
                       Json details = nullptr) {
  throw ApiFailure{code, StatusJson(code, reason, message, std::move(details))};
}

Json Details(const Resource& r, std::string_view name) {
  Json d = {{"name", name}, {"kind", r.type.plural}};
  if (!r.type.group.empty()) d["group"] = r.type.group;
  return d;
}

[[noreturn]] void FailNotFound(const Resource& r, std::string_view name) {
  Fail(404, "NotFound", fmt::format("{} \"{}\" not found", r.qualified(), name), Details(r, name));
}

[[noreturn]] void FailConflict(const Resource& r, std::string_view name, std::string_view why) {
  Fail(409, "Conflict",
       fmt::format("Operation cannot be fulfilled on {} \"{}\": {}", r.qualified(), name, why),
       Details(r, name));
}

[[noreturn]] void FailNoRoute() {
  Fail(404, "NotFound", "the server could not find the requested resource");
}

[[noreturn]] void FailMethod(std::string_view method) {
  Fail(405, "MethodNotAllowed",
       fmt::format("the server does not allow this method on the requested resource ({})", method));
}

HttpResponse Respond(int status, std::string body, const char* content_type = kJson) {
  HttpResponse r;
  r.status = status;
  r.http_version = 20;
  r.headers["content-type"] = content_type;
  r.body = std::move(body);
  return r;
}

// ---- text -------------------------------------------------------------------------------------

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      int hi = HexValue(text[i + 1]);
      int lo = HexValue(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
}

std::vector<std::string> Split(std::string_view text, char separator) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    auto end = text.find(separator, start);
    out.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

std::string Trim(std::string_view text) {
  std::size_t b = 0;
  std::size_t e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  return std::string(text.substr(b, e - b));
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  if (query.empty()) return out;
  for (const auto& pair : Split(query, '&')) {
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    std::string key = PercentDecode(std::string_view(pair).substr(0, eq), true);
    std::string value =
        eq == std::string::npos ? "" : PercentDecode(std::string_view(pair).substr(eq + 1), true);
    out[key] = value;
  }
  return out;
}

std::string NowRfc3339() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

std::string StringOr(const Json& object, std::string_view key, std::string fallback = {}) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

std::string MetaString(const Json& object, std::string_view key) {
  auto m = object.find("metadata");
  return m == object.end() ? std::string() : StringOr(*m, key);
}

// ---- label selectors -------------------------------------------------------------------------
// The string syntax of k8s.io/apimachinery/pkg/labels: requirements joined by ',' (all must
// hold): `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, and `k>n`, `k<n`.

struct LabelRequirement {
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist, kGreater, kLess };
  Op op = Op::kExists;
  std::string key;
  std::vector<std::string> values;
};

class LabelSelectorParser {
 public:
  explicit LabelSelectorParser(std::string_view text) : text_(text) {}

  std::vector<LabelRequirement> Parse() {
    std::vector<LabelRequirement> out;
    SkipSpace();
    if (AtEnd()) return out;  // the empty selector selects everything
    while (true) {
      out.push_back(Requirement());
      SkipSpace();
      if (AtEnd()) return out;
      Expect(',');
    }
  }

 private:
  [[noreturn]] void Error(std::string_view why) const {
    Fail(400, "BadRequest",
         fmt::format("unable to parse requirement: {} at position {} of \"{}\"", why, pos_, text_));
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void Expect(char c) {
    SkipSpace();
    if (Peek() != c) Error(fmt::format("expected '{}'", c));
    ++pos_;
  }
  static bool IsNameChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
           c == '/';
  }
  std::string Word() {
    SkipSpace();
    std::size_t start = pos_;
    while (!AtEnd() && IsNameChar(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  std::string Key() {
    std::string key = Word();
    if (key.empty()) Error("expected a label key");
    return key;
  }
  std::string Value() {
    std::string value = Word();
    if (value.find('/') != std::string::npos) Error("a label value cannot contain '/'");
    return value;
  }

  LabelRequirement Requirement() {
    LabelRequirement r;
    SkipSpace();
    if (Peek() == '!') {
      ++pos_;
      r.op = LabelRequirement::Op::kDoesNotExist;
      r.key = Key();
      return r;
    }
    r.key = Key();
    SkipSpace();
    if (AtEnd() || Peek() == ',') return r;  // existence
    if (text_.substr(pos_, 2) == "==" || text_.substr(pos_, 2) == "!=") {
      r.op = text_[pos_] == '=' ? LabelRequirement::Op::kEquals : LabelRequirement::Op::kNotEquals;
      pos_ += 2;
      r.values.push_back(Value());
    } else if (Peek() == '=') {
      ++pos_;
      r.op = LabelRequirement::Op::kEquals;
      r.values.push_back(Value());
    } else if (Peek() == '>' || Peek() == '<') {
      r.op = Peek() == '>' ? LabelRequirement::Op::kGreater : LabelRequirement::Op::kLess;
      ++pos_;
      std::string v = Value();
      if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c)) || c == '-';
          })) {
        Error("'>' and '<' need an integer value");
      }
      r.values.push_back(v);
    } else {
      std::string op = Word();
      if (op != "in" && op != "notin") Error("expected one of =, ==, !=, in, notin, >, <");
      r.op = op == "in" ? LabelRequirement::Op::kIn : LabelRequirement::Op::kNotIn;
      Expect('(');
      while (true) {
        r.values.push_back(Value());
        SkipSpace();
        if (Peek() == ')') break;
        Expect(',');
      }
      ++pos_;
      if (r.values.size() == 1 && r.values.front().empty()) {
        Error("for 'in' and 'notin' the set of values cannot be empty");
      }
    }
    return r;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

bool Matches(const std::vector<LabelRequirement>& selector, const Json& object) {
  const Json* labels = nullptr;
  if (auto m = object.find("metadata"); m != object.end() && m->is_object()) {
    if (auto l = m->find("labels"); l != m->end() && l->is_object()) labels = &*l;
  }
  for (const auto& r : selector) {
    std::optional<std::string> value;
    if (labels) {
      if (auto it = labels->find(r.key); it != labels->end() && it->is_string()) {
        value = it->get<std::string>();
      }
    }
    const bool in_values =
        value && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
    bool ok = false;
    switch (r.op) {
      case LabelRequirement::Op::kEquals:
      case LabelRequirement::Op::kIn:
        ok = in_values;
        break;
      // As in Kubernetes: an object without the label satisfies != and notin.
      case LabelRequirement::Op::kNotEquals:
      case LabelRequirement::Op::kNotIn:
        ok = !in_values;
        break;
      case LabelRequirement::Op::kExists:
        ok = value.has_value();
        break;
      case LabelRequirement::Op::kDoesNotExist:
        ok = !value.has_value();
        break;
      case LabelRequirement::Op::kGreater:
      case LabelRequirement::Op::kLess: {
        if (!value) break;
        try {
          std::size_t used = 0;
          long long have = std::stoll(*value, &used);
          if (used != value->size()) break;
          long long bound = std::stoll(r.values.front());
          ok = r.op == LabelRequirement::Op::kGreater ? have > bound : have < bound;
        } catch (const std::exception&) {
        }
        break;
      }
    }
    if (!ok) return false;
  }
  return true;
}

// ---- field selectors -------------------------------------------------------------------------
// `path=value`, `path==value`, `path!=value` joined by ','. The server supports a few paths per
// kind (metadata.name, metadata.namespace, status.phase, spec.nodeName, involvedObject.name …)
// and refuses others; the fake evaluates any dotted path in the object, which gives the same
// answer for every supported path (a missing field reads as "").

struct FieldRequirement {
  std::vector<std::string> path;
  bool equals = true;
  std::string value;
};

std::vector<FieldRequirement> ParseFieldSelector(std::string_view text) {
  std::vector<FieldRequirement> out;
  if (Trim(text).empty()) return out;
  for (const auto& term : Split(text, ',')) {
    FieldRequirement r;
    std::size_t op = term.find("!=");
    std::size_t value_at = 0;
    if (op != std::string::npos) {
      r.equals = false;
      value_at = op + 2;
    } else if ((op = term.find("==")) != std::string::npos) {
      value_at = op + 2;
    } else if ((op = term.find('=')) != std::string::npos) {
      value_at = op + 1;
    } else {
      Fail(400, "BadRequest", fmt::format("invalid field selector: \"{}\" has no operator", term));
    }
    std::string path = Trim(std::string_view(term).substr(0, op));
    if (path.empty()) Fail(400, "BadRequest", fmt::format("invalid field selector: \"{}\"", term));
    r.path = Split(path, '.');
    r.value = Trim(std::string_view(term).substr(value_at));
    out.push_back(std::move(r));
  }
  return out;
}

bool Matches(const std::vector<FieldRequirement>& selector, const Json& object) {
  for (const auto& r : selector) {
    const Json* at = &object;
    for (const auto& step : r.path) {
      if (!at->is_object()) {
        at = nullptr;
        break;
      }
      auto it = at->find(step);
      if (it == at->end()) {
        at = nullptr;
        break;
      }
      at = &*it;
    }
    std::string value;
    if (at && at->is_string()) {
      value = at->get<std::string>();
    } else if (at && !at->is_null() && !at->is_structured()) {
      value = at->dump();
    }
    if ((value == r.value) != r.equals) return false;
  }
  return true;
}

struct Selectors {
  std::vector<LabelRequirement> labels;
  std::vector<FieldRequirement> fields;
  [[nodiscard]] bool Match(const Json& object) const {
    return Matches(labels, object) && Matches(fields, object);
  }
};

Selectors SelectorsOf(const std::map<std::string, std::string>& query) {
  Selectors s;
  if (auto it = query.find("labelSelector"); it != query.end()) {
    s.labels = LabelSelectorParser(it->second).Parse();
  }
  if (auto it = query.find("fieldSelector"); it != query.end()) {
    s.fields = ParseFieldSelector(it->second);
  }
  return s;
}

// The object without metadata and status: what a change of generation compares.
Json SpecPart(Json object) {
  if (object.is_object()) {
    object.erase("metadata");
    object.erase("status");
    object.erase("apiVersion");
    object.erase("kind");
  }
  return object;
}

std::string EventLine(std::string_view type, const Json& object) {
  Json event = {{"type", type}, {"object", object}};
  return event.dump() + "\n";
}

}  // namespace

// ---- the server --------------------------------------------------------------------------------

class FakeCluster::Server : public internal::HttpTransport {
 public:
  Server() {
    auto add = [this](std::string group, std::string version, std::string kind, std::string plural,
                      bool namespaced, bool has_status) {
      Resource r;
      r.type = ResourceType{std::move(group), std::move(version), std::move(kind),
                            std::move(plural), namespaced};
      r.has_status = has_status;
      r.has_generation = r.type.group == "apps" || r.type.group == "batch";
      resources_.push_back(std::move(r));
    };
    add("", "v1", "Namespace", "namespaces", false, true);
    add("", "v1", "Node", "nodes", false, true);
    add("", "v1", "ConfigMap", "configmaps", true, false);
    add("", "v1", "Secret", "secrets", true, false);
    add("", "v1", "Service", "services", true, true);
    add("", "v1", "Pod", "pods", true, true);
    add("", "v1", "Event", "events", true, false);
    add("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true, true);
    add("", "v1", "ResourceQuota", "resourcequotas", true, true);
    add("", "v1", "LimitRange", "limitranges", true, false);
    add("", "v1", "ServiceAccount", "serviceaccounts", true, false);
    add("apps", "v1", "StatefulSet", "statefulsets", true, true);
    add("apps", "v1", "Deployment", "deployments", true, true);
    add("apps", "v1", "ReplicaSet", "replicasets", true, true);
    add("batch", "v1", "Job", "jobs", true, true);
    add("batch", "v1beta1", "CronJob", "cronjobs", true, true);
    add("storage.k8s.io", "v1", "StorageClass", "storageclasses", false, false);
    add("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", false, false);
    add("rbac.authorization.k8s.io", "v1", "Role", "roles", true, false);
    add("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true, false);
    for (const char* ns : {"default", "kube-system", "kube-public"}) {
      Store({{"apiVersion", "v1"},
             {"kind", "Namespace"},
             {"metadata", {{"name", ns}}},
             {"status", {{"phase", "Active"}}}},
            /*keep_identity=*/false);
    }
  }

  ~Server() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      for (auto& w : watchers_) {
        if (auto s = w.stream.lock()) s->Finish(nullptr);
      }
      watchers_.clear();
    }
    timer_cv_.notify_all();
    if (timer_.joinable()) timer_.join();
  }

  std::future<HttpResponse> Send(HttpRequest request) override {
    std::promise<HttpResponse> p;
    p.set_value(*Serve(request, nullptr));
    return p.get_future();
  }

  std::shared_ptr<internal::HttpStream> Open(HttpRequest request) override {
    auto stream = std::make_shared<BufferedStream>();
    if (auto r = Serve(request, stream)) {
      stream->SetHeaders(r->status, r->headers);
      stream->Push(r->body);
      stream->Finish(nullptr);
    }
    return stream;
  }

  // ---- the test's side ---------------------------------------------------------------------

  void Add(Json object) {
    std::lock_guard lock(mu_);
    Store(std::move(object), /*keep_identity=*/true);
  }

  void AddResource(const ResourceType& type) {
    std::lock_guard lock(mu_);
    if (FindResource(type.group, type.version, type.plural)) return;
    Resource r;
    r.type = type;
    r.has_status = true;  // custom resources usually enable the status subresource
    r.has_generation = true;
    resources_.push_back(std::move(r));
  }

  void FailNext(int http_code, const std::string& reason, const std::string& message) {
    std::lock_guard lock(mu_);
    failures_.push_back(StatusJson(http_code, reason, message));
  }

  std::optional<Json> Find(std::string_view api_version, std::string_view kind, std::string_view ns,
                           std::string_view name) const {
    std::lock_guard lock(mu_);
    const Resource& r = ResourceForTest(api_version, kind);
    const auto& objects = Objects(r);
    auto it = objects.find(Key(r, ns, name));
    if (it == objects.end()) return std::nullopt;
    return Output(r, it->second);
  }

  std::vector<Json> List(std::string_view api_version, std::string_view kind,
                         std::string_view ns) const {
    std::lock_guard lock(mu_);
    const Resource& r = ResourceForTest(api_version, kind);
    std::vector<Json> out;
    for (const auto& [key, object] : Objects(r)) {
      if (r.type.namespaced && !ns.empty() && key.first != ns) continue;
      out.push_back(Output(r, object));
    }
    return out;
  }

  std::vector<RecordedRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

  void ClearRequests() {
    std::lock_guard lock(mu_);
    requests_.clear();
  }

 private:
  using ObjectKey = std::pair<std::string, std::string>;  // namespace ("" if none), name
  using ObjectMap = std::map<ObjectKey, Json>;

  struct Event {
    std::int64_t resource_version;
    std::string storage_key;
    std::string type;  // ADDED, MODIFIED, DELETED
    Json object;       // as the watch sends it
    Json previous;     // the object before a MODIFIED (selectors may stop or start matching)
  };

  struct Watcher {
    std::weak_ptr<BufferedStream> stream;
    std::string storage_key;
    std::string ns;  // "" = every namespace
    Selectors selectors;
    std::optional<std::chrono::steady_clock::time_point> deadline;
  };

  // ---- lookup (callers hold mu_) ------------------------------------------------------------

  const Resource* FindResource(std::string_view group, std::string_view version,
                               std::string_view plural) const {
    for (const auto& r : resources_) {
      if (r.type.group == group && r.type.version == version && r.type.plural == plural) return &r;
    }
    return nullptr;
  }

  const Resource* FindKind(std::string_view api_version, std::string_view kind) const {
    for (const auto& r : resources_) {
      if (r.type.ApiVersion() == api_version && r.type.kind == kind) return &r;
    }
    return nullptr;
  }

  const Resource& ResourceForTest(std::string_view api_version, std::string_view kind) const {
    const Resource* r = FindKind(api_version, kind);
    if (!r) {
      throw ValidationError("kind", fmt::format("{}/{}", api_version, kind),
                            "the fake cluster does not serve this kind (see AddResource)");
    }
    return *r;
  }

  bool GroupVersionServed(std::string_view group, std::string_view version) const {
    return std::any_of(resources_.begin(), resources_.end(), [&](const Resource& r) {
      return r.type.group == group && r.type.version == version;
    });
  }

  ObjectMap& Objects(const Resource& r) { return objects_[r.storage_key()]; }
  const ObjectMap& Objects(const Resource& r) const {
    static const ObjectMap kEmpty;
    auto it = objects_.find(r.storage_key());
    return it == objects_.end() ? kEmpty : it->second;
  }

  static ObjectKey Key(const Resource& r, std::string_view ns, std::string_view name) {
    return {r.type.namespaced ? std::string(ns) : std::string(), std::string(name)};
  }

  // The object as the server returns it: with the served apiVersion and kind.
  static Json Output(const Resource& r, Json object) {
    object["apiVersion"] = r.type.ApiVersion();
    object["kind"] = r.type.kind;
    return object;
  }

  std::string NextResourceVersion() { return std::to_string(++resource_version_); }

  std::string NextUid() {
    // Deterministic, so failing tests print the same values run after run.
    return fmt::format("fa4ec1a5-0000-4000-8000-{:012x}", ++uid_counter_);
  }

  // ---- writes (callers hold mu_) ------------------------------------------------------------

  // Kubernetes' defaulting of Services that code under test may read back: a cluster IP and
  // node ports (DevInstance's access information comes from them).
  void DefaultService(Json& service) {
    Json& spec = service["spec"];
    if (!spec.is_object()) spec = Json::object();
    std::string type = StringOr(spec, "type", "ClusterIP");
    spec["type"] = type;
    if (StringOr(spec, "clusterIP").empty()) {
      ++cluster_ips_;
      spec["clusterIP"] = fmt::format("10.96.{}.{}", cluster_ips_ / 250, cluster_ips_ % 250 + 1);
    }
    if (!spec.contains("ports") || !spec["ports"].is_array()) return;
    for (auto& port : spec["ports"]) {
      if (!port.is_object()) continue;
      if (!port.contains("protocol")) port["protocol"] = "TCP";
      if (!port.contains("targetPort") && port.contains("port")) port["targetPort"] = port["port"];
      if ((type == "NodePort" || type == "LoadBalancer") && !port.contains("nodePort")) {
        port["nodePort"] = 30000 + (node_ports_++ % 2768);
      }
    }
  }

  // Stores an object coming from the test (Add) or from a create; returns the stored object.
  // `keep_identity`: keep a given uid / creationTimestamp (Add), else assign them (create).
  Json Store(Json object, bool keep_identity) {
    if (!object.is_object()) throw ValidationError("object", "", "an object must be a JSON object");
    std::string api_version = StringOr(object, "apiVersion");
    std::string kind = StringOr(object, "kind");
    if (api_version.empty()) throw ValidationError("apiVersion", "", "an object needs apiVersion");
    if (kind.empty()) throw ValidationError("kind", "", "an object needs kind");
    const Resource& r = ResourceForTest(api_version, kind);
    Json& md = object["metadata"];
    if (!md.is_object()) throw ValidationError("metadata", "", "an object needs metadata");
    std::string name = StringOr(md, "name");
    if (name.empty()) throw ValidationError("metadata.name", "", "an object needs a name");
    if (r.type.namespaced) {
      if (StringOr(md, "namespace").empty()) md["namespace"] = "default";
    } else {
      md.erase("namespace");
    }
    ObjectKey key = Key(r, StringOr(md, "namespace"), name);
    auto& objects = Objects(r);
    auto existing = objects.find(key);
    // Add() over an existing object keeps its identity unless the test gives another one.
    const std::string old_uid =
        existing == objects.end() ? "" : MetaString(existing->second, "uid");
    const std::string old_created =
        existing == objects.end() ? "" : MetaString(existing->second, "creationTimestamp");
    if (!keep_identity || StringOr(md, "uid").empty()) {
      md["uid"] = keep_identity && !old_uid.empty() ? old_uid : NextUid();
    }
    if (!keep_identity || StringOr(md, "creationTimestamp").empty()) {
      md["creationTimestamp"] = keep_identity && !old_created.empty() ? old_created : NowRfc3339();
    }
    if (r.has_generation && !md.contains("generation")) md["generation"] = 1;
    if (r.type.group.empty() && r.type.kind == "Service") DefaultService(object);
    md["resourceVersion"] = NextResourceVersion();
    Json previous = existing == objects.end() ? Json() : existing->second;
    objects[key] = object;
    Notify(r, previous.is_null() ? "ADDED" : "MODIFIED", object, previous);
    return object;
  }

  // Records the event and sends it to the watches that see it.
  void Notify(const Resource& r, const std::string& type, const Json& object,
              const Json& previous) {
    Event e{resource_version_, r.storage_key(), type, Output(r, object),
            previous.is_null() ? Json() : Output(r, previous)};
    for (auto it = watchers_.begin(); it != watchers_.end();) {
      auto stream = it->stream.lock();
      if (!stream || stream->cancelled()) {
        it = watchers_.erase(it);  // the reader went away: nothing to clean up but the entry
        continue;
      }
      if (auto line = LineFor(*it, e)) stream->Push(*line);
      ++it;
    }
    history_.push_back(std::move(e));
    while (history_.size() > kMaxHistory) {
      compacted_ = history_.front().resource_version;
      history_.pop_front();
    }
  }

  // What a watch sees of an event: a change of labels can move an object into or out of the
  // selection, which the server reports as ADDED or DELETED.
  static std::optional<std::string> LineFor(const Watcher& w, const Event& e) {
    if (e.storage_key != w.storage_key) return std::nullopt;
    if (!w.ns.empty() && MetaString(e.object, "namespace") != w.ns) return std::nullopt;
    const bool now = w.selectors.Match(e.object);
    if (e.type != "MODIFIED") {
      if (!now) return std::nullopt;
      return EventLine(e.type, e.object);
    }
    const bool before = !e.previous.is_null() && w.selectors.Match(e.previous);
    if (now && before) return EventLine("MODIFIED", e.object);
    if (now) return EventLine("ADDED", e.object);
    if (before) return EventLine("DELETED", e.object);
    return std::nullopt;
  }

  // Removes an object; cascades to its dependents (the garbage collector's work, done at once)
  // unless `orphan`, in which case their ownerReferences to it are dropped.
  Json Remove(const Resource& r, const ObjectKey& key, bool orphan) {
    auto& objects = Objects(r);
    auto it = objects.find(key);
    if (it == objects.end()) return Json();
    Json removed = std::move(it->second);
    objects.erase(it);
    removed["metadata"]["resourceVersion"] = NextResourceVersion();
    Notify(r, "DELETED", removed, Json());
    const std::string uid = MetaString(removed, "uid");
    const bool is_namespace = r.type.group.empty() && r.type.kind == "Namespace";
    for (const auto& other : resources_) {
      std::vector<ObjectKey> doomed;
      for (auto& [other_key, object] : Objects(other)) {
        if (is_namespace && other.type.namespaced && other_key.first == key.second) {
          doomed.push_back(other_key);
          continue;
        }
        auto& md = object["metadata"];
        if (!md.contains("ownerReferences") || !md["ownerReferences"].is_array()) continue;
        auto& refs = md["ownerReferences"];
        const bool owned = std::any_of(
            refs.begin(), refs.end(), [&](const Json& ref) { return StringOr(ref, "uid") == uid; });
        if (!owned) continue;
        if (!orphan) {
          doomed.push_back(other_key);
          continue;
        }
        Json previous = object;
        Json kept = Json::array();
        for (const auto& ref : refs) {
          if (StringOr(ref, "uid") != uid) kept.push_back(ref);
        }
        if (kept.empty()) {
          md.erase("ownerReferences");
        } else {
          refs = std::move(kept);
        }
        md["resourceVersion"] = NextResourceVersion();
        Notify(other, "MODIFIED", object, previous);
      }
      for (const auto& k : doomed) Remove(other, k, false);
    }
    return removed;
  }

  // ---- request handling -------------------------------------------------------------------

  // Answers one request; returns nullopt when it took `stream` over (a live watch).
  std::optional<HttpResponse> Serve(const HttpRequest& request,
                                    const std::shared_ptr<BufferedStream>& stream) {
    std::lock_guard lock(mu_);
    std::string_view url = request.url;
    auto scheme = url.find("://");
    auto path_start = url.find('/', scheme == std::string_view::npos ? 0 : scheme + 3);
    std::string_view target = path_start == std::string_view::npos ? "/" : url.substr(path_start);
    auto q = target.find('?');
    RecordedRequest recorded;
    recorded.method = request.method;
    recorded.path = std::string(target.substr(0, q));
    recorded.query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
    for (const auto& h : request.headers) {
      constexpr std::string_view kContentType = "content-type:";
      if (h.size() > kContentType.size() &&
          std::equal(kContentType.begin(), kContentType.end(), h.begin(), [](char a, char b) {
            return a == std::tolower(static_cast<unsigned char>(b));
          })) {
        recorded.content_type = Trim(std::string_view(h).substr(kContentType.size()));
      }
    }
    if (!request.body.empty()) {
      recorded.body = Json::parse(request.body, nullptr, false);
      if (recorded.body.is_discarded()) recorded.body = nullptr;
    }
    requests_.push_back(recorded);
    try {
      return Route(recorded, request.body, stream);
    } catch (const ApiFailure& f) {
      return Respond(f.code, f.status.dump());
    } catch (const ValidationError& e) {
      // An object the client sent that the fake cannot store (a missing kind, say).
      return Respond(400, StatusJson(400, "BadRequest", e.what()).dump());
    } catch (const std::exception& e) {
      // A body of an unexpected shape (a string where an object belongs …): answered like a
      // server bug rather than taking the client's thread down.
      return Respond(500, StatusJson(500, "InternalError",
                                     fmt::format("the fake cluster failed: {}", e.what()))
                              .dump());
    }
  }

  std::optional<HttpResponse> Route(const RecordedRequest& req, const std::string& raw_body,
                                    const std::shared_ptr<BufferedStream>& stream) {
    std::vector<std::string> segments;
    for (const auto& s : Split(req.path, '/')) {
      if (!s.empty()) segments.push_back(PercentDecode(s, false));
    }
    const bool discovery = req.path == "/version" || segments.empty() ||
                           (segments[0] == "api" && segments.size() <= 2) ||
                           (segments[0] == "apis" && segments.size() <= 3);
    if (!discovery && !failures_.empty()) {
      Json status = std::move(failures_.front());
      failures_.pop_front();
      return Respond(status.value("code", 500), status.dump());
    }
    if (req.path == "/version") return Respond(200, VersionDocument().dump());
    if (segments.empty()) FailNoRoute();
    std::string group;
    std::string version;
    std::size_t rest_at = 0;
    if (segments[0] == "api") {
      if (segments.size() == 1) return Respond(200, CoreVersions().dump());
      version = segments[1];
      rest_at = 2;
    } else if (segments[0] == "apis") {
      if (segments.size() == 1) return Respond(200, GroupList().dump());
      group = segments[1];
      if (segments.size() == 2) return Respond(200, GroupDocument(group).dump());
      version = segments[2];
      rest_at = 3;
    } else {
      FailNoRoute();
    }
    if (!GroupVersionServed(group, version)) FailNoRoute();
    std::vector<std::string> rest(segments.begin() + static_cast<std::ptrdiff_t>(rest_at),
                                  segments.end());
    if (rest.empty()) {
      if (req.method != "GET") FailMethod(req.method);
      return Respond(200, ResourceList(group, version).dump());
    }
    std::string ns;
    if (rest[0] == "namespaces" && rest.size() >= 3) {
      if (const Resource* inner = FindResource(group, version, rest[2]);
          inner && inner->type.namespaced) {
        ns = rest[1];
        rest.erase(rest.begin(), rest.begin() + 2);
      }
    }
    const Resource* r = FindResource(group, version, rest[0]);
    if (!r) FailNoRoute();
    if (r->type.namespaced && ns.empty() && rest.size() > 1) FailNoRoute();
    const std::string name = rest.size() > 1 ? rest[1] : "";
    std::string subresource;
    for (std::size_t i = 2; i < rest.size(); ++i) {
      subresource += (subresource.empty() ? "" : "/") + rest[i];
    }
    const auto query = ParseQuery(req.query);
    const bool dry_run = query.count("dryRun") > 0;
    const std::string& method = req.method;

    if (name.empty()) {
      if (method == "GET") {
        auto w = query.find("watch");
        if (w != query.end() && (w->second == "true" || w->second == "1")) {
          return Watch(*r, ns, query, stream);
        }
        return Respond(200, ListOf(*r, ns, query).dump());
      }
      if (method == "POST" && (!r->type.namespaced || !ns.empty())) {
        return Respond(201, Create(*r, ns, Body(req, raw_body), dry_run).dump());
      }
      if (method == "DELETE" && (!r->type.namespaced || !ns.empty())) {
        return Respond(200, DeleteCollection(*r, ns, query, req.body).dump());
      }
      FailMethod(method);
    }
    if (subresource.empty()) {
      if (method == "GET") return Respond(200, Get(*r, ns, name).dump());
      if (method == "PUT") {
        return Respond(200, Replace(*r, ns, name, Body(req, raw_body), false, dry_run).dump());
      }
      if (method == "PATCH") return Patch(*r, ns, name, req, raw_body, false, dry_run);
      if (method == "DELETE") return Respond(200, Delete(*r, ns, name, req.body, dry_run).dump());
      FailMethod(method);
    }
    if (subresource == "status" && r->has_status) {
      if (method == "GET") return Respond(200, Get(*r, ns, name).dump());
      if (method == "PUT") {
        return Respond(200, Replace(*r, ns, name, Body(req, raw_body), true, dry_run).dump());
      }
      if (method == "PATCH") return Patch(*r, ns, name, req, raw_body, true, dry_run);
      FailMethod(method);
    }
    if (subresource == "log" && r->type.group.empty() && r->type.kind == "Pod") {
      if (method != "GET") FailMethod(method);
      (void)Get(*r, ns, name);                // 404 for a pod that does not exist
      return Respond(200, "", "text/plain");  // no container ever ran: an empty log
    }
    FailNoRoute();
  }

  static Json Body(const RecordedRequest& req, const std::string& raw) {
    if (req.body.is_object()) return req.body;
    if (req.content_type == kApplyPatch && !raw.empty()) {
      try {
        Json parsed = FromYaml(raw);
        if (parsed.is_object()) return parsed;
      } catch (const ValidationError&) {
      }
    }
    Fail(400, "BadRequest", "the request body is not a JSON (or YAML) object");
  }

  // ---- discovery ------------------------------------------------------------------------------

  static Json VersionDocument() {
    return {{"major", "1"},
            {"minor", "20"},
            {"gitVersion", "v1.20.2"},
            {"gitTreeState", "clean"},
            {"goVersion", "go1.15.5"},
            {"compiler", "gc"},
            {"platform", "linux/amd64"}};
  }

  static Json CoreVersions() {
    return {{"kind", "APIVersions"},
            {"versions", {"v1"}},
            {"serverAddressByClientCIDRs",
             {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1:6443"}}}}};
  }

  // A group's versions, preferred (the first one served) first.
  std::vector<std::string> VersionsOf(std::string_view group) const {
    std::vector<std::string> versions;
    for (const auto& r : resources_) {
      if (r.type.group == group &&
          std::find(versions.begin(), versions.end(), r.type.version) == versions.end()) {
        versions.push_back(r.type.version);
      }
    }
    return versions;
  }

  Json GroupDocument(std::string_view group) const {
    std::vector<std::string> versions = VersionsOf(group);
    if (group.empty() || versions.empty()) FailNoRoute();
    Json g = {{"name", group}, {"versions", Json::array()}};
    for (const auto& v : versions) {
      g["versions"].push_back({{"groupVersion", std::string(group) + "/" + v}, {"version", v}});
    }
    g["preferredVersion"] = g["versions"].front();
    return g;
  }

  Json GroupList() const {
    Json list = {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", Json::array()}};
    std::vector<std::string> groups;
    for (const auto& r : resources_) {
      if (!r.type.group.empty() &&
          std::find(groups.begin(), groups.end(), r.type.group) == groups.end()) {
        groups.push_back(r.type.group);
      }
    }
    for (const auto& g : groups) {
      Json doc = GroupDocument(g);
      doc.erase("kind");
      list["groups"].push_back(std::move(doc));
    }
    return list;
  }

  Json ResourceList(std::string_view group, std::string_view version) const {
    const std::string gv =
        group.empty() ? std::string(version) : std::string(group) + "/" + std::string(version);
    Json list = {{"kind", "APIResourceList"},
                 {"apiVersion", "v1"},
                 {"groupVersion", gv},
                 {"resources", Json::array()}};
    for (const auto& r : resources_) {
      if (r.type.group != group || r.type.version != version) continue;
      list["resources"].push_back(
          {{"name", r.type.plural},
           {"singularName", ""},
           {"namespaced", r.type.namespaced},
           {"kind", r.type.kind},
           {"verbs",
            {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}}});
      if (r.has_status) {
        list["resources"].push_back({{"name", r.type.plural + "/status"},
                                     {"singularName", ""},
                                     {"namespaced", r.type.namespaced},
                                     {"kind", r.type.kind},
                                     {"verbs", {"get", "patch", "update"}}});
      }
      if (r.type.group.empty() && r.type.kind == "Pod") {
        list["resources"].push_back({{"name", "pods/log"},
                                     {"singularName", ""},
                                     {"namespaced", true},
                                     {"kind", "Pod"},
                                     {"verbs", {"get"}}});
      }
    }
    return list;
  }

  // ---- verbs ----------------------------------------------------------------------------------

  Json Get(const Resource& r, const std::string& ns, const std::string& name) const {
    const auto& objects = Objects(r);
    auto it = objects.find(Key(r, ns, name));
    if (it == objects.end()) FailNotFound(r, name);
    return Output(r, it->second);
  }

  Json ListOf(const Resource& r, const std::string& ns,
              const std::map<std::string, std::string>& query) const {
    Selectors selectors = SelectorsOf(query);
    std::int64_t limit = 0;
    if (auto it = query.find("limit"); it != query.end()) {
      try {
        limit = std::stoll(it->second);
      } catch (const std::exception&) {
        Fail(400, "BadRequest", fmt::format("invalid limit \"{}\"", it->second));
      }
    }
    std::optional<ObjectKey> after;
    if (auto it = query.find("continue"); it != query.end() && !it->second.empty()) {
      auto slash = it->second.find('/');
      if (slash == std::string::npos) Fail(400, "BadRequest", "invalid continue token");
      after = ObjectKey{it->second.substr(0, slash), it->second.substr(slash + 1)};
    }
    Json items = Json::array();
    std::optional<ObjectKey> last;
    std::int64_t remaining = 0;
    for (const auto& [key, object] : Objects(r)) {
      if (r.type.namespaced && !ns.empty() && key.first != ns) continue;
      if (after && key <= *after) continue;
      if (!selectors.Match(Output(r, object))) continue;
      if (limit > 0 && static_cast<std::int64_t>(items.size()) >= limit) {
        ++remaining;
        continue;
      }
      // Like the server's lists of built-in kinds: items carry no apiVersion and kind.
      Json item = object;
      item.erase("apiVersion");
      item.erase("kind");
      items.push_back(std::move(item));
      last = key;
    }
    Json md = {{"resourceVersion", std::to_string(resource_version_)}};
    if (remaining > 0 && last) {
      md["continue"] = last->first + "/" + last->second;
      md["remainingItemCount"] = remaining;
    }
    return {{"kind", r.type.kind + "List"},
            {"apiVersion", r.type.ApiVersion()},
            {"metadata", std::move(md)},
            {"items", std::move(items)}};
  }

  std::optional<HttpResponse> Watch(const Resource& r, const std::string& ns,
                                    const std::map<std::string, std::string>& query,
                                    const std::shared_ptr<BufferedStream>& stream) {
    Watcher w;
    w.storage_key = r.storage_key();
    w.ns = r.type.namespaced ? ns : "";
    w.selectors = SelectorsOf(query);
    std::string lines;
    std::string from;
    if (auto it = query.find("resourceVersion"); it != query.end()) from = it->second;
    if (from.empty() || from == "0") {
      // Like the server: the current state as ADDED events, then the changes.
      for (const auto& [key, object] : Objects(r)) {
        if (!w.ns.empty() && key.first != w.ns) continue;
        Json out = Output(r, object);
        if (w.selectors.Match(out)) lines += EventLine("ADDED", out);
      }
    } else {
      std::int64_t since = 0;
      try {
        since = std::stoll(from);
      } catch (const std::exception&) {
        Fail(400, "BadRequest", fmt::format("invalid resourceVersion \"{}\"", from));
      }
      if (since < compacted_) {
        // The server answers 200 and then an ERROR event; the client maps it to Gone.
        Json gone =
            StatusJson(410, "Expired",
                       fmt::format("too old resource version: {} ({})", since, compacted_ + 1));
        lines = EventLine("ERROR", gone);
        return Respond(200, lines);
      }
      for (const auto& e : history_) {
        if (e.resource_version <= since) continue;
        if (auto line = LineFor(w, e)) lines += *line;
      }
    }
    if (!stream) return Respond(200, lines);  // a watch sent as a plain request: what is known
    stream->SetHeaders(200, {{"content-type", kJson}});
    if (!lines.empty()) stream->Push(lines);
    if (auto it = query.find("timeoutSeconds"); it != query.end()) {
      try {
        w.deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(std::stoll(it->second));
      } catch (const std::exception&) {
        Fail(400, "BadRequest", fmt::format("invalid timeoutSeconds \"{}\"", it->second));
      }
      StartTimer();
    }
    w.stream = stream;
    watchers_.push_back(std::move(w));
    timer_cv_.notify_all();
    return std::nullopt;
  }

  // Ends watches whose timeoutSeconds passed, as the server does.
  void StartTimer() {
    if (timer_.joinable()) return;
    timer_ = std::thread([this] {
      std::unique_lock lock(mu_);
      while (!stopping_) {
        auto now = std::chrono::steady_clock::now();
        std::optional<std::chrono::steady_clock::time_point> next;
        for (auto it = watchers_.begin(); it != watchers_.end();) {
          auto stream = it->stream.lock();
          if (!stream || stream->cancelled() || (it->deadline && *it->deadline <= now)) {
            if (stream) stream->Finish(nullptr);
            it = watchers_.erase(it);
            continue;
          }
          if (it->deadline && (!next || *it->deadline < *next)) next = it->deadline;
          ++it;
        }
        if (next) {
          timer_cv_.wait_until(lock, *next);
        } else {
          timer_cv_.wait(lock);
        }
      }
    });
  }

  Json Create(const Resource& r, const std::string& ns, Json object, bool dry_run) {
    const std::string kind = StringOr(object, "kind");
    if (!kind.empty() && kind != r.type.kind) {
      Fail(400, "BadRequest",
           fmt::format("the kind of the object ({}) does not match the resource ({})", kind,
                       r.qualified()));
    }
    object["apiVersion"] = r.type.ApiVersion();
    object["kind"] = r.type.kind;
    Json& md = object["metadata"];
    if (!md.is_object()) md = Json::object();
    std::string name = StringOr(md, "name");
    if (name.empty() && !StringOr(md, "generateName").empty()) {
      // The server adds five random characters; a counter keeps tests reproducible.
      name = fmt::format("{}{:05x}", StringOr(md, "generateName"), ++generated_names_);
      md["name"] = name;
    }
    if (name.empty()) {
      Fail(422, "Invalid",
           fmt::format("{} \"\" is invalid: metadata.name: Required value: name or "
                       "generateName is required",
                       r.type.kind),
           {{"kind", r.type.kind},
            {"causes",
             {{{"reason", "FieldValueRequired"},
               {"message", "Required value: name or generateName is required"},
               {"field", "metadata.name"}}}}});
    }
    if (r.type.namespaced) {
      std::string given = StringOr(md, "namespace");
      if (!given.empty() && given != ns) {
        Fail(400, "BadRequest",
             "the namespace of the provided object does not match the namespace sent on the "
             "request");
      }
      md["namespace"] = ns;
    } else {
      md.erase("namespace");
    }
    if (Objects(r).count(Key(r, ns, name))) {
      Fail(409, "AlreadyExists", fmt::format("{} \"{}\" already exists", r.qualified(), name),
           Details(r, name));
    }
    // Status is the controllers' to write: a create through the API drops it.
    if (r.has_status) object.erase("status");
    if (r.type.group.empty() && r.type.kind == "Namespace") {
      object["status"] = {{"phase", "Active"}};
    }
    md.erase("resourceVersion");
    md.erase("uid");
    md.erase("creationTimestamp");
    md.erase("generation");
    if (dry_run) {
      md["uid"] = NextUid();
      md["creationTimestamp"] = NowRfc3339();
      if (r.has_generation) md["generation"] = 1;
      return object;
    }
    return Store(std::move(object), /*keep_identity=*/false);
  }

  // Writes `updated` over `existing` (same key): identity kept, status kept unless `status`
  // (the status subresource, which keeps everything else), generation bumped on spec changes,
  // resourceVersion bumped unless nothing changed.
  Json Update(const Resource& r, const ObjectKey& key, const Json& existing, Json updated,
              bool status, bool dry_run) {
    const std::string kind = StringOr(updated, "kind");
    if (!kind.empty() && kind != r.type.kind) {
      Fail(400, "BadRequest",
           fmt::format("the kind of the object ({}) does not match the resource ({})", kind,
                       r.qualified()));
    }
    if (status) {
      Json only_status = existing;
      if (updated.contains("status")) {
        only_status["status"] = updated["status"];
      } else {
        only_status.erase("status");
      }
      updated = std::move(only_status);
    } else if (r.has_status) {
      if (existing.contains("status")) {
        updated["status"] = existing["status"];
      } else {
        updated.erase("status");
      }
    }
    updated["apiVersion"] = StringOr(existing, "apiVersion");
    updated["kind"] = StringOr(existing, "kind");
    Json& md = updated["metadata"];
    if (!md.is_object()) md = Json::object();
    const Json old_md = existing.value("metadata", Json::object());
    for (const char* field : {"name", "namespace", "uid", "creationTimestamp", "resourceVersion"}) {
      if (auto it = old_md.find(field); it != old_md.end()) {
        md[field] = *it;
      } else {
        md.erase(field);
      }
    }
    if (r.has_generation) {
      std::int64_t generation = 1;
      if (auto it = old_md.find("generation"); it != old_md.end() && it->is_number_integer()) {
        generation = it->get<std::int64_t>();
      }
      if (SpecPart(updated) != SpecPart(existing)) ++generation;
      md["generation"] = generation;
    }
    if (updated == existing || dry_run) return Output(r, updated);  // a no-op write changes nothing
    md["resourceVersion"] = NextResourceVersion();
    // A copy: `existing` is the stored object, which the next line overwrites.
    Json previous = existing;  // NOLINT(performance-unnecessary-copy-initialization)
    Objects(r)[key] = updated;
    Notify(r, "MODIFIED", updated, previous);
    return Output(r, updated);
  }

  Json Replace(const Resource& r, const std::string& ns, const std::string& name, Json object,
               bool status, bool dry_run) {
    const ObjectKey key = Key(r, ns, name);
    const auto& objects = Objects(r);
    auto it = objects.find(key);
    if (it == objects.end()) FailNotFound(r, name);
    const std::string body_name = MetaString(object, "name");
    if (body_name != name) {
      Fail(400, "BadRequest",
           fmt::format("the name of the object ({}) does not match the name on the URL ({})",
                       body_name, name));
    }
    const std::string version = MetaString(object, "resourceVersion");
    if (!version.empty() && version != MetaString(it->second, "resourceVersion")) {
      FailConflict(r, name,
                   "the object has been modified; please apply your changes to the latest "
                   "version and try again");
    }
    return Update(r, key, it->second, std::move(object), status, dry_run);
  }

  HttpResponse Patch(const Resource& r, const std::string& ns, const std::string& name,
                     const RecordedRequest& req, const std::string& raw_body, bool status,
                     bool dry_run) {
    const ObjectKey key = Key(r, ns, name);
    const auto& objects = Objects(r);
    auto it = objects.find(key);
    const std::string& type = req.content_type;
    if (type == kApplyPatch) {
      Json applied = Body(req, raw_body);
      const std::string applied_name = MetaString(applied, "name");
      if (!applied_name.empty() && applied_name != name) {
        Fail(400, "BadRequest",
             fmt::format("the name of the object ({}) does not match the name on the URL ({})",
                         applied_name, name));
      }
      if (it == objects.end()) {
        if (status) FailNotFound(r, name);
        applied["metadata"]["name"] = name;
        return Respond(201, Create(r, ns, std::move(applied), dry_run).dump());
      }
      // Simplified server-side apply: the applied fields are merged into the stored object
      // (objects key by key, lists and scalars replaced); no field ownership, no conflicts.
      Json merged = it->second;
      merged.merge_patch(applied);
      return Respond(200, Update(r, key, it->second, std::move(merged), status, dry_run).dump());
    }
    if (it == objects.end()) FailNotFound(r, name);
    Json patched = it->second;
    if (type == "application/merge-patch+json" ||
        type == "application/strategic-merge-patch+json") {
      // A strategic merge patch is applied as a merge patch: lists are replaced, not merged by
      // their keys, and $patch directives are not understood.
      patched.merge_patch(Body(req, raw_body));
    } else if (type == "application/json-patch+json") {
      if (!req.body.is_array()) Fail(400, "BadRequest", "a JSON patch must be a JSON array");
      try {
        patched = patched.patch(req.body);
      } catch (const nlohmann::json::exception& e) {
        Fail(422, "Invalid", fmt::format("the JSON patch cannot be applied: {}", e.what()));
      }
    } else {
      Fail(415, "UnsupportedMediaType",
           fmt::format("the body of the request was in an unknown format - accepted media types "
                       "include: application/json-patch+json, application/merge-patch+json, "
                       "application/apply-patch+yaml (got \"{}\")",
                       type));
    }
    // A patch that names a resourceVersion is conditional on it, as on the server.
    const std::string version = MetaString(patched, "resourceVersion");
    if (!version.empty() && version != MetaString(it->second, "resourceVersion")) {
      FailConflict(r, name,
                   "the object has been modified; please apply your changes to the latest "
                   "version and try again");
    }
    return Respond(200, Update(r, key, it->second, std::move(patched), status, dry_run).dump());
  }

  Json Delete(const Resource& r, const std::string& ns, const std::string& name,
              const Json& options, bool dry_run) {
    const ObjectKey key = Key(r, ns, name);
    const auto& objects = Objects(r);
    auto it = objects.find(key);
    if (it == objects.end()) FailNotFound(r, name);
    const Json preconditions =
        options.is_object() ? options.value("preconditions", Json::object()) : Json::object();
    const std::string uid = MetaString(it->second, "uid");
    if (std::string want = StringOr(preconditions, "uid"); !want.empty() && want != uid) {
      FailConflict(r, name,
                   fmt::format("Precondition failed: UID in precondition: {}, UID in object "
                               "meta: {}",
                               want, uid));
    }
    const std::string version = MetaString(it->second, "resourceVersion");
    if (std::string want = StringOr(preconditions, "resourceVersion");
        !want.empty() && want != version) {
      FailConflict(r, name,
                   fmt::format("Precondition failed: ResourceVersion in precondition: {}, "
                               "ResourceVersion in object meta: {}",
                               want, version));
    }
    if (options.is_object() && options.contains("dryRun")) dry_run = true;
    if (!dry_run) {
      Remove(r, key, options.is_object() && StringOr(options, "propagationPolicy") == "Orphan");
    }
    // What the server answers for an object deleted at once (no finalizers, no grace period).
    Json details = Details(r, name);
    details["uid"] = uid;
    return {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", Json::object()},
            {"status", "Success"},
            {"details", std::move(details)}};
  }

  Json DeleteCollection(const Resource& r, const std::string& ns,
                        const std::map<std::string, std::string>& query, const Json& options) {
    Json list = ListOf(r, ns, query);
    const bool dry_run =
        query.count("dryRun") > 0 || (options.is_object() && options.contains("dryRun"));
    const bool orphan = options.is_object() && StringOr(options, "propagationPolicy") == "Orphan";
    Json deleted = Json::array();
    for (const auto& item : list["items"]) {
      ObjectKey key = Key(r, MetaString(item, "namespace"), MetaString(item, "name"));
      Json removed = dry_run ? item : Remove(r, key, orphan);
      if (removed.is_null()) continue;  // already gone with an owner deleted before it
      removed.erase("apiVersion");
      removed.erase("kind");
      deleted.push_back(std::move(removed));
    }
    list["items"] = std::move(deleted);
    list["metadata"] = {{"resourceVersion", std::to_string(resource_version_)}};
    return list;
  }

  mutable std::mutex mu_;
  std::vector<Resource> resources_;
  std::map<std::string, ObjectMap> objects_;  // by Resource::storage_key()
  std::int64_t resource_version_ = 0;
  std::int64_t uid_counter_ = 0;
  std::int64_t generated_names_ = 0;
  int cluster_ips_ = 0;
  int node_ports_ = 0;
  std::deque<Event> history_;
  std::int64_t compacted_ = 0;  // the newest version no longer in history_
  std::vector<Watcher> watchers_;
  std::deque<Json> failures_;  // Status objects queued by FailNext
  std::vector<RecordedRequest> requests_;
  std::thread timer_;
  std::condition_variable timer_cv_;
  bool stopping_ = false;
};

// ---- FakeCluster
// ---------------------------------------------------------------------------------

FakeCluster::FakeCluster() : server_(std::make_shared<Server>()) {}

FakeCluster::~FakeCluster() = default;

Client FakeCluster::client(std::string default_namespace) const {
  ClientConfig config;
  config.default_namespace = std::move(default_namespace);
  config.retry.max_attempts = 1;
  config.rate_limit.qps = 0;
  return client(config);
}

Client FakeCluster::client(const ClientConfig& config) const {
  // Only what the caller chose about behaviour survives: the fake needs no address,
  // certificates or credentials, and must never send any of them anywhere.
  ClientConfig fake;
  fake.server = std::string(kServerUrl);
  fake.source = "tfk8s::testing::FakeCluster";
  fake.default_namespace = config.default_namespace;
  fake.connect_timeout = config.connect_timeout;
  fake.request_timeout = config.request_timeout;
  fake.retry = config.retry;
  fake.rate_limit = config.rate_limit;
  fake.user_agent = config.user_agent;
  return internal::ClientOver(std::move(fake), server_);
}

void FakeCluster::Add(Json object) { server_->Add(std::move(object)); }

void FakeCluster::AddNode(const std::string& name, const std::map<std::string, std::string>& labels,
                          const std::string& cpu, const std::string& memory, int gpus) {
  Json resources = {{"cpu", cpu}, {"memory", memory}, {"pods", "110"}};
  if (gpus > 0) resources["nvidia.com/gpu"] = std::to_string(gpus);
  Json node_labels = {{"kubernetes.io/hostname", name}, {"kubernetes.io/os", "linux"}};
  for (const auto& [k, v] : labels) node_labels[k] = v;
  server_->Add(
      {{"apiVersion", "v1"},
       {"kind", "Node"},
       {"metadata", {{"name", name}, {"labels", std::move(node_labels)}}},
       {"spec", Json::object()},
       {"status",
        {{"capacity", resources},
         {"allocatable", resources},
         {"conditions", {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}},
         {"nodeInfo", {{"kubeletVersion", "v1.20.2"}, {"architecture", "amd64"}}}}}});
}

void FakeCluster::AddResource(const ResourceType& type) { server_->AddResource(type); }

void FakeCluster::FailNext(int http_code, const std::string& reason, const std::string& message) {
  server_->FailNext(http_code, reason, message);
}

std::optional<Json> FakeCluster::Find(std::string_view api_version, std::string_view kind,
                                      std::string_view ns, std::string_view name) const {
  return server_->Find(api_version, kind, ns, name);
}

std::vector<Json> FakeCluster::Objects(std::string_view api_version, std::string_view kind,
                                       std::string_view ns) const {
  return server_->List(api_version, kind, ns);
}

std::vector<RecordedRequest> FakeCluster::requests() const { return server_->requests(); }

void FakeCluster::ClearRequests() { server_->ClearRequests(); }

Json RecordedRequest::ToJson() const {
  return {{"method", method},
          {"path", path},
          {"query", query},
          {"body", body},
          {"content_type", content_type}};
}

}  // namespace tfk8s::testing
