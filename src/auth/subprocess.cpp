#include "auth/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <system_error>
#include <thread>

namespace tfk8s::internal {
namespace {

using SteadyClock = std::chrono::steady_clock;

[[noreturn]] void ThrowErrno(int err, const char* what) {
  throw std::system_error(err, std::generic_category(), what);
}

class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { Reset(); }
  [[nodiscard]] int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = -1;
  }

 private:
  int fd_;
};

class SpawnFileActions {
 public:
  SpawnFileActions() {
    if (const int rc = ::posix_spawn_file_actions_init(&actions_); rc != 0) {
      ThrowErrno(rc, "posix_spawn_file_actions_init");
    }
  }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  ~SpawnFileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() {
    if (const int rc = ::posix_spawnattr_init(&attr_); rc != 0) {
      ThrowErrno(rc, "posix_spawnattr_init");
    }
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attr_); }
  posix_spawnattr_t* get() { return &attr_; }

 private:
  posix_spawnattr_t attr_;
};

/// Owns a running child: unless released after a successful wait, the destructor kills it
/// (and its process group when it has one) and reaps it.
class ChildProcess {
 public:
  ChildProcess(pid_t pid, bool own_group) : pid_(pid), own_group_(own_group) {}
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { KillAndReap(); }

  void KillAndReap() {
    if (pid_ <= 0) {
      return;
    }
    ::kill(own_group_ ? -pid_ : pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

  /// Non-blocking wait; true (and status set) once the child has ended.
  bool TryWait(int* status) {
    for (;;) {
      const pid_t rc = ::waitpid(pid_, status, WNOHANG);
      if (rc == pid_) {
        pid_ = -1;
        return true;
      }
      if (rc == 0) {
        return false;
      }
      if (errno == EINTR) {
        continue;
      }
      const int err = errno;
      pid_ = -1;  // ECHILD: someone else reaped it (SIGCHLD ignored); nothing left to kill.
      ThrowErrno(err, "waitpid");
    }
  }

 private:
  pid_t pid_;
  bool own_group_;
};

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) {
    out.push_back(const_cast<char*>(s.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

int RemainingMs(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(left.count(), 0, 1'000'000));
}

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string FindExecutable(const std::string& command) {
  if (command.empty()) {
    return {};
  }
  if (command.find('/') != std::string::npos) {
    return IsExecutableFile(command) ? command : std::string();
  }
  // getenv races only with setenv, which a multi-threaded program must not call anyway.
  const char* path_env = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe)
  const std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    // An empty PATH element means the current directory (POSIX).
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) {
      dir = ".";
    }
    std::string candidate = dir.append("/").append(command);
    if (IsExecutableFile(candidate)) {
      return candidate;
    }
    start = end + 1;
  }
  return {};
}

SubprocessResult RunSubprocess(const SubprocessOptions& options) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ThrowErrno(errno, "pipe2");
  }
  ScopedFd read_end(pipe_fds[0]);
  ScopedFd write_end(pipe_fds[1]);

  SpawnFileActions actions;
  if (!options.inherit_stdin) {
    if (const int rc = ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null",
                                                          O_RDONLY, 0);
        rc != 0) {
      ThrowErrno(rc, "posix_spawn_file_actions_addopen");
    }
  }
  if (const int rc =
          ::posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), STDOUT_FILENO);
      rc != 0) {
    ThrowErrno(rc, "posix_spawn_file_actions_adddup2");
  }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Descriptors other threads opened without O_CLOEXEC (sockets with TLS sessions …) must not
  // leak into the plugin.
  ::posix_spawn_file_actions_addclosefrom_np(actions.get(), STDERR_FILENO + 1);
#endif

  SpawnAttributes attr;
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  // A separate process group lets a timeout kill the plugin's own children too. Interactive
  // plugins stay in ours: they must remain in the terminal's foreground group to read from it.
  const bool own_group = !options.inherit_stdin;
  if (own_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  ::posix_spawnattr_setflags(attr.get(), flags);
  if (own_group) {
    ::posix_spawnattr_setpgroup(attr.get(), 0);
  }
  sigset_t signals;
  sigemptyset(&signals);
  ::posix_spawnattr_setsigmask(attr.get(), &signals);
  // Ignored signals (e.g. SIGPIPE, which network libraries ignore) would stay ignored across
  // exec; give the plugin default dispositions.
  sigfillset(&signals);
  ::posix_spawnattr_setsigdefault(attr.get(), &signals);

  std::vector<char*> argv = CStrings(options.argv);
  std::vector<char*> envp = CStrings(options.env);
  pid_t pid = -1;
  if (const int rc = ::posix_spawn(&pid, options.executable.c_str(), actions.get(), attr.get(),
                                   argv.data(), envp.data());
      rc != 0) {
    ThrowErrno(rc, "posix_spawn");
  }
  ChildProcess child(pid, own_group);
  write_end.Reset();  // Only the child holds the write end now, so its exit gives us EOF.

  SubprocessResult result;
  const auto deadline = SteadyClock::now() + options.timeout;
  char buffer[8192];
  for (;;) {
    const int wait_ms = RemainingMs(deadline);
    if (wait_ms <= 0) {
      child.KillAndReap();
      result.outcome = SubprocessResult::Outcome::kTimedOut;
      return result;
    }
    pollfd pfd{read_end.get(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) {
        continue;
      }
      ThrowErrno(errno, "poll");
    }
    if (ready == 0) {
      continue;  // The deadline check above ends the loop.
    }
    const ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      ThrowErrno(errno, "read");
    }
    if (n == 0) {
      break;  // EOF: the child closed stdout (normally by exiting).
    }
    if (result.stdout_data.size() + static_cast<std::size_t>(n) > options.max_stdout_bytes) {
      child.KillAndReap();
      result.outcome = SubprocessResult::Outcome::kOutputTooLarge;
      result.stdout_data.clear();
      return result;
    }
    result.stdout_data.append(buffer, static_cast<std::size_t>(n));
  }

  // stdout is closed; the exit normally follows at once, but a child that closed stdout and
  // kept running is still bound by the deadline.
  int status = 0;
  while (!child.TryWait(&status)) {
    if (RemainingMs(deadline) <= 0) {
      child.KillAndReap();
      result.outcome = SubprocessResult::Outcome::kTimedOut;
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status)) {
    result.outcome = SubprocessResult::Outcome::kExited;
    result.exit_code = WEXITSTATUS(status);
  } else {
    result.outcome = SubprocessResult::Outcome::kSignaled;
    result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  return result;
}

}  // namespace tfk8s::internal
