// Client::Exec: the pods/exec subresource over a WebSocket (see exec.hpp for the protocol).
#include "client/exec.hpp"

#include <fmt/format.h>

#include "client/connection.hpp"
#include "util/json_parse.hpp"

namespace tfk8s {
namespace internal {

namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr std::size_t kStdinChunk = 32u << 10;

std::string Quoted(const std::vector<std::string>& command) {
  std::string out;
  for (const auto& word : command) out += (out.empty() ? "" : " ") + word;
  return out.size() > 80 ? out.substr(0, 77) + "..." : out;
}

}  // namespace

int ExitCodeFromStatus(std::string_view status_json, std::string_view context) {
  Json status = ParseJson(status_json, fmt::format("{}: the error stream", context));
  if (!status.is_object()) {
    // channel.k8s.io (before v4) sent plain text here; v4+ always sends a Status.
    throw DecodeError(fmt::format("{}: the error stream is not a Status: {:.200}", context,
                                  std::string(status_json)),
                      "");
  }
  // A string member, "" when absent or of another type (Json::value would throw on that).
  auto text_of = [](const Json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto text = [&](const char* key) { return text_of(status, key); };
  if (text("status") == "Success") return 0;
  if (text("reason") == "NonZeroExitCode") {
    const Json* causes = nullptr;
    if (auto d = status.find("details"); d != status.end() && d->is_object()) {
      if (auto c = d->find("causes"); c != d->end() && c->is_array()) causes = &*c;
    }
    if (causes != nullptr) {
      for (const auto& cause : *causes) {
        if (!cause.is_object() || text_of(cause, "reason") != "ExitCode") continue;
        const std::string code = text_of(cause, "message");
        try {
          std::size_t used = 0;
          int value = std::stoi(code, &used);
          if (used == code.size()) return value;
        } catch (const std::exception&) {
        }
      }
    }
  }
  // The command could not be run (not found, not executable, the container stopped …): the
  // Status's own message (the runtime's words), not the JSON around it.
  std::string message = text("message");
  if (message.empty()) message = std::string(status_json.substr(0, 300));
  throw ServerError(ErrorKind::kServerError, fmt::format("{}: {}", context, message), 500,
                    text("reason"), message);
}

int PortPrefix(std::string_view message, unsigned char channel, std::string_view context) {
  if (message.size() != 3 || static_cast<unsigned char>(message[0]) != channel) {
    throw TransportError(
        fmt::format("{}: expected the port on stream {} first, got {} bytes on stream {}", context,
                    channel, message.size(),
                    message.empty() ? -1 : static_cast<unsigned char>(message[0])),
        true);
  }
  return static_cast<unsigned char>(message[1]) | (static_cast<unsigned char>(message[2]) << 8);
}

ExecResult RunExec(WebSocket& ws, const ExecOptions& options, std::string_view context,
                   std::size_t max_output, std::optional<SteadyClock::time_point> deadline) {
  ExecResult result;
  result.protocol = ws.protocol();
  auto timed_out = [&] {
    ws.Close();
    auto ms = options.timeout.count();
    throw Timeout(ErrorKind::kTimeout,
                  fmt::format("{}: no exit status after {} ms (the stream was closed; the "
                              "command may still run in the container)",
                              context, ms));
  };
  if (options.stdin_data) {
    const std::string& in = *options.stdin_data;
    for (std::size_t at = 0; at < in.size(); at += kStdinChunk) {
      std::string message(1, static_cast<char>(kStdin));
      message.append(in, at, kStdinChunk);
      ws.Send(std::move(message));
    }
    if (result.protocol == kV5Protocol) {
      ws.Send(std::string{static_cast<char>(kCloseChannel), static_cast<char>(kStdin)});
    }
  }
  std::optional<int> exit_code;
  std::size_t collected = 0;
  std::string message;
  while (true) {
    auto wait = std::chrono::milliseconds(60'000);
    if (deadline) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - SteadyClock::now());
      if (left.count() <= 0) timed_out();
      wait = std::min(wait, left);
    }
    if (options.cancelled) {
      if (options.cancelled()) {
        ws.Close();
        throw CancelledError(
            fmt::format("{}: cancelled (the command may still run in the "
                        "container)",
                        context));
      }
      wait = std::min(wait, std::chrono::milliseconds(100));
    }
    auto got = ws.Receive(&message, wait);
    if (got == WebSocket::ReceiveResult::kTimeout) continue;
    if (got == WebSocket::ReceiveResult::kClosed) break;
    if (message.empty()) continue;
    const auto channel = static_cast<unsigned char>(message[0]);
    std::string_view data(message);
    data.remove_prefix(1);
    if (channel == kStdout || channel == kStderr) {
      if (data.empty()) continue;
      if (options.on_output) {
        options.on_output(channel, data);
        continue;
      }
      collected += data.size();
      if (max_output > 0 && collected > max_output) {
        ws.Close();
        throw ResponseTooLarge(fmt::format("{}: the command's output is larger than "
                                           "max_response_bytes ({} bytes)",
                                           context, max_output),
                               "max_response_bytes", max_output);
      }
      (channel == kStdout ? result.out : result.err).append(data);
    } else if (channel == kErrorChannel && !data.empty()) {
      exit_code = ExitCodeFromStatus(data, context);
    }
  }
  if (!exit_code) {
    // Without the final Status a broken connection is the error to report; after it, how the
    // connection ended does not matter.
    if (auto error = ws.error()) std::rethrow_exception(error);
    throw TransportError(
        fmt::format("{}: the stream ended without the command's exit status", context), true);
  }
  result.exit_code = *exit_code;
  return result;
}

const ResourceType& PodsType() {
  static const ResourceType kPods{"", "v1", "Pod", "pods", true};
  return kPods;
}

}  // namespace internal

ExecResult Client::Exec(std::string_view ns, std::string_view pod,
                        const std::vector<std::string>& command, const ExecOptions& options) {
  const std::string n = ns.empty() ? default_namespace() : std::string(ns);
  if (command.empty()) {
    throw ValidationError("command", "[]", "must not be empty (an argv: the program first)");
  }
  if (pod.empty()) throw ValidationError("pod", "", "must not be empty");
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (options.timeout.count() > 0) deadline = std::chrono::steady_clock::now() + options.timeout;
  internal::Query q;
  for (const auto& word : command) q.Add("command", word);
  q.AddIf(!options.container.empty(), "container", options.container);
  q.AddIf(options.stdin_data.has_value(), "stdin", "true");
  q.Add("stdout", "true");
  q.AddIf(!options.tty, "stderr", "true");
  q.AddIf(options.tty, "tty", "true");
  internal::RequestSpec spec;
  spec.path = internal::PodsType().ObjectPath(n, pod, "exec") + q.str();
  spec.context = fmt::format("exec {:?} in pod {}/{}", internal::Quoted(command), n, pod);
  auto ws = conn_->OpenWebSocket(spec, {internal::kV5Protocol, internal::kV4Protocol});
  return internal::RunExec(*ws, options, spec.context, conn_->config().max_response_bytes,
                           deadline);
}

}  // namespace tfk8s
