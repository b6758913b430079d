// DevInstance: external ports in ingress-nginx's tcp-services ConfigMap (pure allocation), and
// user volumes with sharing grants.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <set>
#include <thread>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/quantity.hpp"
#include "tfk8s/validation.hpp"
#include "util/json_parse.hpp"
#include "workloads/common.hpp"
#include "workloads/devinstance_internal.hpp"

namespace tfk8s {

using namespace internal::kinds;

namespace internal {

std::string TcpServiceTarget(const std::string& ns, const std::string& service, int port) {
  return fmt::format("{}/{}:{}", ns, service, port);
}

namespace {

// The target port of an entry pointing at ns/service ("ns/svc:8888" or "ns/svc:8888:PROXY"),
// or -1 for entries of other services.
int TargetOf(const Json& value, const std::string& prefix) {
  if (!value.is_string()) return -1;
  const std::string& v = value.get_ref<const std::string&>();
  if (v.compare(0, prefix.size(), prefix) != 0) return -1;
  std::string rest = v.substr(prefix.size());
  std::size_t end = rest.find(':');
  std::string digits = rest.substr(0, end);
  if (digits.empty() || digits.size() > 5 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoi(digits);
}

// External ports are the keys; anything that is not a number is left alone.
int ExternalOf(const std::string& key) {
  if (key.empty() || key.size() > 5 || key.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoi(key);
}

}  // namespace

std::map<int, int> TcpAssignments(const Json& data, const std::string& ns,
                                  const std::string& service) {
  std::map<int, int> out;
  if (!data.is_object()) return out;
  std::string prefix = ns + "/" + service + ":";
  for (auto it = data.begin(); it != data.end(); ++it) {
    int target = TargetOf(it.value(), prefix);
    int external = ExternalOf(it.key());
    if (target > 0 && external > 0 && !out.count(target)) out[target] = external;
  }
  return out;
}

std::map<int, int> AssignTcpPorts(Json* data, const std::string& ns, const std::string& service,
                                  const std::vector<int>& targets, int min, int max,
                                  bool* changed) {
  *changed = false;
  if (!data->is_object()) *data = Json::object();
  std::string prefix = ns + "/" + service + ":";
  std::set<int> wanted(targets.begin(), targets.end());
  std::map<int, int> out;
  std::set<int> taken;
  std::vector<std::string> stale;
  for (auto it = data->begin(); it != data->end(); ++it) {
    int external = ExternalOf(it.key());
    int target = TargetOf(it.value(), prefix);
    if (target < 0) {
      if (external > 0) taken.insert(external);
      continue;
    }
    // One entry per wanted target; duplicates and targets no longer served go.
    if (wanted.count(target) && !out.count(target) && external > 0) {
      out[target] = external;
      taken.insert(external);
    } else {
      stale.push_back(it.key());
    }
  }
  for (const auto& key : stale) {
    data->erase(key);
    *changed = true;
  }
  int next = min;
  for (int target : wanted) {
    if (out.count(target)) continue;
    while (next <= max && taken.count(next)) ++next;
    if (next > max) {
      throw DevInstanceFailed(
          fmt::format("no free external port left in {}..{} for {}/{} (tcp-services is full)", min,
                      max, ns, service),
          DevInstanceStatus{});
    }
    (*data)[std::to_string(next)] = TcpServiceTarget(ns, service, target);
    out[target] = next;
    taken.insert(next);
    *changed = true;
  }
  return out;
}

int RemoveTcpPorts(Json* data, const std::string& ns, const std::string& service) {
  if (!data->is_object()) return 0;
  std::string prefix = ns + "/" + service + ":";
  std::vector<std::string> keys;
  for (auto it = data->begin(); it != data->end(); ++it) {
    if (TargetOf(it.value(), prefix) > 0) keys.push_back(it.key());
  }
  for (const auto& k : keys) data->erase(k);
  return static_cast<int>(keys.size());
}

// Read-modify-write of ingress-nginx's tcp-services ConfigMap. The write is a Replace carrying
// the resourceVersion that was read, so two instances allocating at the same moment cannot both
// win: the loser gets Conflict, re-reads (now seeing the winner's ports) and tries again.
void UpdateTcpServices(Client& client, const DevExposeSpec& x,
                       const std::function<bool(Json* data)>& mutate, bool may_create) {
  constexpr int kAttempts = 30;
  std::minstd_rand jitter(std::random_device{}());  // spreads retries; not a secret
  for (int attempt = 1;; ++attempt) {
    Json cm;
    bool exists = true;
    try {
      cm = internal::GetChecked(client, kConfigMaps, x.configmap_namespace, x.configmap_name);
    } catch (const NotFound&) {
      if (!may_create) return;  // nothing to release
      if (!x.create_configmap) {
        throw NotFound(ErrorKind::kNotFound,
                       fmt::format("ConfigMap {}/{} (ingress-nginx tcp-services) does not exist; "
                                   "create it or set expose.create_configmap",
                                   x.configmap_namespace, x.configmap_name),
                       404, "NotFound");
      }
      exists = false;
      cm = {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", {{"name", x.configmap_name}, {"namespace", x.configmap_namespace}}}};
    }
    Json data = cm.contains("data") && cm["data"].is_object() ? cm["data"] : Json::object();
    if (!mutate(&data)) return;
    cm["data"] = data;
    try {
      if (exists) {
        client.Replace(kConfigMaps, x.configmap_namespace, cm);
      } else {
        client.Create(kConfigMaps, x.configmap_namespace, cm);
      }
      return;
    } catch (const Conflict&) {
      if (attempt >= kAttempts) throw;
    } catch (const AlreadyExists&) {
      if (attempt >= kAttempts) throw;
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(5 + static_cast<int>(jitter() % 20) * std::min(attempt, 5)));
  }
}

}  // namespace internal

// ---- volumes and sharing ------------------------------------------------------------------

std::map<std::string, DevShareMode> VolumeGrants(const Json& pvc) {
  std::map<std::string, DevShareMode> out;
  std::string text = internal::AnnotationOf(pvc, kSharedWithAnnotation);
  if (text.empty()) return out;
  Json grants;
  try {
    grants = internal::ParseJson(text, kSharedWithAnnotation);
  } catch (const DecodeError&) {
    return out;  // nested too deeply: grants nothing, like any malformed value
  }
  if (!grants.is_object()) return out;  // malformed: grants nothing (fail closed)
  for (auto it = grants.begin(); it != grants.end(); ++it) {
    if (!it.value().is_string()) continue;
    const std::string& mode = it.value().get_ref<const std::string&>();
    if (mode == "ro") out[it.key()] = DevShareMode::kReadOnly;
    if (mode == "rw") out[it.key()] = DevShareMode::kReadWrite;
  }
  return out;
}

std::string MountRefusal(const Json& pvc, const std::string& user, bool read_only) {
  std::string owner = internal::LabelOf(pvc, kOwnerLabel);
  std::string claim = internal::NameOf(pvc);
  if (!owner.empty() && owner == user) return {};
  auto grants = VolumeGrants(pvc);
  auto it = grants.find(user);
  if (it == grants.end()) {
    if (owner.empty()) {
      return fmt::format("PersistentVolumeClaim {} has no {} label and is not shared with {}",
                         claim, kOwnerLabel, user);
    }
    return fmt::format("PersistentVolumeClaim {} belongs to {} and is not shared with {}", claim,
                       owner, user);
  }
  if (!read_only && it->second == DevShareMode::kReadOnly) {
    return fmt::format(
        "PersistentVolumeClaim {} is shared with {} read-only; mount it with read_only = true",
        claim, user);
  }
  return {};
}

Json CreateVolume(Client& client, const DevVolumeSpec& spec) {
  validation::RequireDns1123Label("owner", spec.owner);
  validation::RequireDns1123Subdomain("name", spec.name);
  validation::RequireDns1123Label("namespace", spec.namespace_name);
  Quantity size;
  std::string why;
  if (!Quantity::TryParse(spec.size, &size, &why)) throw ValidationError("size", spec.size, why);
  if (size.Sign() <= 0) throw ValidationError("size", spec.size, "must be positive");
  if (spec.access_modes.empty()) throw ValidationError("accessModes", "", "needs one mode");
  for (const auto& m : spec.access_modes) {
    if (m != "ReadWriteOnce" && m != "ReadOnlyMany" && m != "ReadWriteMany") {
      throw ValidationError("accessModes", m,
                            "must be ReadWriteOnce, ReadOnlyMany or ReadWriteMany");
    }
  }
  Json pvc = {{"apiVersion", "v1"},
              {"kind", "PersistentVolumeClaim"},
              {"metadata",
               {{"name", spec.name},
                {"namespace", spec.namespace_name},
                {"labels",
                 {{internal::kManagedBy, "tfk8s"},
                  {kOwnerLabel, spec.owner},
                  {internal::kDevComponentLabel, "volume"}}}}},
              {"spec",
               {{"accessModes", spec.access_modes},
                {"resources", {{"requests", {{"storage", spec.size}}}}}}}};
  if (!spec.storage_class.empty()) pvc["spec"]["storageClassName"] = spec.storage_class;
  return client.Create(kPvcs, spec.namespace_name, pvc);
}

namespace {

// Read-modify-write of a PVC's grants, conditional on its resourceVersion.
void UpdateGrants(Client& client, const std::string& ns, const std::string& claim,
                  const std::string& owner,
                  const std::function<void(std::map<std::string, DevShareMode>*)>& change) {
  validation::RequireDns1123Label("owner", owner);
  constexpr int kAttempts = 10;
  for (int attempt = 0;; ++attempt) {
    Json pvc = internal::GetChecked(client, kPvcs, ns, claim);
    std::string actual = internal::LabelOf(pvc, kOwnerLabel);
    if (actual != owner) {
      throw ValidationError(
          "claim", claim,
          fmt::format("belongs to {}, not {}: only the owner can share it",
                      actual.empty() ? "nobody (no tfk8s.io/owner label)" : actual, owner));
    }
    auto grants = VolumeGrants(pvc);
    change(&grants);
    Json annotation = Json::object();
    for (const auto& [user, mode] : grants) annotation[user] = ToString(mode);
    pvc["metadata"]["annotations"][kSharedWithAnnotation] = annotation.dump();
    try {
      client.Replace(kPvcs, ns, pvc);  // carries metadata.resourceVersion
      return;
    } catch (const Conflict&) {
      if (attempt + 1 >= kAttempts) throw;
    }
  }
}

}  // namespace

void ShareVolume(Client& client, const std::string& ns, const std::string& claim,
                 const std::string& owner, const std::string& grantee, DevShareMode mode) {
  validation::RequireDns1123Label("grantee", grantee);
  if (grantee == owner) throw ValidationError("grantee", grantee, "already owns the volume");
  UpdateGrants(client, ns, claim, owner,
               [&](std::map<std::string, DevShareMode>* g) { (*g)[grantee] = mode; });
}

void UnshareVolume(Client& client, const std::string& ns, const std::string& claim,
                   const std::string& owner, const std::string& grantee) {
  UpdateGrants(client, ns, claim, owner,
               [&](std::map<std::string, DevShareMode>* g) { g->erase(grantee); });
}

}  // namespace tfk8s
