// DevInstance lifecycle: create, apply, start / stop / restart, external ports, status,
// watch-driven wait, access, list, delete. All I/O goes through the generic Client.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <tuple>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/validation.hpp"
#include "tfk8s/yaml.hpp"
#include "util/base64.hpp"
#include "workloads/common.hpp"
#include "workloads/cron.hpp"
#include "workloads/devinstance_internal.hpp"
#include "workloads/start_script.hpp"
#include "workloads/unowned.hpp"
#include "workloads/wait.hpp"
#include "workloads/workload_impl.hpp"

namespace tfk8s {

using internal::DevPodName;
using internal::DevPorts;
using internal::DevSecretName;
using internal::Items;
using namespace internal::kinds;
using internal::LabelOf;

DevInstanceFailed::DevInstanceFailed(std::string what, DevInstanceStatus status)
    : Error(ErrorKind::kWorkloadFailed, std::move(what)), status_(std::move(status)) {}

// ---- formatting -----------------------------------------------------------------------------

std::optional<DevEndpoint> DevAccess::Find(const std::string& tool) const {
  for (const auto& e : endpoints) {
    if (e.tool == tool) return e;
  }
  return std::nullopt;
}

std::string DevAccess::Table() const {
  std::string out =
      fmt::format("{:<12} {:>5}  {:<40} {}\n", "TOOL", "PORT", "CLUSTER ADDRESS", "CONNECT");
  for (const auto& e : endpoints) {
    out += fmt::format("{:<12} {:>5}  {:<40} {}\n", e.tool, e.port, e.cluster_address, e.connect);
  }
  return out;
}

std::string DevStartResult::ToString() const {
  return "user: " + access.user + "\npassword: REDACTED\n" + access.Table();
}

Json DevInstanceStatus::ToJson() const {
  Json out = FieldsToJson(*this);
  out["table"] = Table();
  return out;
}

std::string DevInstanceStatus::Table() const {
  std::string out = fmt::format("phase:   {}\n", tfk8s::ToString(phase));
  if (!pod.empty()) {
    out +=
        fmt::format("pod:     {} on {} ({} restarts)\n", pod, node.empty() ? "-" : node, restarts);
  }
  if (!ready_tools.empty()) out += fmt::format("tools:   {}\n", fmt::join(ready_tools, ", "));
  if (!reason.empty()) out += fmt::format("reason:  {}\n", reason);
  if (!message.empty() && message != reason) out += fmt::format("message: {}\n", message);
  return out;
}

// ---- status (pure) ----------------------------------------------------------------------------

namespace internal {

DevInstanceStatus ComputeDevStatus(const DevInstanceSpec& spec, const DevObserved& seen,
                                   std::vector<std::string>* fatal) {
  DevInstanceStatus st;
  if (!seen.statefulset.is_object()) {
    st.message = "the instance does not exist";
    return st;
  }
  int desired = seen.statefulset.value("spec", Json::object()).value("replicas", 1);
  const Json* pod = nullptr;
  bool terminating = false;
  for (const auto& p : seen.pods) {
    if (NameOf(p) != DevPodName(spec)) continue;
    if (p.value("metadata", Json::object()).contains("deletionTimestamp")) {
      terminating = true;
      continue;
    }
    pod = &p;
  }
  if (pod) {
    st.pod = NameOf(*pod);
    st.node = pod->value("spec", Json::object()).value("nodeName", "");
    st.restarts = PodRestarts(*pod);
    const Json& pod_status = pod->value("status", Json::object());
    if (auto t = ParseTimestamp(pod_status.value("startTime", ""))) st.started_at = *t;
  }
  if (desired == 0) {
    st.phase = DevPhase::kStopped;
    st.message = pod || terminating ? "stopping" : "stopped";
    return st;
  }
  if (!pod) {
    st.phase = DevPhase::kPending;
    if (!seen.quota_rejections.empty()) {
      st.reason = seen.quota_rejections.front();
      if (fatal) fatal->push_back(st.reason);
    } else {
      st.reason = terminating ? "waiting for the previous pod to terminate"
                              : "waiting for the pod to be created";
    }
    st.message = st.reason;
    return st;
  }
  const Json& status = pod->value("status", Json::object());
  std::string phase = status.value("phase", "Pending");
  bool is_fatal = false;
  std::string problem = PodProblem(*pod, &is_fatal);
  if (phase == "Failed" || phase == "Succeeded") {
    st.phase = DevPhase::kFailed;
    std::string why = status.value("message", status.value("reason", ""));
    st.reason = !problem.empty()
                    ? problem
                    : fmt::format("the pod {}{}{}", phase == "Failed" ? "failed" : "exited",
                                  why.empty() ? "" : ": ", why);
    if (fatal) fatal->push_back(st.reason);
  } else if (phase == "Running" && PodReady(*pod)) {
    st.phase = DevPhase::kRunning;
    // Ready means the readiness probe found every served tool's port listening.
    for (const auto& p : internal::ServedToolPorts(spec.tools)) st.ready_tools.push_back(p.name);
    st.message = fmt::format("running on {}", st.node);
    return st;
  } else {
    st.phase = DevPhase::kPending;
    if (!problem.empty()) {
      st.reason = problem;
      if (is_fatal && fatal) fatal->push_back(problem);
    } else if (phase == "Running") {
      st.reason = "starting: the tools do not accept connections yet";
    } else {
      st.reason = st.node.empty() ? "waiting to be scheduled" : "starting on " + st.node;
    }
  }
  st.message = st.reason;
  return st;
}

}  // namespace internal

// ---- lifecycle helpers
// ---------------------------------------------------------------------------

namespace {

// tfk8s owns every field of these objects: take them over from other managers.
ApplyOptions Forced() {
  ApplyOptions a;
  a.force = true;
  return a;
}

using internal::GetOptional;

int DesiredReplicas(const Json& sts) {
  return sts.value("spec", Json::object()).value("replicas", 1);
}

// Mount grants, checked before anything is written: reads the claims only. Returns whether the
// owner's home claim exists already.
bool CheckGrants(Client& client, const DevInstanceSpec& spec) {
  // Tenancy (devinstance_tenancy.cpp): whose namespace this is, before anything else is read.
  internal::CheckDevTenancy(client, spec);
  const std::string& ns = spec.namespace_name;
  for (std::size_t i = 0; i < spec.mounts.size(); ++i) {
    const VolumeMount& m = spec.mounts[i];
    std::string field = fmt::format("mounts[{}].claim", i);
    auto pvc = GetOptional(client, kPvcs, ns, m.claim);
    if (!pvc) {
      throw ValidationError(
          field, m.claim, fmt::format("no PersistentVolumeClaim {} in namespace {}", m.claim, ns));
    }
    std::string why = MountRefusal(*pvc, spec.owner, m.read_only);
    if (!why.empty()) throw ValidationError(field, m.claim, why);
  }
  if (!spec.home.enabled) return false;
  auto home = GetOptional(client, kPvcs, ns, HomeClaimName(spec.owner));
  if (!home) return false;
  std::string owner = LabelOf(*home, kOwnerLabel);
  if (owner != spec.owner) {
    throw ValidationError("home", HomeClaimName(spec.owner),
                          fmt::format("exists in {} but belongs to {}", ns,
                                      owner.empty() ? "nobody (no tfk8s.io/owner label)" : owner));
  }
  return true;
}

// What creating or starting would add, against the quota; and the pod against the nodes.
FitResult PreflightObjects(Client& client, const DevInstanceSpec& spec, const Json* existing,
                           bool home_exists, const PodSecurityPreflight& pod_security = {}) {
  DevRenderOptions o;
  o.running = true;
  o.credentials = DevCredentials{};  // the Secret counts as an object; its content does not
  auto rendered = RenderDevInstance(spec, o);
  FitResult fit;
  if (!existing) {
    std::vector<Json> fresh;
    for (const auto& obj : rendered) {
      if (obj.value("kind", "") == "PersistentVolumeClaim" && home_exists) continue;
      fresh.push_back(obj);
    }
    fit = CheckQuota(client, spec.namespace_name, fresh);
  } else if (DesiredReplicas(*existing) == 0) {
    // A stopped instance's objects exist already: only its pod comes back.
    fit = CheckQuotaForPods(client, spec.namespace_name, rendered.front()["spec"]["template"], 1);
  }
  fit.Merge(CheckPlacement(client, {rendered.front()}));
  internal::AddNamespacePodSecurity(client, spec.namespace_name, {rendered.front()}, pod_security,
                                    &fit);
  return fit;
}

void ThrowIfNotFit(const DevInstanceSpec& spec, const FitResult& fit, const char* action) {
  if (fit.fits) return;
  std::string what = fmt::format("DevInstance {}/{} cannot {}; nothing was changed: {}",
                                 spec.namespace_name, spec.name, action, fit.Message());
  if (!fit.shortfalls.empty()) {
    std::vector<std::string> resources;
    for (const auto& s : fit.shortfalls) resources.push_back(s.resource);
    throw QuotaExceeded(what, "Forbidden", fit.Message(), {}, resources);
  }
  DevInstanceStatus st;
  st.phase = DevPhase::kFailed;
  st.reason = fit.Message();
  st.message = fit.Message();
  throw DevInstanceFailed(what, st);
}

// `uid`: the StatefulSet's that was loaded or made ("" for the first apply): the server refuses
// the apply if the object now under that name is another one.
Json ApplyStatefulSet(Client& client, const DevInstanceSpec& spec, bool running,
                      const std::string& uid) {
  DevRenderOptions o;
  o.running = running;
  return client.Apply(internal::WithUidPrecondition(RenderDevInstance(spec, o).front(), uid),
                      Forced());
}

DevAccess BaseAccess(const DevInstanceSpec& spec) {
  DevAccess a;
  for (const auto& p : DevPorts(spec)) {
    DevEndpoint& e = a.endpoints.emplace_back();
    e.tool = p.name;
    e.port = p.port;
    e.cluster_address = fmt::format("{}.{}.svc:{}", spec.name, spec.namespace_name, p.port);
  }
  return a;
}

// The events saying the StatefulSet could not create its pod.
std::string FailedCreateSelector(const DevInstanceSpec& spec) {
  return "involvedObject.name=" + spec.name + ",reason=FailedCreate";
}

// The quota's refusals of this StatefulSet's pod since tfk8s last applied it (older ones belong
// to an earlier start).
std::vector<std::string> QuotaRejections(const Json& sts, const std::vector<Json>& events) {
  std::string since;
  for (const auto& f : sts["metadata"].value("managedFields", Json::array())) {
    if (f.value("manager", "") == "tfk8s") since = std::max(since, f.value("time", ""));
  }
  return internal::QuotaRefusals(events, {sts.value("metadata", Json::object()).value("uid", "")},
                                 "its pod", since);
}

}  // namespace

// ---- DevInstance --------------------------------------------------------------------------------

Json DevInstance::GetRoot() {
  Json sts = internal::GetChecked(client_, kStatefulSets, spec_.namespace_name, spec_.name);
  internal::RequireSameObject(sts, root_uid_, "DevInstance", spec_.namespace_name, spec_.name);
  // From here on, writes of it carry this UID (an instance made from a spec adopts the
  // StatefulSet it finds on first use).
  if (root_uid_.empty()) root_uid_ = sts["metadata"].value("uid", "");
  return sts;
}

std::vector<DevInstanceSummary> DevInstance::List(Client client, const std::string& ns,
                                                  const std::string& owner,
                                                  const std::string& label_selector) {
  ListOptions o;
  o.label_selector = internal::WithOwner(
      std::string(internal::kInstanceLabel) + "," + internal::kManagedBy + "=tfk8s", owner);
  if (!label_selector.empty()) o.label_selector += "," + label_selector;
  std::vector<DevInstanceSummary> out;
  for (const auto& sts : Items(client.ListAll(kStatefulSets, ns, o))) {
    DevInstanceSummary s;
    const Json& md = sts.value("metadata", Json::object());
    s.namespace_name = md.value("namespace", "");
    s.name = md.value("name", "");
    s.created = md.value("creationTimestamp", "");
    s.owner = LabelOf(sts, kOwnerLabel);
    const Json& containers = sts.value("spec", Json::object())
                                 .value("template", Json::object())
                                 .value("spec", Json::object())
                                 .value("containers", Json::array());
    if (!containers.empty()) s.image = containers.front().value("image", "");
    s.running = DesiredReplicas(sts) > 0;
    s.ready = sts.value("status", Json::object()).value("readyReplicas", 0) > 0;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.namespace_name, a.name) < std::tie(b.namespace_name, b.name);
  });
  return out;
}

Json DevInstance::ApplyObjects(bool running, const std::optional<DevCredentials>& credentials) {
  Json sts = ApplyStatefulSet(client_, spec_, running, root_uid_);
  root_uid_ = sts["metadata"].value("uid", "");
  DevRenderOptions o;
  o.running = running;
  o.root_uid = sts["metadata"].value("uid", "");
  o.credentials = credentials;
  std::vector<Json> children;
  for (auto& obj : RenderDevInstance(spec_, o)) {
    std::string kind = obj.value("kind", "");
    // The StatefulSet is applied; the home PVC is only ever created (never resized or taken).
    if (kind == "StatefulSet" || kind == "PersistentVolumeClaim") continue;
    if (kind == "Secret") {
      // Written whole before the pod can (re)start, so the pod reads these credentials.
      internal::WriteSecretWhole(client_, obj, true);
      continue;
    }
    children.push_back(std::move(obj));
  }
  for (auto& r : client_.ApplyAll(children, Forced())) {
    if (!r.ok()) std::rethrow_exception(r.error);
  }
  return sts;
}

void DevInstance::SyncExposure(const DevInstanceSpec& spec, bool running) {
  const DevExposeSpec& x = spec.expose;
  if (x.backend == DevExposure::kIngressTcp) {
    std::vector<int> targets;
    if (running) {
      for (const auto& p : internal::DevExposedPorts(spec)) targets.push_back(p.port);
    }
    internal::UpdateTcpServices(
        client_, x,
        [&](Json* data) {
          bool changed = false;
          internal::AssignTcpPorts(data, spec.namespace_name, spec.name, targets, x.port_min,
                                   x.port_max, &changed);
          return changed;
        },
        running);
  }
  if (x.backend == DevExposure::kNodePort && !running) {
    // Node ports are a cluster-wide resource: give them back while stopped.
    try {
      client_.Delete(kServices, spec.namespace_name, internal::DevNodePortName(spec));
    } catch (const NotFound&) {
    }
  }
}

DevStartResult DevInstance::Started(std::string password) {
  DevStartResult result;
  result.password = std::move(password);
  try {
    result.access = Access();
  } catch (const Error&) {
    // The password must reach the caller even if the exposure cannot be read back.
    result.access = BaseAccess(spec_);
    internal::FillConnect(&result.access);
  }
  return result;
}

DevStartResult DevInstance::Create(const DevCreateOptions& options) {
  const std::string& ns = spec_.namespace_name;
  bool home_exists = CheckGrants(client_, spec_);
  if (GetOptional(client_, kStatefulSets, ns, spec_.name)) {
    throw AlreadyExists(
        ErrorKind::kAlreadyExists,
        fmt::format("DevInstance {}/{} already exists (use Apply() or Start())", ns, spec_.name),
        409, "AlreadyExists");
  }
  if (options.preflight) {
    ThrowIfNotFit(spec_,
                  PreflightObjects(client_, spec_, nullptr, home_exists, options.pod_security),
                  "be created");
  }
  if (spec_.home.enabled && !home_exists) {
    try {
      client_.Create(kPvcs, ns, RenderDevInstance(spec_).back());
    } catch (const AlreadyExists&) {
      CheckGrants(client_, spec_);  // created meanwhile: it must still be the owner's
    }
  }
  DevCredentials credentials = DevCredentials::Generate();
  root_uid_.clear();  // a new StatefulSet (an earlier one of this object was deleted)
  try {
    // Stopped first: the Secret and Services exist before the pod can start.
    ApplyObjects(false, credentials);
    if (options.start) {
      SyncExposure(spec_, true);
      ApplyStatefulSet(client_, spec_, true, root_uid_);
    }
  } catch (...) {
    // Leave nothing half-made behind; the home PVC stays (it is the user's).
    try {
      SyncExposure(spec_, false);
    } catch (...) {
    }
    try {
      DeleteOptions del;
      del.propagation_policy = "Background";
      client_.Delete(kStatefulSets, ns, spec_.name, del);
    } catch (...) {
    }
    throw;
  }
  return Started(std::move(credentials.password));
}

void DevInstance::Apply() {
  const std::string& ns = spec_.namespace_name;
  CheckGrants(client_, spec_);
  Json sts = GetRoot();
  bool running = DesiredReplicas(sts) > 0;
  std::optional<DevInstanceSpec> previous;
  try {
    previous = internal::DevSpecFromObject(sts);
  } catch (const internal::StoredIdentityError&) {
    throw;  // never act on a spec that names another instance (its exposure, below)
  } catch (const ValidationError&) {
    // Unreadable (damaged, or from an older tfk8s): nothing of it to clean up.
  } catch (const NotFound&) {
  }
  // Keep the password; rewrite the Secret so changed authorized keys reach it. Credentials
  // that may not read Secrets (the launching Role: one user's instance must not read
  // another's password) leave it as it is, which is right unless the keys changed.
  std::optional<DevCredentials> credentials;
  try {
    if (auto secret = GetOptional(client_, kSecrets, ns, DevSecretName(spec_))) {
      credentials = internal::CredentialsFromSecret(*secret);
    }
  } catch (const Forbidden& e) {
    if (!previous || previous->security.ssh_authorized_keys != spec_.security.ssh_authorized_keys) {
      throw Forbidden(
          ErrorKind::kForbidden,
          fmt::format("DevInstance {}/{}: changing security.sshAuthorizedKeys keeps the password, "
                      "which is in Secret {}; these credentials may not read it (nothing was "
                      "changed). Restart the instance for a new password, or apply with "
                      "credentials that may read the Secret",
                      ns, spec_.name, DevSecretName(spec_)),
          e.http_code(), e.reason(), e.server_message(), e.causes());
    }
  }
  ApplyObjects(running, credentials);
  if (spec_.expose.backend != DevExposure::kNodePort) {
    try {
      client_.Delete(kServices, ns, internal::DevNodePortName(spec_));
    } catch (const NotFound&) {
    }
  }
  // Entries made under an earlier exposure setting go before the new ones are made.
  if (previous && previous->expose.backend == DevExposure::kIngressTcp &&
      (spec_.expose.backend != DevExposure::kIngressTcp ||
       previous->expose.configmap_namespace != spec_.expose.configmap_namespace ||
       previous->expose.configmap_name != spec_.expose.configmap_name)) {
    SyncExposure(*previous, false);
  }
  if (running) SyncExposure(spec_, true);
}

DevStartResult DevInstance::Launch(const DevStartOptions& options) {
  const std::string& ns = spec_.namespace_name;
  CheckGrants(client_, spec_);
  Json sts = GetRoot();
  bool was_running = DesiredReplicas(sts) > 0;
  if (options.preflight) {
    ThrowIfNotFit(spec_, PreflightObjects(client_, spec_, &sts, true),
                  was_running ? "restart" : "start");
  }
  DevCredentials credentials = DevCredentials::Generate();
  // The Secret is written before the pod (re)starts, so the pod reads the new password.
  ApplyObjects(was_running, credentials);
  SyncExposure(spec_, true);
  ApplyStatefulSet(client_, spec_, true, root_uid_);
  if (was_running) {
    // The running pod holds the old password: replace it (the StatefulSet recreates it).
    try {
      Json pod = internal::GetChecked(client_, kPods, ns, DevPodName(spec_));
      if (!pod["metadata"].contains("deletionTimestamp")) {
        DeleteOptions del;
        del.precondition_uid = pod["metadata"].value("uid", "");
        client_.Delete(kPods, ns, DevPodName(spec_), del);
      }
    } catch (const NotFound&) {
    } catch (const Conflict&) {
      // Already replaced by someone else: the new pod reads the new Secret anyway.
    }
  }
  return Started(std::move(credentials.password));
}

DevStartResult DevInstance::Start(const DevStartOptions& options) { return Launch(options); }

DevStartResult DevInstance::Restart(const DevStartOptions& options) { return Launch(options); }

void DevInstance::Stop(const DevStopOptions& options) {
  // NotFound when absent, Conflict when replaced since it was loaded.
  GetRoot();
  ApplyStatefulSet(client_, spec_, false, root_uid_);
  if (!options.keep_ports) SyncExposure(spec_, false);
}

void DevInstance::Delete(const DevDeleteOptions& options) {
  const std::string& ns = spec_.namespace_name;
  std::string home = HomeClaimName(spec_.owner);
  if (options.delete_home_volume && spec_.home.enabled) {
    for (const auto& other : List(client_, ns, spec_.owner)) {
      if (other.name != spec_.name) {
        throw ValidationError("deleteHomeVolume", home,
                              "still used by the owner's instance " + other.name);
      }
    }
  }
  // The loaded StatefulSet only: one re-created under its name meanwhile is refused (Conflict),
  // before its ports are touched.
  auto sts = GetOptional(client_, kStatefulSets, ns, spec_.name);
  if (sts) internal::RequireSameObject(*sts, root_uid_, "DevInstance", ns, spec_.name);
  // Ports first: if releasing fails, the instance is intact and the call can be repeated.
  SyncExposure(spec_, false);
  if (sts) {
    DeleteOptions del;
    del.propagation_policy = options.wait ? "Foreground" : "Background";
    del.precondition_uid = (*sts)["metadata"].value("uid", "");
    try {
      client_.Delete(kStatefulSets, ns, spec_.name, del);
    } catch (const NotFound&) {
    }
  }
  root_uid_.clear();  // a later Create makes a new StatefulSet
  // What `kubectl apply` of `tfk8s render` created before the StatefulSet existed has no
  // owner, so the garbage collector leaves it: it goes here (never the home volume, which has
  // no instance label).
  auto unowned = internal::DeleteUnownedRendered(
      client_, RenderDevInstance(spec_),
      {{internal::kInstanceLabel, spec_.name}, {kOwnerLabel, spec_.owner}, {kManagedBy, "tfk8s"}},
      options.wait ? "Foreground" : "Background");
  if (options.delete_home_volume && spec_.home.enabled) {
    if (auto pvc = GetOptional(client_, kPvcs, ns, home)) {
      if (LabelOf(*pvc, kOwnerLabel) == spec_.owner) {
        DeleteOptions del;
        del.precondition_uid = (*pvc)["metadata"].value("uid", "");
        try {
          client_.Delete(kPvcs, ns, home, del);
        } catch (const NotFound&) {
        }
      }
    }
  }
  if (!options.wait) return;
  auto deadline = std::chrono::steady_clock::now() + *options.wait;
  auto gone = [](const Json* o) { return o == nullptr; };
  // Foreground deletion keeps the StatefulSet until its pod, Services and Secret are gone.
  bool done = internal::WaitForObject(client_, kStatefulSets, ns, spec_.name, *options.wait, gone);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  done = done && internal::WaitForObject(client_, kPods, ns, DevPodName(spec_),
                                         std::max(left, std::chrono::milliseconds(1)), gone);
  done = done && internal::WaitUntilGone(client_, ns, unowned, deadline);
  if (!done) internal::ThrowStillDeleting("DevInstance", ns, spec_.name, *options.wait);
}

DevAccess DevInstance::Access() {
  const std::string& ns = spec_.namespace_name;
  const DevExposeSpec& x = spec_.expose;
  DevAccess a = BaseAccess(spec_);
  if (x.backend == DevExposure::kIngressTcp) {
    if (auto cm = GetOptional(client_, kConfigMaps, x.configmap_namespace, x.configmap_name)) {
      auto assigned = internal::TcpAssignments(cm->value("data", Json::object()), ns, spec_.name);
      for (auto& e : a.endpoints) {
        auto it = assigned.find(e.port);
        if (it == assigned.end()) continue;
        e.external_port = it->second;
        if (!x.external_host.empty()) {
          e.external_address = fmt::format("{}:{}", x.external_host, it->second);
        }
      }
    }
  } else if (x.backend == DevExposure::kNodePort) {
    if (auto svc = GetOptional(client_, kServices, ns, internal::DevNodePortName(spec_))) {
      std::string host = x.external_host;
      if (host.empty()) {
        // Any node forwards a node port; the pod's own node is the natural choice.
        if (auto pod = GetOptional(client_, kPods, ns, DevPodName(spec_))) {
          host = pod->value("status", Json::object()).value("hostIP", "");
        }
      }
      for (const auto& p : (*svc)["spec"].value("ports", Json::array())) {
        for (auto& e : a.endpoints) {
          if (e.tool != p.value("name", "")) continue;
          e.external_port = p.value("nodePort", 0);
          if (!host.empty() && e.external_port > 0) {
            e.external_address = fmt::format("{}:{}", host, e.external_port);
          }
        }
      }
    }
  }
  internal::FillConnect(&a);
  return a;
}

WorkloadLogStream DevInstance::StreamLogs(WorkloadLogOptions options) const {
  const std::string pod = internal::DevPodName(spec_);
  if (!options.source.empty() && options.source != pod) {
    throw ValidationError("source", options.source,
                          "an instance has one source, its pod \"" + pod + "\" (or \"\")");
  }
  LogOptions lo = options.ForPod(internal::kDevContainer);
  return WorkloadLogStream::WithOptions(
      std::move(options),
      [client = client_, ns = spec_.namespace_name, name = spec_.name, pod, lo](
          const WorkloadLogOptions& o, const WorkloadLogStream::Emit& emit) mutable {
        // A pod whose container has not started (or no pod: a stopped instance) is said at
        // once: an error without follow; with it a notice line, then its log once it starts
        // (at most pending_wait).
        std::optional<LogStream> opened;
        bool noticed = false;
        const auto until = std::chrono::steady_clock::now() + o.pending_wait;
        while (!opened) {
          std::string why;
          try {
            opened.emplace(internal::OpenPodLogs(client, ns, pod, lo, pod));
            break;
          } catch (const NotFound&) {
            if (!o.follow) {
              throw NotFound(ErrorKind::kNotFound,
                             fmt::format("DevInstance {}/{} has no pod {} (stopped, or not "
                                         "created yet): no logs (-f waits for them)",
                                         ns, name, pod),
                             404, "NotFound");
            }
            why = "no pod yet";
          } catch (const BadRequest& e) {
            // OpenPodLogs words a container that has not started as "<pod> has not started…".
            const std::string what = e.what();
            const std::string started = pod + " has not started";
            if (!o.follow || what.rfind(started, 0) != 0) throw;
            why = what.substr(started.size());
            if (why.starts_with(": ")) why.erase(0, 2);
            why = why.substr(0, why.find(" ("));
          }
          if (!noticed) {
            noticed = true;
            if (!emit({pod, "(not started: " + why + "; its logs follow when it starts)"})) return;
          }
          if (o.cancelled()) return;
          if (std::chrono::steady_clock::now() >= until) {
            throw Timeout(ErrorKind::kTimeout,
                          fmt::format("DevInstance {}/{}: pod {} has not started after {} ms", ns,
                                      name, pod, o.pending_wait.count()));
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        LogStream& stream = *opened;
        while (!o.cancelled()) {
          auto line = stream.NextLine(std::chrono::milliseconds(500));
          if (line) {
            if (!emit({pod, std::move(*line)})) break;
          } else if (stream.ended()) {
            return;
          }
        }
        stream.Cancel();
      });
}

// ---- the kind's parts of the shared life (Workload<DevInstanceKind>) -------------------------

namespace internal {

template <>
struct KindOps<DevInstanceKind> {
  // An instance is only ever waited for until ready (a finished one is a stopped one).
  static constexpr KindFacts<DevInstanceSpec> kFacts{
      "instance",
      validation::RequireDns1035Label,
      kInstanceLabel,
      &kStatefulSets,
      &DevSpecFromObject,
      [](const DevInstanceSpec& spec) { return RenderDevInstance(spec); },
      /*waits_only_until_ready=*/true};
  static std::string RefSelector() {
    return std::string(kInstanceLabel) + "," + kManagedBy + "=tfk8s";
  }
  // Every object but the StatefulSet owned by it (the home volume never is: it is the user's).
  static std::vector<Json> RenderOwned(const DevInstanceSpec& spec, const std::string& root_uid) {
    DevRenderOptions o;
    o.root_uid = root_uid;
    std::vector<Json> objects = RenderDevInstance(spec, o);
    objects.front()["metadata"].erase("ownerReferences");
    return objects;
  }

  static FitResult Preflight(Client& client, const DevInstanceSpec& spec) {
    bool home_exists = CheckGrants(client, spec);
    auto existing = GetOptional(client, kStatefulSets, spec.namespace_name, spec.name);
    return PreflightObjects(client, spec, existing ? &*existing : nullptr, home_exists);
  }

  static DevInstanceStatus Status(Client& client, const DevInstanceSpec& spec) {
    const std::string& ns = spec.namespace_name;
    DevObserved seen;
    seen.statefulset = GetChecked(client, kStatefulSets, ns, spec.name);
    ListOptions sel;
    sel.label_selector = DevSelector(spec);
    seen.pods = Items(client.ListAll(kPods, ns, sel));
    ListOptions events;
    events.field_selector = FailedCreateSelector(spec);
    seen.quota_rejections =
        QuotaRejections(seen.statefulset, Items(client.ListAll(kEvents, ns, events)));
    return ComputeDevStatus(spec, seen, nullptr);
  }

  /// The wait watches the pod, the StatefulSet and the quota's refusals to create the pod.
  static std::vector<WaitWatch> Watches(const DevInstanceSpec& spec) {
    return {{&kPods, ByLabel(DevSelector(spec))},
            {&kStatefulSets, ByField("metadata.name=" + spec.name)},
            {&kEvents, ByField(FailedCreateSelector(spec))}};
  }

  static std::pair<DevInstanceStatus, WaitVerdict> Judge(JudgeContext<DevInstanceSpec>& wait,
                                                         const WaitSnapshot& snapshot) {
    const DevInstanceSpec& spec = wait.spec;
    const bool synced = snapshot.synced;
    DevObserved seen;
    const auto& sts = snapshot.objects[1];
    if (!sts.empty()) {
      seen.statefulset = sts.front();
      seen.quota_rejections = QuotaRejections(seen.statefulset, snapshot.objects[2]);
    }
    seen.pods = snapshot.objects[0];
    std::vector<std::string> fatal;
    DevInstanceStatus st = ComputeDevStatus(spec, seen, &fatal);
    if (synced && sts.empty()) {
      throw NotFound(ErrorKind::kNotFound, fmt::format("{} does not exist", wait.what), 404,
                     "NotFound");
    }
    if (!synced) st.message = "watching";
    if (synced && st.reason.rfind("Unschedulable", 0) == 0) {
      auto never = wait.NeverPlaced([&] { return std::vector{RenderDevInstance(spec).front()}; });
      if (never) {
        fatal.push_back(st.reason + "; " + *never);
      } else {
        // Not yet: capacity may free up, a node come back or be added; the wait goes on.
        st.reason = UnschedulableYet(st.reason);
        st.message = st.reason;
      }
    }
    // Running and Stopped are read from every watch's first list (a Running pod seen
    // before the StatefulSet is no answer yet, and its message would be "watching").
    WaitVerdict verdict;
    verdict.done = synced && st.phase == DevPhase::kRunning;
    if (!verdict.done && !fatal.empty()) {
      verdict.failure = std::make_exception_ptr(
          DevInstanceFailed(fmt::format("{} cannot start: {}", wait.what, fatal.front()), st));
    } else if (synced && st.phase == DevPhase::kStopped) {
      verdict.failure = std::make_exception_ptr(
          DevInstanceFailed(fmt::format("{} is stopped; Start() it first", wait.what), st));
    }
    verdict.report = synced;
    return Judged(std::move(st), std::move(verdict));
  }
};

}  // namespace internal

template class Workload<DevInstanceKind>;

Json DevAccess::ToJson() const {
  Json out = Json::array();
  for (const auto& e : endpoints) {
    out.push_back({{"tool", e.tool},
                   {"port", e.port},
                   {"cluster_address", e.cluster_address},
                   {"external_port", e.external_port},
                   {"external_address", e.external_address},
                   {"connect", e.connect}});
  }
  return {{"user", user}, {"endpoints", std::move(out)}, {"table", Table()}};
}

}  // namespace tfk8s
