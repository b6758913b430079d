#pragma once
// Internal: strict RFC 4648 base64 (standard alphabet, padded), as used by kubeconfig `*-data`
// fields and ExecCredential. Kept here rather than in src/http/ so the config layer does not
// depend on OpenSSL.

#include <optional>
#include <string>
#include <string_view>

namespace tfk8s::internal {

/// Encodes bytes as padded standard base64 (no line breaks).
std::string Base64Encode(std::string_view bytes);

/// Decodes padded standard base64. Line breaks (`\r`, `\n`) are ignored, like Go's
/// `base64.StdEncoding` does for kubeconfig data; anything else outside the alphabet, missing or
/// misplaced padding, or a truncated final group is an error. On failure returns nullopt and, when
/// `error` is not null, stores a description that never quotes the input (it may be a key).
std::optional<std::string> Base64Decode(std::string_view text, std::string* error = nullptr);

}  // namespace tfk8s::internal
