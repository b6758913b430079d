#pragma once
// Internal: runs a helper program (exec credential plugins) without a shell, capturing stdout,
// with a deadline. Every fd and the child pid are owned, so no early return leaks or leaves a
// zombie.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace tfk8s::internal {

/// What to run and how.
struct SubprocessOptions {
  std::string executable;         ///< Path of the program (not searched in PATH).
  std::vector<std::string> argv;  ///< Arguments, argv[0] first.
  std::vector<std::string> env;   ///< The complete environment, as "NAME=value".
  /// Let the child read our stdin (interactive plugins); otherwise stdin is /dev/null. A
  /// non-interactive child also gets its own process group so a timeout kills its helpers too.
  bool inherit_stdin = false;
  std::chrono::milliseconds timeout{60'000};  ///< Wall-clock bound; the child is killed after.
  std::size_t max_stdout_bytes = 1u << 20;    ///< Larger output kills the child.
};

/// How the child ended and what it wrote to stdout (its stderr goes to ours).
struct SubprocessResult {
  /// How the run ended.
  enum class Outcome { kExited, kSignaled, kTimedOut, kOutputTooLarge };
  Outcome outcome = Outcome::kExited;
  int exit_code = 0;        ///< For kExited.
  int signal = 0;           ///< For kSignaled.
  std::string stdout_data;  ///< Everything read from stdout (may hold secrets: never log it).
};

/// Runs the program and waits for it (or for the deadline). Throws std::system_error carrying
/// the errno when it cannot be started (ENOENT, EACCES, ENOEXEC …).
SubprocessResult RunSubprocess(const SubprocessOptions& options);

/// Finds a command like execvp would: a name containing '/' is used as it is, anything else is
/// searched in this process's PATH. Returns the path of an executable regular file, or "".
std::string FindExecutable(const std::string& command);

}  // namespace tfk8s::internal
