#pragma once
// Internal: a workload's identity comes from its root object, never from the spec stored on it.
//
// A spec stored on an object (a DevInstance's or ScheduledJob's `tfk8s.io/spec` annotation, a
// TFCluster root ConfigMap's `spec.json`) is data: whoever may edit the object may rewrite it.
// What the API server vouches for is the object's own metadata: its namespace (RBAC is granted
// per namespace), its name, its UID and its labels. So every load reads the workload's name,
// namespace and owner from there, refuses a stored spec that says otherwise, and remembers the
// UID, which every later write of the root carries as a precondition.

#include <string>
#include <string_view>
#include <utility>

#include "tfk8s/client.hpp"
#include "tfk8s/error.hpp"

namespace tfk8s::internal {

/// Who a root object says a workload is.
struct RootIdentity {
  std::string kind;            ///< The workload kind, for messages ("DevInstance").
  std::string object;          ///< The root object, for messages ("StatefulSet ns/name").
  std::string namespace_name;  ///< metadata.namespace
  std::string name;            ///< The workload's name (its label; see IdentityOf).
  std::string owner;           ///< The tfk8s.io/owner label ("" when it has none).
  std::string uid;             ///< metadata.uid
};

/// The identity of `root`, an object of Kubernetes kind `object_kind` ("StatefulSet") and of
/// workload `kind` ("DevInstance"), whose workload label `name_label` holds the workload's
/// name. Throws NotFound (the object is not that workload) when the label
/// is missing or the object is not managed by tfk8s, and, when `name_is_object_name` (a root
/// named after its workload: a StatefulSet, a root ConfigMap, a CronJob), when the label
/// disagrees with metadata.name.
RootIdentity IdentityOf(const Json& root, std::string_view object_kind, std::string_view kind,
                        const char* name_label, bool name_is_object_name);

/// A stored spec's JSON text parsed with the decoders' depth bound (util/json_parse.hpp):
/// ValidationError on `field` (value `name`) when it is not JSON or nested too deeply.
Json ParseStoredSpec(std::string_view text, const std::string& field, const std::string& name);

/// A stored spec that names another workload than its object (a ValidationError to callers;
/// its own type so code that forgets an unreadable stored spec can still refuse a forged one).
class StoredIdentityError : public ValidationError {
 public:
  using ValidationError::ValidationError;
};

/// Refuses a stored spec whose name, namespace or owner disagree with the object's: a
/// StoredIdentityError whose field is `spec_field` + ".name" (".namespace", ".owner"), whose value
/// is the stored one and whose reason names the object's. Nothing is sent by anyone acting on
/// such a spec: a tenant who rewrote her own object's stored spec must not steer an
/// administrator's next write to somebody else's workload.
void RequireStoredIdentity(const RootIdentity& object, std::string_view spec_field,
                           const std::string& name, const std::string& ns,
                           const std::string& owner);

/// The spec stored as JSON `text` on the object `id` describes (`field` names where it is
/// stored), read with Spec::FromJson and refused (RequireStoredIdentity) when it names another
/// workload than the object; `identity`, when given, receives `id`.
template <typename Spec>
Spec StoredSpec(RootIdentity id, std::string_view text, const std::string& field,
                RootIdentity* identity) {
  Spec spec = Spec::FromJson(ParseStoredSpec(text, field, id.name));
  RequireStoredIdentity(id, field, spec.name, spec.namespace_name, spec.owner);
  if (identity) *identity = std::move(id);
  return spec;
}

/// `root` with metadata.uid set to `uid` (unchanged when `uid` is empty). The API server
/// refuses a write whose body names another object's UID (metadata.uid is immutable), so an
/// apply carrying the loaded UID can only change the object that was loaded: one deleted and
/// re-created under the same name meanwhile is refused, not overwritten.
Json WithUidPrecondition(Json root, const std::string& uid);

/// Whether `object` names `owner_uid` among its ownerReferences (false for an empty UID). What
/// a workload deletes or rewrites besides its root must be owned by the root: labels can be
/// put on anything by whoever may edit it.
bool OwnedBy(const Json& object, const std::string& owner_uid);

/// Throws Conflict when `current` (the root as just read) is not the object that was loaded
/// (`loaded_uid`; nothing is checked when it is empty).
void RequireSameObject(const Json& current, const std::string& loaded_uid, std::string_view kind,
                       std::string_view ns, std::string_view name);

}  // namespace tfk8s::internal
