// Fleet: one shared set of informers over everything tfk8s manages, and every workload's entry
// computed in memory from the objects they hold (the workloads' own status logic).

#include "tfk8s/fleet.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "workloads/common.hpp"
#include "workloads/cron.hpp"
#include "workloads/devinstance_internal.hpp"
#include "workloads/fleet_internal.hpp"
#include "workloads/kinds.hpp"
#include "workloads/quota_pods.hpp"
#include "workloads/scheduledjob_internal.hpp"
#include "workloads/tfcluster_internal.hpp"

namespace tfk8s {

std::string ToString(FleetKind kind) {
  switch (kind) {
    case FleetKind::kTFCluster:
      return "TFCluster";
    case FleetKind::kDevInstance:
      return "DevInstance";
    case FleetKind::kScheduledJob:
      return "ScheduledJob";
  }
  return "TFCluster";
}

FleetKind ParseFleetKind(std::string_view text) {
  for (FleetKind k : {FleetKind::kTFCluster, FleetKind::kDevInstance, FleetKind::kScheduledJob}) {
    if (ToString(k) == text) return k;
  }
  throw ValidationError("kind", std::string(text),
                        "must be TFCluster, DevInstance or ScheduledJob");
}

std::string ToString(FleetChangeType type) {
  switch (type) {
    case FleetChangeType::kAdded:
      return "ADDED";
    case FleetChangeType::kModified:
      return "MODIFIED";
    case FleetChangeType::kRemoved:
      return "REMOVED";
  }
  return "MODIFIED";
}

Json FleetResources::ToJson() const {
  return {{"gpus", gpus},
          {"cpu", static_cast<double>(cpu_milli) / 1000.0},
          {"cpu_milli", cpu_milli},
          {"memory_bytes", memory_bytes}};
}

std::chrono::seconds FleetEntry::Age(std::chrono::system_clock::time_point now) const {
  return std::chrono::duration_cast<std::chrono::seconds>(now - created);
}

Json FleetEntry::ToJson() const {
  auto epoch = std::chrono::duration_cast<std::chrono::seconds>(created.time_since_epoch());
  bool known = epoch.count() != 0;  // no creationTimestamp
  return {{"kind", ToString(kind)},
          {"namespace", namespace_name},
          {"name", name},
          {"owner", owner},
          {"phase", phase},
          {"message", message},
          {"created", known ? Json(epoch.count()) : Json()},
          {"age_seconds", known ? Json(Age().count()) : Json()},
          {"requested", requested.ToJson()},
          {"last_activity", last_activity ? Json(std::chrono::duration_cast<std::chrono::seconds>(
                                                     last_activity->time_since_epoch())
                                                     .count())
                                          : Json()}};
}

Json FleetChange::ToJson() const { return {{"type", ToString(type)}, {"entry", entry.ToJson()}}; }

Json FleetError::ToJson() const {
  Json out = failure.ToJson();
  out["source"] = source;
  return out;
}

// ---- the pure part ----------------------------------------------------------------------------

namespace internal {

using namespace kinds;

namespace {

const Json& Metadata(const Json& object) { return At(object, "metadata"); }

std::string NamespaceOf(const Json& object) { return StringAt(Metadata(object), "namespace"); }

std::string CreatedOf(const Json& object) {
  return StringAt(Metadata(object), "creationTimestamp");
}

std::chrono::system_clock::time_point CreatedTime(const Json& object) {
  if (auto t = ParseTimestamp(CreatedOf(object))) return ToTimePoint(*t);
  return {};
}

// Copies of the objects (the workloads' status functions take them by value).
std::vector<Json> Copies(const std::vector<const Json*>& objects) {
  std::vector<Json> out;
  out.reserve(objects.size());
  for (const Json* o : objects) out.push_back(*o);
  return out;
}

// Oldest first; names break ties of one-second timestamps.
std::vector<const Json*> ByCreation(std::vector<const Json*> objects) {
  std::sort(objects.begin(), objects.end(), [](const Json* a, const Json* b) {
    return std::make_pair(CreatedOf(*a), NameOf(*a)) < std::make_pair(CreatedOf(*b), NameOf(*b));
  });
  return objects;
}

FleetEntry BaseEntry(const FleetKey& key, const Json& root) {
  FleetEntry e;
  e.kind = key.kind;
  e.namespace_name = key.namespace_name;
  e.name = key.name;
  e.owner = LabelOf(root, kOwnerLabel);
  e.created = CreatedTime(root);
  return e;
}

FleetEntry TFClusterEntry(const FleetKey& key, const FleetObserved& seen) {
  const Json& root = *seen.of(FleetSource::kRootConfigMaps).front();
  FleetEntry e = BaseEntry(key, root);
  try {
    TFClusterSpec spec = TFSpecFromRoot(root);
    TFObserved observed;
    observed.pods = Copies(seen.of(FleetSource::kPods));
    observed.jobs = Copies(seen.of(FleetSource::kJobs));
    TFClusterStatus st = ComputeTFStatus(spec, observed, nullptr);
    e.phase = ToString(st.phase);
    e.message = st.message;
    e.requested = RequestedResources(RenderTFCluster(spec));
  } catch (const Error& error) {
    e.phase = "Unknown";
    e.message = error.what();
  }
  return e;
}

FleetEntry DevInstanceEntry(const FleetKey& key, const FleetObserved& seen) {
  const Json& sts = *seen.of(FleetSource::kStatefulSets).front();
  FleetEntry e = BaseEntry(key, sts);
  if (auto t = ParseTimestamp(AnnotationOf(sts, kLastActivityAnnotation))) {
    e.last_activity = ToTimePoint(*t);
  }
  try {
    e.requested = RequestedResources({sts});
    DevInstanceSpec spec = DevSpecFromObject(sts);
    DevObserved observed;
    observed.statefulset = sts;
    observed.pods = Copies(seen.of(FleetSource::kPods));
    DevInstanceStatus st = ComputeDevStatus(spec, observed, nullptr);
    e.phase = ToString(st.phase);
    e.message = st.message;
  } catch (const Error& error) {
    e.phase = "Unknown";
    e.message = error.what();
  }
  return e;
}

FleetEntry ScheduledJobEntry(const FleetKey& key, const FleetObserved& seen) {
  const auto& cronjobs = seen.of(FleetSource::kCronJobs);
  std::vector<const Json*> jobs = ByCreation(seen.of(FleetSource::kJobs));
  const Json* cronjob = cronjobs.empty() ? nullptr : cronjobs.front();
  FleetEntry e = BaseEntry(key, cronjob ? *cronjob : *jobs.front());
  if (e.owner.empty() && !jobs.empty()) e.owner = LabelOf(*jobs.back(), kOwnerLabel);
  std::vector<JobRun> runs;
  runs.reserve(jobs.size());
  for (const Json* j : jobs) runs.push_back(RunOf(*j));
  auto running = std::find_if(runs.begin(), runs.end(),
                              [](const JobRun& r) { return r.result == RunResult::kRunning; });
  std::string last_run;
  if (!runs.empty()) {
    const JobRun& r = runs.back();
    last_run = fmt::format("last run {}: {}{}{}", r.name, ToString(r.result),
                           r.reason.empty() ? "" : " (", r.reason.empty() ? "" : r.reason + ")");
  }
  if (running != runs.end()) {
    e.phase = "Running";
    e.message =
        fmt::format("run {} running (attempt {})", running->name, std::max(1, running->attempts));
  } else if (cronjob) {
    const Json& spec = At(*cronjob, "spec");
    bool suspended = At(spec, "suspend").is_boolean() && At(spec, "suspend").get<bool>();
    e.phase = suspended ? "Suspended" : "Scheduled";
    e.message = fmt::format("schedule \"{}\"{}{}", StringAt(spec, "schedule"),
                            last_run.empty() ? "" : "; ", last_run);
  } else {
    e.phase = ToString(runs.back().result);
    e.message = last_run;
  }
  try {
    // One run's pods: the schedule's template (suspended or not), else the newest run's.
    Json one_run = cronjob ? *cronjob : *jobs.back();
    if (cronjob && one_run["spec"].is_object()) one_run["spec"]["suspend"] = false;
    e.requested = RequestedResources({one_run});
  } catch (const Error&) {
    // A template the quota code cannot read: the resources stay unknown (zero).
  }
  return e;
}

// ---- trimming: what the entries read, and nothing else ----

// The annotations any entry reads.
bool AnnotationRead(const std::string& key) {
  return key == kDevSpecAnnotation || key == kLastActivityAnnotation ||
         key == kInstantiateAnnotation || key == kScheduledTimestampAnnotation;
}

// Erases every member of `object` for which `keep(key, value)` is false.
template <typename Keep>
void KeepIf(Json& object, Keep keep) {
  if (!object.is_object()) return;
  for (auto it = object.begin(); it != object.end();) {
    if (keep(it.key(), *it)) {
      ++it;
    } else {
      it = object.erase(it);
    }
  }
}

// Keeps only the members named in `keys` of each object of the array `list`.
void KeepEach(Json& list, std::initializer_list<std::string_view> keys) {
  if (!list.is_array()) return;
  for (auto& item : list) {
    KeepIf(item, [&](const std::string& k, const Json&) {
      return std::find(keys.begin(), keys.end(), k) != keys.end();
    });
  }
}

void TrimMetadata(Json& meta) {
  KeepIf(meta, [](const std::string& k, Json& v) {
    if (k == "annotations") {
      KeepIf(v, [](const std::string& a, const Json&) { return AnnotationRead(a); });
      return v.is_object() && !v.empty();
    }
    if (k == "ownerReferences") {
      KeepEach(v, {"kind", "name", "uid", "controller"});
      return true;
    }
    return k == "name" || k == "namespace" || k == "uid" || k == "labels" ||
           k == "creationTimestamp" || k == "resourceVersion" || k == "deletionTimestamp";
  });
}

// A pod spec as the scheduler counts it: its scalar fields (nodeName, …), overhead, and each
// container's name and resources (an init container's restartPolicy too).
void TrimPodSpec(Json& spec) {
  KeepIf(spec, [](const std::string& k, Json& v) {
    if (k == "containers" || k == "initContainers") {
      KeepEach(v, {"name", "resources", "restartPolicy"});
      return true;
    }
    return k == "overhead" || v.is_primitive();
  });
}

// A workload's spec: its scalar fields (replicas, parallelism, schedule, suspend, …) and its
// pod template (a CronJob's through its jobTemplate).
void TrimWorkloadSpec(Json& spec) {
  KeepIf(spec, [](const std::string& k, Json& v) {
    if (k == "template") {
      KeepIf(v, [](const std::string& t, Json& pod_spec) {
        if (t != "spec") return false;
        TrimPodSpec(pod_spec);
        return true;
      });
      return true;
    }
    if (k == "jobTemplate") {
      KeepIf(v, [](const std::string& t, Json& job_spec) {
        if (t != "spec") return false;
        TrimWorkloadSpec(job_spec);
        return true;
      });
      return true;
    }
    return v.is_primitive();
  });
}

// A pod's status as PodProblem, PodReady and PodRestarts read it.
void TrimPodStatus(Json& status) {
  KeepIf(status, [](const std::string& k, Json& v) {
    if (k == "conditions") {
      KeepEach(v, {"type", "status", "reason", "message"});
      return true;
    }
    if (k == "containerStatuses" || k == "initContainerStatuses") {
      KeepEach(v, {"name", "ready", "restartCount", "state", "lastState"});
      return true;
    }
    return k == "phase" || k == "reason" || k == "message";
  });
}

}  // namespace

void TrimForFleet(FleetSource source, Json& object) {
  if (!object.is_object()) return;
  KeepIf(object, [source](const std::string& k, Json& v) {
    if (k == "apiVersion" || k == "kind") return true;
    if (k == "metadata") {
      TrimMetadata(v);
      return true;
    }
    switch (source) {
      case FleetSource::kRootConfigMaps:
        if (k != "data") return false;
        KeepIf(v, [](const std::string& d, const Json&) { return d == kSpecKey; });
        return true;
      case FleetSource::kPods:
        if (k == "spec") {  // nodeName, …
          KeepIf(v, [](const std::string&, const Json& f) { return f.is_primitive(); });
          return true;
        }
        if (k == "status") {
          TrimPodStatus(v);
          return true;
        }
        return false;
      case FleetSource::kJobs:
        if (k == "status") return true;  // RunOf, JobCondition; small
        [[fallthrough]];
      case FleetSource::kStatefulSets:
      case FleetSource::kCronJobs:
        if (k == "spec") {
          TrimWorkloadSpec(v);
          return true;
        }
        return false;
    }
    return false;
  });
}

std::optional<FleetKey> FleetKeyOf(FleetSource source, const Json& object) {
  const std::string ns = NamespaceOf(object);
  const std::string cluster = LabelOf(object, kClusterLabel);
  const std::string instance = LabelOf(object, kInstanceLabel);
  const std::string task = LabelOf(object, kScheduledJobLabel);
  switch (source) {
    case FleetSource::kRootConfigMaps:
      if (!cluster.empty()) return FleetKey{FleetKind::kTFCluster, ns, cluster};
      break;
    case FleetSource::kStatefulSets:
    case FleetSource::kPods:
      if (!cluster.empty()) return FleetKey{FleetKind::kTFCluster, ns, cluster};
      if (!instance.empty()) return FleetKey{FleetKind::kDevInstance, ns, instance};
      break;
    case FleetSource::kJobs:
      if (!cluster.empty()) return FleetKey{FleetKind::kTFCluster, ns, cluster};
      if (!task.empty()) return FleetKey{FleetKind::kScheduledJob, ns, task};
      break;
    case FleetSource::kCronJobs:
      if (!task.empty()) return FleetKey{FleetKind::kScheduledJob, ns, task};
      break;
  }
  return std::nullopt;
}

std::optional<FleetEntry> ComputeFleetEntry(const FleetKey& key, const FleetObserved& seen) {
  switch (key.kind) {
    case FleetKind::kTFCluster:
      if (seen.of(FleetSource::kRootConfigMaps).empty()) return std::nullopt;
      return TFClusterEntry(key, seen);
    case FleetKind::kDevInstance:
      if (seen.of(FleetSource::kStatefulSets).empty()) return std::nullopt;
      return DevInstanceEntry(key, seen);
    case FleetKind::kScheduledJob:
      if (seen.of(FleetSource::kCronJobs).empty() && seen.of(FleetSource::kJobs).empty()) {
        return std::nullopt;
      }
      return ScheduledJobEntry(key, seen);
  }
  return std::nullopt;
}

FleetResources RequestedResources(const std::vector<Json>& objects) {
  FleetResources total;
  for (auto& group : PodGroupsOf(objects)) {
    if (group.count <= 0 || group.terminated) continue;
    Json& spec = group.pod["spec"];
    DefaultPodResources(spec, {});  // requests default to limits, as the API server does
    ResourceList one = PodSchedulingRequests(spec);
    auto value = [&](const char* name, bool milli) -> std::int64_t {
      auto it = one.find(name);
      if (it == one.end()) return 0;
      return milli ? it->second.MilliValue() : it->second.Value();
    };
    total.gpus += value("nvidia.com/gpu", false) * group.count;
    total.cpu_milli += value("cpu", true) * group.count;
    total.memory_bytes += value("memory", false) * group.count;
  }
  return total;
}

}  // namespace internal

// ---- the live part ----------------------------------------------------------------------------

using internal::FleetKey;
using internal::FleetSource;
using internal::kFleetSourceCount;

struct Fleet::Impl {
  Impl(Client c, FleetOptions o) : client(std::move(c)), options(std::move(o)) {}

  Client client;
  FleetOptions options;

  // One informer per source (null: not served, e.g. CronJobs on an old server), each read by
  // its own thread; Cancel() from Stop().
  std::array<std::unique_ptr<Informer>, kFleetSourceCount> informers;
  std::vector<std::thread> threads;
  std::thread dispatcher;
  std::mutex stop_mu;  // serialises Stop() (e.g. close() on one thread, the destructor on another)

  mutable std::mutex mu;       // guards everything below
  std::condition_variable cv;  // dirty, listed, stop, error changed
  struct Held {
    std::optional<FleetKey> key;
    Json object;
  };
  // Per source: "namespace/name" -> the object and the workload it belongs to.
  std::array<std::map<std::string, Held>, kFleetSourceCount> objects;
  // Workload -> per source, the keys of its objects.
  std::map<FleetKey, std::array<std::set<std::string>, kFleetSourceCount>> index;
  std::set<FleetKey> dirty;
  std::map<FleetKey, FleetEntry> entries;
  std::array<bool, kFleetSourceCount> listed{};
  bool synced = false;
  bool stop = false;
  std::exception_ptr error;
  std::vector<std::shared_ptr<std::function<void(const FleetChange&)>>> callbacks;
  // Informer failures: the kind each source watches (FleetError::source), the failures not yet
  // given to the error callbacks (bounded: a backing-off informer fails at most every 30 s,
  // but nobody may be reading) and the latest one.
  static constexpr std::size_t kMaxPendingFailures = 1000;
  std::array<std::string, kFleetSourceCount> source_kinds;
  std::deque<FleetError> failures;
  std::optional<FleetError> last_failure;
  std::vector<std::shared_ptr<std::function<void(const FleetError&)>>> error_callbacks;

  static std::string ObjectKey(const Json& object) {
    return internal::NamespaceOf(object) + "/" + internal::NameOf(object);
  }

  // With mu held.
  void Remove(std::size_t source, const std::string& key) {
    auto it = objects[source].find(key);
    if (it == objects[source].end()) return;
    if (it->second.key) {
      dirty.insert(*it->second.key);
      auto w = index.find(*it->second.key);
      if (w != index.end()) {
        w->second[source].erase(key);
        bool empty = std::all_of(w->second.begin(), w->second.end(),
                                 [](const auto& keys) { return keys.empty(); });
        if (empty) index.erase(w);
      }
    }
    objects[source].erase(it);
  }

  // With mu held. `object` is already cut to what the entries read (the informers' transform).
  void Upsert(std::size_t source, Json object) {
    std::string key = ObjectKey(object);
    Remove(source, key);
    auto workload = internal::FleetKeyOf(static_cast<FleetSource>(source), object);
    if (workload) {
      dirty.insert(*workload);
      index[*workload][source].insert(key);
    }
    objects[source][key] = Held{std::move(workload), std::move(object)};
  }

  // Called by an informer's error handler (its reading thread) and when an informer stops.
  void Report(FleetError failure) {
    std::lock_guard lock(mu);
    last_failure = failure;
    if (failures.size() >= kMaxPendingFailures) failures.pop_front();
    failures.push_back(std::move(failure));
    cv.notify_all();
  }

  // What stopped informer `source`: its own record of the failure when it threw it, else (the
  // Fleet's own reading failed) the error as it is.
  FleetError Stopped(std::size_t source, const std::exception_ptr& stopped) {
    FleetError out{source_kinds[source], {}};
    if (auto f = informers[source]->last_error(); f && f->fatal && f->error == stopped) {
      out.failure = std::move(*f);
      return out;
    }
    out.failure.error = stopped;
    out.failure.transient = false;
    out.failure.fatal = true;
    out.failure.consecutive = 1;
    out.failure.time = std::chrono::system_clock::now();
    std::tie(out.failure.kind, out.failure.message) = DescribeError(stopped);
    return out;
  }

  void ReadInformer(std::size_t source) {
    Informer& informer = *informers[source];
    try {
      while (true) {
        bool was_listed = false;
        {
          std::lock_guard lock(mu);
          if (stop) return;
          was_listed = listed[source];
        }
        // Until the first list, a short wait: Next() returns once it has listed, where a kind
        // with no objects would otherwise hold the first sync for the whole wait.
        auto event = informer.Next(std::chrono::milliseconds(was_listed ? 500 : 10));
        bool first_list = false;
        {
          std::lock_guard lock(mu);
          if (stop) return;
          first_list = !listed[source] && !informer.resource_version().empty();
        }
        if (first_list) {
          // The first Next() listed and queued every object as an event: take them all at
          // once (Next() without a wait only drains that queue), so the entries are computed
          // once, from the objects the events carry (no copy of the informer's store).
          // Applied in order: a deletion that arrived while draining removes its object.
          std::vector<WatchEvent> first;
          if (event) first.push_back(std::move(*event));
          while (auto more = informer.Next(std::chrono::milliseconds(0))) {
            first.push_back(std::move(*more));
          }
          std::lock_guard lock(mu);
          for (auto& e : first) Apply(source, std::move(e));
          listed[source] = true;
          cv.notify_all();
          continue;
        }
        if (!event) continue;
        std::lock_guard lock(mu);
        Apply(source, std::move(*event));
        cv.notify_all();
      }
    } catch (...) {
      FleetError stopped = Stopped(source, std::current_exception());
      {
        std::lock_guard lock(mu);
        if (!error) error = std::current_exception();
      }
      Report(std::move(stopped));
    }
  }

  // With mu held: one watch event into the store.
  void Apply(std::size_t source, WatchEvent event) {
    if (event.type == WatchEventType::kDeleted) {
      Remove(source, ObjectKey(event.object));
    } else if (event.type == WatchEventType::kAdded || event.type == WatchEventType::kModified) {
      Upsert(source, std::move(event.object));
    }
  }

  // With mu held: the changes of the dirty entries.
  std::vector<FleetChange> Recompute() {
    std::vector<FleetChange> changes;
    for (const FleetKey& key : dirty) {
      internal::FleetObserved seen;
      if (auto w = index.find(key); w != index.end()) {
        for (std::size_t s = 0; s < kFleetSourceCount; ++s) {
          for (const auto& k : w->second[s]) {
            seen.by_source[s].push_back(&objects[s].at(k).object);
          }
        }
      }
      std::optional<FleetEntry> now = internal::ComputeFleetEntry(key, seen);
      auto old = entries.find(key);
      if (!now) {
        if (old != entries.end()) {
          changes.push_back({FleetChangeType::kRemoved, std::move(old->second)});
          entries.erase(old);
        }
      } else if (old == entries.end()) {
        entries.emplace(key, *now);
        changes.push_back({FleetChangeType::kAdded, std::move(*now)});
      } else if (!(old->second == *now)) {
        old->second = *now;
        changes.push_back({FleetChangeType::kModified, std::move(*now)});
      }
    }
    dirty.clear();
    return changes;
  }

  void Dispatch() {
    std::unique_lock lock(mu);
    while (true) {
      // Entries wait for every first list (or an informer's fatal error): computed earlier,
      // they would be computed again (a DevInstance before its pods are known, …) while the
      // other lists come in.
      cv.wait(lock, [&] {
        return stop || (!dirty.empty() && (AllListed() || error)) || (!synced && AllListed()) ||
               !failures.empty();
      });
      if (stop) return;
      std::vector<FleetChange> changes;
      if (AllListed() || error) changes = Recompute();
      if (!synced && AllListed()) {
        synced = true;
        cv.notify_all();
      }
      std::deque<FleetError> failed;
      failed.swap(failures);
      auto to_call = callbacks;
      auto to_tell = error_callbacks;
      lock.unlock();
      for (const auto& failure : failed) {
        for (const auto& callback : to_tell) {
          try {
            (*callback)(failure);
          } catch (...) {
            // A callback's failure is its own; the Fleet goes on.
          }
        }
      }
      for (const auto& change : changes) {
        for (const auto& callback : to_call) {
          try {
            (*callback)(change);
          } catch (...) {
            // A callback's failure is its own; the Fleet goes on.
          }
        }
      }
      lock.lock();
    }
  }

  // With mu held.
  bool AllListed() const {
    for (std::size_t s = 0; s < kFleetSourceCount; ++s) {
      if (informers[s] && !listed[s]) return false;
    }
    return true;
  }
};

Fleet::Fleet(Client client, FleetOptions options)
    : impl_(std::make_shared<Impl>(std::move(client), std::move(options))) {
  using namespace internal::kinds;
  Impl& d = *impl_;
  std::string selector = kManagedBySelector;
  if (!d.options.label_selector.empty()) selector += "," + d.options.label_selector;
  const std::string& ns = d.options.namespace_name;
  auto make = [&](FleetSource source, const ResourceType& type, const std::string& sel) {
    ListOptions o;
    o.label_selector = sel;
    auto informer = std::make_unique<Informer>(d.client, type, ns, o);
    // One copy of each object, cut as it is decoded: the informer keeps names and versions,
    // the Fleet the fields its entries read.
    informer->set_transform([source](Json& object) { internal::TrimForFleet(source, object); });
    informer->set_keep_objects(false);
    // Failures it retries are reported as they happen; the one it gives up on, by ReadInformer.
    informer->set_error_handler([impl = impl_.get(), kind = type.kind](const InformerFailure& f) {
      if (!f.fatal) impl->Report(FleetError{kind, f});
    });
    d.source_kinds[static_cast<std::size_t>(source)] = type.kind;
    d.informers[static_cast<std::size_t>(source)] = std::move(informer);
  };
  make(FleetSource::kRootConfigMaps, kConfigMaps,
       std::string(kComponentLabel) + "=root," + selector);
  make(FleetSource::kStatefulSets, kStatefulSets, selector);
  make(FleetSource::kJobs, kJobs, selector);
  make(FleetSource::kPods, kPods, selector);
  try {
    make(FleetSource::kCronJobs, d.client.ResolvePreferred("batch", "CronJob", {"v1", "v1beta1"}),
         selector);
  } catch (const NotFound&) {
    // No CronJobs served: ScheduledJobs are seen through their runs alone.
  }
  for (std::size_t s = 0; s < kFleetSourceCount; ++s) {
    if (d.informers[s]) d.threads.emplace_back([impl = impl_, s] { impl->ReadInformer(s); });
  }
  d.dispatcher = std::thread([impl = impl_] { impl->Dispatch(); });
}

Fleet::~Fleet() { Stop(); }

void Fleet::Stop() {
  Impl& d = *impl_;
  std::lock_guard stopping(d.stop_mu);
  {
    std::lock_guard lock(d.mu);
    d.stop = true;
    d.cv.notify_all();
  }
  for (auto& informer : d.informers) {
    if (informer) informer->Cancel();
  }
  for (auto& t : d.threads) {
    if (t.joinable()) t.join();
  }
  if (d.dispatcher.joinable()) {
    // Called from a change callback: the dispatcher ends after it returns (it holds the state).
    if (d.dispatcher.get_id() == std::this_thread::get_id()) {
      d.dispatcher.detach();
    } else {
      d.dispatcher.join();
    }
  }
}

bool Fleet::WaitForSync(std::chrono::milliseconds timeout) {
  Impl& d = *impl_;
  std::unique_lock lock(d.mu);
  bool done = d.cv.wait_for(lock, timeout, [&] { return d.synced || d.error || d.stop; });
  if (d.error) std::rethrow_exception(d.error);
  return done && d.synced;
}

bool Fleet::synced() const {
  std::lock_guard lock(impl_->mu);
  return impl_->synced;
}

std::vector<FleetEntry> Fleet::Entries() const {
  std::lock_guard lock(impl_->mu);
  std::vector<FleetEntry> out;
  out.reserve(impl_->entries.size());
  for (const auto& [key, entry] : impl_->entries) out.push_back(entry);
  return out;
}

std::optional<FleetEntry> Fleet::Get(FleetKind kind, std::string_view ns,
                                     std::string_view name) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->entries.find(FleetKey{kind, std::string(ns), std::string(name)});
  if (it == impl_->entries.end()) return std::nullopt;
  return it->second;
}

std::vector<FleetEntry> Fleet::ByOwner(std::string_view owner) const {
  std::lock_guard lock(impl_->mu);
  std::vector<FleetEntry> out;
  for (const auto& [key, entry] : impl_->entries) {
    if (entry.owner == owner) out.push_back(entry);
  }
  return out;
}

std::vector<FleetEntry> Fleet::ByNamespace(std::string_view ns) const {
  std::lock_guard lock(impl_->mu);
  std::vector<FleetEntry> out;
  for (const auto& [key, entry] : impl_->entries) {
    if (entry.namespace_name == ns) out.push_back(entry);
  }
  return out;
}

void Fleet::OnChange(std::function<void(const FleetChange&)> callback) {
  std::lock_guard lock(impl_->mu);
  impl_->callbacks.push_back(
      std::make_shared<std::function<void(const FleetChange&)>>(std::move(callback)));
}

void Fleet::OnError(std::function<void(const FleetError&)> callback) {
  std::lock_guard lock(impl_->mu);
  impl_->error_callbacks.push_back(
      std::make_shared<std::function<void(const FleetError&)>>(std::move(callback)));
}

std::optional<FleetError> Fleet::last_error() const {
  std::lock_guard lock(impl_->mu);
  return impl_->last_failure;
}

std::exception_ptr Fleet::error() const {
  std::lock_guard lock(impl_->mu);
  return impl_->error;
}

}  // namespace tfk8s
