// The Pod Security Standards checker (tfk8s/pod_security.hpp): a rendered object in, a list of
// {"check", "field", "message"} dicts out. Pure, so the GIL stays held.

#include <string>

#include "bindings.hpp"
#include "tfk8s/pod_security.hpp"

namespace tfk8s::python {

void BindPodSecurity(py::module_& m) {
  // Raised with warnings.warn by the workloads' pre-flights (PodSecurityWarnings).
  m.attr("PodSecurityWarning") = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "tfk8s.PodSecurityWarning",
      "A workload's pods would break a level its namespace's pod-security.kubernetes.io labels "
      "set (warn or audit, or enforce under pod_security_admission='warn').",
      PyExc_UserWarning, nullptr));
  m.def(
      "check_pod_security",
      [](const nlohmann::json& object, const std::string& level) {
        return ToJsonList(CheckPodSecurity(object, ParsePodSecurityLevel(level)));
      },
      py::arg("object"), py::arg("level") = "restricted",
      "The Pod Security Standards violations of the pod that `object` carries (a Pod, a "
      "workload with a pod template such as a Deployment, StatefulSet, Job or CronJob, or a bare "
      "PodSpec) at `level` ('privileged', 'baseline' or 'restricted', as in the namespace label "
      "pod-security.kubernetes.io/enforce): a list of {'check', 'field', 'message'} dicts, empty "
      "when the pod satisfies the level. Raises ValidationError for an unknown level, an object "
      "without a pod, or a wrongly typed field.");
}

}  // namespace tfk8s::python
