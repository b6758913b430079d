// Exec and port-forward against the real API server, up to where a kubelet is needed (the
// simulated nodes have none; tests/e2e runs commands and forwards ports on a real node): the
// WebSocket upgrade with every authentication method, TLS verification, and the server's
// refusals mapped to typed errors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "cluster.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

TEST_SUITE("pod streams") {
  TEST_CASE("exec upgrades with token, certificate, token file and exec plugin credentials") {
    // A missing pod: the server authenticates and authorizes the upgrade, then answers 404
    // with a Status, which only an accepted handshake and TLS session can carry.
    const std::string pod = UniqueName("no-such-pod");
    for (const char* context :
         {"tfk8s-local", "tfk8s-local-cert", "tfk8s-local-tokenfile", "tfk8s-local-exec"}) {
      CAPTURE(context);
      Client c(ConfigFor(context));
      try {
        c.Exec("default", pod, {"true"});
        FAIL("expected NotFound");
      } catch (const NotFound& e) {
        CHECK(e.http_code() == 404);
        CHECK_MESSAGE(std::string(e.what()).find(pod) != std::string::npos, e.what());
        CHECK_MESSAGE(
            std::string(e.what()).find("exec \"true\" in pod default/") != std::string::npos,
            e.what());
      }
    }
  }

  TEST_CASE("exec: bad credentials are Unauthorized, missing rights Forbidden") {
    ClientConfig bad = ConfigFor();
    bad.token = "definitely-not-valid";
    CHECK_THROWS_AS(Client(bad).Exec("default", "p", {"true"}), Unauthorized);
    // The limited user may read pods but not create pods/exec.
    try {
      Client(ConfigFor("tfk8s-local-limited")).Exec("default", "p", {"true"});
      FAIL("expected Forbidden");
    } catch (const Forbidden& e) {
      CHECK(e.http_code() == 403);
      CHECK_MESSAGE(std::string(e.what()).find("pods/exec") != std::string::npos, e.what());
    }
  }

  TEST_CASE("exec: a rotated token file is re-read after the upgrade's 401") {
    namespace fs = std::filesystem;
    fs::path dir = fs::path(ClusterDir()) / ("ws-rotate-" + UniqueName("t"));
    fs::create_directories(dir);
    fs::path token_path = dir / "token";
    const std::string good = ConfigFor().token;
    { std::ofstream(token_path) << "stale-token\n"; }
    ClientConfig cfg = ConfigFor();
    cfg.token.clear();
    cfg.token_file = token_path.string();
    cfg.token_file_refresh = std::chrono::seconds(3600);
    Client c(cfg);
    CHECK_THROWS_AS(c.Exec("default", "p", {"true"}), Unauthorized);
    { std::ofstream(token_path) << good << "\n"; }
    CHECK_THROWS_AS(c.Exec("default", UniqueName("absent"), {"true"}), NotFound);
    fs::remove_all(dir);
  }

  TEST_CASE("exec verifies the server like every request: CA and server name") {
    ClientConfig other_ca = ConfigFor();
    other_ca.ca_pem = ReadFile(ClusterDir() + "/pki/other-ca.crt");
    REQUIRE(other_ca.ca_pem.find("BEGIN CERTIFICATE") != std::string::npos);
    CHECK_THROWS_AS(Client(other_ca).Exec("default", "p", {"true"}), TlsError);

    ClientConfig wrong_name = ConfigFor();
    wrong_name.tls_server_name = "not-a-san.example";
    CHECK_THROWS_AS(Client(wrong_name).Exec("default", "p", {"true"}), TlsError);

    ClientConfig right_name = ConfigFor();
    right_name.tls_server_name = "kubernetes.default.svc";  // a SAN of the serving certificate
    CHECK_THROWS_AS(Client(right_name).Exec("default", UniqueName("absent"), {"true"}), NotFound);
  }

  TEST_CASE("port-forward: a missing pod is NotFound, a pending one Conflict, nothing listens") {
    Client c = AdminClient();
    CHECK_THROWS_AS(c.ForwardPort("default", UniqueName("absent"), 80), NotFound);
    // A pod no scheduler will place (its node selector matches no node) stays Pending.
    const std::string name = UniqueName("pending");
    Json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}}},
                {"spec",
                 {{"nodeSelector", {{"tfk8s.io/test-no-such-node", "x"}}},
                  {"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
    c.Create(kPods, "default", pod);
    try {
      c.ForwardPort("default", name, 80);
      FAIL("expected Conflict");
    } catch (const Conflict& e) {
      CHECK_MESSAGE(std::string(e.what()).find("not Running") != std::string::npos, e.what());
    }
    c.Delete(kPods, "default", name);
  }

  TEST_CASE("port-forward verifies a first stream: a node without a kubelet fails at once") {
    Client c = AdminClient();
    const std::string name = UniqueName("simulated");
    Json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}}},
                {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
    c.Create(kPods, "default", pod);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (c.Get(kPods, "default", name).value(Json::json_pointer("/status/phase"), "") !=
           "Running") {
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "pod never Running");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    // The simulated node answers the API server's streaming request with 404.
    CHECK_THROWS_AS(c.ForwardPort("default", name, 80), NotFound);

    // Without the check the port listens, and the first connection tells why it fails.
    PortForwardOptions lazy;
    lazy.verify = false;
    PortForward pf = c.ForwardPort("default", name, 80, lazy);
    REQUIRE(pf.local_port() > 0);
    CHECK(pf.last_error().empty());
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(pf.local_port()));
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    char byte;
    CHECK(::recv(fd, &byte, 1, 0) == 0);  // closed by the forwarder: the stream failed
    ::close(fd);
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (pf.last_error().empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK_MESSAGE(pf.last_error().find("404") != std::string::npos, pf.last_error());
    CHECK(pf.connections() == 1);
    pf.Close();
    CHECK_FALSE(pf.is_open());
    c.Delete(kPods, "default", name);
  }
}
