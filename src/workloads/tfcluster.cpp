// TFCluster lifecycle: apply (with pre-flight and pruning), status, wait (watch driven),
// logs, scale, delete. All I/O goes through the generic Client.

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "tfk8s/tfcluster.hpp"
#include "tfk8s/validation.hpp"
#include "tfk8s/yaml.hpp"
#include "util/concurrent.hpp"
#include "workloads/common.hpp"
#include "workloads/identity.hpp"
#include "workloads/start_script.hpp"
#include "workloads/tfcluster_internal.hpp"
#include "workloads/unowned.hpp"
#include "workloads/wait.hpp"
#include "workloads/workload_impl.hpp"

namespace tfk8s {

using internal::Items;
using namespace internal::kinds;
using internal::RoleOf;

namespace {

// Every kind a cluster may own besides the root (for pruning and status). Not Secrets: the
// only one is the session's, known by name, and the in-cluster launching Role may not list
// Secrets (see SessionSecret).
const ResourceType* const kOwnedKinds[] = {&kServices,    &kJobs,        &kStatefulSets,
                                           &kDeployments, &kReplicaSets, &kPvcs};

// The session's credentials Secret as these credentials see it.
struct SessionSecret {
  enum State { kAbsent, kPresent, kUnreadable } state = kAbsent;
  Json object;                                // kPresent: as stored
  std::optional<DevCredentials> credentials;  // kPresent and complete: the kept password
};

SessionSecret ReadSessionSecret(Client& client, const TFClusterSpec& spec) {
  SessionSecret out;
  try {
    out.object = internal::GetChecked(client, kSecrets, spec.namespace_name,
                                      internal::TFSessionSecretName(spec));
    out.state = SessionSecret::kPresent;
    out.credentials = internal::CredentialsFromSecret(out.object);
  } catch (const NotFound&) {
  } catch (const Forbidden&) {
    // The launching Role: it may create the Secret but not read it (nor anyone else's).
    out.state = SessionSecret::kUnreadable;
  }
  return out;
}

// What ComputeTFStatus never reads of a pod or Job (most of their size): decoding skips them.
const std::vector<std::string_view> kNotReadByStatus = {
    "managedFields", "containers",  "initContainers", "volumes",
    "affinity",      "tolerations", "template"};

std::string Selector(const TFClusterSpec& spec) {
  return std::string(kClusterLabel) + "=" + spec.name;
}

}  // namespace

std::string ToString(TFClusterPhase phase) {
  switch (phase) {
    case TFClusterPhase::kPending:
      return "Pending";
    case TFClusterPhase::kRunning:
      return "Running";
    case TFClusterPhase::kSucceeded:
      return "Succeeded";
    case TFClusterPhase::kFailed:
      return "Failed";
    case TFClusterPhase::kUnknown:
      break;
  }
  return "Unknown";
}

TFClusterFailed::TFClusterFailed(std::string what, TFClusterStatus status)
    : Error(ErrorKind::kWorkloadFailed, std::move(what)), status_(std::move(status)) {}

Json TFClusterStatus::ToJson() const {
  Json out = FieldsToJson(*this);
  out["not_ready"] = NotReady();
  out["table"] = Table();
  return out;
}

std::string TFClusterStatus::Table() const {
  std::string out = fmt::format("{:<10} {:>5}  {:<36} {:<10} {:<16} {:>8}  {}\n", "ROLE", "INDEX",
                                "POD", "PHASE", "NODE", "RESTARTS", "REASON");
  for (const auto& r : replicas) {
    out += fmt::format("{:<10} {:>5}  {:<36} {:<10} {:<16} {:>8}  {}\n", r.role, r.index,
                       r.pod.empty() ? "-" : r.pod, r.phase, r.node.empty() ? "-" : r.node,
                       r.restarts, r.reason);
  }
  out += fmt::format("cluster: {}{}{}\n", ToString(phase), message.empty() ? "" : ": ", message);
  for (const auto& e : events) out += fmt::format("event: {}\n", e);
  if (session) {
    out += fmt::format("session: user {}, password from Session() (Python: session())\n",
                       session->user);
    for (const auto& e : session->endpoints) {
      out += fmt::format("  {:<8} {}\n", e.tool, e.connect);
    }
  }
  return out;
}

int TFClusterStatus::NotReady() const {
  int n = 0;
  for (const auto& r : replicas) n += (r.phase != "Running" && r.phase != "Succeeded");
  return n;
}

// ---- status computation (pure, from listed objects) -----------------------------------------

namespace {

using internal::ReplicaKey;

std::vector<ReplicaKey> ExpectedReplicas(const TFClusterSpec& spec) {
  std::vector<ReplicaKey> out;
  for (const char* role : {"chief", "ps", "worker", "evaluator"}) {
    for (int i = 0; i < RoleOf(spec, role).replicas; ++i) out.push_back({role, i});
  }
  if (spec.session) out.push_back({"session", 0});
  return out;
}

std::string JobCondition(const Json& job, const char* type) {
  for (const auto& c : job.value("status", Json::object()).value("conditions", Json::array())) {
    if (c.value("type", "") == type && c.value("status", "") == "True") {
      std::string reason = c.value("reason", type);
      std::string message = c.value("message", "");
      return message.empty() ? reason : fmt::format("{}: {}", reason, message);
    }
  }
  return {};
}

}  // namespace

namespace internal {

int PodIndex(const Json& pod) {
  std::string label = LabelOf(pod, kIndexLabel);
  if (!label.empty()) return std::atoi(label.c_str());
  std::string name = NameOf(pod);
  auto dash = name.rfind('-');
  if (dash == std::string::npos) return 0;
  return std::atoi(name.c_str() + dash + 1);
}

DevAccess SessionAccess(const TFClusterSpec& spec, const std::vector<Json>& services) {
  DevAccess access;
  if (!spec.session) return access;
  const TFSessionSpec& s = *spec.session;
  const std::string name = spec.name + "-session";
  for (const auto& [tool, service, port] : {std::tuple{"jupyter", name, s.jupyter_port},
                                            std::tuple{"ssh", name + "-ssh", s.ssh_port}}) {
    DevEndpoint e;
    e.tool = tool;
    e.port = port;
    e.cluster_address = fmt::format("{}.{}.svc:{}", service, spec.namespace_name, port);
    for (const auto& svc : services) {
      if (NameOf(svc) != service) continue;
      const Json& ports = svc.value("spec", Json::object()).value("ports", Json::array());
      for (const auto& p : ports) {
        if (p.value("name", "") == tool) e.external_port = p.value("nodePort", 0);
      }
    }
    access.endpoints.push_back(std::move(e));
  }
  FillConnect(&access);
  return access;
}

TFClusterStatus ComputeTFStatus(const TFClusterSpec& spec, const TFObserved& seen,
                                std::vector<std::string>* fatal_reasons) {
  TFClusterStatus st;
  st.name = spec.name;
  st.namespace_name = spec.namespace_name;
  if (spec.session) st.session = SessionAccess(spec, seen.services);
  std::map<std::pair<std::string, int>, const Json*> newest;
  for (const auto& pod : seen.pods) {
    if (pod.value("metadata", Json::object()).contains("deletionTimestamp")) continue;
    std::string role = LabelOf(pod, kRoleLabel);
    if (role.empty()) continue;
    auto key = std::make_pair(role, role == "session" ? 0 : PodIndex(pod));
    const Json*& slot = newest[key];
    std::string created = pod["metadata"].value("creationTimestamp", "");
    if (!slot || (*slot)["metadata"].value("creationTimestamp", "") < created) slot = &pod;
  }
  std::map<std::string, const Json*> jobs_by_name;
  for (const auto& j : seen.jobs) jobs_by_name[internal::NameOf(j)] = &j;

  bool any_failed = false;
  std::string fail_message;
  for (const auto& key : ExpectedReplicas(spec)) {
    TFReplicaStatus r;
    r.role = key.role;
    r.index = key.index;
    auto it = newest.find({key.role, key.index});
    std::string job_name =
        key.role == "session" ? spec.name + "-session" : ReplicaName(spec, key.role, key.index);
    const Json* job = spec.topology == TFTopology::kPerReplica || key.role == "session"
                          ? (jobs_by_name.count(job_name) ? jobs_by_name[job_name] : nullptr)
                          : nullptr;
    if (it != newest.end()) {
      const Json& pod = *it->second;
      r.pod = internal::NameOf(pod);
      r.phase = pod.value("status", Json::object()).value("phase", "Pending");
      r.node = pod.value("spec", Json::object()).value("nodeName", "");
      r.restarts = internal::PodRestarts(pod);
      bool fatal = false;
      r.reason = PodProblem(pod, &fatal);
      if (key.role == "session" && r.phase == "Running" && !internal::PodReady(pod)) {
        // The session is usable once Jupyter accepts connections (its readiness probe).
        r.phase = "Pending";
        if (r.reason.empty()) {
          r.reason = "ContainersNotReady: Jupyter is not accepting connections yet";
        }
      }
      if (fatal && fatal_reasons) {
        fatal_reasons->push_back(fmt::format("{}-{}: {}", r.role, r.index, r.reason));
      }
    } else {
      r.phase = "Missing";
    }
    if (job) {
      std::string complete = JobCondition(*job, "Complete");
      std::string failed = JobCondition(*job, "Failed");
      if (!complete.empty()) r.phase = "Succeeded";
      if (!failed.empty()) {
        r.phase = "Failed";
        r.reason = failed;
      }
    }
    if (r.phase == "Failed" && r.role != "session") {
      any_failed = true;
      if (fail_message.empty()) {
        fail_message = fmt::format("{}-{} failed{}{}", r.role, r.index,
                                   r.reason.empty() ? "" : ": ", r.reason);
      }
    }
    st.replicas.push_back(std::move(r));
  }

  for (auto& [key, text] : LossEvents(spec, seen)) {
    for (auto& r : st.replicas) {
      if (r.role == key.role && r.index == key.index && r.phase == "Missing") r.reason = text;
    }
    st.events.push_back(std::move(text));
  }

  auto find = [&](const std::string& role, int index) -> const TFReplicaStatus* {
    for (const auto& r : st.replicas) {
      if (r.role == role && r.index == index) return &r;
    }
    return nullptr;
  };
  // TensorFlow's convention: the chief (or worker 0 without one) decides success.
  const TFReplicaStatus* decider = spec.chief.replicas > 0 ? find("chief", 0) : find("worker", 0);
  if (decider && decider->phase == "Succeeded") {
    st.phase = TFClusterPhase::kSucceeded;
    st.message = fmt::format("{}-0 completed", decider->role);
  } else if (any_failed) {
    st.phase = TFClusterPhase::kFailed;
    st.message = fail_message;
  } else if (!seen.quota_rejections.empty()) {
    st.phase = TFClusterPhase::kPending;
    st.message = seen.quota_rejections.front();
    if (fatal_reasons) fatal_reasons->push_back(seen.quota_rejections.front());
  } else if (st.NotReady() == 0) {
    st.phase = TFClusterPhase::kRunning;
    st.message = fmt::format("{} replicas running", st.replicas.size());
    for (const auto& e : st.events) st.message += "; " + e;
  } else {
    st.phase = TFClusterPhase::kPending;
    for (const auto& r : st.replicas) {
      if (r.phase != "Running" && r.phase != "Succeeded") {
        st.message =
            fmt::format("{} of {} replicas not ready; {}-{}: {}", st.NotReady(), st.replicas.size(),
                        r.role, r.index, r.reason.empty() ? r.phase : r.reason);
        break;
      }
    }
  }
  return st;
}

}  // namespace internal

namespace {

using Observed = internal::TFObserved;
using internal::ComputeTFStatus;

// The status from the pods, reading the Jobs only when they can matter. When the newest pod of
// every replica is Running (and not being deleted), the Jobs cannot change the result, and
// reading them (as large as the pods) is skipped: a Job is Complete only once its pod has
// Succeeded, and the Job controller deletes a failed Job's pods before it records the Failed
// condition, so a pod read as Running means its Job had not failed when the pods were read.
TFClusterStatus StatusFromPods(const TFClusterSpec& spec, Observed seen,
                               const std::function<std::vector<Json>()>& list_jobs) {
  TFClusterStatus from_pods = ComputeTFStatus(spec, seen, nullptr);
  bool all_running = std::all_of(from_pods.replicas.begin(), from_pods.replicas.end(),
                                 [](const TFReplicaStatus& r) { return r.phase == "Running"; });
  if (all_running) return from_pods;
  seen.jobs = list_jobs();
  return ComputeTFStatus(spec, seen, nullptr);
}

}  // namespace

// ---- TFCluster ------------------------------------------------------------------------------

namespace {

// Every object of the cluster but its root.
std::vector<Json> ChildrenOf(const TFClusterSpec& spec) {
  auto all = RenderTFCluster(spec);
  all.erase(all.begin());  // the root
  return all;
}

}  // namespace

std::vector<Json> TFCluster::Children() const { return ChildrenOf(spec_); }

namespace {

// What the server holds of a cluster before a change, gathered with overlapping requests (one
// round trip of latency instead of one per kind).
struct Survey {
  std::vector<std::vector<Json>> owned;  // per kOwnedKinds entry; a kind not served is empty
  SessionSecret session;                 // read only when the spec has a session
  FitResult placement;                   // these two only when asked for: placement
  FitResult quota_all;                   // and quota for every child, as if none existed yet
};

// `resolve`: objects whose kinds to look up meanwhile (discovery the writes would otherwise
// wait for, one group version after another).
Survey SurveyCluster(Client& client, const TFClusterSpec& spec, const std::vector<Json>& children,
                     bool preflight, const std::vector<Json>& resolve = {}) {
  constexpr std::size_t kinds = std::size(kOwnedKinds);
  std::set<std::pair<std::string, std::string>> unique;
  for (const auto& o : resolve) unique.insert({o.value("apiVersion", ""), o.value("kind", "")});
  std::vector<std::pair<std::string, std::string>> lookups(unique.begin(), unique.end());
  Survey out;
  out.owned.resize(kinds);
  ListOptions o;
  o.label_selector = Selector(spec);
  // Tasks: one list per owned kind, the session's Secret, then (for a pre-flight) placement
  // and quota, then lookups.
  const std::size_t checks = preflight ? 2 : 0;
  internal::ForEachConcurrently(kinds + 1 + checks + lookups.size(), [&](std::size_t i) {
    if (i < kinds) {
      try {
        out.owned[i] = Items(client.ListAll(*kOwnedKinds[i], spec.namespace_name, o));
      } catch (const NotFound&) {
      }
      return;
    }
    if (i == kinds) {
      if (spec.session) out.session = ReadSessionSecret(client, spec);
      return;
    }
    --i;
    if (i == kinds && checks) {
      out.placement = CheckPlacement(client, children);
    } else if (i == kinds + 1 && checks) {
      out.quota_all = CheckQuota(client, spec.namespace_name, children);
    } else {
      const auto& [api_version, kind] = lookups[i - kinds - checks];
      client.Resolve(api_version, kind);
    }
  });
  return out;
}

// Quota (for what does not exist yet: re-applies and scale-ups add only their new objects) and
// the survey's placement, as one verdict. The survey must have been asked for placement.
FitResult PreflightOf(Client& client, const TFClusterSpec& spec, const std::vector<Json>& children,
                      const Survey& survey) {
  std::set<std::pair<std::string, std::string>> existing;
  for (std::size_t i = 0; i < survey.owned.size(); ++i) {
    for (const auto& item : survey.owned[i]) {
      existing.insert({kOwnedKinds[i]->kind, internal::NameOf(item)});
    }
  }
  // An unreadable session Secret counts as new: possibly one object too many, never too few.
  if (survey.session.state == SessionSecret::kPresent) {
    existing.insert({"Secret", internal::TFSessionSecretName(spec)});
  }
  // Demand only grows with objects: when every child fits, or none exists yet, the survey's
  // check is the answer; only a tight quota on a re-apply needs a second look.
  FitResult out = survey.quota_all;
  if (!out.fits && !existing.empty()) {
    std::vector<Json> fresh;
    for (const auto& c : children) {
      if (!existing.count({c.value("kind", ""), internal::NameOf(c)})) fresh.push_back(c);
    }
    out = CheckQuota(client, spec.namespace_name, fresh);
  }
  out.Merge(survey.placement);
  return out;
}

}  // namespace

std::vector<Json> TFCluster::Apply(const TFApplyOptions& options) {
  spec_.Validate();
  const bool prune = options.prune && !options.dry_run;
  // Listed before anything is written: what this apply creates is wanted by definition, so
  // the same listing serves the quota check and pruning.
  Survey survey;
  FitResult fit;
  TFRenderOptions ro;
  if (spec_.session) {
    // The session keeps the password of its Secret across applies; a new session gets a new
    // one. (For the pre-flight the Secret counts as an object; its content does not.)
    ro.session_credentials = DevCredentials{};
  }
  auto rendered = RenderTFCluster(spec_, ro);
  if (options.preflight || prune) {
    std::vector<Json> children(rendered.begin() + 1, rendered.end());
    survey = SurveyCluster(client_, spec_, children, options.preflight, rendered);
    if (options.preflight) {
      fit = PreflightOf(client_, spec_, children, survey);
      internal::AddNamespacePodSecurity(client_, spec_.namespace_name, children,
                                        options.pod_security, &fit);
    }
  }
  if (!fit.fits) {
    std::vector<std::string> resources;
    for (const auto& s : fit.shortfalls) resources.push_back(s.resource);
    std::string what = fmt::format("TFCluster {}/{} does not fit; nothing was created: {}",
                                   spec_.namespace_name, spec_.name, fit.Message());
    if (!fit.shortfalls.empty()) {
      throw QuotaExceeded(what, "Forbidden", fit.Message(), {}, resources);
    }
    TFClusterStatus status;
    status.name = spec_.name;
    status.namespace_name = spec_.namespace_name;
    status.phase = TFClusterPhase::kFailed;
    status.message = fit.Message();
    throw TFClusterFailed(what, std::move(status));
  }
  ApplyOptions apply;
  apply.dry_run = options.dry_run;
  apply.force = true;  // tfk8s owns these objects' fields
  // The loaded root only (its UID): one re-created under its name meanwhile is refused.
  Json root = client_.Apply(internal::WithUidPrecondition(rendered.front(), root_uid_), apply);
  ro.root_uid = root["metadata"].value("uid", "");
  if (!options.dry_run) root_uid_ = ro.root_uid;
  SessionSecret session;
  if (spec_.session) {
    session = (options.preflight || prune) ? survey.session : ReadSessionSecret(client_, spec_);
    ro.session_credentials =
        session.credentials ? *session.credentials : DevCredentials::Generate();
  }
  rendered = RenderTFCluster(spec_, ro);
  std::vector<Json> children;
  for (auto& c : std::vector<Json>(rendered.begin() + 1, rendered.end())) {
    if (c.value("kind", "") != "Secret") {
      children.push_back(std::move(c));
      continue;
    }
    // The session keeps the password of its Secret across applies. Written whole, before the
    // session's pod exists: created when absent; rewritten only when its content is not what
    // the kept password renders (a Secret from before argon2 hashes); left alone when these
    // credentials may not read it (then its password is not known here, see Session()).
    if (session.state == SessionSecret::kPresent &&
        session.object.value("data", Json()) == c.value("data", Json())) {
      continue;
    }
    bool created = internal::WriteSecretWhole(client_, c, session.state == SessionSecret::kPresent,
                                              options.dry_run);
    if (created && !options.dry_run && session.state != SessionSecret::kPresent) {
      session_password_ = ro.session_credentials->password;
    }
  }
  auto results = client_.ApplyAll(children, apply);
  std::vector<Json> applied{root};
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto& r = results[i];
    if (!r.ok() && children[i].value("kind", "") == "Job") {
      // A Job's pod template is immutable: a changed replica (new TF_CONFIG after a scale, a
      // new image) is replaced, which restarts it with the new configuration. A dry run would
      // replace it too: the Job as rendered stands for the one the replacement would create.
      try {
        std::rethrow_exception(r.error);
      } catch (const Invalid&) {
        if (options.dry_run) {
          r.object = children[i];
        } else {
          RecreateJob(children[i], apply);
          r.object = internal::GetChecked(client_, kJobs, spec_.namespace_name,
                                          internal::NameOf(children[i]));
        }
        r.error = nullptr;
      } catch (...) {
      }
    }
    if (!r.ok()) std::rethrow_exception(r.error);
    applied.push_back(std::move(r.object));
  }
  if (prune) {
    // Converge down: delete what this spec no longer renders (e.g. workers 5 → 3).
    std::set<std::pair<std::string, std::string>> wanted;
    for (const auto& c : children) wanted.insert({c.value("kind", ""), internal::NameOf(c)});
    // A PVC the user asked to keep is no longer labelled as ours (see Delete): never listed.
    std::vector<std::pair<const ResourceType*, std::string>> stale;
    for (std::size_t i = 0; i < survey.owned.size(); ++i) {
      for (const auto& item : survey.owned[i]) {
        const ResourceType* t = kOwnedKinds[i];
        // Only what the root owns: anyone who may label an object could put it in the list.
        if (!internal::OwnedBy(item, ro.root_uid)) continue;
        if (!wanted.count({t->kind, internal::NameOf(item)})) {
          stale.emplace_back(t, internal::NameOf(item));
        }
      }
    }
    if (!spec_.session) {
      // By name: Secrets are not listed (see kOwnedKinds); NotFound when there was none.
      stale.emplace_back(&kSecrets, internal::TFSessionSecretName(spec_));
    }
    DeleteOptions del;
    del.propagation_policy = "Background";
    internal::ForEachConcurrently(stale.size(), [&](std::size_t i) {
      try {
        client_.Delete(*stale[i].first, spec_.namespace_name, stale[i].second, del);
      } catch (const NotFound&) {
      }
    });
  }
  return applied;
}

void TFCluster::RecreateJob(const Json& job, const ApplyOptions& apply) {
  const std::string& ns = spec_.namespace_name;
  std::string name = internal::NameOf(job);
  DeleteOptions del;
  del.propagation_policy = "Foreground";  // the old pod goes before the new one comes
  try {
    client_.Delete(kJobs, ns, name, del);
  } catch (const NotFound&) {
  }
  ListOptions sel;
  sel.field_selector = "metadata.name=" + name;
  Informer watch(client_, kJobs, ns, sel);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  bool gone = false;
  while (!gone && std::chrono::steady_clock::now() < deadline) {
    auto ev = watch.Next(std::chrono::milliseconds(500));
    gone = (ev && ev->type == WatchEventType::kDeleted) || (!ev && watch.Snapshot().empty());
  }
  if (!gone) {
    throw Timeout(ErrorKind::kTimeout,
                  fmt::format("job {}/{} was not deleted in time to be replaced", ns, name));
  }
  client_.Apply(job, apply);
}

void TFCluster::Scale(const std::string& role, int replicas, const TFApplyOptions& options) {
  TFClusterSpec next = spec_;
  internal::MutableRoleOf(next, role).replicas = replicas;
  set_spec(std::move(next));
  Apply(options);
}

namespace {

// A NodePort session's two Services (their node ports are the session's external ports);
// none otherwise.
std::vector<Json> SessionServices(const Client& client, const TFClusterSpec& spec) {
  std::vector<Json> out;
  if (!spec.session || spec.session->service_type != "NodePort") return out;
  const std::string name = spec.name + "-session";
  for (const std::string& service : {name, name + "-ssh"}) {
    out.push_back(internal::GetChecked(client, kServices, spec.namespace_name, service));
  }
  return out;
}

}  // namespace

TFClusterStatus TFCluster::StatusOf(Client client, const std::string& ns, const std::string& name) {
  internal::RequireWorkloadName(ns, name, validation::RequireDns1035Label);
  // The pods and Jobs are selected by the cluster label alone, so they need not wait for the
  // spec; the spec then says which replicas to expect.
  ListOptions o;
  o.label_selector = std::string(kClusterLabel) + "=" + name;
  Json root;
  Observed seen;
  internal::ForEachConcurrently(2, [&](std::size_t i) {
    if (i == 0) {
      try {
        root = internal::GetChecked(client, kConfigMaps, ns, name);
      } catch (const NotFound& e) {
        internal::ThrowWorkloadNotFound(e, TFClusterKind::kName, kConfigMaps.kind,
                                        ns.empty() ? client.default_namespace() : ns, name);
      }
    } else {
      seen.pods = internal::ListItemsWithout(client, kPods, ns, o, kNotReadByStatus);
    }
  });
  TFClusterSpec spec = internal::TFSpecFromRoot(root);
  spec.Validate();
  seen.services = SessionServices(client, spec);
  internal::ReadNodes(client, internal::NodesToRead(seen.pods, seen.nodes), &seen.nodes);
  return StatusFromPods(spec, std::move(seen), [&] {
    return internal::ListItemsWithout(client, kJobs, ns, o, kNotReadByStatus);
  });
}

namespace {

// Why a pod's container waits: Status() leaves out the normal waits (ContainerCreating,
// PodInitializing), which a replica that has not started should still name.
std::string WaitingReason(Client client, const std::string& ns, const std::string& pod) {
  try {
    Json p = client.Get(kPods, ns, pod);
    const Json& status = p.value("status", Json::object());
    for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
      for (const auto& cs : status.value(list, Json::array())) {
        const Json& state = cs.value("state", Json::object());
        if (auto w = state.find("waiting"); w != state.end() && w->is_object()) {
          std::string reason = w->value("reason", "");
          if (!reason.empty()) return reason;
        }
      }
    }
  } catch (const NotFound&) {
  }
  return "";
}

}  // namespace

void TFCluster::Logs(const WorkloadLogOptions& options,
                     const std::function<bool(const WorkloadLogLine&)>& on_line) {
  // Which replicas: every one, a role's ("worker") or one ("worker-1"); each is resolved to a
  // running (or finished) pod, waiting for pending ones.
  std::vector<ReplicaKey> wanted;
  for (const auto& k : ExpectedReplicas(spec_)) {
    if (options.source.empty() || options.source == k.role ||
        options.source == fmt::format("{}-{}", k.role, k.index)) {
      wanted.push_back(k);
    }
  }
  if (wanted.empty()) {
    throw ValidationError("source", options.source,
                          "no such role or replica in this cluster (e.g. worker, worker-1)");
  }

  // A bounded queue: producers (one per pod) block when the consumer is behind.
  constexpr std::size_t kMaxQueued = 4096;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<WorkloadLogLine> queue;
  int producers_left = static_cast<int>(wanted.size());
  std::atomic<bool> stop{false};
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<std::optional<LogStream>>> streams;

  // Replicas whose container has not started: each says so at once (a notice line); without
  // follow they are not waited for, and a cluster none of whose replicas started is an error.
  std::vector<std::string> not_started;
  auto push = [&](WorkloadLogLine line) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return stop || queue.size() < kMaxQueued; });
    if (stop) return false;
    queue.push_back(std::move(line));
    cv.notify_all();
    return true;
  };

  for (const auto& key : wanted) {
    auto slot = std::make_shared<std::optional<LogStream>>();
    streams.push_back(slot);
    threads.emplace_back([&, key, slot] {
      std::string replica = fmt::format("{}-{}", key.role, key.index);
      try {
        // The replica's pod whose container started.
        std::string pod;
        bool noticed = false;
        auto until = std::chrono::steady_clock::now() + options.pending_wait;
        while (!stop && std::chrono::steady_clock::now() < until) {
          std::string phase = "Missing";
          std::string reason;
          std::string waiting_pod;
          for (const auto& r : Status().replicas) {
            if (r.role != key.role || r.index != key.index) continue;
            phase = r.phase;
            reason = r.reason;
            waiting_pod = r.pod;
            if (!r.pod.empty() &&
                (r.phase == "Running" || r.phase == "Succeeded" || r.phase == "Failed")) {
              pod = r.pod;
            }
          }
          if (!pod.empty()) break;
          if (!noticed) {
            noticed = true;
            if (reason.empty() && !waiting_pod.empty())
              reason = WaitingReason(client_, spec_.namespace_name, waiting_pod);
            std::string why = reason.empty() ? phase : fmt::format("{} \u2014 {}", phase, reason);
            if (!options.follow) {
              {
                std::lock_guard lock(mu);
                not_started.push_back(fmt::format("{} ({})", replica, why));
              }
              push({replica, "(not started: " + why + ")"});
              break;
            }
            if (!push({replica, "(not started: " + why + "; its logs follow when it starts)"})) {
              break;
            }
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        if (pod.empty() && options.follow && !stop) {
          throw Timeout(ErrorKind::kTimeout,
                        fmt::format("replica {} has no started pod after {} ms", replica,
                                    options.pending_wait.count()));
        }
        if (!pod.empty()) {
          LogOptions lo = options.ForPod();
          {
            std::lock_guard lock(mu);
            if (!stop) {
              slot->emplace(internal::OpenPodLogs(client_, spec_.namespace_name, pod, lo, replica));
            }
          }
          while (!stop && *slot) {
            auto line = (*slot)->NextLine(std::chrono::milliseconds(500));
            if (!line) {
              if ((*slot)->ended()) break;
              continue;
            }
            std::unique_lock lock(mu);
            cv.wait(lock, [&] { return stop || queue.size() < kMaxQueued; });
            if (stop) break;
            queue.push_back({replica, std::move(*line)});
            cv.notify_all();
          }
        }
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first_error) first_error = std::current_exception();
      }
      std::lock_guard lock(mu);
      --producers_left;
      cv.notify_all();
    });
  }

  auto finish = [&] {
    {
      std::lock_guard lock(mu);
      stop = true;
      for (auto& s : streams) {
        if (*s) (*s)->Cancel();
      }
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
  };
  try {
    while (true) {
      if (options.cancelled && options.cancelled()) break;
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(200),
                  [&] { return !queue.empty() || producers_left == 0; });
      if (queue.empty()) {
        if (producers_left == 0) break;
        continue;
      }
      WorkloadLogLine line = std::move(queue.front());
      queue.pop_front();
      cv.notify_all();
      lock.unlock();
      if (!on_line(line)) break;
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
  if (first_error) std::rethrow_exception(first_error);
  if (!not_started.empty() && not_started.size() == wanted.size()) {
    std::sort(not_started.begin(), not_started.end());
    std::string which;
    for (const auto& n : not_started) which += (which.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::kWorkloadFailed,
                fmt::format("no replica of TFCluster {}/{} has started, so there are no logs yet: "
                            "{} (-f waits for them)",
                            spec_.namespace_name, spec_.name, which));
  }
}

void TFCluster::Delete(const TFDeleteOptions& options) {
  const std::string& ns = spec_.namespace_name;
  if (options.keep_storage && spec_.storage && spec_.storage->existing_claim.empty()) {
    // Release the PVC first: no owner, no cluster label, so neither the garbage collector nor
    // a later prune removes it.
    try {
      client_.Patch(
          kPvcs, ns, internal::ClaimName(spec_), PatchType::kJson,
          Json::array({{{"op", "remove"}, {"path", "/metadata/ownerReferences"}},
                       {{"op", "remove"}, {"path", "/metadata/labels/tfk8s.io~1cluster"}}}));
    } catch (const NotFound&) {
    } catch (const ApiError&) {
      // Already released (nothing to remove): fine.
    }
  }
  DeleteOptions del;
  del.propagation_policy = options.foreground || options.wait ? "Foreground" : "Background";
  try {
    Json root = internal::GetChecked(client_, kConfigMaps, ns, spec_.name);
    internal::RequireSameObject(root, root_uid_, "TFCluster", ns, spec_.name);
    del.precondition_uid = root["metadata"].value("uid", "");
    client_.Delete(kConfigMaps, ns, spec_.name, del);
  } catch (const NotFound&) {
    root_uid_.clear();
    return;
  }
  root_uid_.clear();  // a later Apply makes a new root
  // What `kubectl apply` of `tfk8s render` created before the root existed has no owner, so
  // the garbage collector leaves it: it goes here (a kept claim stays).
  std::vector<Json> rendered = RenderTFCluster(spec_);
  if (options.keep_storage) {
    std::erase_if(rendered, [](const Json& o) { return o.value("kind", "") == kPvcs.kind; });
  }
  auto unowned = internal::DeleteUnownedRendered(
      client_, rendered, {{kClusterLabel, spec_.name}, {internal::kinds::kManagedBy, "tfk8s"}},
      del.propagation_policy);
  if (!options.wait) return;
  // Foreground deletion keeps the root until every dependent is gone: its DELETED event is
  // the signal.
  ListOptions sel;
  sel.field_selector = "metadata.name=" + spec_.name;
  Informer root(client_, kConfigMaps, ns, sel);
  auto deadline = std::chrono::steady_clock::now() + *options.wait;
  bool present = true;
  while (present && std::chrono::steady_clock::now() < deadline) {
    auto ev = root.Next(std::chrono::milliseconds(500));
    if (ev && ev->type == WatchEventType::kDeleted) present = false;
    if (!ev && root.Snapshot().empty()) present = false;
  }
  if (present || !internal::WaitUntilGone(client_, ns, unowned, deadline)) {
    internal::ThrowStillDeleting("TFCluster", ns, spec_.name, *options.wait);
  }
}

void TFCluster::CleanUpAfterSuccess() {
  Json root = internal::GetChecked(client_, kConfigMaps, spec_.namespace_name, spec_.name);
  internal::RequireSameObject(root, root_uid_, "TFCluster", spec_.namespace_name, spec_.name);
  const std::string root_uid = root["metadata"].value("uid", "");
  DeleteOptions del;
  del.propagation_policy = "Background";
  ListOptions o;
  o.label_selector = Selector(spec_) + "," + kRoleLabel + " in (ps,worker,evaluator)";
  for (const ResourceType* t : {&kJobs, &kStatefulSets, &kServices}) {
    for (const auto& item : Items(client_.ListAll(*t, spec_.namespace_name, o))) {
      if (!internal::OwnedBy(item, root_uid)) continue;  // labelled, but not the cluster's
      del.precondition_uid = item["metadata"].value("uid", "");
      try {
        client_.Delete(*t, spec_.namespace_name, internal::NameOf(item), del);
      } catch (const NotFound&) {
      } catch (const Conflict&) {
        // Re-created under its name meanwhile: not the object that was listed.
      }
    }
  }
}

DevStartResult TFCluster::Session() {
  if (!spec_.session) {
    throw ValidationError("session", "", "this cluster has no session");
  }
  const std::string& ns = spec_.namespace_name;
  const std::string secret = internal::TFSessionSecretName(spec_);
  DevStartResult out;
  try {
    auto credentials =
        internal::CredentialsFromSecret(internal::GetChecked(client_, kSecrets, ns, secret));
    if (!credentials) {
      throw ValidationError("session", secret, "the credentials Secret is incomplete");
    }
    out.password = credentials->password;
  } catch (const Forbidden& e) {
    // The in-cluster launching Role may create Secrets but read none, so that one user's
    // instance cannot read another's passwords: only the object whose Apply created the
    // Secret knows its password.
    if (!session_password_) {
      throw Forbidden(
          ErrorKind::kForbidden,
          fmt::format("TFCluster {}/{}: the session's password is in Secret {}, which these "
                      "credentials may not read (a DevInstance's launching Role reads no "
                      "Secrets, so that no user reads another's); call session() on the "
                      "TFCluster whose apply() created the session, or with credentials that "
                      "may read the Secret",
                      ns, spec_.name, secret),
          e.http_code(), e.reason(), e.server_message(), e.causes());
    }
    out.password = *session_password_;
  }
  out.access = internal::SessionAccess(spec_, SessionServices(client_, spec_));
  return out;
}

WorkloadLogStream TFCluster::StreamLogs(WorkloadLogOptions options) const {
  return WorkloadLogStream::WithOptions(
      std::move(options),
      [self = *this](const WorkloadLogOptions& o, const WorkloadLogStream::Emit& emit) mutable {
        self.Logs(o, emit);
      });
}

// ---- the kind's parts of the shared life (Workload<TFClusterKind>) ---------------------------

namespace internal {

template <>
struct KindOps<TFClusterKind> {
  static constexpr KindFacts<TFClusterSpec> kFacts{
      "cluster",       validation::RequireDns1035Label,
      kClusterLabel,   &kConfigMaps,
      &TFSpecFromRoot, [](const TFClusterSpec& spec) { return RenderTFCluster(spec); }};
  static std::string RefSelector() {
    return std::string(kComponentLabel) + "=root," + kinds::kManagedBySelector;
  }
  // Every object but the root owned by it (the root itself has no owner).
  static std::vector<Json> RenderOwned(const TFClusterSpec& spec, const std::string& root_uid) {
    TFRenderOptions o;
    o.root_uid = root_uid;
    std::vector<Json> objects = RenderTFCluster(spec, o);
    objects.front()["metadata"].erase("ownerReferences");
    return objects;
  }

  static FitResult Preflight(Client& client, const TFClusterSpec& spec) {
    std::vector<Json> children = ChildrenOf(spec);
    FitResult fit =
        PreflightOf(client, spec, children, SurveyCluster(client, spec, children, true));
    AddNamespacePodSecurity(client, spec.namespace_name, children, {}, &fit);
    return fit;
  }

  static TFClusterStatus Status(Client& client, const TFClusterSpec& spec) {
    ListOptions o;
    o.label_selector = Selector(spec);
    Observed seen;
    seen.pods = ListItemsWithout(client, kPods, spec.namespace_name, o, kNotReadByStatus);
    seen.services = SessionServices(client, spec);
    ReadNodes(client, NodesToRead(seen.pods, seen.nodes), &seen.nodes);
    return StatusFromPods(spec, std::move(seen), [&] {
      return ListItemsWithout(client, kJobs, spec.namespace_name, o, kNotReadByStatus);
    });
  }

  /// The wait watches pods, Jobs and the quota's refusals to create pods.
  static std::vector<WaitWatch> Watches(const TFClusterSpec& spec) {
    return {{&kPods, ByLabel(Selector(spec))},
            {&kJobs, ByLabel(Selector(spec))},
            {&kEvents, ByField("reason=FailedCreate")}};
  }

  // A wait tells every loss it saw, also once the lost pod's object is gone (its node came
  // back): it keeps such pods and their nodes' state until it returns.
  static void RememberLosses(JudgeContext<TFClusterSpec>& wait, Observed* seen) {
    auto& nodes = wait.Memory<std::map<std::string, NodeReadiness>>("nodes");
    auto& lost = wait.Memory<std::map<std::string, Json>>("lost pods");
    try {
      ReadNodes(wait.client, NodesToRead(seen->pods, nodes), &nodes);
    } catch (const Error&) {
      // A node not read now is read on the next change: the wait goes on.
    }
    std::set<std::string> present;
    for (const auto& pod : seen->pods) {
      std::string uid = pod["metadata"].value("uid", "");
      present.insert(uid);
      auto node = nodes.find(pod.value("spec", Json::object()).value("nodeName", ""));
      if (node != nodes.end() && !node->second.ready &&
          pod["metadata"].contains("deletionTimestamp")) {
        lost[uid] = pod;
      }
    }
    for (const auto& [uid, pod] : lost) {
      if (!present.count(uid)) seen->pods.push_back(pod);
    }
    seen->nodes = nodes;
  }

  static std::pair<TFClusterStatus, WaitVerdict> Judge(JudgeContext<TFClusterSpec>& wait,
                                                       const WaitSnapshot& snapshot) {
    const TFClusterSpec& spec = wait.spec;
    Observed seen;
    seen.pods = snapshot.objects[0];
    seen.jobs = snapshot.objects[1];
    RememberLosses(wait, &seen);
    std::set<std::string> job_uids;
    for (const auto& j : seen.jobs) job_uids.insert(j["metadata"].value("uid", ""));
    seen.quota_rejections = QuotaRefusals(snapshot.objects[2], job_uids, "pods");
    std::vector<std::string> fatal;
    TFClusterStatus st = ComputeTFStatus(spec, seen, &fatal);
    for (auto& r : st.replicas) {
      if (r.reason.rfind("Unschedulable", 0) != 0) continue;
      if (auto never = wait.NeverPlaced([&] { return ChildrenOf(spec); })) {
        fatal.push_back(fmt::format("{}-{}: {}", r.role, r.index, *never));
        break;
      }
      // Not yet: capacity may free up, a node come back or be added. The wait goes on and
      // says so (the message names the first replica not ready by its reason).
      std::string yet = UnschedulableYet(r.reason);
      if (auto at = st.message.find(r.reason); at != std::string::npos) {
        st.message.replace(at, r.reason.size(), yet);
      }
      r.reason = std::move(yet);
    }
    WaitVerdict verdict;
    if (st.phase == TFClusterPhase::kFailed) {
      verdict.failure = std::make_exception_ptr(
          TFClusterFailed(fmt::format("{} failed: {}", wait.what, st.message), st));
    } else if (!fatal.empty()) {
      verdict.failure = std::make_exception_ptr(
          TFClusterFailed(fmt::format("{} cannot start: {}", wait.what, fatal.front()), st));
    }
    verdict.done = st.phase == TFClusterPhase::kSucceeded ||
                   (wait.until == WaitUntil::kReady && st.phase == TFClusterPhase::kRunning);
    return Judged(std::move(st), std::move(verdict));
  }
};

}  // namespace internal

template class Workload<TFClusterKind>;

}  // namespace tfk8s
