// Runtime credential sources. Each provider serialises refreshes behind one mutex: a refresh
// (file read, plugin run) happens once and concurrent callers wait for its result instead of
// starting their own, which is what keeps N simultaneous 401s down to one plugin run.

#include "auth/credentials.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "auth/exec_plugin.hpp"
#include "auth/file_util.hpp"
#include "tfk8s/error.hpp"

namespace tfk8s::internal {
namespace {

using SystemClock = std::chrono::system_clock;

/// Refresh exec credentials this long before they expire, so a request does not leave with a
/// token that expires on the way (halved for very short-lived credentials, see ExecProvider).
constexpr std::chrono::seconds kExecRefreshMargin{10};

/// The parts of a config that every source passes through unchanged.
Credentials StaticPart(const ClientConfig& config) {
  Credentials c;
  c.client_cert_pem = config.client_cert_pem;
  c.client_key_pem = config.client_key_pem;
  c.username = config.username;
  c.password = config.password;
  return c;
}

/// Static token, client certificate and/or basic auth: nothing to refresh.
class StaticProvider final : public CredentialProvider {
 public:
  explicit StaticProvider(const ClientConfig& config) : credentials_(Make(config)) {}
  Credentials Get() override { return credentials_; }  // Immutable after construction.
  void OnUnauthorized(const Credentials& /*failed*/) override {}

 private:
  static Credentials Make(const ClientConfig& config) {
    Credentials c = StaticPart(config);
    c.bearer_token = config.token;
    c.generation = 1;
    return c;
  }

  const Credentials credentials_;
};

/// A bearer token file (projected service account tokens rotate): re-read when older than the
/// refresh period or after a 401; a failed re-read keeps the last good token (client-go's
/// cachingTokenSource).
class TokenFileProvider final : public CredentialProvider {
 public:
  TokenFileProvider(const ClientConfig& config, Clock clock)
      : clock_(std::move(clock)),
        path_(config.token_file),
        refresh_(config.token_file_refresh),
        credentials_(StaticPart(config)) {
    // A static token next to the file is the fallback until the file has been read.
    if (!config.token.empty()) {
      credentials_.bearer_token = config.token;
      credentials_.generation = 1;
    }
  }

  Credentials Get() override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = clock_();
    if (!last_read_ || reread_requested_ || now - *last_read_ >= refresh_) {
      Read(now);
    }
    return credentials_;
  }

  void OnUnauthorized(const Credentials& failed) override {
    std::lock_guard<std::mutex> lock(mutex_);
    // A 401 for a token we have since replaced says nothing about the current one.
    if (failed.generation == credentials_.generation) {
      reread_requested_ = true;
    }
  }

 private:
  void Read(SystemClock::time_point now) {
    std::string why;
    const auto content = ReadWholeFile(path_, &why);
    const std::string_view token = content ? TrimWhitespace(*content) : std::string_view();
    if (content && token.empty()) {
      why = "the file is empty";
    }
    if (token.empty()) {
      // Keep serving the last good token: the kubelet rewrites the file atomically, so a failed
      // read is usually transient, and a stale token is at worst answered with a 401.
      if (credentials_.bearer_token.empty()) {
        throw ConfigError(path_, "token_file",
                          fmt::format("cannot read the bearer token file: {}", why));
      }
      return;  // last_read_ stays old, so the next Get() tries again.
    }
    if (token != credentials_.bearer_token) {
      credentials_.bearer_token = std::string(token);
      ++credentials_.generation;
    }
    last_read_ = now;
    reread_requested_ = false;
  }

  std::mutex mutex_;
  const Clock clock_;
  const std::string path_;
  const std::chrono::seconds refresh_;
  Credentials credentials_;
  std::optional<SystemClock::time_point> last_read_;
  bool reread_requested_ = false;
};

/// An exec credential plugin: run on first use, cached until shortly before its expiration
/// (or forever without one), re-run after a 401 for the current credentials.
class ExecProvider final : public CredentialProvider {
 public:
  ExecProvider(const ClientConfig& config, Clock clock, ExecPluginOptions options)
      : config_(config),
        clock_(std::move(clock)),
        options_(options),
        static_part_(StaticPart(config)) {}

  Credentials Get() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!valid_ || (refresh_at_ && clock_() >= *refresh_at_)) {
      Run();
    }
    return credentials_;
  }

  void OnUnauthorized(const Credentials& failed) override {
    std::lock_guard<std::mutex> lock(mutex_);
    // Only the first 401 for these credentials invalidates them; the others (same generation,
    // already invalid, or older generation) find the plugin already re-run or about to be.
    if (valid_ && failed.generation == credentials_.generation) {
      valid_ = false;
    }
  }

 private:
  void Run() {
    const auto started = clock_();
    ExecCredential result = RunExecPlugin(config_, options_);
    const std::uint64_t generation = credentials_.generation + 1;
    credentials_ = static_part_;
    credentials_.bearer_token = std::move(result.token);
    if (!result.client_cert_pem.empty()) {
      credentials_.client_cert_pem = std::move(result.client_cert_pem);
      credentials_.client_key_pem = std::move(result.client_key_pem);
    }
    credentials_.generation = generation;
    refresh_at_.reset();
    if (result.expiration) {
      const auto lifetime = *result.expiration - started;
      // A credential valid for less than twice the margin is refreshed halfway through its life
      // instead, so short-lived tokens do not make every request run the plugin.
      const auto margin =
          std::max(SystemClock::duration::zero(),
                   std::min<SystemClock::duration>(kExecRefreshMargin, lifetime / 2));
      refresh_at_ = *result.expiration - margin;
    }
    valid_ = true;
  }

  std::mutex mutex_;
  const ClientConfig config_;
  const Clock clock_;
  const ExecPluginOptions options_;
  const Credentials static_part_;
  Credentials credentials_;
  bool valid_ = false;
  std::optional<SystemClock::time_point> refresh_at_;
};

}  // namespace

std::shared_ptr<CredentialProvider> MakeCredentialProvider(const ClientConfig& config, Clock clock,
                                                           const ExecPluginOptions& exec_options) {
  if (!clock) {
    clock = [] { return SystemClock::now(); };
  }
  if (config.exec) {
    return std::make_shared<ExecProvider>(config, std::move(clock), exec_options);
  }
  if (!config.token_file.empty()) {
    return std::make_shared<TokenFileProvider>(config, std::move(clock));
  }
  return std::make_shared<StaticProvider>(config);
}

std::shared_ptr<CredentialProvider> MakeCredentialProvider(const ClientConfig& config,
                                                           Clock clock) {
  return MakeCredentialProvider(config, std::move(clock), ExecPluginOptions{});
}

}  // namespace tfk8s::internal
