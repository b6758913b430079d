#include "tfk8s/client.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <future>
#include <map>

#include "client/connection.hpp"
#include "tfk8s/validation.hpp"
#include "util/concurrent.hpp"
#include "util/json_parse.hpp"

namespace tfk8s {

using internal::Connection;
using internal::Query;
using internal::RequestSpec;
using internal::UrlEncode;

// ---- ResourceType -------------------------------------------------------------------------

std::string ResourceType::ApiVersion() const {
  return group.empty() ? version : group + "/" + version;
}

// The one path builder: every request path of the client (discovery, objects, collections,
// subresources, logs, watches) is made here, and every segment taken from a caller is checked
// before anything is sent. Without it, a name such as ".." becomes a dot segment that the URL
// layer resolves away ("DELETE .../namespaces/ns/configmaps/.." deletes the namespace) and an
// empty name becomes a collection call.
std::string ResourceType::GroupVersionPath() const {
  if (!group.empty()) validation::RequirePathSegment("group", group);
  validation::RequirePathSegment("version", version);
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

std::string ResourceType::CollectionPath(std::string_view ns) const {
  std::string path = GroupVersionPath();
  if (namespaced && !ns.empty()) {
    validation::RequireNamespaceName("namespace", ns);
    path += "/namespaces/" + UrlEncode(ns);
  }
  validation::RequirePathSegment("resource", plural);
  return path + "/" + plural;
}

std::string ResourceType::ObjectPath(std::string_view ns, std::string_view name,
                                     std::string_view subresource) const {
  if (namespaced && ns.empty()) {
    throw ValidationError("namespace", "",
                          fmt::format("may not be empty: {} are namespaced", plural));
  }
  validation::RequirePathSegment("name", name);
  std::string path = CollectionPath(ns) + "/" + UrlEncode(name);
  if (!subresource.empty()) {
    // A subresource may have several segments ("proxy/healthz"); each one is checked.
    std::string_view rest = subresource;
    while (true) {
      const std::size_t slash = rest.find('/');
      std::string_view segment = rest.substr(0, slash);
      validation::RequirePathSegment("subresource", segment);
      path += "/" + UrlEncode(segment);
      if (slash == std::string_view::npos) break;
      rest.remove_prefix(slash + 1);
    }
  }
  return path;
}

std::string_view ToString(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
    case WatchEventType::kUnknown:
      break;
  }
  return "UNKNOWN";
}

WatchEventType ParseWatchEventType(std::string_view text) {
  if (text == "ADDED") return WatchEventType::kAdded;
  if (text == "MODIFIED") return WatchEventType::kModified;
  if (text == "DELETED") return WatchEventType::kDeleted;
  if (text == "BOOKMARK") return WatchEventType::kBookmark;
  if (text == "ERROR") return WatchEventType::kError;
  return WatchEventType::kUnknown;
}

std::string ApplyResult::error_message() const {
  if (!error) return {};
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// ---- construction ---------------------------------------------------------------------------

Client::Client(ClientConfig config) : Client(std::move(config), internal::MakeCurlTransport()) {}

Client::Client(ClientConfig config, std::shared_ptr<internal::HttpTransport> transport)
    : conn_(std::make_shared<Connection>(std::move(config), std::move(transport))) {}

namespace internal {
Client ClientOver(ClientConfig config, std::shared_ptr<HttpTransport> transport) {
  return Client(std::move(config), std::move(transport));
}
const std::shared_ptr<Connection>& ConnectionOf(const Client& client) { return client.conn_; }
}  // namespace internal

Client Client::FromDefault(const KubeconfigOptions& options) {
  return Client(LoadDefaultConfig(options));
}

const ClientConfig& Client::config() const { return conn_->config(); }
const std::string& Client::default_namespace() const { return conn_->config().default_namespace; }

namespace {

// metadata.<key> of a caller's object as a string ("" when absent); ValidationError when it is
// of another JSON type (never an nlohmann exception).
std::string MetadataString(const Json& object, const std::string& key) {
  if (!object.is_object()) return {};
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return {};
  auto v = m->find(key);
  if (v == m->end() || v->is_null()) return {};
  if (!v->is_string()) {
    throw ValidationError("metadata." + key, v->dump(), "must be a string");
  }
  return v->get<std::string>();
}

std::string NamespaceFor(const Client& c, const ResourceType& type, std::string_view ns,
                         const Json* object = nullptr) {
  if (!type.namespaced) return {};
  if (!ns.empty()) return std::string(ns);
  if (object) {
    std::string from_object = MetadataString(*object, "namespace");
    if (!from_object.empty()) return from_object;
  }
  return c.default_namespace();
}

std::string NameOf(const Json& object, std::string_view what) {
  std::string name = MetadataString(object, "name");
  if (!name.empty()) return name;
  throw ValidationError("metadata.name", "", fmt::format("{} needs a metadata.name", what));
}

Json ParseText(std::string_view text, std::string_view context) {
  if (text.empty()) return Json::object();
  Json j = internal::ParseJson(text, context);
  if (j.is_discarded()) {
    throw DecodeError(
        fmt::format("{}: the server's answer is not JSON ({} bytes)", context, text.size()), "");
  }
  return j;
}

// Runs `decode` (which reads a server answer); a field of the wrong JSON type becomes a
// DecodeError for `context` instead of an nlohmann exception escaping to the caller.
template <class F>
auto Decoding(std::string_view context, F&& decode) -> decltype(decode()) {
  try {
    return decode();
  } catch (const Json::exception& e) {
    throw DecodeError(fmt::format("{}: the server's answer has a field of an unexpected type ({})",
                                  context, e.what()),
                      "");
  }
}

Json ParseBody(const internal::HttpResponse& r, std::string_view context) {
  return ParseText(r.body, context);
}

std::string Describe(std::string_view verb, const ResourceType& type, std::string_view ns,
                     std::string_view name = {}) {
  if (!type.namespaced) ns = {};  // a cluster-scoped call ignores the namespace it was given
  std::string what = fmt::format("{} {}", verb, type.plural);
  if (!type.group.empty()) what += "." + type.group;
  if (!ns.empty() || !name.empty()) what += " ";
  if (!ns.empty()) what += std::string(ns) + (name.empty() ? "" : "/");
  what += name;
  return what;
}

void AddListQuery(Query& q, const ListOptions& o) {
  q.AddIf(!o.label_selector.empty(), "labelSelector", o.label_selector);
  q.AddIf(!o.field_selector.empty(), "fieldSelector", o.field_selector);
  q.AddIf(o.limit > 0, "limit", std::to_string(o.limit));
  q.AddIf(!o.continue_token.empty(), "continue", o.continue_token);
  q.AddIf(!o.resource_version.empty(), "resourceVersion", o.resource_version);
  q.AddIf(!o.resource_version_match.empty(), "resourceVersionMatch", o.resource_version_match);
  if (o.timeout_seconds) q.Add("timeoutSeconds", std::to_string(*o.timeout_seconds));
}

void AddWriteQuery(Query& q, bool dry_run, std::string_view field_manager) {
  q.AddIf(dry_run, "dryRun", "All");
  q.AddIf(!field_manager.empty(), "fieldManager", field_manager);
}

// A write request (create, replace, patch) to `path` with the options' query.
RequestSpec WriteRequest(const char* method, std::string path, const WriteOptions& options) {
  Query q;
  AddWriteQuery(q, options.dry_run, options.field_manager);
  RequestSpec spec;
  spec.method = method;
  spec.path = std::move(path) + q.str();
  return spec;
}

// Splits "apps/v1" into ("apps", "v1") and "v1" into ("", "v1").
std::pair<std::string, std::string> SplitApiVersion(std::string_view api_version) {
  auto slash = api_version.find('/');
  if (slash == std::string_view::npos) return {"", std::string(api_version)};
  return {std::string(api_version.substr(0, slash)), std::string(api_version.substr(slash + 1))};
}

}  // namespace

// ---- discovery ----------------------------------------------------------------------------

namespace {

std::vector<ResourceType> LoadResources(Connection& conn, const std::string& group,
                                        const std::string& version) {
  RequestSpec spec;
  spec.path = ResourceType{group, version, "", "", false}.GroupVersionPath();
  spec.idempotent = true;
  spec.context = "discover " + (group.empty() ? version : group + "/" + version);
  Json j = ParseBody(conn.Execute(spec), spec.context);
  return Decoding(spec.context, [&] {
    std::vector<ResourceType> out;
    for (const auto& r : j.value("resources", Json::array())) {
      std::string name = r.value("name", "");
      if (name.empty() || name.find('/') != std::string::npos) continue;  // skip subresources
      out.push_back(
          ResourceType{group, version, r.value("kind", ""), name, r.value("namespaced", false)});
    }
    return out;
  });
}

void LoadGroups(Connection& conn) {
  // Caller holds discovery_mu.
  if (conn.groups_loaded) return;
  RequestSpec core;
  core.path = "/api";
  core.idempotent = true;
  core.context = "discover /api";
  Json api = ParseBody(conn.Execute(core), core.context);
  conn.versions_by_group[""] =
      Decoding(core.context, [&] { return api.value("versions", std::vector<std::string>{}); });
  RequestSpec groups;
  groups.path = "/apis";
  groups.idempotent = true;
  groups.context = "discover /apis";
  Json apis = ParseBody(conn.Execute(groups), groups.context);
  auto by_group = Decoding(groups.context, [&] {
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& g : apis.value("groups", Json::array())) {
      std::vector<std::string> versions;
      std::string preferred = g.value("preferredVersion", Json::object()).value("version", "");
      if (!preferred.empty()) versions.push_back(preferred);
      for (const auto& v : g.value("versions", Json::array())) {
        std::string ver = v.value("version", "");
        if (ver != preferred) versions.push_back(ver);
      }
      out[g.value("name", "")] = std::move(versions);
    }
    return out;
  });
  for (auto& [group, versions] : by_group) conn.versions_by_group[group] = std::move(versions);
  conn.groups_loaded = true;
}

const std::vector<ResourceType>& ResourcesFor(Connection& conn, const std::string& group,
                                              const std::string& version) {
  // Caller holds discovery_mu.
  std::string key = group.empty() ? version : group + "/" + version;
  auto it = conn.resources_by_group_version.find(key);
  if (it == conn.resources_by_group_version.end()) {
    it = conn.resources_by_group_version.emplace(key, LoadResources(conn, group, version)).first;
  }
  return it->second;
}

// The resources of one group version, from the cache or the server. The fetch runs without
// discovery_mu, so callers whose kinds are cached never wait behind it (ApplyAll's workers), and
// concurrent callers for the same group version share one request.
std::vector<ResourceType> ResourcesOf(Connection& conn, const std::string& group,
                                      const std::string& version) {
  const std::string key = group.empty() ? version : group + "/" + version;
  std::promise<std::vector<ResourceType>> promise;
  std::shared_future<std::vector<ResourceType>> fetch;
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(conn.discovery_mu);
    if (auto it = conn.resources_by_group_version.find(key);
        it != conn.resources_by_group_version.end()) {
      return it->second;
    }
    if (auto it = conn.discovery_fetches.find(key); it != conn.discovery_fetches.end()) {
      fetch = it->second;
    } else {
      conn.discovery_fetches.emplace(key, promise.get_future().share());
      generation = conn.discovery_generation;
    }
  }
  if (fetch.valid()) return fetch.get();  // someone else's fetch: its result or its error
  try {
    std::vector<ResourceType> resources = LoadResources(conn, group, version);
    {
      std::lock_guard lock(conn.discovery_mu);
      conn.discovery_fetches.erase(key);
      // Not cached when InvalidateDiscovery ran meanwhile: the answer may predate it.
      if (generation == conn.discovery_generation) {
        conn.resources_by_group_version.emplace(key, resources);
      }
    }
    promise.set_value(resources);
    return resources;
  } catch (...) {
    {
      std::lock_guard lock(conn.discovery_mu);
      conn.discovery_fetches.erase(key);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

}  // namespace

ResourceType Client::Resolve(std::string_view api_version, std::string_view kind) {
  auto [group, version] = SplitApiVersion(api_version);
  std::vector<ResourceType> resources;
  try {
    resources = ResourcesOf(*conn_, group, version);
  } catch (const NotFound&) {
    throw NotFound(ErrorKind::kNotFound,
                   fmt::format("the server does not serve {} (kind {})", api_version, kind), 404,
                   "NotFound");
  }
  for (const auto& r : resources) {
    if (r.kind == kind) return r;
  }
  throw NotFound(ErrorKind::kNotFound,
                 fmt::format("the server serves {} but no kind {} in it", api_version, kind), 404,
                 "NotFound");
}

ResourceType Client::ResolvePreferred(std::string_view group, std::string_view kind,
                                      const std::vector<std::string>& versions) {
  {
    std::lock_guard lock(conn_->discovery_mu);
    LoadGroups(*conn_);
    auto it = conn_->versions_by_group.find(std::string(group));
    std::vector<std::string> served =
        it == conn_->versions_by_group.end() ? std::vector<std::string>{} : it->second;
    for (const auto& v : versions) {
      if (std::find(served.begin(), served.end(), v) == served.end()) continue;
      for (const auto& r : ResourcesFor(*conn_, std::string(group), v)) {
        if (r.kind == kind) return r;
      }
    }
  }
  throw NotFound(ErrorKind::kNotFound,
                 fmt::format("the server serves {} in none of the versions {}", kind,
                             fmt::join(versions, ", ")),
                 404, "NotFound");
}

std::vector<std::string> Client::ServerGroupVersions() {
  std::lock_guard lock(conn_->discovery_mu);
  LoadGroups(*conn_);
  std::vector<std::string> out;
  for (const auto& v : conn_->versions_by_group[""]) out.push_back(v);
  for (const auto& [group, versions] : conn_->versions_by_group) {
    if (group.empty()) continue;
    for (const auto& v : versions) out.push_back(fmt::format("{}/{}", group, v));
  }
  return out;
}

Json Client::ServerVersion() {
  RequestSpec spec;
  spec.path = "/version";
  spec.idempotent = true;
  spec.context = "get /version";
  return ParseBody(conn_->Execute(spec), spec.context);
}

void Client::InvalidateDiscovery() {
  std::lock_guard lock(conn_->discovery_mu);
  conn_->resources_by_group_version.clear();
  conn_->versions_by_group.clear();
  conn_->groups_loaded = false;
  ++conn_->discovery_generation;  // fetches in flight finish but are not cached
}

// ---- reads --------------------------------------------------------------------------------

Json Client::Get(const ResourceType& type, std::string_view ns, std::string_view name,
                 std::string_view subresource) {
  std::string n = NamespaceFor(*this, type, ns);
  RequestSpec spec;
  spec.path = type.ObjectPath(n, name, subresource);
  spec.idempotent = true;
  spec.context = Describe("get", type, n, name);
  return ParseBody(conn_->Execute(spec), spec.context);
}

namespace {

// A list request. Without the caller's own timeoutSeconds it carries `timeout=<request
// timeout>` (as client-go does), so the server gives up on it when this client does instead of
// finishing an expensive list nobody reads.
RequestSpec ListRequest(const ResourceType& type, std::string_view ns, const ListOptions& options,
                        std::chrono::milliseconds request_timeout) {
  Query q;
  AddListQuery(q, options);
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(request_timeout).count();
  q.AddIf(!options.timeout_seconds && seconds > 0, "timeout", std::to_string(seconds) + "s");
  RequestSpec spec;
  spec.path = type.CollectionPath(ns) + q.str();
  spec.idempotent = true;
  spec.context = Describe("list", type, ns);
  return spec;
}

}  // namespace

Json Client::List(const ResourceType& type, std::string_view ns, const ListOptions& options) {
  RequestSpec spec = ListRequest(type, ns, options, config().request_timeout);
  return ParseBody(conn_->Execute(spec), spec.context);
}

std::string Client::ListText(const ResourceType& type, std::string_view ns,
                             const ListOptions& options) {
  return std::move(conn_->Execute(ListRequest(type, ns, options, config().request_timeout)).body);
}

void Client::ListPages(const ResourceType& type, std::string_view ns, ListOptions options,
                       std::int64_t page_size,
                       const std::function<std::string(std::string page)>& on_page) {
  options.limit = page_size;
  std::string next = on_page(ListText(type, ns, options));
  while (!next.empty()) {
    // Later pages must not repeat the version constraint: the continue token carries it.
    ListOptions page = options;
    page.continue_token = next;
    page.resource_version.clear();
    page.resource_version_match.clear();
    next = on_page(ListText(type, ns, page));
  }
}

Json Client::ListAll(const ResourceType& type, std::string_view ns, ListOptions options,
                     std::int64_t page_size) {
  return ListAll(type, ns, std::move(options), page_size, nullptr);
}

Json Client::ListAll(const ResourceType& type, std::string_view ns, ListOptions options,
                     std::int64_t page_size, const std::function<void(Json& item)>& each_item) {
  Json result;
  const std::string context = Describe("list", type, ns);
  ListPages(type, ns, std::move(options), page_size, [&](const std::string& text) {
    Json page = ParseText(text, context);
    return Decoding(context, [&] {
      if (!page.is_object()) {
        throw DecodeError(fmt::format("{}: the server's answer is {}, not a list object", context,
                                      page.type_name()),
                          "");
      }
      std::string next = page.value("metadata", Json::object()).value("continue", "");
      auto items = page.find("items");
      if (items != page.end() && !items->is_null() && !items->is_array()) {
        throw DecodeError(fmt::format("{}: the server's field \"items\" is {}, not an array",
                                      context, items->type_name()),
                          "items");
      }
      if (each_item && items != page.end() && items->is_array()) {
        for (auto& item : *items) each_item(item);
      }
      if (result.is_null()) {
        result = std::move(page);
        if (!result["items"].is_array()) result["items"] = Json::array();
      } else if (items != page.end() && items->is_array()) {
        for (auto& item : *items) result["items"].push_back(std::move(item));
      }
      return next;
    });
  });
  if (result.contains("metadata")) result["metadata"].erase("continue");
  return result;
}

// ---- writes -------------------------------------------------------------------------------

Json Client::Create(const ResourceType& type, std::string_view ns, const Json& object,
                    const WriteOptions& options) {
  std::string n = NamespaceFor(*this, type, ns, &object);
  RequestSpec spec = WriteRequest("POST", type.CollectionPath(n), options);
  spec.body = object.dump();
  spec.content_type = "application/json";
  std::string name = MetadataString(object, "name");
  spec.context = Describe("create", type, n, name);
  return ParseBody(conn_->Execute(spec), spec.context);
}

Json Client::Replace(const ResourceType& type, std::string_view ns, const Json& object,
                     const WriteOptions& options, std::string_view subresource) {
  std::string n = NamespaceFor(*this, type, ns, &object);
  std::string name = NameOf(object, "replace");
  validation::RequirePathSegment("metadata.name", name);
  RequestSpec spec = WriteRequest("PUT", type.ObjectPath(n, name, subresource), options);
  spec.body = object.dump();
  spec.content_type = "application/json";
  spec.context = Describe("replace", type, n, name);
  return ParseBody(conn_->Execute(spec), spec.context);
}

Json Client::Patch(const ResourceType& type, std::string_view ns, std::string_view name,
                   PatchType patch_type, const Json& patch, const WriteOptions& options,
                   std::string_view subresource) {
  std::string n = NamespaceFor(*this, type, ns);
  RequestSpec spec = WriteRequest("PATCH", type.ObjectPath(n, name, subresource), options);
  spec.body = patch.dump();
  switch (patch_type) {
    case PatchType::kMerge:
      spec.content_type = "application/merge-patch+json";
      break;
    case PatchType::kStrategicMerge:
      spec.content_type = "application/strategic-merge-patch+json";
      break;
    case PatchType::kJson:
      spec.content_type = "application/json-patch+json";
      break;
  }
  spec.context = Describe("patch", type, n, name);
  return ParseBody(conn_->Execute(spec), spec.context);
}

Json Client::Delete(const ResourceType& type, std::string_view ns, std::string_view name,
                    const DeleteOptions& options) {
  std::string n = NamespaceFor(*this, type, ns);
  Json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!options.propagation_policy.empty()) body["propagationPolicy"] = options.propagation_policy;
  if (options.grace_period_seconds) body["gracePeriodSeconds"] = *options.grace_period_seconds;
  if (!options.precondition_uid.empty()) body["preconditions"]["uid"] = options.precondition_uid;
  if (!options.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  if (options.dry_run) body["dryRun"] = Json::array({"All"});
  RequestSpec spec;
  spec.method = "DELETE";
  spec.path = type.ObjectPath(n, name);
  spec.body = body.dump();
  spec.content_type = "application/json";
  spec.context = Describe("delete", type, n, name);
  return ParseBody(conn_->Execute(spec), spec.context);
}

Json Client::DeleteCollection(const ResourceType& type, std::string_view ns,
                              const ListOptions& selectors, const DeleteOptions& options) {
  std::string n = NamespaceFor(*this, type, ns);
  Query q;
  AddListQuery(q, selectors);
  Json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!options.propagation_policy.empty()) body["propagationPolicy"] = options.propagation_policy;
  if (options.grace_period_seconds) body["gracePeriodSeconds"] = *options.grace_period_seconds;
  if (options.dry_run) body["dryRun"] = Json::array({"All"});
  RequestSpec spec;
  spec.method = "DELETE";
  spec.path = type.CollectionPath(n) + q.str();
  spec.body = body.dump();
  spec.content_type = "application/json";
  spec.context = Describe("deletecollection", type, n);
  return ParseBody(conn_->Execute(spec), spec.context);
}

Json Client::Apply(const Json& object, const ApplyOptions& options) {
  if (!object.is_object()) throw ValidationError("object", "", "apply needs a JSON object");
  auto top_string = [&](const char* key) -> std::string {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return {};
    if (!it->is_string()) throw ValidationError(key, it->dump(), "must be a string");
    return it->get<std::string>();
  };
  std::string api_version = top_string("apiVersion");
  std::string kind = top_string("kind");
  if (api_version.empty()) throw ValidationError("apiVersion", "", "apply needs an apiVersion");
  if (kind.empty()) throw ValidationError("kind", "", "apply needs a kind");
  std::string name = NameOf(object, "apply");
  // Checked before discovery, so that a refused call sends nothing at all.
  validation::RequirePathSegment("metadata.name", name);
  if (std::string object_ns = MetadataString(object, "namespace"); !object_ns.empty()) {
    validation::RequireNamespaceName("metadata.namespace", object_ns);
  }
  if (options.field_manager.empty()) {
    throw ValidationError("fieldManager", "", "server-side apply needs a field manager");
  }
  ResourceType type = Resolve(api_version, kind);
  std::string n = NamespaceFor(*this, type, "", &object);
  Json body = object;
  if (type.namespaced) body["metadata"]["namespace"] = n;
  Query q;
  AddWriteQuery(q, options.dry_run, options.field_manager);
  q.AddIf(options.force, "force", "true");
  RequestSpec spec;
  spec.method = "PATCH";
  spec.path = type.ObjectPath(n, name) + q.str();
  spec.body = body.dump();  // JSON is YAML: the apply content type accepts it
  spec.content_type = "application/apply-patch+yaml";
  spec.context = Describe("apply", type, n, name);
  return ParseBody(conn_->Execute(spec), spec.context);
}

std::vector<ApplyResult> Client::ApplyAll(const std::vector<Json>& objects,
                                          const ApplyOptions& options, int max_in_flight) {
  std::vector<ApplyResult> results(objects.size());
  // Each call stores its own outcome, so one failure never stops the others.
  internal::ForEachConcurrently(
      objects.size(),
      [&](std::size_t i) {
        try {
          results[i].object = Apply(objects[i], options);
        } catch (...) {
          results[i].error = std::current_exception();
        }
      },
      static_cast<std::size_t>(std::max(1, max_in_flight)));
  return results;
}

namespace {

// The checks of ObjectPath that need no resource type, made before discovery so that a refused
// call sends nothing at all.
void CheckObjectArguments(std::string_view ns, std::string_view name) {
  validation::RequirePathSegment("name", name);
  if (!ns.empty()) validation::RequireNamespaceName("namespace", ns);
}

}  // namespace

Json Client::Get(std::string_view api_version, std::string_view kind, std::string_view ns,
                 std::string_view name) {
  CheckObjectArguments(ns, name);
  return Get(Resolve(api_version, kind), ns, name);
}

Json Client::Delete(std::string_view api_version, std::string_view kind, std::string_view ns,
                    std::string_view name, const DeleteOptions& options) {
  CheckObjectArguments(ns, name);
  return Delete(Resolve(api_version, kind), ns, name, options);
}

}  // namespace tfk8s
