#pragma once
// Internal: the source of python/tfk8s/launcher.py, embedded at build time
// (cmake/launcher_source.cpp.in). TFCluster's root ConfigMap carries it to every replica.

#include <string_view>

namespace tfk8s::internal {

/// The launcher's whole source text.
std::string_view LauncherSource();

}  // namespace tfk8s::internal
