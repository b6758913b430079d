// Helpers shared by workload lifecycles (see common.hpp).

#include "workloads/common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"
#include "util/json_parse.hpp"
#include "workloads/cron.hpp"
#include "workloads/server_shape.hpp"

namespace tfk8s::internal {

using namespace kinds;

void RequireWorkloadName(std::string_view ns, std::string_view name,
                         void (*rule)(std::string_view field, std::string_view value)) {
  validation::RequirePathSegment("name", name);
  rule("name", name);
  if (!ns.empty()) validation::RequireNamespaceName("namespace", ns);
}

const Json& At(const Json& object, std::string_view key) {
  static const Json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

std::string StringAt(const Json& object, std::string_view key) {
  const Json& v = At(object, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::string WithOwner(std::string selector, const std::string& owner) {
  if (owner.empty()) return selector;
  validation::RequireDns1123Label("owner", owner);
  return selector + "," + kOwnerLabel + "=" + owner;
}

void RequireOneNamespace(const std::string& ns, std::string_view instead) {
  if (ns.empty()) {
    throw ValidationError("namespace", "",
                          fmt::format("names alone are ambiguous across namespaces: name one "
                                      "namespace, or use {} (namespace and name)",
                                      instead));
  }
}

std::vector<std::string> Names(const std::vector<WorkloadRef>& refs) {
  std::vector<std::string> names;
  names.reserve(refs.size());
  for (const auto& r : refs) names.push_back(r.name);
  return names;
}

void SortRefs(std::vector<WorkloadRef>* refs) {
  std::sort(refs->begin(), refs->end(), [](const WorkloadRef& a, const WorkloadRef& b) {
    return std::tie(a.namespace_name, a.name) < std::tie(b.namespace_name, b.name);
  });
}

}  // namespace tfk8s::internal

namespace tfk8s {

std::string FormatRfc3339(std::chrono::system_clock::time_point t) {
  return internal::FormatTimestamp(std::chrono::floor<std::chrono::seconds>(t));
}

std::string internal::LowerCamelCase(const std::string& key) {
  for (char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return key;
  }
  std::string out;
  bool upper = false;
  for (char c : key) {
    if (c == '_') {
      upper = !out.empty();
    } else {
      out += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
      upper = false;
    }
  }
  return out;
}

Json internal::CamelCaseKeys(const Json& value) {
  if (value.is_array()) {
    Json out = Json::array();
    for (const auto& v : value) out.push_back(CamelCaseKeys(v));
    return out;
  }
  if (!value.is_object()) return value;
  Json out = Json::object();
  for (const auto& [k, v] : value.items()) out[LowerCamelCase(k)] = CamelCaseKeys(v);
  return out;
}

Json WorkloadRef::ToJson() const {
  return {{"namespace", namespace_name},
          {"name", name},
          {"owner", owner},
          {"created", created.empty() ? Json(nullptr) : Json(created)}};
}

std::string FormatTextTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace tfk8s

namespace tfk8s::internal {

std::vector<Json> Items(Json list) {
  std::vector<Json> out;
  // "PodList" → every item is read as a Pod (items carry no kind of their own).
  std::string kind = StringAt(list, "kind");
  if (kind.size() > 4 && kind.compare(kind.size() - 4, 4, "List") == 0) {
    kind.resize(kind.size() - 4);
  }
  if (auto it = list.find("items"); it != list.end() && it->is_array()) {
    for (auto& item : *it) {
      CheckServerObject(item, kind, "list");
      out.push_back(std::move(item));
    }
  }
  return out;
}

std::vector<Json> ListItemsWithout(Client& client, const ResourceType& type, const std::string& ns,
                                   const ListOptions& options,
                                   const std::vector<std::string_view>& dropped) {
  // nlohmann's depth at a key event: 1 for the list's own keys, 3 for an item's (metadata,
  // spec, status), 4 for the keys inside those.
  constexpr int kItemSectionKeyDepth = 4;
  const Json::parser_callback_t keep = [&dropped](int depth, Json::parse_event_t event,
                                                  Json& parsed) {
    if (event != Json::parse_event_t::key || depth != kItemSectionKeyDepth) return true;
    const auto& key = parsed.get_ref<const std::string&>();
    return std::find(dropped.begin(), dropped.end(), key) == dropped.end();
  };
  std::vector<Json> items;
  client.ListPages(type, ns, options, 500, [&](const std::string& text) {
    Json page = ParseJson(text, fmt::format("list {}", type.plural), keep);
    if (page.is_discarded() || !page.is_object()) {
      throw DecodeError(fmt::format("list {}: the server's answer is not a list object ({} bytes)",
                                    type.plural, text.size()),
                        "");
    }
    auto it = page.find("items");
    if (it != page.end() && it->is_array()) {
      for (auto& item : *it) {
        CheckServerObject(item, type.kind, "list");
        items.push_back(std::move(item));
      }
    } else if (it != page.end() && !it->is_null()) {
      throw DecodeError(fmt::format("list {}: the server's field \"items\" is {}, not an array",
                                    type.plural, it->type_name()),
                        "items");
    }
    const Json& metadata = At(page, "metadata");
    const Json& next = At(metadata, "continue");
    return next.is_string() ? next.get<std::string>() : std::string();
  });
  return items;
}

namespace {

std::string MetadataString(const Json& object, const char* section, const std::string& key) {
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return {};
  auto sec = md->find(section);
  if (sec == md->end() || !sec->is_object()) return {};
  auto v = sec->find(key);
  return v != sec->end() && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace

std::string NameOf(const Json& object) {
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) return {};
  return md->value("name", "");
}

std::string LabelOf(const Json& object, const std::string& key) {
  return MetadataString(object, "labels", key);
}

std::string AnnotationOf(const Json& object, const std::string& key) {
  return MetadataString(object, "annotations", key);
}

namespace {

// A terminated container's own last words (its termination message), trimmed.
std::string TerminationMessage(const Json& terminated) {
  std::string m = StringAt(terminated, "message");
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

// tfk8s's own start scripts write a termination message starting "tfk8s: " only when starting
// again cannot help (a tool missing from the image).
bool IsTfk8sVerdict(const std::string& message) { return message.rfind("tfk8s: ", 0) == 0; }

}  // namespace

std::string PodProblem(const Json& pod, bool* fatal) {
  *fatal = false;
  const Json& status = pod.value("status", Json::object());
  for (const auto& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") {
      return fmt::format("{}: {}", c.value("reason", "Unschedulable"), c.value("message", ""));
    }
  }
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const auto& cs : status.value(list, Json::array())) {
      const Json& state = cs.value("state", Json::object());
      if (auto w = state.find("waiting"); w != state.end()) {
        std::string reason = w->value("reason", "");
        if (reason == "ErrImagePull" || reason == "ImagePullBackOff" ||
            reason == "InvalidImageName" || reason == "CrashLoopBackOff" ||
            reason == "CreateContainerConfigError" || reason == "CreateContainerError") {
          *fatal = true;
          std::string msg = w->value("message", "");
          if (reason == "CrashLoopBackOff") {
            // Why it crashed says more than the back-off.
            std::string last = TerminationMessage(At(At(cs, "lastState"), "terminated"));
            if (!last.empty()) msg = last;
          }
          return msg.empty() ? reason : fmt::format("{}: {}", reason, msg);
        }
        if (!reason.empty() && reason != "ContainerCreating" && reason != "PodInitializing") {
          return reason;
        }
      }
      if (auto t = state.find("terminated"); t != state.end()) {
        std::string reason = t->value("reason", "");
        if (reason == "OOMKilled") *fatal = true;
        int code = t->value("exitCode", 0);
        if (code != 0) {
          std::string message = TerminationMessage(*t);
          if (IsTfk8sVerdict(message)) *fatal = true;
          return fmt::format("{} (exit code {}){}{}", reason.empty() ? "Error" : reason, code,
                             message.empty() ? "" : ": ", message);
        }
      }
      const Json& last = cs.value("lastState", Json::object());
      if (auto t = last.find("terminated");
          t != last.end() && t->value("reason", "") == "OOMKilled") {
        *fatal = true;
        return "OOMKilled";
      }
      // Restarted after a tfk8s verdict: the same verdict will come again.
      if (std::string m = TerminationMessage(At(last, "terminated")); IsTfk8sVerdict(m)) {
        *fatal = true;
        return m;
      }
    }
  }
  return {};
}

int PodRestarts(const Json& pod) {
  int n = 0;
  const Json& status = pod.value("status", Json::object());
  for (const auto& cs : status.value("containerStatuses", Json::array())) {
    n += cs.value("restartCount", 0);
  }
  return n;
}

bool PodReady(const Json& pod) {
  const Json& status = pod.value("status", Json::object());
  for (const auto& c : status.value("conditions", Json::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

WatchTracker::WatchTracker(Client client, const ResourceType& type, const std::string& ns,
                           ListOptions selectors, std::mutex* mu, std::condition_variable* cv,
                           std::atomic<int>* changes)
    : informer_(std::move(client), type, ns, std::move(selectors)), kind_(type.kind) {
  thread_ = std::thread([this, mu, cv, changes] {
    try {
      while (!stop_) {
        // Next() lists before it waits, so after its first return the snapshot is current.
        auto ev = informer_.Next(std::chrono::milliseconds(500));
        bool first = !synced_.exchange(true);
        if (!ev && !first) continue;
        {
          std::lock_guard lock(*mu);
          ++*changes;
        }
        cv->notify_all();
      }
    } catch (...) {
      std::lock_guard lock(*mu);
      error_ = std::current_exception();
      ++*changes;  // wakes waits that watch `changes`
      cv->notify_all();
    }
  });
}

WatchTracker::~WatchTracker() {
  stop_ = true;
  informer_.Cancel();
  if (thread_.joinable()) thread_.join();
}

std::vector<Json> WatchTracker::Snapshot() const { return CheckedSnapshot(informer_, kind_); }

Json GetChecked(Client client, const ResourceType& type, std::string_view ns,
                std::string_view name) {
  Json object = client.Get(type, ns, name);
  CheckServerObject(object, type.kind, "get");
  return object;
}

std::optional<Json> GetOptional(Client client, const ResourceType& type, std::string_view ns,
                                std::string_view name) {
  try {
    return GetChecked(std::move(client), type, ns, name);
  } catch (const NotFound&) {
    return std::nullopt;
  }
}

std::vector<Json> CheckedSnapshot(const Informer& informer, const std::string& kind) {
  std::vector<Json> out = informer.Snapshot();
  CheckServerObjects(out, kind, "watch");
  return out;
}

bool WaitForObject(Client client, const ResourceType& type, const std::string& ns,
                   const std::string& name, std::chrono::milliseconds timeout,
                   const std::function<bool(const Json* object)>& done) {
  ListOptions sel;
  sel.field_selector = "metadata.name=" + name;
  Informer watch(std::move(client), type, ns, sel);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    // The first Next() lists, so the snapshot reflects the server from then on.
    auto ev = watch.Next(std::chrono::milliseconds(200));
    auto snapshot = CheckedSnapshot(watch, type.kind);
    if (done(snapshot.empty() ? nullptr : &snapshot.front())) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    (void)ev;
  }
}

bool WriteSecretWhole(Client& client, const Json& secret, bool replace, bool dry_run) {
  const std::string ns = StringAt(At(secret, "metadata"), "namespace");
  const std::string name = NameOf(secret);
  WriteOptions write;
  write.dry_run = dry_run;
  write.field_manager = "tfk8s";
  try {
    client.Create(kSecrets, ns, secret, write);
    return true;
  } catch (const AlreadyExists&) {
    // A dry run has checked what it can: the real call would read and replace.
    if (!replace || dry_run) return false;
  }
  // Replaced in place, never deleted first: a write that fails leaves the old Secret (and the
  // pods that mount it) as they were. The resourceVersion read makes the PUT conditional; a
  // writer in between (Conflict), or a delete (NotFound: then created again), costs a round.
  constexpr int kRounds = 3;
  for (int round = 1;; ++round) {
    try {
      const std::optional<Json> current = GetOptional(client, kSecrets, ns, name);
      if (!current) {
        client.Create(kSecrets, ns, secret, write);
        return true;
      }
      const std::string version = StringAt(At(*current, "metadata"), "resourceVersion");
      if (version.empty()) {  // a PUT without it would be unconditional
        throw DecodeError(fmt::format("Secret {}/{}: the server's answer has no "
                                      "metadata.resourceVersion",
                                      ns, name),
                          "metadata.resourceVersion");
      }
      Json next = secret;
      next["metadata"]["resourceVersion"] = version;
      client.Replace(kSecrets, ns, next, write);
      return true;
    } catch (const ApiError& e) {
      const bool raced = e.kind() == ErrorKind::kConflict ||
                         e.kind() == ErrorKind::kAlreadyExists || e.kind() == ErrorKind::kNotFound;
      if (!raced || round == kRounds) throw;
    }
  }
}

}  // namespace tfk8s::internal
