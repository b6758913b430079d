// Fleet: the C++ live view of every tfk8s workload, with dicts out (FleetEntry::ToJson(),
// FleetChange::ToJson()). tfk8s.Fleet (python/tfk8s/fleet.py) is the Pythonic front end.
//
// Changes are queued by a C++ callback on the Fleet's thread (no GIL, no Python code there)
// and read by next_change(), which waits without the GIL in slices (WaitInSlices), so Ctrl-C
// stops it. The queue is bounded: past kMaxQueued the oldest changes are dropped and counted.
// The error that stops an informer is queued too, in order with the changes: next_change()
// raises it once, so a Python loop over the changes never waits on a dead informer unawares.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/fleet.hpp"
#include "workload_calls.hpp"

namespace tfk8s::python {

namespace {

using NoGil = py::call_guard<py::gil_scoped_release>;

// A Fleet plus the queue of its changes for Python.
class PyFleet {
 public:
  static constexpr std::size_t kMaxQueued = 100'000;

  PyFleet(Client client, FleetOptions options)
      : queue_(std::make_shared<Queue>()), fleet_(std::move(client), std::move(options)) {
    // The queue outlives the Fleet's thread even if this object goes first.
    fleet_.OnChange([queue = queue_](const FleetChange& change) {
      std::lock_guard lock(queue->mu);
      if (queue->changes.size() >= kMaxQueued) {
        // The oldest change goes, never a queued error (there is at most one per informer).
        auto oldest = std::find_if(queue->changes.begin(), queue->changes.end(),
                                   [](const Item& item) { return !item.error; });
        queue->changes.erase(oldest);
        ++queue->dropped;
      }
      queue->changes.push_back({change.ToJson(), nullptr});
      queue->cv.notify_all();
    });
    fleet_.OnError([queue = queue_](const FleetError& error) {
      if (!error.failure.fatal) return;  // retried: last_error tells, changes go on
      std::lock_guard lock(queue->mu);
      queue->changes.push_back({Json(), error.failure.error});
      queue->cv.notify_all();
    });
  }

  Fleet& fleet() { return fleet_; }

  // The next change as a dict, or None at the timeout (None = wait until one comes or
  // close()).
  py::object NextChange(std::optional<double> timeout) {
    auto change = WaitInSlices(
        timeout,
        [&](std::chrono::milliseconds slice) -> std::optional<Item> {
          std::unique_lock lock(queue_->mu);
          queue_->cv.wait_for(lock, slice,
                              [&] { return !queue_->changes.empty() || queue_->closed; });
          if (queue_->changes.empty()) return std::nullopt;
          Item out = std::move(queue_->changes.front());
          queue_->changes.pop_front();
          return out;
        },
        [&] {
          std::lock_guard lock(queue_->mu);
          return queue_->closed && queue_->changes.empty();
        });
    if (!change) return py::none();
    if (change->error) RaiseInstance(ExceptionToPython(change->error));
    return JsonToPython(change->change);
  }

  void Close() {
    fleet_.Stop();
    std::lock_guard lock(queue_->mu);
    queue_->closed = true;
    queue_->cv.notify_all();
  }

  bool closed() const {
    std::lock_guard lock(queue_->mu);
    return queue_->closed;
  }

  std::int64_t dropped() const {
    std::lock_guard lock(queue_->mu);
    return queue_->dropped;
  }

 private:
  // A change, or (error set) the error that stopped an informer.
  struct Item {
    Json change;
    std::exception_ptr error;
  };
  struct Queue {
    mutable std::mutex mu;
    std::condition_variable cv;
    std::deque<Item> changes;
    std::int64_t dropped = 0;
    bool closed = false;
  };
  std::shared_ptr<Queue> queue_;
  Fleet fleet_;
};

Json EntriesJson(const std::vector<FleetEntry>& entries) { return ToJsonList(entries); }

}  // namespace

void BindFleet(py::module_& m) {
  py::class_<PyFleet>(m, "Fleet", "The C++ Fleet. Use tfk8s.Fleet.")
      .def(py::init([](Client& client, const std::string& namespace_name,
                       const std::string& label_selector) {
             FleetOptions options;
             options.namespace_name = namespace_name;
             options.label_selector = label_selector;
             return std::make_unique<PyFleet>(client, std::move(options));
           }),
           py::arg("client"), py::arg("namespace") = "", py::arg("label_selector") = "", NoGil(),
           "Starts the informers (one discovery request for the CronJob version).")
      .def(
          "wait_for_sync",
          [](PyFleet& self, std::optional<double> timeout) {
            auto done = WaitInSlices(
                timeout,
                [&](std::chrono::milliseconds slice) { return self.fleet().WaitForSync(slice); },
                [&] { return self.closed(); });  // a closed Fleet never syncs
            return done;
          },
          py::arg("timeout") = py::none(),
          "True once every informer listed; False at the timeout (seconds; None = no limit).")
      .def_property_readonly("synced", [](PyFleet& self) { return self.fleet().synced(); })
      .def(
          "entries", [](PyFleet& self) { return EntriesJson(self.fleet().Entries()); },
          "Every entry as a dict, sorted by kind, namespace, name.")
      .def(
          "get",
          [](PyFleet& self, const std::string& kind, const std::string& namespace_name,
             const std::string& name) -> py::object {
            auto entry = self.fleet().Get(ParseFleetKind(kind), namespace_name, name);
            if (!entry) return py::none();
            return JsonToPython(entry->ToJson());
          },
          py::arg("kind"), py::arg("namespace"), py::arg("name"), "One entry as a dict, or None.")
      .def(
          "by_owner",
          [](PyFleet& self, const std::string& owner) {
            return EntriesJson(self.fleet().ByOwner(owner));
          },
          py::arg("owner"))
      .def(
          "by_namespace",
          [](PyFleet& self, const std::string& namespace_name) {
            return EntriesJson(self.fleet().ByNamespace(namespace_name));
          },
          py::arg("namespace"))
      .def("next_change", &PyFleet::NextChange, py::arg("timeout") = py::none(),
           "The next change {type, entry}, or None at the timeout or after close(). Raises, once, "
           "the error that stopped an informer, in order with the changes.")
      .def_property_readonly("dropped_changes", &PyFleet::dropped)
      .def_property_readonly(
          "last_error",
          [](PyFleet& self) -> py::object {
            auto error = self.fleet().last_error();
            if (!error) return py::none();
            py::dict out = FailureToPython(error->failure);
            out["source"] = error->source;
            return out;
          },
          "The most recent informer failure as a dict (source, kind, message, transient, "
          "consecutive, fatal, time, error), or None.")
      .def_property_readonly(
          "error",
          [](PyFleet& self) -> py::object {
            auto error = self.fleet().error();
            if (!error) return py::none();
            return ExceptionToPython(error);
          },
          "The exception that stopped an informer, or None.")
      .def("close", &PyFleet::Close, NoGil(), "Stops the informers; entries stay readable.");
}

}  // namespace tfk8s::python
