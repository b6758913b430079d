// Client.exec and Client.port_forward: the WebSocket streaming subresources.
//
// exec runs without the GIL; every 100 ms it takes the GIL briefly to run Python's signal
// handlers, so Ctrl-C closes the stream and raises KeyboardInterrupt. A PortForward serves its
// connections on its own C++ threads and never needs the GIL.

#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/client.hpp"

namespace tfk8s::python {

namespace {

py::bytes Bytes(const std::string& s) { return py::bytes(s.data(), s.size()); }

py::dict ExecCall(Client& c, std::string_view ns, std::string_view pod,
                  const std::vector<std::string>& command, const std::string& container,
                  std::optional<py::bytes> stdin_data, bool tty, std::optional<double> timeout) {
  ExecOptions options;
  options.container = container;
  if (stdin_data) options.stdin_data = std::string(*stdin_data);
  options.tty = tty;
  if (timeout && *timeout > 0) {
    options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(*timeout * 1000));
  }
  bool interrupted = false;
  options.cancelled = [&interrupted] {
    py::gil_scoped_acquire gil;
    interrupted = PyErr_CheckSignals() != 0;
    return interrupted;
  };
  ExecResult result;
  try {
    py::gil_scoped_release release;
    result = c.Exec(ns, pod, command, options);
  } catch (const CancelledError&) {
    if (interrupted) throw py::error_already_set();  // the KeyboardInterrupt the handler set
    throw;
  }
  py::dict out;
  out["exit_code"] = result.exit_code;
  out["stdout"] = Bytes(result.out);
  out["stderr"] = Bytes(result.err);
  out["protocol"] = result.protocol;
  return out;
}

}  // namespace

void BindPodStreams(py::module_& m) {
  py::class_<PortForward>(m, "PortForward",
                          "A loopback port forwarded to a pod's port (Client.port_forward).")
      .def_property_readonly("local_port", &PortForward::local_port)
      .def_property_readonly("remote_port", &PortForward::remote_port)
      .def_property_readonly("pod", &PortForward::pod)
      .def_property_readonly("namespace", &PortForward::namespace_)
      .def_property_readonly("is_open", &PortForward::is_open)
      .def_property_readonly("connections", &PortForward::connections)
      .def_property_readonly("last_error", &PortForward::last_error)
      .def("close", &PortForward::Close, py::call_guard<py::gil_scoped_release>(),
           "Stops listening and ends open connections (idempotent).");

  auto client = py::reinterpret_borrow<py::class_<Client>>(m.attr("Client"));
  client
      .def("exec", &ExecCall, py::arg("namespace"), py::arg("pod"), py::arg("command"),
           py::arg("container") = "", py::arg("stdin") = py::none(), py::arg("tty") = false,
           py::arg("timeout") = py::none(),
           "Runs a command in a pod: {exit_code, stdout (bytes), stderr (bytes), protocol}.")
      .def(
          "port_forward",
          [](Client& c, std::string_view ns, std::string_view pod, int remote_port,
             int local_port) {
            PortForwardOptions options;
            options.local_port = local_port;
            py::gil_scoped_release release;
            return std::make_unique<PortForward>(c.ForwardPort(ns, pod, remote_port, options));
          },
          py::arg("namespace"), py::arg("pod"), py::arg("remote_port"), py::arg("local_port") = 0,
          "Forwards a loopback port to the pod's port while the returned handle lives.");
}

}  // namespace tfk8s::python
