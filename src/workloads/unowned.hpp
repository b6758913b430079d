#pragma once
// Internal: what `kubectl apply` of `tfk8s render` created before the workload's root existed.
// Rendered objects carry an ownerReference to the root only when its UID is known (Apply() and
// RenderForApply() once the root exists), so the first `render | kubectl apply` leaves objects
// that the garbage collector never removes with the root: a workload's Delete() removes them.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tfk8s/client.hpp"

namespace tfk8s::internal {

/// One object deleted by DeleteUnownedRendered.
struct DeletedObject {
  ResourceType type;
  std::string name;
};

/// Deletes the objects of `rendered` (a workload's Render() of its stored spec; the root,
/// `rendered[0]`, is skipped) that exist without any owner. Each is read by its rendered name
/// and kind, and counts only when it carries every label of `labels` (the workload's name label
/// and managed-by) and has no ownerReferences at all: neither a name nor labels alone make an
/// object the workload's (whoever may edit an object may label it), and an object with an owner
/// is left to that owner. Secrets are never read (Render() has none); a kind these credentials
/// may not read (Forbidden) is skipped. Each is deleted with its
/// UID as precondition and `propagation` (its pods go with a Job or StatefulSet); one gone or
/// re-created meanwhile is skipped. Returns what was deleted.
std::vector<DeletedObject> DeleteUnownedRendered(Client& client, const std::vector<Json>& rendered,
                                                 const std::map<std::string, std::string>& labels,
                                                 const std::string& propagation);

/// Waits (watch-driven) until each of `objects` in `ns` is gone; false at `deadline`.
bool WaitUntilGone(Client& client, const std::string& ns, const std::vector<DeletedObject>& objects,
                   std::chrono::steady_clock::time_point deadline);

}  // namespace tfk8s::internal
