// The one pod builder (see pod.hpp).

#include "workloads/pod.hpp"

#include <fmt/format.h>

#include "tfk8s/error.hpp"
#include "workloads/spec_json.hpp"

namespace tfk8s::internal {

Json ResourcesJson(const Resources& r) {
  Json requests = Json::object();
  Json limits = Json::object();
  if (!r.cpu.empty()) requests["cpu"] = r.cpu;
  if (!r.memory.empty()) requests["memory"] = r.memory;
  if (!r.cpu_limit.empty() || !r.cpu.empty()) {
    limits["cpu"] = r.cpu_limit.empty() ? r.cpu : r.cpu_limit;
  }
  if (!r.memory_limit.empty() || !r.memory.empty()) {
    limits["memory"] = r.memory_limit.empty() ? r.memory : r.memory_limit;
  }
  if (r.gpus > 0) {
    // Extended resources cannot be over-committed: requests must equal limits.
    requests[std::string(kGpuResource)] = std::to_string(r.gpus);
    limits[std::string(kGpuResource)] = std::to_string(r.gpus);
  }
  Json out = Json::object();
  if (!requests.empty()) out["requests"] = requests;
  if (!limits.empty()) out["limits"] = limits;
  return out;
}

Json AffinityJson(const Placement& p, bool gpu) {
  Json exprs = Json::array();
  auto in = [&](const char* key, const std::string& value) {
    if (value.empty()) return;
    exprs.push_back({{"key", key}, {"operator", "In"}, {"values", Json::array({value})}});
  };
  in("nodetype", p.nodetype);
  if (gpu) {
    in("gputype", p.gputype);
  } else {
    in("cputype", p.cputype);
  }
  in("pooltype", p.pool);
  if (p.pool == "unshared") in("privatename", p.private_name);
  if (exprs.empty()) return nullptr;
  return {{"nodeAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             {{"nodeSelectorTerms", Json::array({{{"matchExpressions", exprs}}})}}}}}};
}

Json GpuToleration() {
  return {{"key", std::string(kGpuResource)}, {"operator", "Exists"}, {"effect", "NoSchedule"}};
}

Json EnvJson(const std::vector<EnvVar>& env) {
  Json out = Json::array();
  for (const auto& e : env) out.push_back({{"name", e.name}, {"value", e.value}});
  return out;
}

std::vector<std::string> KubeletArgv(std::vector<std::string> argv,
                                     bool expand_variable_references) {
  if (expand_variable_references) return argv;
  for (auto& word : argv) {
    std::string escaped;
    escaped.reserve(word.size());
    for (char c : word) {
      escaped += c;
      if (c == '$') escaped += '$';
    }
    word = std::move(escaped);
  }
  return argv;
}

void AddPlacement(Json* pod_spec, const Placement& placement, bool gpu) {
  Json affinity = AffinityJson(placement, gpu);
  if (!affinity.is_null()) (*pod_spec)["affinity"] = std::move(affinity);
  if (gpu) (*pod_spec)["tolerations"] = Json::array({GpuToleration()});
}

Json ToSpecJson(const Resources& r) {
  return {{"cpu", r.cpu},
          {"memory", r.memory},
          {"cpuLimit", r.cpu_limit},
          {"memoryLimit", r.memory_limit},
          {"gpus", r.gpus}};
}

Json ToSpecJson(const Placement& p) {
  return {{"nodetype", p.nodetype},
          {"cputype", p.cputype},
          {"gputype", p.gputype},
          {"pool", p.pool},
          {"privateName", p.private_name}};
}

Json ToSpecJson(const std::vector<EnvVar>& env) { return EnvJson(env); }

Resources ResourcesFromSpecJson(const Json& j, const std::string& path) {
  Resources r;
  r.cpu = Field<std::string>(j, "cpu", path, "");
  r.memory = Field<std::string>(j, "memory", path, "");
  r.cpu_limit = Field<std::string>(j, "cpuLimit", path, "");
  r.memory_limit = Field<std::string>(j, "memoryLimit", path, "");
  r.gpus = Field<int>(j, "gpus", path, 0);
  return r;
}

Placement PlacementFromSpecJson(const Json& j, const std::string& path) {
  Placement p;
  if (j.is_object() && !j.contains("nodetype") && j.contains("tensorflowNodesOnly")) {
    p.nodetype = Field<bool>(j, "tensorflowNodesOnly", path, true) ? "tensorflow" : "";
  } else {
    p.nodetype = Field<std::string>(j, "nodetype", path, p.nodetype);
  }
  p.cputype = Field<std::string>(j, "cputype", path, "");
  p.gputype = Field<std::string>(j, "gputype", path, "");
  p.pool = Field<std::string>(j, "pool", path, p.pool);
  p.private_name = Field<std::string>(j, "privateName", path, "");
  return p;
}

std::vector<EnvVar> EnvFromSpecJson(const Json& j, const std::string& path) {
  std::vector<EnvVar> env;
  if (j.is_null()) return env;
  if (!j.is_array()) throw ValidationError(path, j.dump(), "must be a list of {name, value}");
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string item = fmt::format("{}[{}].", path, i);
    if (!j[i].is_object()) throw ValidationError(item, j[i].dump(), "must be {name, value}");
    env.push_back({Field<std::string>(j[i], "name", item, ""),
                   Field<std::string>(j[i], "value", item, "")});
  }
  return env;
}

}  // namespace tfk8s::internal
