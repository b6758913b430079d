// The exec and port-forward channel protocol over a scripted WebSocket: output demultiplexing,
// exit codes from the error stream's Status, stdin (and its end on v5), limits, timeouts,
// cancellation; and the checks Client makes before it opens anything. No server.
#include <doctest/doctest.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/exec.hpp"
#include "fake_transport.hpp"
#include "tfk8s/client.hpp"

using namespace tfk8s;
using internal::WebSocket;

namespace {

// Plays back `inbox` (then reports the close), records what is sent.
class ScriptedSocket : public WebSocket {
 public:
  ScriptedSocket(std::string protocol, std::vector<std::string> inbox, bool then_silent = false)
      : protocol_(std::move(protocol)),
        inbox_(inbox.begin(), inbox.end()),
        then_silent_(then_silent) {}

  [[nodiscard]] std::string protocol() const override { return protocol_; }
  ReceiveResult Receive(std::string* message, std::chrono::milliseconds wait) override {
    std::lock_guard lock(mu_);
    if (!inbox_.empty()) {
      *message = inbox_.front();
      inbox_.pop_front();
      return ReceiveResult::kMessage;
    }
    if (then_silent_ && !closed_) {
      std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds(5)));
      return ReceiveResult::kTimeout;
    }
    return ReceiveResult::kClosed;
  }
  void Send(std::string message) override {
    std::lock_guard lock(mu_);
    sent.push_back(std::move(message));
  }
  [[nodiscard]] std::exception_ptr error() const override { return nullptr; }
  void Close() override {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  bool closed() {
    std::lock_guard lock(mu_);
    return closed_;
  }

  std::vector<std::string> sent;

 private:
  std::mutex mu_;
  std::string protocol_;
  std::deque<std::string> inbox_;
  bool then_silent_;
  bool closed_ = false;
};

std::string On(unsigned char channel, std::string data) {
  return std::string(1, static_cast<char>(channel)) + data;
}

const std::string kSuccess = On(3, R"({"metadata":{},"status":"Success"})");
std::string ExitWith(int code) {
  return On(3, R"({"metadata":{},"status":"Failure","message":"command terminated with )"
               R"(non-zero exit code: error executing command [sh -c exit 3], exit code )" +
                   std::to_string(code) +
                   R"(","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode",)"
                   R"("message":")" +
                   std::to_string(code) + R"("}]}})");
}

ExecResult Run(ScriptedSocket& ws, const ExecOptions& options = {}, std::size_t max = 0) {
  return internal::RunExec(ws, options, "exec in pod ns/p", max, std::nullopt);
}

}  // namespace

TEST_CASE("exec: stdout and stderr are separated, the exit code comes from the Status") {
  ScriptedSocket ws(internal::kV4Protocol,
                    {On(1, ""), On(1, "hel"), On(2, "warn\n"), On(1, "lo\n"), ExitWith(3)});
  ExecResult r = Run(ws);
  CHECK(r.out == "hello\n");
  CHECK(r.err == "warn\n");
  CHECK(r.exit_code == 3);
  CHECK(r.protocol == "v4.channel.k8s.io");
  CHECK(ws.sent.empty());  // no stdin asked: nothing written

  ScriptedSocket ok(internal::kV4Protocol, {On(1, "x"), kSuccess});
  CHECK(Run(ok).exit_code == 0);
}

TEST_CASE("exec: a Status other than an exit code is the error it states") {
  const std::string not_found =
      R"({"metadata":{},"status":"Failure","message":"OCI runtime exec failed: exec failed: )"
      R"(exec: \"nosuch\": executable file not found in $PATH: unknown","reason":)"
      R"("InternalError","details":{"causes":[{"message":"OCI runtime exec failed"}]},)"
      R"("code":500})";
  try {
    internal::ExitCodeFromStatus(not_found, "exec \"nosuch\" in pod ns/p");
    FAIL("expected ServerError");
  } catch (const ServerError& e) {
    CHECK_MESSAGE(std::string(e.what()).find("executable file not found") != std::string::npos,
                  e.what());
    CHECK_MESSAGE(std::string(e.what()).find("exec \"nosuch\" in pod ns/p") != std::string::npos,
                  e.what());
    CHECK_MESSAGE(std::string(e.what()).find("{\"metadata\"") == std::string::npos, e.what());
    CHECK(e.reason() == "InternalError");
  }
  // NonZeroExitCode without a usable ExitCode cause is not silently 0 or 1.
  CHECK_THROWS_AS(internal::ExitCodeFromStatus(
                      R"({"status":"Failure","reason":"NonZeroExitCode","details":{}})", "x"),
                  ServerError);
  CHECK_THROWS_AS(internal::ExitCodeFromStatus("plain text error", "x"), DecodeError);
}

TEST_CASE("exec: the stream ending without a Status is an error, not exit 0") {
  ScriptedSocket ws(internal::kV4Protocol, {On(1, "partial")});
  CHECK_THROWS_AS(Run(ws), TransportError);
}

TEST_CASE("exec: stdin goes out on stream 0 in chunks (v5 also closes it, v4 cannot)") {
  ExecOptions options;
  options.stdin_data = std::string(70'000, 'a');
  ScriptedSocket v4(internal::kV4Protocol, {kSuccess});
  Run(v4, options);
  REQUIRE(v4.sent.size() == 3);  // 32 KiB + 32 KiB + the rest
  std::string joined;
  for (const auto& m : v4.sent) {
    CHECK(m[0] == '\0');
    joined += m.substr(1);
  }
  CHECK(joined == *options.stdin_data);

  ScriptedSocket v5(internal::kV5Protocol, {kSuccess});
  options.stdin_data = "input";
  Run(v5, options);
  REQUIRE(v5.sent.size() == 2);
  CHECK(v5.sent[0] == On(0, "input"));
  CHECK(v5.sent[1] == std::string{static_cast<char>(255), '\0'});
}

TEST_CASE("exec: on_output gets the output as it arrives, nothing is collected") {
  std::vector<std::pair<int, std::string>> seen;
  ExecOptions options;
  options.on_output = [&](int fd, std::string_view data) { seen.emplace_back(fd, data); };
  ScriptedSocket ws(internal::kV4Protocol, {On(1, "a"), On(2, "b"), On(1, "c"), kSuccess});
  ExecResult r = Run(ws, options);
  CHECK(r.out.empty());
  CHECK(r.err.empty());
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == std::pair<int, std::string>{1, "a"});
  CHECK(seen[1] == std::pair<int, std::string>{2, "b"});
  CHECK(seen[2] == std::pair<int, std::string>{1, "c"});
}

TEST_CASE("exec: collected output is bounded by max_response_bytes") {
  ScriptedSocket ws(internal::kV4Protocol,
                    {On(1, std::string(600, 'x')), On(2, "12345"), kSuccess});
  try {
    Run(ws, {}, 604);
    FAIL("expected ResponseTooLarge");
  } catch (const ResponseTooLarge& e) {
    CHECK(e.limit_bytes() == 604);
  }
  CHECK(ws.closed());
}

TEST_CASE("exec: a deadline or a cancellation closes the stream with a typed error") {
  ScriptedSocket silent(internal::kV4Protocol, {On(1, "started")}, /*then_silent=*/true);
  ExecOptions options;
  options.timeout = std::chrono::milliseconds(30);
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  CHECK_THROWS_AS(internal::RunExec(silent, options, "exec", 0, deadline), Timeout);
  CHECK(silent.closed());

  ScriptedSocket waiting(internal::kV4Protocol, {}, /*then_silent=*/true);
  int polls = 0;
  ExecOptions cancel;
  cancel.cancelled = [&] { return ++polls == 3; };
  CHECK_THROWS_AS(internal::RunExec(waiting, cancel, "exec", 0, std::nullopt), CancelledError);
  CHECK(polls == 3);
  CHECK(waiting.closed());
}

TEST_CASE("port-forward: each stream first announces the port, two bytes little endian") {
  CHECK(internal::PortPrefix(std::string{'\0', '\xb8', '\x22'}, 0, "pf") == 8888);
  CHECK(internal::PortPrefix(std::string{'\1', '\x16', '\0'}, 1, "pf") == 22);
  CHECK_THROWS_AS(internal::PortPrefix(std::string{'\1', '\x16', '\0'}, 0, "pf"), TransportError);
  CHECK_THROWS_AS(internal::PortPrefix(std::string{'\0', 'x'}, 0, "pf"), TransportError);
  CHECK_THROWS_AS(internal::PortPrefix("", 0, "pf"), TransportError);
}

TEST_CASE("exec and port-forward refuse bad arguments before sending anything") {
  auto transport = std::make_shared<tfk8s::testing::FakeTransport>(
      [](const internal::HttpRequest&) { return tfk8s::testing::Respond(500, "{}"); });
  ClientConfig config;
  config.server = "https://127.0.0.1:6443";
  config.token = "t";
  Client client = internal::ClientOver(config, transport);
  try {
    client.Exec("ns", "pod", {});
    FAIL("expected ValidationError");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "command");
  }
  CHECK_THROWS_AS(client.Exec("ns", "", {"true"}), ValidationError);
  for (int port : {0, -1, 65536}) {
    try {
      client.ForwardPort("ns", "pod", port);
      FAIL("expected ValidationError");
    } catch (const ValidationError& e) {
      CHECK(e.field() == "remote_port");
    }
  }
  PortForwardOptions options;
  options.local_port = 70000;
  CHECK_THROWS_AS(client.ForwardPort("ns", "pod", 80, options), ValidationError);
  CHECK(transport->requests().empty());
}

TEST_CASE("exec refuses a proxy_url instead of bypassing the proxy") {
  auto transport = std::make_shared<tfk8s::testing::FakeTransport>(
      [](const internal::HttpRequest&) { return tfk8s::testing::Respond(500, "{}"); });
  ClientConfig config;
  config.server = "https://127.0.0.1:6443";
  config.token = "t";
  config.proxy_url = "http://proxy.example:3128";
  Client client = internal::ClientOver(config, transport);
  try {
    client.Exec("ns", "pod", {"true"});
    FAIL("expected TransportError");
  } catch (const TransportError& e) {
    CHECK_MESSAGE(std::string(e.what()).find("proxy") != std::string::npos, e.what());
    CHECK_FALSE(e.sent_request());
  }
}
