// Streams as Python iterators: WatchStream (raw watch), Informer (list-then-watch with resume),
// LogStream (pod log lines) and WorkloadLogs, all subclasses of _Stream, which holds what they
// share (next, iteration, cancel, ended, the context manager).
//
// Waiting happens without the GIL in short slices; between slices Python's signal handlers run,
// so Ctrl-C in a terminal or a notebook interrupts a wait at once. Dropping the Python object
// cancels the C++ stream (its destructor does); cancel() does it explicitly, from any thread.

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/client.hpp"
#include "tfk8s/workload.hpp"

namespace tfk8s::python {

namespace {

// What every pull stream shares, bound once as _core._Stream (the base class of WatchStream,
// LogStream, WorkloadLogs and Informer): the next item as a Python object, cancel() and ended.
class PyStream {
 public:
  PyStream() = default;
  PyStream(const PyStream&) = delete;
  PyStream& operator=(const PyStream&) = delete;
  virtual ~PyStream() = default;

  // The next item, or None when `timeout` seconds pass first or the stream has ended.
  virtual py::object NextItem(std::optional<double> timeout) = 0;
  virtual void Cancel() = 0;
  [[nodiscard]] virtual bool ended() const = 0;
};

// A stream plus what Python needs around it: a lock so that two Python threads cannot read it at
// once (the C++ stream is single-reader), and whether it has ended. `ReadFn(stream, slice)`
// returns std::optional<Item>; `ConvertFn` turns that optional into a Python object (None for
// nullopt).
template <typename Stream, auto ReadFn, auto ConvertFn>
class Guarded final : public PyStream {
 public:
  explicit Guarded(Stream stream) : stream_(std::move(stream)) {}

  py::object NextItem(std::optional<double> timeout) override { return ConvertFn(Next(timeout)); }

  // Waits for the next item; nullopt on timeout or at the end. `timeout` in seconds, nullopt =
  // until an item or the end.
  auto Next(std::optional<double> timeout) {
    return WaitInSlices(
        timeout,
        [&](std::chrono::milliseconds slice) {
          std::lock_guard lock(read_mu_);
          auto item = ReadFn(stream_, slice);
          if (!item && Ended()) ended_ = true;
          return item;
        },
        [&] { return ended_.load(); });
  }

  void Cancel() override {
    cancelled_ = true;
    stream_.Cancel();  // thread-safe by contract: may run while another thread reads
  }

  [[nodiscard]] bool ended() const override { return ended_; }
  Stream& stream() { return stream_; }
  std::mutex& read_mutex() { return read_mu_; }

 private:
  // Called with read_mu_ held.
  bool Ended() {
    if constexpr (requires(Stream s) { s.ended(); }) {
      return cancelled_ || stream_.ended();
    } else {
      return cancelled_.load();
    }
  }

  Stream stream_;
  std::mutex read_mu_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> cancelled_{false};
};

py::object EventToPython(std::optional<WatchEvent> event) {
  if (!event) return py::none();
  return py::make_tuple(py::str(std::string(ToString(event->type))), JsonToPython(event->object));
}

py::object LineToPython(const std::optional<std::string>& line) {
  if (!line) return py::none();
  return DecodeLenient(*line);
}

py::object SourceLineToPython(const std::optional<WorkloadLogLine>& line) {
  if (!line) return py::none();
  return py::make_tuple(DecodeLenient(line->source), DecodeLenient(line->line));
}

template <typename Stream>
auto ReadNext(Stream& stream, std::chrono::milliseconds slice) {
  return stream.Next(slice);
}

std::optional<std::string> ReadLine(LogStream& stream, std::chrono::milliseconds slice) {
  return stream.NextLine(slice);
}

using PyWatchStream = Guarded<WatchStream, &ReadNext<WatchStream>, &EventToPython>;
using PyLogStream = Guarded<LogStream, &ReadLine, &LineToPython>;
using PyInformer = Guarded<Informer, &ReadNext<Informer>, &EventToPython>;
using PyWorkloadLogs =
    Guarded<WorkloadLogStream, &ReadNext<WorkloadLogStream>, &SourceLineToPython>;

// Binds _core._Stream: next(timeout), __iter__, __next__, cancel(), ended and the context
// manager protocol, inherited by every stream class.
void BindStreamBase(py::module_& m) {
  py::class_<PyStream>(m, "_Stream",
                       "What every pull stream shares: next(timeout), iteration, cancel(), "
                       "ended and use as a context manager (leaving it cancels the stream).")
      .def("next", &PyStream::NextItem, py::arg("timeout") = py::none(),
           "The next item, or None when `timeout` seconds pass first or the stream has ended "
           "(timeout None: wait as long as it takes).")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__",
           [](PyStream& self) {
             py::object item = self.NextItem(std::nullopt);
             if (item.is_none()) throw py::stop_iteration();
             return item;
           })
      .def("cancel", &PyStream::Cancel,
           "Stops the stream; iteration then ends. Thread-safe and idempotent.")
      .def_property_readonly("ended", &PyStream::ended, "True once the stream has ended.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyStream& self, const py::args&) { self.Cancel(); });
}

}  // namespace

py::dict FailureToPython(const InformerFailure& failure) {
  auto out = py::dict(JsonToPython(failure.ToJson()));
  out["error"] = failure.error ? ExceptionToPython(failure.error) : py::none();
  return out;
}

void BindStreams(py::module_& m) {
  py::class_<WatchOptions>(m, "WatchOptions", "Options of raw watches.")
      .def(py::init<>())
      .def_readwrite("label_selector", &WatchOptions::label_selector)
      .def_readwrite("field_selector", &WatchOptions::field_selector)
      .def_readwrite(
          "resource_version", &WatchOptions::resource_version,
          "Start after this version ('' = the current state as ADDED events, then changes).")
      .def_readwrite("allow_bookmarks", &WatchOptions::allow_bookmarks)
      .def_readwrite("timeout_seconds", &WatchOptions::timeout_seconds,
                     "Server-side duration of the watch request.");

  py::class_<LogOptions>(m, "LogOptions", "Options of pod log calls.")
      .def(py::init<>())
      .def_readwrite("container", &LogOptions::container)
      .def_readwrite("follow", &LogOptions::follow)
      .def_readwrite("tail_lines", &LogOptions::tail_lines)
      .def_readwrite("since_seconds", &LogOptions::since_seconds)
      .def_readwrite("limit_bytes", &LogOptions::limit_bytes)
      .def_readwrite("timestamps", &LogOptions::timestamps)
      .def_readwrite("previous", &LogOptions::previous);

  BindStreamBase(m);
  py::class_<PyWatchStream, PyStream>(m, "WatchStream",
                                      "A raw watch: (type, object) tuples in the order the "
                                      "server sends them; ERROR events are returned as events.");

  py::class_<PyLogStream, PyStream>(m, "LogStream", "Pod log lines (str, without the newline).");

  py::class_<PyWorkloadLogs, PyStream> workload_logs(
      m, "WorkloadLogs",
      "A workload's logs as (source, line) tuples (source: a replica such as 'worker-1', a "
      "run's attempt such as 'attempt-2', or a pod), read on a worker thread into a bounded "
      "queue. Returned by the logs / stream_logs calls of TFCluster, DevInstance and "
      "ScheduledJob.");
  workload_logs.def("close", &PyWorkloadLogs::Cancel, "Stops reading (the same as cancel()).");

  py::class_<PyInformer, PyStream> informer(
      m, "Informer",
      "List-then-watch with resume: (type, object) events for every change, resuming after "
      "server timeouts and relisting after 410 Gone (delivering only the differences). Raises "
      "the typed error of failures that retrying cannot fix.");
  informer
      .def(py::init([](Client client, ResourceType type, std::string ns, ListOptions selectors) {
             return std::make_unique<PyInformer>(
                 Informer(std::move(client), std::move(type), std::move(ns), std::move(selectors)));
           }),
           py::arg("client"), py::arg("type"), py::arg("namespace"),
           py::arg_v("selectors", ListOptions{}, "ListOptions()"),
           "Watches `type` in `namespace` ('' = all namespaces). With selectors.resource_version "
           "set, resumes from that version without listing first.")
      .def(
          "snapshot",
          [](PyInformer& self) {
            py::gil_scoped_release release;
            return self.stream().Snapshot();
          },
          "The objects currently known.")
      .def_property_readonly(
          "resource_version",
          [](PyInformer& self) {
            py::gil_scoped_release release;
            return self.stream().resource_version();
          },
          "The last resourceVersion seen (save it to resume later).")
      .def_property_readonly(
          "relist_count",
          [](PyInformer& self) {
            py::gil_scoped_release release;
            return self.stream().relist_count();
          },
          "How many times the informer had to list again (first list excluded).")
      .def_property_readonly(
          "last_error",
          [](PyInformer& self) -> py::object {
            std::optional<InformerFailure> failure;
            {
              py::gil_scoped_release release;
              failure = self.stream().last_error();
            }
            if (!failure) return py::none();
            return FailureToPython(*failure);
          },
          "The most recent failure as a dict (kind, message, transient, consecutive, fatal, "
          "time, error: the exception), or None.")
      .def_property_readonly(
          "consecutive_failures",
          [](PyInformer& self) { return self.stream().consecutive_failures(); },
          "Failures since the last success (0 when healthy).")
      .def_property_readonly(
          "failure_limit", [](PyInformer& self) { return self.stream().failure_limit(); },
          "How many failures that are not transient, in a row, make next() raise.")
      .def(
          "set_failure_limit",
          [](PyInformer& self, int limit) {
            py::gil_scoped_release release;
            std::lock_guard lock(self.read_mutex());
            self.stream().set_failure_limit(limit);
          },
          py::arg("limit"),
          "How many failures that are not transient (TLS, size limit, undecodable answers), in "
          "a row, make next() raise (at least 1; default 5). Set before iterating.")
      .def(
          "set_backoff",
          [](PyInformer& self, double initial, double max) {
            auto ms = [](double seconds) {
              return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
            };
            py::gil_scoped_release release;
            std::lock_guard lock(self.read_mutex());
            self.stream().set_backoff(ms(initial), ms(max));
          },
          py::arg("initial"), py::arg("max"),
          "The wait after a failure in seconds: `initial` (0.8) doubling up to `max` (30), with "
          "jitter. Set before iterating.")
      .def(
          "set_watch_timeout",
          [](PyInformer& self, double seconds) {
            auto min_timeout = std::chrono::seconds(static_cast<std::int64_t>(seconds));
            py::gil_scoped_release release;
            std::lock_guard lock(self.read_mutex());
            self.stream().set_watch_timeout(min_timeout);
          },
          py::arg("min_timeout"),
          "Server-side duration of each watch request in seconds (at least 1): random in "
          "[t, 2t). Set before iterating.");

  // The Client methods that open streams.
  auto client = py::reinterpret_borrow<py::class_<Client>>(m.attr("Client"));
  client
      .def(
          "watch",
          [](Client& c, const ResourceType& type, std::string_view ns,
             const WatchOptions& options) {
            std::unique_ptr<PyWatchStream> stream;
            {
              py::gil_scoped_release release;
              stream = std::make_unique<PyWatchStream>(c.Watch(type, ns, options));
            }
            return stream;
          },
          py::arg("type"), py::arg("namespace"),
          py::arg_v("options", WatchOptions{}, "WatchOptions()"),
          "A raw watch from options.resource_version ('' namespace = all namespaces).")
      .def(
          "read_logs",
          [](Client& c, std::string_view ns, std::string_view pod, const LogOptions& options) {
            std::string text;
            {
              py::gil_scoped_release release;
              text = c.ReadLogs(ns, pod, options);
            }
            return DecodeLenient(text);
          },
          py::arg("namespace"), py::arg("pod"), py::arg_v("options", LogOptions{}, "LogOptions()"),
          "A pod's whole log (never follows).")
      .def(
          "stream_logs",
          [](Client& c, std::string_view ns, std::string_view pod, const LogOptions& options) {
            std::unique_ptr<PyLogStream> stream;
            {
              py::gil_scoped_release release;
              stream = std::make_unique<PyLogStream>(c.StreamLogs(ns, pod, options));
            }
            return stream;
          },
          py::arg("namespace"), py::arg("pod"), py::arg_v("options", LogOptions{}, "LogOptions()"),
          "A pod's log as a stream of lines (follow or not).");
}

py::object WrapWorkloadLogs(WorkloadLogStream stream) {
  return py::cast(std::make_unique<PyWorkloadLogs>(std::move(stream)));
}

}  // namespace tfk8s::python
