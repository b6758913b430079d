#pragma once
// Internal: the channel protocol of exec and port-forward over a WebSocket
// (v4.channel.k8s.io / v5.channel.k8s.io), separate from the socket so unit tests drive it.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "http/websocket.hpp"
#include "tfk8s/client.hpp"

namespace tfk8s::internal {

/// Channel numbers: every message starts with one byte naming its stream.
enum ExecChannel : unsigned char {
  kStdin = 0,
  kStdout = 1,
  kStderr = 2,
  kErrorChannel = 3,  ///< v4+: the command's final Status (JSON).
  kResize = 4,
  kCloseChannel = 255,  ///< v5: `{255, n}` closes stream n (stdin's end of input).
};

inline constexpr const char* kV5Protocol = "v5.channel.k8s.io";
inline constexpr const char* kV4Protocol = "v4.channel.k8s.io";

/// The exit code a v4 error-channel Status describes: 0 for Success, N for the
/// NonZeroExitCode failure with cause ExitCode N; otherwise throws the error the Status states
/// (ServerError with its message: the command could not be started, …).
int ExitCodeFromStatus(std::string_view status_json, std::string_view context);

/// Speaks the exec protocol on an open socket: sends stdin (and its end on v5), collects or
/// passes on the output, returns when the server closed the stream after the final Status.
/// `max_output` bounds collected output (0: no bound); `deadline` the whole exchange.
ExecResult RunExec(WebSocket& ws, const ExecOptions& options, std::string_view context,
                   std::size_t max_output,
                   std::optional<std::chrono::steady_clock::time_point> deadline);

/// The port a port-forward stream's first message on `channel` announces (two bytes, little
/// endian, after the channel byte); throws TransportError naming `context` when it is not one.
int PortPrefix(std::string_view message, unsigned char channel, std::string_view context);

/// Core v1 pods: exec and port-forward build their subresource paths with its ObjectPath.
const ResourceType& PodsType();

}  // namespace tfk8s::internal
