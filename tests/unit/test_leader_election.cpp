// Leader election on a Lease (tfk8s/leader_election.hpp) against the fake cluster, with clocks
// the tests move: acquire, renew, lose, steal after expiry (on the candidate's own clock), clock
// skew between machines, release, and a race for an expired Lease that exactly one wins.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tfk8s/error.hpp"
#include "tfk8s/leader_election.hpp"
#include "tfk8s/testing/fake_cluster.hpp"

using namespace tfk8s;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

namespace {

const ResourceType kLeases{"coordination.k8s.io", "v1", "Lease", "leases", true};

// A candidate with its own clocks: `at` is its steady clock, `skew` moves its wall clock.
struct Candidate {
  std::shared_ptr<Steady::time_point> at = std::make_shared<Steady::time_point>();
  std::shared_ptr<Steady::duration> skew = std::make_shared<Steady::duration>();
  LeaderElector elector;

  Candidate(testing::FakeCluster& fake, const std::string& identity)
      : elector(fake.client(), Config(identity)) {}

  LeaderElectionConfig Config(const std::string& identity) {
    LeaderElectionConfig c;
    c.namespace_name = "ctl";
    c.lease_name = "tfk8s-controller";
    c.identity = identity;
    c.clock = [at = at] { return *at; };
    c.wall_clock = [skew = skew] {
      return std::chrono::system_clock::now() +
             std::chrono::duration_cast<std::chrono::system_clock::duration>(*skew);
    };
    return c;
  }
  void Advance(Steady::duration d) { *at += d; }
};

testing::FakeCluster& WithLeases(testing::FakeCluster& fake) {
  fake.AddResource(kLeases);
  return fake;
}

// The candidate of the Run() tests, with real (short) durations.
LeaderElectionConfig RunnerConfig(milliseconds lease, milliseconds renew, milliseconds retry) {
  LeaderElectionConfig c;
  c.namespace_name = "ctl";
  c.lease_name = "tfk8s-controller";
  c.identity = "runner";
  c.lease_duration = lease;
  c.renew_deadline = renew;
  c.retry_period = retry;
  return c;
}

LeaderElectionRecord Stored(const testing::FakeCluster& fake) {
  auto lease = fake.Find("coordination.k8s.io/v1", "Lease", "ctl", "tfk8s-controller");
  REQUIRE(lease.has_value());
  return LeaderElectionRecordFromLease(*lease);
}

}  // namespace

TEST_CASE("leader election: the first candidate creates the Lease and leads, the next waits") {
  testing::FakeCluster fake;
  WithLeases(fake);
  Candidate a(fake, "a"), b(fake, "b");
  CHECK(a.elector.TryAcquireOrRenew());
  CHECK(a.elector.IsLeader());
  LeaderElectionRecord r = Stored(fake);
  CHECK(r.holder == "a");
  CHECK(r.lease_duration_seconds == 15);
  CHECK(r.lease_transitions == 0);
  // MicroTime: exactly six fraction digits, as the apiserver parses it.
  CHECK(std::regex_match(r.renew_time, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")));
  CHECK(r.acquire_time == r.renew_time);

  CHECK_FALSE(b.elector.TryAcquireOrRenew());
  CHECK_FALSE(b.elector.IsLeader());
  CHECK(b.elector.Leader() == "a");

  // Renewing keeps acquireTime and the transitions, moves renewTime.
  a.Advance(seconds(2));
  std::this_thread::sleep_for(milliseconds(2));  // a later wall clock for renewTime
  CHECK(a.elector.TryAcquireOrRenew());
  LeaderElectionRecord renewed = Stored(fake);
  CHECK(renewed.acquire_time == r.acquire_time);
  CHECK(renewed.renew_time > r.renew_time);
  CHECK(renewed.lease_transitions == 0);
}

TEST_CASE(
    "leader election: a silent leader is replaced once the Lease expired on the "
    "candidate's own clock, not before") {
  testing::FakeCluster fake;
  WithLeases(fake);
  Candidate a(fake, "a"), b(fake, "b");
  REQUIRE(a.elector.TryAcquireOrRenew());
  CHECK_FALSE(b.elector.TryAcquireOrRenew());  // b sees the record now (its time 0)
  b.Advance(seconds(14));
  CHECK_FALSE(b.elector.TryAcquireOrRenew());  // unchanged for 14 s < 15 s
  b.Advance(seconds(1));
  CHECK(b.elector.TryAcquireOrRenew());  // unchanged for 15 s: expired
  CHECK(b.elector.IsLeader());
  LeaderElectionRecord r = Stored(fake);
  CHECK(r.holder == "b");
  CHECK(r.lease_transitions == 1);

  // a has not renewed: within its renew deadline it still believes it leads, then it does not.
  a.Advance(seconds(9));
  CHECK(a.elector.IsLeader());
  a.Advance(seconds(1));
  CHECK_FALSE(a.elector.IsLeader());
  // Its next attempt sees b and stands back.
  CHECK_FALSE(a.elector.TryAcquireOrRenew());
  CHECK(a.elector.Leader() == "b");
}

TEST_CASE("leader election: a renewing leader is never replaced, whatever its wall clock says") {
  for (auto skew : {-hours(1), hours(1)}) {
    testing::FakeCluster fake;
    WithLeases(fake);
    Candidate a(fake, "a"), b(fake, "b");
    *a.skew = skew;  // a's renewTime is an hour off: b must not read anything into it
    REQUIRE(a.elector.TryAcquireOrRenew());
    for (int i = 0; i < 30; ++i) {  // 60 s of b's time, a renewing every 2 s
      b.Advance(seconds(2));
      a.Advance(seconds(2));
      std::this_thread::sleep_for(milliseconds(1));  // each renewal writes a new renewTime
      REQUIRE(a.elector.TryAcquireOrRenew());
      CHECK_FALSE(b.elector.TryAcquireOrRenew());
    }
    CHECK(a.elector.IsLeader());
    CHECK(Stored(fake).holder == "a");
  }
}

TEST_CASE("leader election: a leader whose renewals fail steps down within the renew deadline") {
  testing::FakeCluster fake;
  WithLeases(fake);
  Candidate a(fake, "a");
  REQUIRE(a.elector.TryAcquireOrRenew());
  for (int i = 0; i < 5; ++i) {  // 2 s apart: the fifth failure is 10 s after the renewal
    a.Advance(seconds(2));
    fake.FailNext(500, "InternalError", "etcd is away");
    CHECK_THROWS_AS(a.elector.TryAcquireOrRenew(), ServerError);
    CHECK(a.elector.IsLeader() == (i < 4));
  }
  // Its next successful attempt takes the Lease back (still its own, so no transition) and
  // begins a new term: a new acquireTime, which renewals then keep.
  const LeaderElectionRecord first = Stored(fake);
  a.Advance(seconds(2));
  std::this_thread::sleep_for(milliseconds(2));  // a later wall clock
  REQUIRE(a.elector.TryAcquireOrRenew());
  CHECK(a.elector.IsLeader());
  const LeaderElectionRecord again = Stored(fake);
  CHECK(again.holder == "a");
  CHECK(again.lease_transitions == first.lease_transitions);
  CHECK(again.acquire_time > first.acquire_time);
  a.Advance(seconds(2));
  std::this_thread::sleep_for(milliseconds(2));
  REQUIRE(a.elector.TryAcquireOrRenew());
  CHECK(Stored(fake).acquire_time == again.acquire_time);
  // (A renewal that loses a race, Conflict on the update, returns false without throwing:
  // the racing candidates below.)
}

TEST_CASE("leader election: a released Lease is taken by the next candidate at once") {
  testing::FakeCluster fake;
  WithLeases(fake);
  Candidate a(fake, "a"), b(fake, "b");
  REQUIRE(a.elector.TryAcquireOrRenew());
  CHECK_FALSE(b.elector.TryAcquireOrRenew());
  CHECK_FALSE(b.elector.Release());  // not b's to give up
  CHECK(a.elector.Release());
  CHECK_FALSE(a.elector.IsLeader());
  LeaderElectionRecord r = Stored(fake);
  CHECK(r.holder.empty());
  CHECK(r.lease_duration_seconds == 1);
  CHECK(b.elector.TryAcquireOrRenew());  // no waiting: the holder is empty
  CHECK(Stored(fake).lease_transitions == 1);
}

TEST_CASE("leader election: candidates racing for an expired Lease, exactly one wins") {
  for (int round = 0; round < 10; ++round) {
    testing::FakeCluster fake;
    WithLeases(fake);
    Candidate old(fake, "old");
    REQUIRE(old.elector.TryAcquireOrRenew());
    std::vector<std::unique_ptr<Candidate>> racers;
    for (int i = 0; i < 4; ++i) {
      racers.push_back(std::make_unique<Candidate>(fake, "racer-" + std::to_string(i)));
      CHECK_FALSE(racers.back()->elector.TryAcquireOrRenew());
      racers.back()->Advance(seconds(16));
    }
    std::atomic<int> won{0};
    std::vector<std::thread> threads;
    threads.reserve(racers.size());
    for (auto& r : racers) {
      threads.emplace_back([&won, &r] { won += r->elector.TryAcquireOrRenew() ? 1 : 0; });
    }
    for (auto& t : threads) t.join();
    CHECK(won.load() == 1);
    int leaders = 0;
    for (auto& r : racers) leaders += r->elector.IsLeader() ? 1 : 0;
    CHECK(leaders == 1);
  }
}

TEST_CASE("leader election: Run leads, renews, and on stop releases the Lease") {
  testing::FakeCluster fake;
  WithLeases(fake);
  LeaderElector elector(fake.client(),
                        RunnerConfig(milliseconds(1500), milliseconds(1000), milliseconds(100)));
  std::atomic<bool> stop{false};
  std::atomic<int> started{0}, stopped{0};
  std::vector<std::string> leaders;
  std::thread run([&] {
    LeaderElector::Callbacks cb;
    cb.started = [&](const std::atomic<bool>& lost) {
      ++started;
      while (!lost.load()) std::this_thread::sleep_for(milliseconds(10));
    };
    cb.stopped = [&] { ++stopped; };
    cb.new_leader = [&](const std::string& who) { leaders.push_back(who); };
    CHECK(elector.Run(stop, cb));
  });
  auto until = Steady::now() + seconds(10);
  while (started.load() == 0 && Steady::now() < until)
    std::this_thread::sleep_for(milliseconds(10));
  REQUIRE(started.load() == 1);
  std::this_thread::sleep_for(milliseconds(400));  // a few renewals
  CHECK(elector.IsLeader());
  stop.store(true);
  run.join();
  CHECK(stopped.load() == 1);
  CHECK(leaders == std::vector<std::string>{"runner"});
  CHECK(Stored(fake).holder.empty());  // released on stop
}

TEST_CASE("leader election: Run stops the work once renewals miss the renew deadline") {
  testing::FakeCluster fake;
  WithLeases(fake);
  LeaderElector elector(fake.client(),
                        RunnerConfig(milliseconds(3000), milliseconds(2000), milliseconds(200)));
  std::atomic<bool> stop{false}, started{false}, work_done{false};
  std::atomic<int> errors{0};
  Steady::time_point failing_since{}, lost_at{};
  std::thread run([&] {
    LeaderElector::Callbacks cb;
    cb.started = [&](const std::atomic<bool>& lost) {
      started.store(true);
      while (!lost.load()) std::this_thread::sleep_for(milliseconds(5));
      lost_at = Steady::now();
      work_done.store(true);
    };
    CHECK(elector.Run(stop, cb, [&](const std::string&) { ++errors; }));
  });
  auto until = Steady::now() + seconds(10);
  while (!started.load() && Steady::now() < until) std::this_thread::sleep_for(milliseconds(5));
  REQUIRE(started.load());
  failing_since = Steady::now();
  for (int i = 0; i < 40; ++i) fake.FailNext(503, "ServiceUnavailable", "the apiserver is away");
  run.join();
  CHECK(work_done.load());
  CHECK(errors.load() >= 5);
  // The work stopped before the Lease could expire for another candidate (the requirement;
  // it stops at the renew deadline, 2 s after the last renewal, unless the machine stalls).
  CHECK(lost_at - failing_since < milliseconds(3000));
  CHECK(Stored(fake).holder == "runner");  // not released: it could not write
}

TEST_CASE(
    "leader election: Run's next term writes a new acquireTime, also when the last renewal "
    "still looks recent") {
  testing::FakeCluster fake;
  WithLeases(fake);
  // The elector's steady clock is the real one plus an offset the test moves.
  auto offset = std::make_shared<std::atomic<int>>(0);  // milliseconds
  LeaderElectionConfig config =
      RunnerConfig(milliseconds(3000), milliseconds(2000), milliseconds(200));
  config.clock = [offset] { return Steady::now() + milliseconds(offset->load()); };
  LeaderElector elector(fake.client(), config);
  std::atomic<bool> stop{false}, again{false};
  std::atomic<int> terms{0}, ended{0};
  std::thread run([&] {
    LeaderElector::Callbacks cb;
    cb.started = [&](const std::atomic<bool>& lost) {
      ++terms;
      while (!lost.load()) std::this_thread::sleep_for(milliseconds(5));
    };
    cb.stopped = [&] { ++ended; };
    while (!stop.load()) {
      elector.Run(stop, cb);
      while (!again.load() && !stop.load()) std::this_thread::sleep_for(milliseconds(5));
    }
  });
  auto wait_until = [](const std::function<bool()>& done) {
    const auto until = Steady::now() + seconds(10);
    while (!done() && Steady::now() < until) std::this_thread::sleep_for(milliseconds(5));
    return done();
  };
  REQUIRE(wait_until([&] { return terms.load() == 1; }));
  const LeaderElectionRecord first = Stored(fake);
  // The deadline passes on the elector's clock (as while a renewal request hangs): the term
  // ends. Then the clock is back where the last renewal is recent again, as the time a hung
  // renewal records when it is written after all.
  offset->store(2500);
  REQUIRE(wait_until([&] { return ended.load() == 1; }));
  offset->store(0);
  again.store(true);
  REQUIRE(wait_until([&] { return terms.load() == 2; }));
  const LeaderElectionRecord second = Stored(fake);
  CHECK(second.holder == "runner");
  CHECK(second.lease_transitions == first.lease_transitions);
  CHECK(second.acquire_time != first.acquire_time);
  stop.store(true);
  run.join();
}

TEST_CASE("leader election: the configuration is checked before anything is sent") {
  testing::FakeCluster fake;
  LeaderElectionConfig c;
  c.namespace_name = "ctl";
  c.lease_name = "tfk8s-controller";
  c.identity = "a";
  c.renew_deadline = seconds(15);  // not shorter than the lease
  try {
    LeaderElector e(fake.client(), c);
    FAIL("accepted a renew deadline as long as the lease");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "lease_duration");
  }
  c.renew_deadline = seconds(10);
  c.identity = "";
  CHECK_THROWS_AS(LeaderElector(fake.client(), c), ValidationError);
  c.identity = "a";
  c.lease_name = "Not_A_Name";
  CHECK_THROWS_AS(LeaderElector(fake.client(), c), ValidationError);
  CHECK(fake.requests().empty());
}
