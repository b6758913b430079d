// A workload's identity from its root object (see identity.hpp).

#include "workloads/identity.hpp"

#include <fmt/format.h>

#include "tfk8s/workload.hpp"
#include "util/json_parse.hpp"
#include "workloads/common.hpp"
#include "workloads/kinds.hpp"

namespace tfk8s::internal {

RootIdentity IdentityOf(const Json& root, std::string_view object_kind, std::string_view kind,
                        const char* name_label, bool name_is_object_name) {
  const Json& metadata = At(root, "metadata");
  RootIdentity id;
  id.kind = kind;
  id.namespace_name = StringAt(metadata, "namespace");
  id.name = LabelOf(root, name_label);
  id.owner = LabelOf(root, kOwnerLabel);
  id.uid = StringAt(metadata, "uid");
  std::string object_name = StringAt(metadata, "name");
  id.object = fmt::format("{} {}/{}", object_kind, id.namespace_name, object_name);
  auto not_this = [&](const std::string& why) {
    return NotFound(ErrorKind::kNotFound,
                    fmt::format("{} exists but is not a tfk8s {}: {}", id.object, kind, why), 404,
                    "NotFound");
  };
  if (id.name.empty()) throw not_this(fmt::format("it has no {} label", name_label));
  if (LabelOf(root, kinds::kManagedBy) != kManagedByValue) {
    throw not_this(fmt::format("its {} label is not {}", kinds::kManagedBy, kManagedByValue));
  }
  if (name_is_object_name && id.name != object_name) {
    throw not_this(fmt::format("its {} label says {:?}", name_label, id.name));
  }
  return id;
}

Json ParseStoredSpec(std::string_view text, const std::string& field, const std::string& name) {
  Json j;
  try {
    j = ParseJson(text, field);
  } catch (const DecodeError& e) {
    throw ValidationError(field, name, e.what());
  }
  if (j.is_discarded()) throw ValidationError(field, name, "the stored spec is not JSON");
  return j;
}

void RequireStoredIdentity(const RootIdentity& object, std::string_view spec_field,
                           const std::string& name, const std::string& ns,
                           const std::string& owner) {
  auto check = [&](const char* what, const std::string& stored, const std::string& actual,
                   const char* where) {
    if (stored == actual) return;
    throw StoredIdentityError(
        fmt::format("{}.{}", spec_field, what), stored,
        fmt::format("the stored spec of {} {}/{} says {} {:?}, but {} {:?} ({}): the stored "
                    "spec was changed by someone who may edit {}; refusing to act on it "
                    "(nothing was sent)",
                    object.kind, object.namespace_name, object.name, what, stored, where, actual,
                    object.object, object.object));
  };
  check("name", name, object.name, "the object's name is");
  check("namespace", ns, object.namespace_name, "the object is in");
  check("owner", owner, object.owner, "its tfk8s.io/owner label is");
}

Json WithUidPrecondition(Json root, const std::string& uid) {
  if (!uid.empty()) root["metadata"]["uid"] = uid;
  return root;
}

bool OwnedBy(const Json& object, const std::string& owner_uid) {
  if (owner_uid.empty()) return false;
  const Json& refs = At(At(object, "metadata"), "ownerReferences");
  if (!refs.is_array()) return false;
  for (const auto& o : refs) {
    if (o.is_object() && StringAt(o, "uid") == owner_uid) return true;
  }
  return false;
}

void RequireSameObject(const Json& current, const std::string& loaded_uid, std::string_view kind,
                       std::string_view ns, std::string_view name) {
  if (loaded_uid.empty()) return;
  std::string now = StringAt(At(current, "metadata"), "uid");
  if (now == loaded_uid) return;
  throw Conflict(ErrorKind::kConflict,
                 fmt::format("{} {}/{} was deleted and re-created since it was loaded (UID {} "
                             "then, {} now); nothing was changed: load it again",
                             kind, ns, name, loaded_uid, now),
                 409, "Conflict");
}

}  // namespace tfk8s::internal
