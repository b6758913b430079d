#pragma once
/// @file
/// Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics: of several
/// processes running the same loops (two replicas of a controller), one at a time acts.
///
/// A candidate takes a Lease whose holder is empty, or whose record has not changed for a lease
/// duration as observed on the candidate's own clock (the time it last saw the record change,
/// never the `renewTime` another machine wrote): tolerant of clock skew between machines, not
/// of a clock running at another rate. Every write is an update conditional on the
/// `resourceVersion` it read, so of two candidates only one wins. The leader renews every retry
/// period; one that has not renewed within the renew deadline is no longer leader (IsLeader()
/// turns false), before any other candidate could take over (renew deadline < lease duration).
/// Like client-go, this is not fencing: the Lease tells who should act, the work itself must
/// still be claimed on the objects it changes (as ScheduledJobWatcher's alerts are).

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "tfk8s/client.hpp"

namespace tfk8s {

/// What a LeaderElector is told. Durations are client-go's defaults.
struct LeaderElectionConfig {
  std::string namespace_name;  ///< The Lease's namespace.
  std::string lease_name;      ///< The Lease (created when absent); a DNS subdomain.
  std::string identity;        ///< This candidate, unique among them (e.g. pod name + pid).
  std::chrono::milliseconds lease_duration{15000};  ///< How long others wait to take over.
  std::chrono::milliseconds renew_deadline{10000};  ///< A leader that cannot renew steps down.
  std::chrono::milliseconds retry_period{2000};     ///< Between attempts to acquire or renew.
  /// The clock deadlines are measured on (steady_clock::now by default; tests inject one).
  std::function<std::chrono::steady_clock::time_point()> clock;
  /// The time written as acquireTime / renewTime (system_clock::now by default). Only for
  /// people reading the Lease: no candidate trusts another's.
  std::function<std::chrono::system_clock::time_point()> wall_clock;

  /// Throws ValidationError naming the field: names, identity, and
  /// retry_period < renew_deadline < lease_duration (all positive).
  void Validate() const;
};

/// The Lease's spec as the elector reads and writes it.
struct LeaderElectionRecord {
  std::string holder;  ///< holderIdentity; "" when released.
  int lease_duration_seconds = 0;
  std::string acquire_time;  ///< RFC 3339 with microseconds, as the server writes MicroTime.
  std::string renew_time;
  int lease_transitions = 0;
  bool operator==(const LeaderElectionRecord&) const = default;
};

/// One candidate. Thread-safe: Run() in one thread, IsLeader()/Leader() from any.
class LeaderElector {
 public:
  /// Validates `config` (ValidationError); sends nothing.
  LeaderElector(Client client, LeaderElectionConfig config);

  /// One step: acquires the Lease (creating it when absent) or renews it; whether this
  /// candidate holds it now. API errors other than a lost race (Conflict, AlreadyExists) are
  /// thrown; they count as a failed renewal for IsLeader(). A renewal keeps the Lease's
  /// acquireTime; every acquisition, also of a Lease still in this candidate's name after it
  /// missed the renew deadline (a new term), writes a new one.
  bool TryAcquireOrRenew();
  /// Whether this candidate holds the Lease and renewed it within the renew deadline.
  [[nodiscard]] bool IsLeader() const;
  /// The holder last observed ("" for none yet).
  [[nodiscard]] std::string Leader() const;
  /// The record last observed.
  [[nodiscard]] LeaderElectionRecord Observed() const;
  /// Gives the Lease up when this candidate holds it (empty holder, 1 s duration), so another
  /// takes over at once; whether it did.
  bool Release();

  /// What Run() calls: `started` once leading (its argument turns true when leadership is lost
  /// or stop was asked: stop acting then), `stopped` after. Either may be empty.
  struct Callbacks {
    std::function<void(const std::atomic<bool>& lost)> started;
    std::function<void()> stopped;
    std::function<void(const std::string& leader)> new_leader;  ///< Each observed change.
  };
  /// Tries to acquire every retry period until it leads or `stop` turns true; then runs
  /// `started` in a thread of its own and renews every retry period until a renewal misses the
  /// renew deadline or `stop` turns true; then waits for `started` to return, releases the Lease
  /// (when stopping) and calls `stopped`. Returns whether it ever led. Errors of single
  /// attempts are retried (reported through `on_error` when given).
  bool Run(const std::atomic<bool>& stop, const Callbacks& callbacks,
           const std::function<void(const std::string&)>& on_error = {});

 private:
  std::chrono::steady_clock::time_point Now() const;
  Json LeaseObject(const LeaderElectionRecord& record, const Json* current) const;
  void Observe(const LeaderElectionRecord& record, std::chrono::steady_clock::time_point now);

  Client client_;
  LeaderElectionConfig config_;
  mutable std::mutex mu_;
  LeaderElectionRecord observed_;
  bool observed_any_ = false;
  std::chrono::steady_clock::time_point observed_time_{};
  std::chrono::steady_clock::time_point renewed_at_{};  ///< Last successful write as holder.
  bool holding_ = false;
};

/// The Lease's spec from a Lease object (missing fields empty / 0).
LeaderElectionRecord LeaderElectionRecordFromLease(const Json& lease);

}  // namespace tfk8s
