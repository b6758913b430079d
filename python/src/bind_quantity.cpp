// tfk8s::Quantity: exact Kubernetes quantities with arithmetic, comparison and str().

#include <cstdint>
#include <string>

#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/quantity.hpp"

namespace tfk8s::python {

void BindQuantity(py::module_& m) {
  py::class_<Quantity> cls(
      m, "Quantity",
      "A Kubernetes resource quantity ('500m', '1.5Gi', '1e3') with exact arithmetic.\n\n"
      "Quantity('1.5Gi'), Quantity(4) or Quantity() (zero). str() gives the canonical form the "
      "API server prints ('1536Mi'). Compares numerically ('1Gi' == '1024Mi'); +, - and * (by "
      "an int) are exact. A str or int is accepted wherever a Quantity is expected. Invalid text "
      "raises ValidationError.");

  py::enum_<Quantity::Format>(cls, "Format", "How a quantity prints.")
      .value("DECIMAL_SI", Quantity::Format::kDecimalSI, "Suffixes n u m k M G T P E.")
      .value("BINARY_SI", Quantity::Format::kBinarySI, "Suffixes Ki Mi Gi Ti Pi Ei.")
      .value("DECIMAL_EXPONENT", Quantity::Format::kDecimalExponent, "Exponents such as 1e3.");

  cls.def(py::init<>(), "Zero.")
      .def(py::init(&Quantity::Parse), py::arg("text"), "Parses Kubernetes quantity syntax.")
      .def(py::init([](std::int64_t value) { return Quantity::FromInt(value); }), py::arg("value"),
           "A whole number of units (decimal SI).")
      .def_static("parse", &Quantity::Parse, py::arg("text"),
                  "Parses Kubernetes quantity syntax; raises ValidationError on bad input.")
      .def_static(
          "try_parse",
          [](std::string_view text) -> std::optional<Quantity> {
            Quantity q;
            if (!Quantity::TryParse(text, &q)) return std::nullopt;
            return q;
          },
          py::arg("text"), "Parses; None instead of an exception on bad input.")
      .def_static(
          "why_invalid",
          [](std::string_view text) -> std::optional<std::string> {
            std::string why;
            if (Quantity::TryParse(text, nullptr, &why)) return std::nullopt;
            return why;
          },
          py::arg("text"), "Why `text` is not a quantity, or None when it is one.")
      .def_static("from_int", &Quantity::FromInt, py::arg("value"),
                  py::arg_v("format", Quantity::Format::kDecimalSI, "Quantity.Format.DECIMAL_SI"),
                  "A whole number of units printed in `format` (from_int(1024, BINARY_SI) is "
                  "'1Ki').")
      .def_static("from_milli", &Quantity::FromMilli, py::arg("milli"),
                  "A number of milli-units (from_milli(500) is '500m').")
      .def_property_readonly("format", &Quantity::format, "The format str() uses.")
      .def("value", &Quantity::Value,
           "Whole units, rounded up away from zero like Kubernetes' Value().")
      .def("milli_value", &Quantity::MilliValue,
           "Milli-units, rounded up away from zero like Kubernetes' MilliValue().")
      .def("as_float", &Quantity::AsDouble, "Approximate value (for display and ratios).")
      .def("__float__", &Quantity::AsDouble)
      .def("sign", &Quantity::Sign, "-1, 0 or +1.")
      .def("is_zero", &Quantity::IsZero, "True for zero.")
      .def("__bool__", [](const Quantity& q) { return !q.IsZero(); })
      .def("times", &Quantity::Times, py::arg("n"), "Exact product with an integer.")
      .def("compare", &Quantity::Compare, py::arg("other"), "-1, 0 or +1 comparing numerically.")
      .def(py::self + py::self)
      .def(py::self - py::self)
      .def(
          "__radd__", [](const Quantity& self, const Quantity& other) { return other + self; },
          py::is_operator())
      .def(
          "__rsub__", [](const Quantity& self, const Quantity& other) { return other - self; },
          py::is_operator())
      .def("__mul__", &Quantity::Times, py::is_operator())
      .def("__rmul__", &Quantity::Times, py::is_operator())
      .def("__neg__", [](const Quantity& q) { return Quantity() - q; })
      .def(py::self == py::self)
      .def(py::self != py::self)
      .def(py::self < py::self)
      .def(py::self <= py::self)
      .def(py::self > py::self)
      .def(py::self >= py::self)
      // Equal quantities hold the same exact value, hence the same double.
      .def("__hash__", [](const Quantity& q) { return py::hash(py::float_(q.AsDouble())); })
      .def("__str__", &Quantity::ToString)
      .def("__repr__",
           [](const Quantity& q) {
             return "Quantity(" + py::repr(py::str(q.ToString())).cast<std::string>() + ")";
           })
      .def(py::pickle([](const Quantity& q) { return q.ToString(); },
                      [](const std::string& text) { return Quantity::Parse(text); }));

  py::implicitly_convertible<std::string, Quantity>();
  py::implicitly_convertible<std::int64_t, Quantity>();
}

}  // namespace tfk8s::python
