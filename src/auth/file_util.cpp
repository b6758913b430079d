#include "auth/file_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include <fmt/format.h>

namespace tfk8s::internal {
namespace {

// Owns a file descriptor so every early return closes it.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

std::optional<std::string> Fail(std::string* error, std::string why) {
  if (error != nullptr) {
    *error = std::move(why);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> ReadWholeFile(const std::string& path, std::string* error,
                                         std::size_t max_bytes) {
  if (path.empty()) {
    return Fail(error, "empty file name");
  }
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return Fail(error, ErrnoMessage(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return Fail(error, ErrnoMessage(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return Fail(error, "is a directory");
  }
  std::string data;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Fail(error, ErrnoMessage(errno));
    }
    if (n == 0) {
      break;
    }
    if (data.size() + static_cast<std::size_t>(n) > max_bytes) {
      return Fail(error, fmt::format("larger than {} bytes", max_bytes));
    }
    data.append(buffer, static_cast<std::size_t>(n));
  }
  return data;
}

std::string ErrnoMessage(int err) { return std::generic_category().message(err); }

bool PathExists(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0;
}

std::string_view TrimWhitespace(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(kSpace);
  return text.substr(first, last - first + 1);
}

}  // namespace tfk8s::internal
