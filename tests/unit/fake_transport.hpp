#pragma once
// A scripted HttpTransport for unit tests of the client layer: records every request and
// answers from a queue of canned responses (or a handler).

#include <functional>
#include <mutex>
#include <vector>

#include "http/transport.hpp"
#include "tfk8s/config.hpp"
#include "tfk8s/error.hpp"

namespace tfk8s::testing {

class FakeTransport : public internal::HttpTransport {
 public:
  using Handler = std::function<internal::HttpResponse(const internal::HttpRequest&)>;

  /// Answers every request with `handler` (may throw TransportError).
  explicit FakeTransport(Handler handler) : handler_(std::move(handler)) {}

  std::future<internal::HttpResponse> Send(internal::HttpRequest request) override {
    std::promise<internal::HttpResponse> p;
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
    }
    try {
      p.set_value(handler_(request));
    } catch (...) {
      p.set_exception(std::current_exception());
    }
    return p.get_future();
  }

  std::shared_ptr<internal::HttpStream> Open(internal::HttpRequest request) override {
    auto stream = std::make_shared<internal::BufferedStream>();
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
    }
    try {
      auto r = handler_(request);
      stream->SetHeaders(r.status, r.headers);
      stream->Push(r.body);
      stream->Finish(nullptr);
    } catch (...) {
      stream->Finish(std::current_exception());
    }
    return stream;
  }

  std::vector<internal::HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  Handler handler_;
  mutable std::mutex mu_;
  std::vector<internal::HttpRequest> requests_;
};

inline internal::HttpResponse Respond(int status, std::string body,
                                      std::map<std::string, std::string> headers = {}) {
  internal::HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

/// Whether `headers` holds the exact line "Name: value".
inline bool HasHeader(const internal::HttpRequest& r, const std::string& line) {
  for (const auto& h : r.headers) {
    if (h == line) return true;
  }
  return false;
}

/// A client configuration for a FakeTransport: a token, no rate limit.
inline ClientConfig FakeClientConfig() {
  ClientConfig c;
  c.server = "https://127.0.0.1:6443";
  c.token = "t0ken";
  c.rate_limit.qps = 0;
  return c;
}

/// Whether a request URL is a watch.
inline bool IsWatchUrl(const std::string& url) {
  return url.find("watch=true") != std::string::npos;
}

}  // namespace tfk8s::testing
