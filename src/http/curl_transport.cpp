// The libcurl transport. One multi handle, driven by one thread, carries every request of a
// client: connections are reused, HTTP/2 streams are multiplexed when the server offers h2,
// and callers on any thread submit work through a queue and curl_multi_wakeup().

#include <curl/curl.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <list>
#include <optional>
#include <thread>
#include <vector>

#include "http/transport.hpp"
#include "tfk8s/error.hpp"

namespace tfk8s::internal {
namespace {

// curl_global_init is not thread-safe on old libcurl versions; do it once, first.
void GlobalInitOnce() {
  static const bool done = [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return true;
  }();
  (void)done;
}

struct EasyDeleter {
  void operator()(CURL* e) const { curl_easy_cleanup(e); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
using EasyPtr = std::unique_ptr<CURL, EasyDeleter>;
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;
using MultiPtr = std::unique_ptr<CURLM, MultiDeleter>;

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Errors where the request provably never reached a server.
bool NeverSent(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
      return true;
    default:
      return false;
  }
}

bool IsTlsError(CURLcode code) {
  switch (code) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_USE_SSL_FAILED:
      return true;
    default:
      return false;
  }
}

std::exception_ptr ErrorFor(CURLcode code, const char* detail, const HttpRequest& req,
                            bool got_response_bytes) {
  std::string what = std::string(req.method) + " " + SplitUrl(req.url).host + ":" +
                     SplitUrl(req.url).port + ": " +
                     (detail && *detail ? detail : curl_easy_strerror(code));
  if (IsTlsError(code)) return std::make_exception_ptr(TlsError("TLS: " + what));
  if (code == CURLE_OPERATION_TIMEDOUT) {
    return std::make_exception_ptr(
        TransportError("timed out: " + what, /*sent_request=*/true, ErrorKind::kTimeout));
  }
  bool sent = !NeverSent(code) || got_response_bytes;
  return std::make_exception_ptr(TransportError(what, sent));
}

// One transfer in flight.
struct Transfer {
  HttpRequest request;
  EasyPtr easy;
  SlistPtr header_list;
  SlistPtr connect_to;
  char error_buffer[CURL_ERROR_SIZE] = {};
  HttpResponse response;
  bool headers_done = false;
  bool got_bytes = false;
  // Connection setup bookkeeping (loop thread only): when the handle was added, and whether
  // the request is past connect + TLS (then the setup bounds no longer apply).
  std::chrono::steady_clock::time_point started;
  bool setup_done = false;
  // The socket libcurl opened for this transfer (-1: none yet, or a reused connection), and
  // when it was first seen connected. libcurl 7.88 records CONNECT_TIME only once TLS is done
  // too, so TCP completion is observed on the socket itself.
  curl_socket_t socket = CURL_SOCKET_BAD;
  std::optional<std::chrono::steady_clock::time_point> tcp_connected;
  // Set when the transport itself ends the transfer (body limit, setup bound): reported
  // instead of curl's own error.
  std::exception_ptr own_error;
  // Exactly one of these is set.
  std::promise<HttpResponse> promise;
  std::shared_ptr<BufferedStream> stream;
  std::atomic<bool> cancel_requested{false};
};

class CurlTransport final : public HttpTransport,
                            public std::enable_shared_from_this<CurlTransport> {
 public:
  CurlTransport() {
    GlobalInitOnce();
    multi_.reset(curl_multi_init());
    if (!multi_) throw TransportError("curl_multi_init failed", false);
    curl_multi_setopt(multi_.get(), CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    // Bound the connection pool: enough for many parallel HTTP/1.1 transfers.
    curl_multi_setopt(multi_.get(), CURLMOPT_MAX_HOST_CONNECTIONS, 64L);
    curl_multi_setopt(multi_.get(), CURLMOPT_MAXCONNECTS, 64L);
    thread_ = std::thread([this] { Loop(); });
  }

  ~CurlTransport() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    curl_multi_wakeup(multi_.get());
    if (thread_.joinable()) thread_.join();
  }

  std::future<HttpResponse> Send(HttpRequest request) override {
    auto t = std::make_shared<Transfer>();
    t->request = std::move(request);
    auto future = t->promise.get_future();
    Submit(std::move(t));
    return future;
  }

  std::shared_ptr<HttpStream> Open(HttpRequest request) override {
    auto t = std::make_shared<Transfer>();
    t->request = std::move(request);
    std::weak_ptr<Transfer> weak = t;
    // The callbacks only post commands to the loop: curl handles are touched by its thread only.
    // The stream may outlive this transport (a paused stream kept after its Client is gone), so
    // the callbacks hold it weakly and do nothing once it is destroyed.
    std::weak_ptr<CurlTransport> self = weak_from_this();
    t->stream = std::make_shared<BufferedStream>(
        [self, weak] {
          auto transport = self.lock();
          if (!transport) return;
          if (auto s = weak.lock()) {
            s->cancel_requested = true;
            CurlTransport* loop = transport.get();
            transport->Post([loop, weak] {
              // Runs on the loop thread, which the transport joins before it is destroyed.
              if (auto t2 = weak.lock()) loop->Finish(t2.get(), CURLE_ABORTED_BY_CALLBACK);
            });
          }
        },
        [self, weak] {
          auto transport = self.lock();
          if (!transport) return;
          transport->Post([weak] {
            if (auto t2 = weak.lock()) curl_easy_pause(t2->easy.get(), CURLPAUSE_CONT);
          });
        });
    auto stream = t->stream;
    Submit(std::move(t));
    return stream;
  }

 private:
  void Post(std::function<void()> command) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      commands_.push_back(std::move(command));
    }
    curl_multi_wakeup(multi_.get());
  }

  static std::exception_ptr ShutDownError(const HttpRequest& req) {
    return std::make_exception_ptr(
        CancelledError(req.method + " " + SplitUrl(req.url).host + ":" + SplitUrl(req.url).port +
                       ": cancelled: the client was shut down before the request completed"));
  }

  void Submit(std::shared_ptr<Transfer> t) {
    {
      std::lock_guard lock(mu_);
      if (!stopping_) {
        to_start_.push_back(std::move(t));
        t = nullptr;
      }
    }
    if (t) {
      Fail(t.get(), ShutDownError(t->request));
      return;
    }
    curl_multi_wakeup(multi_.get());
  }

  static size_t OnHeader(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    std::string line(data, size * n);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.rfind("HTTP/", 0) == 0) {  // a new status line (also after 100 Continue)
      t->response.headers.clear();
      t->headers_done = false;
      return size * n;
    }
    if (line.empty()) {
      long code = 0;
      curl_easy_getinfo(t->easy.get(), CURLINFO_RESPONSE_CODE, &code);
      if (code >= 200) {
        t->response.status = static_cast<int>(code);
        t->headers_done = true;
        if (t->stream) t->stream->SetHeaders(t->response.status, t->response.headers);
      }
      return size * n;
    }
    auto colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      auto first = value.find_first_not_of(" \t");
      value = first == std::string::npos ? "" : value.substr(first);
      t->response.headers[Lower(line.substr(0, colon))] = value;
    }
    return size * n;
  }

  static int OnSocket(void* user, curl_socket_t fd, curlsocktype purpose) {
    if (purpose == CURLSOCKTYPE_IPCXN) static_cast<Transfer*>(user)->socket = fd;
    return CURL_SOCKOPT_OK;
  }

  static size_t OnBody(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    t->got_bytes = true;
    if (t->cancel_requested) return 0;  // aborts the transfer
    const std::size_t limit = t->request.max_body_bytes;
    if (!t->stream && limit > 0 && t->response.body.size() + size * n > limit) {
      if (t->request.truncate_body) {
        // Keep what fits and stop: Finish() answers with the status (CURLE_WRITE_ERROR is ours).
        t->response.body.append(data, limit - t->response.body.size());
        t->response.body_truncated = true;
        return 0;
      }
      // Stop reading rather than buffer an unbounded (or decompression-bomb) answer.
      t->own_error = std::make_exception_ptr(
          ResponseTooLarge(t->request.method + " " + SplitUrl(t->request.url).rest +
                               ": the response body is larger than max_response_bytes (" +
                               std::to_string(limit) + " bytes)",
                           "max_response_bytes", limit));
      return 0;
    }
    if (t->stream) {
      if (!t->stream->Push(std::string_view(data, size * n))) {
        // Back-pressure: the reader is behind; stop reading the socket until it drains.
        curl_easy_pause(t->easy.get(), CURLPAUSE_RECV);
      }
    } else {
      t->response.body.append(data, size * n);
    }
    return size * n;
  }

  void Start(const std::shared_ptr<Transfer>& t) {
    const HttpRequest& req = t->request;
    t->easy.reset(curl_easy_init());
    CURL* e = t->easy.get();
    if (!e) {
      Fail(t.get(), std::make_exception_ptr(TransportError("curl_easy_init failed", false)));
      return;
    }
    std::string url = req.url;
    const TlsSettings* tls = req.tls.get();
    if (tls && !tls->tls_server_name.empty()) {
      // Connect to the real address but speak TLS (SNI + name check) for tls_server_name.
      UrlParts parts = SplitUrl(req.url);
      url = parts.scheme + "://" + tls->tls_server_name + ":" + parts.port + parts.rest;
      std::string mapping =
          tls->tls_server_name + ":" + parts.port + ":" + parts.host + ":" + parts.port;
      t->connect_to.reset(curl_slist_append(nullptr, mapping.c_str()));
      curl_easy_setopt(e, CURLOPT_CONNECT_TO, t->connect_to.get());
    }
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    // Second line of defence behind the client's path checks: send the path exactly as built.
    // By default libcurl resolves "/." and "/.." segments, turning ".../configmaps/.." into the
    // namespace itself.
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error_buffer);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);  // prefer multiplexing over a new connection
    if (req.accept_compressed) {
      curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");  // every encoding curl supports
    }
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 15L);
    // libcurl's connect timeout covers DNS, TCP and the TLS handshake together: it is set to
    // the sum, as a backstop; the loop bounds TCP connect and the handshake separately
    // (CheckSetupBounds).
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(req.connect_timeout.count() +
                                       std::max<long long>(0, req.tls_handshake_timeout.count())));
    // Never negotiate below TLS 1.2, whatever the system OpenSSL configuration allows.
    curl_easy_setopt(e, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    if (req.timeout.count() > 0) {
      curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout.count()));
    }
    // Never pick up http_proxy & co. from the environment implicitly: the config decides.
    curl_easy_setopt(e, CURLOPT_PROXY, req.proxy.c_str());
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &CurlTransport::OnHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &CurlTransport::OnBody);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, &CurlTransport::OnSocket);
    curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, t.get());

    if (tls) {
      if (tls->insecure_skip_verify) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
      } else if (!tls->ca_pem.empty()) {
        curl_blob ca{const_cast<char*>(tls->ca_pem.data()), tls->ca_pem.size(), CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
        // Only the given CA: no system bundle or directory next to it.
        curl_easy_setopt(e, CURLOPT_CAPATH, nullptr);
      }
      if (!tls->client_cert_pem.empty()) {
        // Key material goes to OpenSSL from memory; nothing is written to disk.
        curl_blob cert{const_cast<char*>(tls->client_cert_pem.data()), tls->client_cert_pem.size(),
                       CURL_BLOB_COPY};
        curl_blob key{const_cast<char*>(tls->client_key_pem.data()), tls->client_key_pem.size(),
                      CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
      }
    }

    curl_slist* list = nullptr;
    for (const auto& h : req.headers) list = curl_slist_append(list, h.c_str());
    // Suppress curl's "Expect: 100-continue" round trip for large bodies.
    list = curl_slist_append(list, "Expect:");
    t->header_list.reset(list);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->header_list.get());

    if (req.method == "GET") {
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (req.method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
      if (!req.body.empty() || req.method == "POST" || req.method == "PUT" ||
          req.method == "PATCH") {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req.body.data());
      }
    }
    if (curl_multi_add_handle(multi_.get(), e) != CURLM_OK) {
      Fail(t.get(), std::make_exception_ptr(TransportError("curl_multi_add_handle failed", false)));
      return;
    }
    t->started = std::chrono::steady_clock::now();
    active_.emplace(e, t);
    // A stream cancelled before it started: its cancel command already ran and found nothing.
    if (t->cancel_requested) Finish(t.get(), CURLE_ABORTED_BY_CALLBACK);
  }

  static void Fail(Transfer* t, std::exception_ptr error) {
    if (t->stream) {
      t->stream->Finish(std::move(error));
    } else {
      t->promise.set_exception(std::move(error));
    }
  }

  // Completes a transfer (normally, with an error, or cancelled) and releases its handle.
  void Finish(Transfer* t, CURLcode code) {
    auto it = active_.find(t->easy.get());
    if (it == active_.end()) return;  // already finished
    std::shared_ptr<Transfer> keep = it->second;
    curl_multi_remove_handle(multi_.get(), t->easy.get());
    active_.erase(it);
    if (t->stream) {
      if (t->own_error) {
        t->stream->Finish(t->own_error);
      } else if (code == CURLE_OK || t->cancel_requested) {
        t->stream->Finish(nullptr);
      } else {
        t->stream->Finish(ErrorFor(code, t->error_buffer, t->request, t->got_bytes));
      }
      return;
    }
    if (t->own_error) {
      t->promise.set_exception(t->own_error);
    } else if (code == CURLE_OK || (code == CURLE_WRITE_ERROR && t->response.body_truncated)) {
      long status = 0;
      curl_easy_getinfo(t->easy.get(), CURLINFO_RESPONSE_CODE, &status);
      t->response.status = static_cast<int>(status);
      long version = 0;
      curl_easy_getinfo(t->easy.get(), CURLINFO_HTTP_VERSION, &version);
      t->response.http_version = version == CURL_HTTP_VERSION_2_0   ? 20
                                 : version == CURL_HTTP_VERSION_1_1 ? 11
                                 : version == CURL_HTTP_VERSION_1_0 ? 10
                                                                    : 0;
      t->promise.set_value(std::move(t->response));
    } else {
      t->promise.set_exception(ErrorFor(code, t->error_buffer, t->request, t->got_bytes));
    }
  }

  // Bounds TCP connect and the TLS handshake separately (libcurl has a single connect timeout
  // for both): a transfer whose socket is not connected `connect_timeout` after its name was
  // resolved, or whose socket is connected but whose handshake is not done
  // `tls_handshake_timeout` later, is ended with a timeout naming the phase. Returns whether
  // some transfer is still setting up (the loop then wakes up more often).
  bool CheckSetupBounds() {
    using std::chrono::microseconds;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::pair<Transfer*, std::exception_ptr>> expired;
    bool setting_up = false;
    for (auto& [easy, t] : active_) {
      if (t->setup_done) continue;
      curl_off_t dns = 0, tls = 0, pre = 0;
      curl_easy_getinfo(easy, CURLINFO_NAMELOOKUP_TIME_T, &dns);
      curl_easy_getinfo(easy, CURLINFO_APPCONNECT_TIME_T, &tls);
      curl_easy_getinfo(easy, CURLINFO_PRETRANSFER_TIME_T, &pre);
      if (pre > 0 || tls > 0) {  // sending (also: a reused connection), or handshake done
        t->setup_done = true;
        continue;
      }
      setting_up = true;
      if (t->socket == CURL_SOCKET_BAD) continue;  // resolving, or waiting for a connection
      const HttpRequest& req = t->request;
      const UrlParts url = SplitUrl(req.url);
      if (!t->tcp_connected) {
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        if (::getpeername(t->socket, reinterpret_cast<sockaddr*>(&peer), &len) == 0) {
          t->tcp_connected = now;
        }
      }
      const std::string where = req.method + " " + url.host + ":" + url.port;
      if (!t->tcp_connected) {
        const auto connecting =
            std::chrono::duration_cast<microseconds>(now - t->started) - microseconds(dns);
        if (req.connect_timeout.count() > 0 && connecting > req.connect_timeout) {
          expired.emplace_back(t.get(),
                               std::make_exception_ptr(TransportError(
                                   fmt::format("timed out: {}: TCP connect not done after {} ms "
                                               "(connect_timeout)",
                                               where, req.connect_timeout.count()),
                                   /*sent_request=*/false, ErrorKind::kTimeout)));
        }
      } else if (url.scheme == "https" && req.tls_handshake_timeout.count() > 0 &&
                 now - *t->tcp_connected > req.tls_handshake_timeout) {
        expired.emplace_back(t.get(),
                             std::make_exception_ptr(TransportError(
                                 fmt::format("timed out: {}: TLS handshake not done after {} ms "
                                             "(tls_handshake_timeout)",
                                             where, req.tls_handshake_timeout.count()),
                                 /*sent_request=*/false, ErrorKind::kTimeout)));
      }
    }
    for (auto& [t, error] : expired) {
      t->own_error = std::move(error);
      Finish(t, CURLE_OPERATION_TIMEDOUT);
    }
    return setting_up;
  }

  void Loop() {
    while (true) {
      std::deque<std::function<void()>> commands;
      std::deque<std::shared_ptr<Transfer>> to_start;
      {
        std::lock_guard lock(mu_);
        if (stopping_) break;
        commands.swap(commands_);
        to_start.swap(to_start_);
      }
      for (auto& t : to_start) Start(t);
      for (auto& c : commands) c();

      int running = 0;
      curl_multi_perform(multi_.get(), &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_.get(), &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
        if (t) Finish(t, msg->data.result);
      }
      const bool setting_up = CheckSetupBounds();
      curl_multi_poll(multi_.get(), nullptr, 0, setting_up ? 50 : 1000, nullptr);
    }
    // Shutting down: whatever is still in flight or queued ends with a typed error (never a
    // broken promise).
    for (auto& [easy, t] : active_) {
      curl_multi_remove_handle(multi_.get(), easy);
      Fail(t.get(), ShutDownError(t->request));
    }
    active_.clear();
    std::deque<std::function<void()>> rest;
    std::deque<std::shared_ptr<Transfer>> never_started;
    {
      std::lock_guard lock(mu_);
      rest.swap(commands_);
      never_started.swap(to_start_);
    }
    for (auto& t : never_started) Fail(t.get(), ShutDownError(t->request));
    (void)rest;
  }

  MultiPtr multi_;
  std::mutex mu_;
  bool stopping_ = false;
  std::deque<std::function<void()>> commands_;
  std::deque<std::shared_ptr<Transfer>> to_start_;     // submitted, not yet given to curl
  std::map<CURL*, std::shared_ptr<Transfer>> active_;  // loop thread only
  std::thread thread_;
};

}  // namespace

std::shared_ptr<HttpTransport> MakeCurlTransport() { return std::make_shared<CurlTransport>(); }

}  // namespace tfk8s::internal
