// tfk8s::validation: Kubernetes' name and label rules, checked before anything is sent.

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/validation.hpp"

namespace tfk8s::python {

void BindValidation(py::module_& m) {
  namespace v = tfk8s::validation;
  m.attr("DNS1123_LABEL_MAX_LENGTH") = v::kDns1123LabelMaxLength;
  m.attr("DNS1123_SUBDOMAIN_MAX_LENGTH") = v::kDns1123SubdomainMaxLength;
  m.attr("LABEL_VALUE_MAX_LENGTH") = v::kLabelValueMaxLength;
  m.attr("STATEFULSET_NAME_MAX_LENGTH") = v::kStatefulSetNameMaxLength;

  m.def("is_dns1123_label", &v::IsDns1123Label, py::arg("value"),
        "Problems with `value` as a DNS-1123 label (empty list when valid).");
  m.def("is_dns1123_subdomain", &v::IsDns1123Subdomain, py::arg("value"),
        "Problems with `value` as a DNS-1123 subdomain (empty list when valid).");
  m.def("is_qualified_name", &v::IsQualifiedName, py::arg("value"),
        "Problems with `value` as a label or annotation key (empty list when valid).");
  m.def("is_valid_label_value", &v::IsValidLabelValue, py::arg("value"),
        "Problems with `value` as a label value (empty list when valid).");
  m.def("is_dns1035_label", &v::IsDns1035Label, py::arg("value"),
        "Problems with `value` as a DNS-1035 label, what Service names must be (empty list "
        "when valid).");
  m.def("is_valid_path_segment_name", &v::IsValidPathSegmentName, py::arg("value"),
        "Problems with `value` as one URL path segment: '.', '..', '/' or '%' (empty list when "
        "valid).");
  m.def("require_dns1035_label", &v::RequireDns1035Label, py::arg("field"), py::arg("value"),
        "Raises ValidationError(field, value) unless `value` is a DNS-1035 label.");
  m.def("require_path_segment", &v::RequirePathSegment, py::arg("field"), py::arg("value"),
        "Raises ValidationError unless `value` can be one request path segment (not empty, "
        "'.' or '..'; no '/', '%' or control character).");
  m.def("require_namespace_name", &v::RequireNamespaceName, py::arg("field"), py::arg("value"),
        "Raises ValidationError unless `value` can name a namespace (a DNS-1123 label).");
  m.def("require_dns1123_label", &v::RequireDns1123Label, py::arg("field"), py::arg("value"),
        "Raises ValidationError(field, value) unless `value` is a DNS-1123 label.");
  m.def("require_dns1123_subdomain", &v::RequireDns1123Subdomain, py::arg("field"),
        py::arg("value"), "Raises ValidationError unless `value` is a DNS-1123 subdomain.");
  m.def("require_label_key", &v::RequireLabelKey, py::arg("field"), py::arg("value"),
        "Raises ValidationError unless `value` is a valid label key.");
  m.def("require_label_value", &v::RequireLabelValue, py::arg("field"), py::arg("value"),
        "Raises ValidationError unless `value` is a valid label value.");
  m.def("require_statefulset_name", &v::RequireStatefulSetName, py::arg("field"), py::arg("name"),
        "Raises ValidationError unless `name` can name a StatefulSet (at most 52 characters).");
}

}  // namespace tfk8s::python
