// The curl transport against the real apiserver: HTTP/2, many requests in flight, timeouts.
#include <thread>

#include "client/connection.hpp"
#include "cluster.hpp"
#include "http/transport.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

internal::HttpRequest VersionRequest(const ClientConfig& cfg) {
  internal::HttpRequest req;
  req.url = cfg.server + "/version";
  req.headers = {"Authorization: Bearer " + cfg.token, "Accept: application/json"};
  auto tls = std::make_shared<internal::TlsSettings>();
  tls->ca_pem = cfg.ca_pem;
  req.tls = tls;
  req.timeout = std::chrono::seconds(10);
  return req;
}

}  // namespace

TEST_SUITE("transport") {
  TEST_CASE("HTTP/2 is negotiated with the apiserver") {
    auto transport = internal::MakeCurlTransport();
    auto r = transport->Send(VersionRequest(ConfigFor())).get();
    CHECK(r.status == 200);
    CHECK(r.http_version == 20);
    CHECK(Json::parse(r.body)["major"] == "1");
  }

  TEST_CASE("many requests in flight at once on one transport") {
    auto transport = internal::MakeCurlTransport();
    ClientConfig cfg = ConfigFor();
    std::vector<std::future<internal::HttpResponse>> futures;
    for (int i = 0; i < 100; ++i) futures.push_back(transport->Send(VersionRequest(cfg)));
    int ok = 0;
    for (auto& f : futures) ok += f.get().status == 200;
    CHECK(ok == 100);
  }

  TEST_CASE("a request timeout is a TransportError of kind Timeout") {
    auto transport = internal::MakeCurlTransport();
    ClientConfig cfg = ConfigFor();
    // A watch that the server keeps open for 30 s, with a 300 ms client timeout.
    internal::HttpRequest req = VersionRequest(cfg);
    req.url = cfg.server + "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30";
    req.timeout = std::chrono::milliseconds(300);
    try {
      transport->Send(req).get();
      FAIL("expected a timeout");
    } catch (const TransportError& e) {
      CHECK(e.kind() == ErrorKind::kTimeout);
    }
  }

  TEST_CASE("a transport is destroyed cleanly with a stream still open") {
    auto transport = internal::MakeCurlTransport();
    ClientConfig cfg = ConfigFor();
    internal::HttpRequest req = VersionRequest(cfg);
    req.url = cfg.server + "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30";
    req.timeout = std::chrono::milliseconds(0);
    auto stream = transport->Open(req);
    CHECK(stream->WaitForHeaders(std::chrono::seconds(10)) == 200);
    transport.reset();  // joins the loop thread, fails the open stream
    std::string rest;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (stream->Read(&rest, std::chrono::milliseconds(100)) !=
               internal::HttpStream::ReadResult::kEnd &&
           std::chrono::steady_clock::now() < deadline) {
    }
    CHECK(stream->Read(&rest, std::chrono::milliseconds(10)) ==
          internal::HttpStream::ReadResult::kEnd);
  }
}
