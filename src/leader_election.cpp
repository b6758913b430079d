// Leader election on a coordination.k8s.io/v1 Lease (tfk8s/leader_election.hpp).
#include "tfk8s/leader_election.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>

#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"

namespace tfk8s {

namespace {

const ResourceType kLeases{"coordination.k8s.io", "v1", "Lease", "leases", true};

using Millis = std::chrono::milliseconds;

// MicroTime as the apiserver writes and parses it: RFC 3339, UTC, exactly six fraction digits.
std::string MicroTime(std::chrono::system_clock::time_point t) {
  auto micros = std::chrono::floor<std::chrono::microseconds>(t);
  auto seconds = std::chrono::floor<std::chrono::seconds>(micros);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:06d}Z", seconds,
                     static_cast<long long>((micros - seconds).count()));
}

int WholeSeconds(Millis d) {
  return static_cast<int>(std::chrono::ceil<std::chrono::seconds>(d).count());
}

}  // namespace

void LeaderElectionConfig::Validate() const {
  validation::RequireNamespaceName("namespace", namespace_name);
  validation::RequireDns1123Subdomain("lease_name", lease_name);
  if (identity.empty()) throw ValidationError("identity", "", "must not be empty");
  auto ms = [](Millis d) { return fmt::format("{} ms", d.count()); };
  if (retry_period <= Millis(0)) {
    throw ValidationError("retry_period", ms(retry_period), "must be positive");
  }
  if (renew_deadline <= retry_period) {
    throw ValidationError("renew_deadline", ms(renew_deadline),
                          "must be longer than retry_period (" + ms(retry_period) + ")");
  }
  if (lease_duration <= renew_deadline) {
    throw ValidationError("lease_duration", ms(lease_duration),
                          "must be longer than renew_deadline (" + ms(renew_deadline) +
                              "): a leader that cannot renew must stop acting before another "
                              "candidate may take over");
  }
}

LeaderElectionRecord LeaderElectionRecordFromLease(const Json& lease) {
  const Json spec = lease.value("spec", Json::object());
  LeaderElectionRecord r;
  r.holder = spec.value("holderIdentity", "");
  r.lease_duration_seconds = spec.value("leaseDurationSeconds", 0);
  r.acquire_time = spec.value("acquireTime", "");
  r.renew_time = spec.value("renewTime", "");
  r.lease_transitions = spec.value("leaseTransitions", 0);
  return r;
}

LeaderElector::LeaderElector(Client client, LeaderElectionConfig config)
    : client_(std::move(client)), config_(std::move(config)) {
  config_.Validate();
  if (!config_.clock) config_.clock = [] { return std::chrono::steady_clock::now(); };
  if (!config_.wall_clock) config_.wall_clock = [] { return std::chrono::system_clock::now(); };
}

std::chrono::steady_clock::time_point LeaderElector::Now() const { return config_.clock(); }

Json LeaderElector::LeaseObject(const LeaderElectionRecord& record, const Json* current) const {
  Json spec = {{"holderIdentity", record.holder},
               {"leaseDurationSeconds", record.lease_duration_seconds},
               {"leaseTransitions", record.lease_transitions}};
  if (!record.acquire_time.empty()) spec["acquireTime"] = record.acquire_time;
  if (!record.renew_time.empty()) spec["renewTime"] = record.renew_time;
  Json lease = current
                   ? *current
                   : Json{{"apiVersion", "coordination.k8s.io/v1"},
                          {"kind", "Lease"},
                          {"metadata",
                           {{"name", config_.lease_name}, {"namespace", config_.namespace_name}}}};
  lease["spec"] = std::move(spec);
  return lease;
}

void LeaderElector::Observe(const LeaderElectionRecord& record,
                            std::chrono::steady_clock::time_point now) {
  if (!observed_any_ || !(record == observed_)) {
    observed_ = record;
    observed_time_ = now;
    observed_any_ = true;
  }
}

bool LeaderElector::TryAcquireOrRenew() {
  const auto now = Now();
  const std::string wall = MicroTime(config_.wall_clock());
  LeaderElectionRecord mine;
  mine.holder = config_.identity;
  mine.lease_duration_seconds = WholeSeconds(config_.lease_duration);
  mine.acquire_time = wall;
  mine.renew_time = wall;

  std::optional<Json> current;
  try {
    current = client_.Get(kLeases, config_.namespace_name, config_.lease_name);
  } catch (const NotFound&) {
  }
  if (!current) {
    try {
      client_.Create(kLeases, config_.namespace_name, LeaseObject(mine, nullptr));
    } catch (const AlreadyExists&) {
      return false;  // another candidate created it first
    }
    std::lock_guard<std::mutex> lock(mu_);
    Observe(mine, now);
    renewed_at_ = now;
    holding_ = true;
    return true;
  }

  const LeaderElectionRecord seen = LeaderElectionRecordFromLease(*current);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Observe(seen, now);
    const bool held_by_other = !seen.holder.empty() && seen.holder != config_.identity;
    const auto valid_for = std::chrono::seconds(std::max(seen.lease_duration_seconds, 0));
    if (held_by_other && now < observed_time_ + valid_for) {
      holding_ = false;
      return false;  // another candidate holds it and has renewed within its duration
    }
  }
  if (seen.holder == config_.identity) {
    // A renewal keeps the term's acquireTime. Taking our own Lease back after missing the
    // renew deadline (or after Run() ended the term) begins a new term: a new acquireTime,
    // which is how a reader of the Lease tells it from an unbroken one (the holder, and so the
    // transitions, stay the same).
    bool renewing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      renewing = holding_ && now < renewed_at_ + config_.renew_deadline;
    }
    if (renewing) mine.acquire_time = seen.acquire_time;
    mine.lease_transitions = seen.lease_transitions;
  } else {
    mine.lease_transitions = seen.lease_transitions + 1;
  }
  // The update carries the resourceVersion read: of two candidates only one wins.
  try {
    client_.Replace(kLeases, config_.namespace_name, LeaseObject(mine, &*current));
  } catch (const Conflict&) {
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Observe(mine, now);
  renewed_at_ = now;
  holding_ = true;
  return true;
}

bool LeaderElector::IsLeader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return holding_ && observed_.holder == config_.identity &&
         Now() < renewed_at_ + config_.renew_deadline;
}

std::string LeaderElector::Leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_.holder;
}

LeaderElectionRecord LeaderElector::Observed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_;
}

bool LeaderElector::Release() {
  Json current;
  try {
    current = client_.Get(kLeases, config_.namespace_name, config_.lease_name);
  } catch (const NotFound&) {
    return false;
  }
  LeaderElectionRecord seen = LeaderElectionRecordFromLease(current);
  if (seen.holder != config_.identity) return false;
  LeaderElectionRecord released = seen;
  released.holder.clear();
  released.lease_duration_seconds = 1;
  released.renew_time = MicroTime(config_.wall_clock());
  try {
    client_.Replace(kLeases, config_.namespace_name, LeaseObject(released, &current));
  } catch (const Conflict&) {
    return false;  // someone wrote it since: not ours to release any more
  }
  std::lock_guard<std::mutex> lock(mu_);
  Observe(released, Now());
  holding_ = false;
  return true;
}

namespace {

// Sleeps `d` (steady time) or until `stop` turns true, checking every 50 ms.
void SleepUnlessStopped(Millis d, const std::atomic<bool>& stop) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (!stop.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        Millis(50), until - std::chrono::steady_clock::now()));
  }
}

}  // namespace

bool LeaderElector::Run(const std::atomic<bool>& stop, const Callbacks& callbacks,
                        const std::function<void(const std::string&)>& on_error) {
  std::string last_leader;
  auto attempt = [&] {
    bool ok = false;
    try {
      ok = TryAcquireOrRenew();
    } catch (const Error& e) {
      if (on_error) on_error(e.what());
    }
    std::string leader = Leader();
    if (leader != last_leader) {
      last_leader = leader;
      if (callbacks.new_leader) callbacks.new_leader(leader);
    }
    return ok;
  };
  bool led = false;
  while (!stop.load() && !(led = attempt())) SleepUnlessStopped(config_.retry_period, stop);
  if (!led) return false;

  // `lost` turns true as soon as the renew deadline passes, also while a renewal request is
  // still hanging (its own timeout may be longer): the work stops before the Lease can expire.
  std::atomic<bool> lost{false};
  std::thread watchdog([&] {
    while (!lost.load()) {
      if (stop.load() || !IsLeader()) {
        lost.store(true);
      } else {
        std::this_thread::sleep_for(Millis(20));
      }
    }
  });
  std::thread work([&] {
    if (callbacks.started) callbacks.started(lost);
  });
  while (!lost.load()) {
    SleepUnlessStopped(config_.retry_period, lost);
    if (lost.load()) break;
    attempt();
  }
  watchdog.join();
  work.join();
  {
    // The term is over, even if a renewal still hanging when the deadline passed has since
    // been written: winning the Lease back begins a new term (a new acquireTime).
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = false;
  }
  if (stop.load()) {
    try {
      Release();
    } catch (const Error& e) {
      if (on_error) on_error(e.what());
    }
  }
  if (callbacks.stopped) callbacks.stopped();
  return true;
}

}  // namespace tfk8s
