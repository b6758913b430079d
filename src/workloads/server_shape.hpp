// The shape of server objects the workload readers use, checked where they enter (issue #17):
// a field of the wrong JSON type becomes a DecodeError naming the object and the field's path
// (e.g. `status.containerStatuses[0].restartCount`), never an nlohmann exception from deep
// inside a status computation.
#pragma once

#include <string_view>
#include <vector>

#include "tfk8s/client.hpp"

namespace tfk8s::internal {

/// Checks every field tfk8s's workload readers read of an object of `kind` ("Pod", "Job" …;
/// empty: the object's own `kind`): each present, non-null field must have the JSON type the
/// Kubernetes API gives it. Absent and null fields are fine. Throws DecodeError naming
/// `context`, the kind, the object and the field's path.
void CheckServerObject(const Json& object, std::string_view kind, std::string_view context);

/// CheckServerObject for every object; returns them.
const std::vector<Json>& CheckServerObjects(const std::vector<Json>& objects, std::string_view kind,
                                            std::string_view context);

}  // namespace tfk8s::internal
