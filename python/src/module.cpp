// tfk8s._core: the C++ library as a Python extension. Each area binds itself (bind_<area>.cpp);
// the public Python API (tfk8s.Client and friends) is the pure-Python package in front of it.

#include "bindings.hpp"

#ifndef TFK8S_VERSION
#define TFK8S_VERSION "0.0.0"
#endif

PYBIND11_MODULE(_core, m) {
  m.doc() = "tfk8s C++ core (pybind11). Use the tfk8s package rather than this module.";
  m.attr("__version__") = TFK8S_VERSION;
  namespace tp = tfk8s::python;
  // Order matters only for readable signatures: a type is bound before functions that use it.
  tp::BindErrors(m);
  tp::BindQuantity(m);
  tp::BindValidation(m);
  tp::BindConfig(m);
  tp::BindClient(m);
  tp::BindStreams(m);
  tp::BindPodStreams(m);
  tp::BindJson(m);
  tp::BindTFCluster(m);
  tp::BindQuota(m);
  tp::BindDevInstance(m);
  tp::BindScheduledJob(m);
  tp::BindFleet(m);
  tp::BindPodSecurity(m);
  tp::BindTesting(m);
}
