#pragma once
// Internal: reading small configuration and secret files (kubeconfig, CA, keys, tokens).
// Shared by src/config/ and src/auth/; lives here because the auth layer owns secret handling.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tfk8s::internal {

/// Largest file the config layer reads; anything bigger is not a kubeconfig, PEM or token and
/// is refused rather than loaded into memory.
inline constexpr std::size_t kMaxConfigFileBytes = 16u << 20;

/// Reads a whole file into memory. On failure returns nullopt and stores a reason such as
/// "No such file or directory" (never any file content) in `*error` when it is not null.
std::optional<std::string> ReadWholeFile(const std::string& path, std::string* error = nullptr,
                                         std::size_t max_bytes = kMaxConfigFileBytes);

/// Whether `path` names an existing file system entry (any type). Unreadable files still count:
/// the caller should then report the read error instead of silently skipping the file.
bool PathExists(const std::string& path);

/// The text of an errno value, e.g. "No such file or directory" (thread-safe, unlike strerror).
std::string ErrnoMessage(int err);

/// `text` without leading and trailing ASCII whitespace.
std::string_view TrimWhitespace(std::string_view text);

}  // namespace tfk8s::internal
