// tfk8s::Error and its subclasses as Python exceptions under one base class, tfk8s.Error.
//
// Each C++ ErrorKind maps to exactly one Python class. The translator builds an instance of that
// class with the error's description as its message and the structured fields as attributes
// (http_code, reason, message, causes, retry_after_seconds, kind, plus field/value, source,
// sent_request or resources where they apply).

#include <array>
#include <string>
#include <utility>

#include <pybind11/stl.h>

#include "bindings.hpp"

namespace tfk8s::python {

namespace {

constexpr std::size_t kKindCount = static_cast<std::size_t>(ErrorKind::kUnknown) + 1;

// The exception classes, owned by the module (and kept for the life of the process, which is
// what a Python extension's types do anyway). Raw handles: no Python object in a static
// destructor runs without the GIL.
struct ErrorClasses {
  PyObject* base = nullptr;
  PyObject* api = nullptr;
  std::array<PyObject*, kKindCount> by_kind{};
};

ErrorClasses& Classes() {
  static ErrorClasses classes;
  return classes;
}

PyObject* NewClass(py::module_& m, const char* name, const char* doc, py::handle bases,
                   ErrorKind kind, py::dict attrs) {
  attrs["kind"] = py::str(std::string(ToString(kind)));
  std::string qualified = std::string("tfk8s.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), attrs.ptr());
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));  // the module takes its own reference; ours stays
  return cls;
}

void SetCommonAttributes(py::handle self, const Error& e) {
  py::list causes;
  for (const auto& c : e.causes()) causes.append(py::cast(c));
  self.attr("kind") = py::str(std::string(ToString(e.kind())));
  self.attr("http_code") = e.http_code();
  self.attr("reason") = e.reason();
  self.attr("message") = DecodeLenient(e.server_message());
  self.attr("causes") = causes;
  self.attr("retry_after_seconds") = py::cast(e.retry_after_seconds());
  self.attr("attempts") = e.attempts();
}

// pybind11 hands translators the exception_ptr by value.
// NOLINTNEXTLINE(performance-unnecessary-value-param)
void TranslateCurrentException(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const Error& e) {
    py::object instance = ErrorToPython(e);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
  }
}

}  // namespace

py::object ErrorToPython(const Error& e) {
  const ErrorClasses& classes = Classes();
  PyObject* cls = classes.by_kind[static_cast<std::size_t>(e.kind())];
  if (!cls) cls = classes.base;
  py::object instance = py::reinterpret_borrow<py::object>(cls)(DecodeLenient(e.what()));
  SetCommonAttributes(instance, e);
  if (const auto* v = dynamic_cast<const ValidationError*>(&e)) {
    instance.attr("field") = v->field();
    instance.attr("value") = DecodeLenient(v->value());
  } else if (const auto* c = dynamic_cast<const ConfigError*>(&e)) {
    instance.attr("source") = c->source();
    instance.attr("field") = c->field();
  } else if (const auto* t = dynamic_cast<const TransportError*>(&e)) {
    instance.attr("sent_request") = t->sent_request();
  } else if (const auto* q = dynamic_cast<const QuotaExceeded*>(&e)) {
    instance.attr("resources") = py::cast(q->resources());
  }
  return instance;
}

py::object ExceptionToPython(const std::exception_ptr& error) {
  if (!error) return py::none();
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return ErrorToPython(e);
  } catch (const std::exception& e) {
    return py::reinterpret_borrow<py::object>(PyExc_RuntimeError)(DecodeLenient(e.what()));
  } catch (...) {
    return py::reinterpret_borrow<py::object>(PyExc_RuntimeError)("unknown C++ exception");
  }
}

void BindErrors(py::module_& m) {
  py::class_<StatusCause>(m, "StatusCause",
                          "One entry of a Kubernetes Status's details.causes: which field was "
                          "wrong and why.")
      .def(py::init([](std::string field, std::string reason, std::string message) {
             return StatusCause{std::move(reason), std::move(message), std::move(field)};
           }),
           py::arg("field") = "", py::arg("reason") = "", py::arg("message") = "")
      .def_readonly("field", &StatusCause::field, "Field path, e.g. 'spec.replicas'.")
      .def_readonly("reason", &StatusCause::reason,
                    "Machine-readable reason, e.g. "
                    "'FieldValueInvalid'.")
      .def_readonly("message", &StatusCause::message, "Human-readable explanation.")
      .def("__eq__", [](const StatusCause& a, const StatusCause& b) { return a == b; })
      .def("__hash__",
           [](const StatusCause& c) {
             return py::hash(py::make_tuple(c.field, c.reason, c.message));
           })
      .def("__repr__",
           [](const StatusCause& c) {
             return "StatusCause(field=" + py::repr(py::str(c.field)).cast<std::string>() +
                    ", reason=" + py::repr(py::str(c.reason)).cast<std::string>() +
                    ", message=" + py::repr(py::str(c.message)).cast<std::string>() + ")";
           })
      .def(py::pickle(
          [](const StatusCause& c) { return py::make_tuple(c.field, c.reason, c.message); },
          [](const py::tuple& t) {
            return StatusCause{t[1].cast<std::string>(), t[2].cast<std::string>(),
                               t[0].cast<std::string>()};
          }));

  ErrorClasses& c = Classes();
  auto& k = c.by_kind;
  auto at = [&k](ErrorKind kind) -> PyObject*& { return k[static_cast<std::size_t>(kind)]; };
  auto one = [](PyObject* base) { return py::handle(base); };

  py::dict base_attrs;
  base_attrs["http_code"] = 0;
  base_attrs["reason"] = "";
  base_attrs["message"] = "";
  base_attrs["causes"] = py::tuple();
  base_attrs["retry_after_seconds"] = py::none();
  base_attrs["attempts"] = 1;
  c.base = NewClass(m, "Error",
                    "Base class of every tfk8s error.\n\n"
                    "str(error) is the full description. Attributes: kind (e.g. 'NotFound'), "
                    "http_code (0 without a response), reason (Kubernetes Status.reason), message "
                    "(the server's Status.message), causes (list of StatusCause), "
                    "retry_after_seconds (or None) and attempts (how many times the request was "
                    "sent).",
                    PyExc_Exception, ErrorKind::kUnknown, base_attrs);

  py::dict validation_attrs;
  validation_attrs["field"] = "";
  validation_attrs["value"] = "";
  at(ErrorKind::kValidation) = NewClass(
      m, "ValidationError",
      "A client-side check failed; nothing was sent. Also a ValueError.\n\n"
      "Attributes: field (path of the offending field) and value (the offending value).",
      py::make_tuple(one(c.base), one(PyExc_ValueError)), ErrorKind::kValidation, validation_attrs);

  py::dict config_attrs;
  config_attrs["source"] = "";
  config_attrs["field"] = "";
  at(ErrorKind::kConfig) =
      NewClass(m, "ConfigError",
               "The configuration (kubeconfig, in-cluster files, exec plugin) is missing or "
               "inconsistent.\n\nAttributes: source (file or mechanism) and field.",
               one(c.base), ErrorKind::kConfig, config_attrs);

  py::dict transport_attrs;
  transport_attrs["sent_request"] = true;
  at(ErrorKind::kTransport) =
      NewClass(m, "TransportError",
               "No usable HTTP response: connection refused, DNS, proxy, reset, timeout.\n\n"
               "Attribute: sent_request (whether the server may have seen the request).",
               one(c.base), ErrorKind::kTransport, transport_attrs);
  at(ErrorKind::kTls) =
      NewClass(m, "TlsError", "The TLS handshake or certificate verification failed.",
               one(at(ErrorKind::kTransport)), ErrorKind::kTls, py::dict());
  at(ErrorKind::kCancelled) =
      NewClass(m, "CancelledError", "The operation was cancelled by the caller.", one(c.base),
               ErrorKind::kCancelled, py::dict());

  c.api = NewClass(m, "ApiError",
                   "Base class of errors built from an API server response (see http_code, "
                   "reason, message and causes).",
                   one(c.base), ErrorKind::kUnknown, py::dict());
  struct ApiClass {
    ErrorKind kind;
    const char* name;
    const char* doc;
  };
  const ApiClass api_classes[] = {
      {ErrorKind::kBadRequest, "BadRequest", "HTTP 400: the request was malformed."},
      {ErrorKind::kUnauthorized, "Unauthorized", "HTTP 401: the credentials were not accepted."},
      {ErrorKind::kForbidden, "Forbidden", "HTTP 403: not allowed (RBAC, admission)."},
      {ErrorKind::kNotFound, "NotFound", "HTTP 404: no such object or resource type."},
      {ErrorKind::kMethodNotAllowed, "MethodNotAllowed", "HTTP 405."},
      {ErrorKind::kAlreadyExists, "AlreadyExists",
       "HTTP 409 with reason AlreadyExists: an object with that name exists."},
      {ErrorKind::kConflict, "Conflict",
       "HTTP 409 with reason Conflict: a stale resourceVersion or a field-manager conflict."},
      {ErrorKind::kGone, "Gone", "HTTP 410: the resourceVersion is too old; list again."},
      {ErrorKind::kInvalid, "Invalid", "HTTP 422: the object is invalid; see causes."},
      {ErrorKind::kTooManyRequests, "TooManyRequests",
       "HTTP 429: throttled; see retry_after_seconds."},
      {ErrorKind::kTimeout, "Timeout", "HTTP 504 or a client-side deadline."},
      {ErrorKind::kServerError, "ServerError", "Any other HTTP 5xx."},
  };
  for (const auto& a : api_classes)
    at(a.kind) = NewClass(m, a.name, a.doc, one(c.api), a.kind, py::dict());
  // Classes with one attribute of their own (its default on the class).
  auto with_attribute = [&](ErrorKind kind, const char* name, const char* doc, PyObject* parent,
                            const char* attribute, py::object value) {
    py::dict attrs;
    attrs[attribute] = std::move(value);
    at(kind) = NewClass(m, name, doc, one(parent), kind, attrs);
  };
  with_attribute(ErrorKind::kQuotaExceeded, "QuotaExceeded",
                 "HTTP 403 caused by a ResourceQuota (also a Forbidden).\n\n"
                 "Attribute: resources (quota resource names that were exceeded, e.g. "
                 "['requests.cpu']).",
                 at(ErrorKind::kForbidden), "resources", py::tuple());
  with_attribute(ErrorKind::kWorkloadFailed, "WorkloadFailed",
                 "A workload (TFCluster, ...) failed or cannot start.\n\n"
                 "Attribute: status (the workload's status when the failure was detected, or "
                 "None).",
                 c.base, "status", py::none());
  at(ErrorKind::kUnknown) = c.api;

  py::register_local_exception_translator(&TranslateCurrentException);

  m.def(
      "api_error",
      [](int http_code, const std::string& body, const std::string& context,
         std::optional<int> retry_after_seconds) {
        return ExceptionToPython(MakeApiError(http_code, body, context, retry_after_seconds));
      },
      py::arg("http_code"), py::arg("body"), py::arg("context") = "",
      py::arg("retry_after_seconds") = py::none(),
      "The typed exception (not raised) for an API server response: status code and body (a "
      "Kubernetes Status object as JSON text, or anything else).");
  m.def("parse_quota_exceeded_resources", &ParseQuotaExceededResources, py::arg("message"),
        "The resource names in an apiserver 'exceeded quota' message (empty for other "
        "messages).");
}

}  // namespace tfk8s::python
