// Harness: the channel framing of exec and port-forward over a WebSocket (src/client/exec.cpp:
// internal::RunExec's reading of channel-tagged messages, ExitCodeFromStatus on the error
// channel's Status, PortPrefix on a port-forward stream's first messages). The messages are what
// the API server (or the kubelet behind it) sends; the WebSocket's own frame parsing is
// Boost.Beast's and needs a socket, so a scripted WebSocket stands in for it here.
//
// Input: byte 0 = flags (bit 0: the server speaks v5, bit 1: output goes to on_output, bit 2:
// there is stdin, bit 3: the connection fails instead of closing cleanly, bits 4-7: max_output
// in units of 16 bytes, 0 = unbounded); then messages, each a 2-byte little-endian length and
// that many bytes (the last one cut at the end of the input; a zero length is a receive timeout).
// Properties: RunExec throws only TransportError (DecodeError, ResponseTooLarge) or the
// ServerError a Status states; it returns only after a Status arrived; collected output never
// exceeds max_output; stdout and stderr hold exactly the bytes of channels 1 and 2, or went to
// on_output, in order; stdin is sent as channel-0 messages (closed by {255, 0} on v5).
// ExitCodeFromStatus and PortPrefix throw only their typed errors; a port is the two bytes.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "client/exec.hpp"
#include "fuzz_util.hpp"

namespace {

using tfk8s::internal::WebSocket;

// Plays back scripted messages; records what is sent.
class ScriptedWebSocket final : public WebSocket {
 public:
  ScriptedWebSocket(std::string protocol, std::deque<std::string> script, bool fails)
      : protocol_(std::move(protocol)), script_(std::move(script)), fails_(fails) {}
  [[nodiscard]] std::string protocol() const override { return protocol_; }
  ReceiveResult Receive(std::string* message, std::chrono::milliseconds) override {
    if (closed_ || script_.empty()) return ReceiveResult::kClosed;
    std::string next = std::move(script_.front());
    script_.pop_front();
    if (next.empty()) return ReceiveResult::kTimeout;
    *message = next.substr(1);  // the scripted message's first byte only marks it non-empty
    return ReceiveResult::kMessage;
  }
  void Send(std::string message) override { sent.push_back(std::move(message)); }
  [[nodiscard]] std::exception_ptr error() const override {
    if (!fails_) return nullptr;
    return std::make_exception_ptr(tfk8s::TransportError("fuzz: connection reset", true));
  }
  void Close() override { closed_ = true; }
  std::vector<std::string> sent;

 private:
  std::string protocol_;
  std::deque<std::string> script_;
  bool fails_;
  bool closed_ = false;
};

// Runs `f`, allowing only TransportError and its subclasses or a ServerError.
template <typename F>
bool Typed(std::string_view what, F&& f) {
  try {
    f();
    return true;
  } catch (const tfk8s::TransportError&) {
    return false;
  } catch (const tfk8s::ServerError&) {
    return false;
  } catch (const std::exception& e) {
    tfk8s::fuzz::Fail(std::string(what) + " threw an unexpected exception", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  if (size < 1) return 0;
  const std::uint8_t flags = data[0];
  const bool v5 = (flags & 1) != 0, callback = (flags & 2) != 0, with_stdin = (flags & 4) != 0;
  const bool fails = (flags & 8) != 0;
  const std::size_t max_output = static_cast<std::size_t>(flags >> 4) * 16;

  // The script: each message prefixed with a marker byte so that an empty message ("", which
  // RunExec skips) differs from a timeout.
  std::deque<std::string> script;
  std::vector<std::string> messages;
  for (std::size_t at = 1; at + 2 <= size;) {
    std::size_t len = data[at] | (data[at + 1] << 8);
    at += 2;
    len = std::min(len, size - at);
    std::string message(reinterpret_cast<const char*>(data) + at, len);
    at += len;
    script.push_back(len == 0 ? std::string() : "m" + message);
    if (len > 0) messages.push_back(message);
  }

  const std::string context = "fuzz exec";
  ScriptedWebSocket ws(v5 ? tfk8s::internal::kV5Protocol : tfk8s::internal::kV4Protocol, script,
                       fails);
  tfk8s::ExecOptions options;
  if (with_stdin) options.stdin_data = std::string(40'000, 'i');  // more than one chunk
  std::string passed[3];
  if (callback) {
    options.on_output = [&](int fd, std::string_view out) {
      Check(fd == 1 || fd == 2, "on_output got a stream other than 1 and 2");
      Check(!out.empty(), "on_output got no bytes");
      passed[fd].append(out);
    };
  }
  tfk8s::ExecResult result;
  const bool ok = Typed("RunExec", [&] {
    result = tfk8s::internal::RunExec(ws, options, context, max_output, std::nullopt);
  });

  // What was sent: stdin in channel-0 messages, then the end of stdin on v5.
  std::string stdin_sent;
  bool closed_stdin = false;
  for (const auto& m : ws.sent) {
    Check(!closed_stdin, "a message after the end of stdin");
    if (m == std::string{static_cast<char>(255), 0}) {
      closed_stdin = true;
      continue;
    }
    Check(!m.empty() && m[0] == 0, "a sent message is not on the stdin channel");
    stdin_sent.append(m, 1);
  }
  Check(stdin_sent == options.stdin_data.value_or(""), "stdin was not sent whole");
  Check(closed_stdin == (with_stdin && v5), "the end of stdin was (not) sent");

  if (ok) {
    bool had_status = false;
    std::string out, err;
    for (const auto& m : messages) {
      const auto c = static_cast<unsigned char>(m[0]);
      if (c == 1) out.append(m, 1);
      if (c == 2) err.append(m, 1);
      if (c == 3 && m.size() > 1) had_status = true;
    }
    Check(had_status, "RunExec returned without an exit status");
    Check(result.protocol == ws.protocol(), "the protocol is not the server's");
    if (callback) {
      Check(result.out.empty() && result.err.empty(), "output collected despite on_output");
      Check(passed[1] == out && passed[2] == err, "on_output did not get the streams");
    } else {
      Check(result.out == out && result.err == err, "the collected output is not the streams'");
      if (max_output > 0) {
        Check(result.out.size() + result.err.size() <= max_output,
              "collected output exceeds max_output");
      }
    }
  }

  // The error channel's Status and a port-forward stream's port announcement, on the bytes
  // after the flags.
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  Typed("ExitCodeFromStatus", [&] { (void)tfk8s::internal::ExitCodeFromStatus(rest, context); });
  for (unsigned char stream : {0, 1}) {
    for (std::string_view message : {rest, rest.substr(0, 3)}) {
      int port = -1;
      if (Typed("PortPrefix",
                [&] { port = tfk8s::internal::PortPrefix(message, stream, context); })) {
        Check(message.size() == 3 && static_cast<unsigned char>(message[0]) == stream,
              "PortPrefix accepted a message that is not a port on its stream");
        Check(port == (static_cast<unsigned char>(message[1]) |
                       static_cast<unsigned char>(message[2]) << 8),
              "PortPrefix read another port");
      }
    }
  }
  return 0;
}
