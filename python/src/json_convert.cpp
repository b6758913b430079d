// nlohmann::json <-> Python objects, directly with the CPython API (no JSON text in between):
// this sits on the path of every object the client reads or writes.

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bindings.hpp"
#include "tfk8s/quantity.hpp"
#include "util/json_parse.hpp"

namespace tfk8s::python {

namespace {

using Json = nlohmann::json;

// Both conversions recurse once per level: the same bound as every JSON decoder of the library
// (a value the C++ side accepted converts), and it stops a dict that contains itself. `depth`
// counts the containers around a value: a container at depth kMaxDepth would be level 513.
constexpr int kMaxDepth = internal::kMaxJsonDepth;
const std::string kTooDeep = "nested deeper than " + std::to_string(kMaxDepth) + " levels";

// A conversion failure, with the path to the offending value collected while unwinding.
struct ConversionError {
  PyObject* type;  // PyExc_TypeError or PyExc_ValueError
  std::string message;
  std::vector<std::string> path;  // innermost first
};

[[noreturn]] void Fail(PyObject* type, std::string message) {
  throw ConversionError{type, std::move(message), {}};
}

std::string TypeName(PyObject* object) { return Py_TYPE(object)->tp_name; }

// ---- JSON -> Python -------------------------------------------------------------------------

PyObject* StringToPython(const std::string& s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
}

// Object keys repeat across the items of a list ("metadata", "name", "labels", ...): one Python
// str per distinct key saves an allocation, a UTF-8 decode and a hash for every repetition (the
// same trick as json.loads' key memo).
class KeyCache {
 public:
  KeyCache() = default;
  KeyCache(const KeyCache&) = delete;
  KeyCache& operator=(const KeyCache&) = delete;
  ~KeyCache() {
    for (auto& [unused, key] : keys_) Py_DECREF(key);
  }

  // A new reference to the str for `key`; `key` must outlive the cache (it is a key of the
  // JSON being converted).
  PyObject* Get(const std::string& key) {
    if (auto it = keys_.find(key); it != keys_.end()) {
      Py_INCREF(it->second);
      return it->second;
    }
    PyObject* str = StringToPython(key);
    if (str && keys_.size() < kMaxKeys) {
      Py_INCREF(str);
      keys_.emplace(std::string_view(key), str);
    }
    return str;
  }

 private:
  static constexpr std::size_t kMaxKeys = 4096;  // bounds memory for maps with arbitrary keys
  std::unordered_map<std::string_view, PyObject*> keys_;
};

PyObject* ToPython(const Json& j, int depth, KeyCache& keys) {
  if (j.is_structured() && depth >= kMaxDepth) {
    PyErr_SetString(PyExc_ValueError, ("JSON value " + kTooDeep + " to convert").c_str());
    return nullptr;
  }
  switch (j.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      Py_INCREF(Py_None);
      return Py_None;
    case Json::value_t::boolean:
      return PyBool_FromLong(j.get<bool>() ? 1 : 0);
    case Json::value_t::number_integer:
      return PyLong_FromLongLong(j.get<Json::number_integer_t>());
    case Json::value_t::number_unsigned:
      return PyLong_FromUnsignedLongLong(j.get<Json::number_unsigned_t>());
    case Json::value_t::number_float:
      return PyFloat_FromDouble(j.get<Json::number_float_t>());
    case Json::value_t::string:
      return StringToPython(j.get_ref<const Json::string_t&>());
    case Json::value_t::binary: {
      const auto& b = j.get_binary();
      return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(b.data()),
                                       static_cast<Py_ssize_t>(b.size()));
    }
    case Json::value_t::array: {
      const auto& array = j.get_ref<const Json::array_t&>();
      PyObject* list = PyList_New(static_cast<Py_ssize_t>(array.size()));
      if (!list) return nullptr;
      Py_ssize_t i = 0;
      for (const auto& item : array) {
        PyObject* value = ToPython(item, depth + 1, keys);
        if (!value) {
          Py_DECREF(list);
          return nullptr;
        }
        PyList_SET_ITEM(list, i++, value);  // steals the reference
      }
      return list;
    }
    case Json::value_t::object: {
      PyObject* dict = PyDict_New();
      if (!dict) return nullptr;
      for (const auto& [key, item] : j.get_ref<const Json::object_t&>()) {
        PyObject* k = keys.Get(key);
        PyObject* v = k ? ToPython(item, depth + 1, keys) : nullptr;
        int rc = v ? PyDict_SetItem(dict, k, v) : -1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc != 0) {
          Py_DECREF(dict);
          return nullptr;
        }
      }
      return dict;
    }
  }
  Py_INCREF(Py_None);
  return Py_None;
}

// ---- Python -> JSON -------------------------------------------------------------------------

Json ToJson(PyObject* o, int depth);

std::string Utf8(PyObject* text) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text, &size);
  if (!data) throw py::error_already_set();
  return std::string(data, static_cast<std::size_t>(size));
}

Json IntegerToJson(PyObject* o) {
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (value == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow == 0) return Json(static_cast<std::int64_t>(value));
  if (overflow > 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
      return Json(static_cast<std::uint64_t>(u));
    }
    PyErr_Clear();
  }
  Fail(PyExc_ValueError, "integer out of the 64-bit range of JSON numbers");
}

Json ObjectToJson(PyObject* items_source, int depth, bool is_dict) {
  if (depth >= kMaxDepth) Fail(PyExc_ValueError, kTooDeep + " (does it contain itself?)");
  Json out = Json::object();
  auto& object = out.get_ref<Json::object_t&>();
  auto add = [&](PyObject* key, PyObject* value) {
    if (!PyUnicode_Check(key)) {
      Fail(PyExc_TypeError, "object keys must be str, not " + TypeName(key));
    }
    std::string k = Utf8(key);
    try {
      object.insert_or_assign(k, ToJson(value, depth + 1));
    } catch (ConversionError& e) {
      e.path.push_back(std::move(k));
      throw;
    }
  };
  if (is_dict) {
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(items_source, &pos, &key, &value)) add(key, value);
    return out;
  }
  py::object items = py::reinterpret_steal<py::object>(PyMapping_Items(items_source));
  if (!items) throw py::error_already_set();
  for (py::handle pair : items) {
    py::tuple kv = py::reinterpret_borrow<py::tuple>(pair);
    add(kv[0].ptr(), kv[1].ptr());
  }
  return out;
}

Json SequenceToJson(PyObject* o, int depth) {
  if (depth >= kMaxDepth) Fail(PyExc_ValueError, kTooDeep + " (does it contain itself?)");
  Json out = Json::array();
  auto& array = out.get_ref<Json::array_t&>();
  // A list or tuple: PySequence_Fast borrows it as is.
  py::object fast = py::reinterpret_steal<py::object>(PySequence_Fast(o, "expected a sequence"));
  if (!fast) throw py::error_already_set();
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.ptr());
  PyObject** items = PySequence_Fast_ITEMS(fast.ptr());
  array.reserve(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    try {
      array.push_back(ToJson(items[i], depth + 1));
    } catch (ConversionError& e) {
      e.path.push_back("[" + std::to_string(i) + "]");
      throw;
    }
  }
  return out;
}

Json ToJson(PyObject* o, int depth) {
  // Containers are checked where they are built; this stops a chain of to_dict() results.
  if (depth > kMaxDepth) Fail(PyExc_ValueError, kTooDeep + " (does it contain itself?)");
  if (o == Py_None) return Json(nullptr);
  if (PyBool_Check(o)) return Json(o == Py_True);
  if (PyUnicode_Check(o)) return Json(Utf8(o));
  if (PyLong_Check(o)) return IntegerToJson(o);
  if (PyFloat_Check(o)) {
    double d = PyFloat_AS_DOUBLE(o);
    if (!std::isfinite(d)) Fail(PyExc_ValueError, "JSON has no NaN or infinity");
    return Json(d);
  }
  if (PyDict_Check(o)) return ObjectToJson(o, depth, /*is_dict=*/true);
  if (PyList_Check(o) || PyTuple_Check(o)) return SequenceToJson(o, depth);
  py::handle h(o);
  if (py::isinstance<Quantity>(h)) return Json(h.cast<const Quantity&>().ToString());
  if (PyBytes_Check(o) || PyByteArray_Check(o)) {
    Fail(PyExc_TypeError, "bytes are not JSON (Secret data must be base64 text)");
  }
  if (PyObject_HasAttrString(o, "to_dict")) {
    py::object converted = h.attr("to_dict")();
    return ToJson(converted.ptr(), depth + 1);
  }
  if (PyMapping_Check(o) && PyObject_HasAttrString(o, "items")) {
    return ObjectToJson(o, depth, /*is_dict=*/false);
  }
  if (PyIndex_Check(o)) {  // numpy integers and other int-like objects
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(o));
    if (!index) throw py::error_already_set();
    return IntegerToJson(index.ptr());
  }
  Fail(PyExc_TypeError, "cannot convert " + TypeName(o) + " to JSON");
}

}  // namespace

py::object JsonToPython(const nlohmann::json& value) {
  KeyCache keys;
  PyObject* o = ToPython(value, 0, keys);
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

nlohmann::json PythonToJson(py::handle object) {
  try {
    return ToJson(object.ptr(), 0);
  } catch (const ConversionError& e) {
    std::string where;
    for (auto it = e.path.rbegin(); it != e.path.rend(); ++it) {
      if (!where.empty() && (*it)[0] != '[') where += '.';
      where += *it;
    }
    std::string message = where.empty() ? e.message : e.message + " (at " + where + ")";
    PyErr_SetString(e.type, message.c_str());
    throw py::error_already_set();
  }
}

py::object JsonTextToPython(std::string text, const std::string& context) {
  if (text.empty()) return py::dict();
  // CPython's own decoder (the C scanner behind json.loads, with its key memo) builds the
  // objects straight from the text: no C++ tree in between. Lists are the bulk of what
  // notebooks read, and this halves their decode time.
  // json.loads recurses per level and would raise RecursionError (not a tfk8s error) at about
  // 1,000; the library's bound first, as a DecodeError naming `context`.
  internal::CheckJsonDepth(text, context);
  const std::size_t size = text.size();
  PyObject* str =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(size), "surrogateescape");
  if (!str) throw py::error_already_set();
  auto unicode = py::reinterpret_steal<py::object>(str);
  std::string().swap(text);  // the text lives on in `unicode`: free the bytes before decoding
  try {
    return py::module_::import("json").attr("loads")(unicode);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ValueError)) throw;
    throw TransportError(
        context + ": the server's answer is not JSON (" + std::to_string(size) + " bytes)", true);
  }
}

py::str DecodeLenient(std::string_view text) {
  PyObject* o = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

void BindJson(py::module_& m) {
  m.def(
      "json_roundtrip",
      [](const nlohmann::json& value, int repeat) {
        // Converts `repeat` times each way without the network: for tests and benchmarks of the
        // conversion every object goes through.
        nlohmann::json json = value;
        for (int i = 1; i < repeat; ++i) json = PythonToJson(JsonToPython(json));
        return json;
      },
      py::arg("value"), py::arg("repeat") = 1,
      "value converted to C++ JSON and back, as every object sent or received is (repeat: how "
      "many times); raises TypeError/ValueError for values JSON cannot hold.");
}

}  // namespace tfk8s::python
