#pragma once
// Internal: the in-pod launcher, the static binary built from src/launcher/tfk8s_launcher.c and
// embedded at build time (cmake/embed_launcher.cmake). TFCluster's root ConfigMap carries it to
// every replica as binaryData.

#include <string_view>

namespace tfk8s::internal {

/// The launcher's executable, byte for byte.
std::string_view LauncherBinary();

}  // namespace tfk8s::internal
