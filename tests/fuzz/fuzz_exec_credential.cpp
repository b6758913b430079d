// Harness: an exec credential plugin's reply (internal::ParseExecCredential and ParseRfc3339,
// src/auth/exec_plugin.cpp): whatever a kubeconfig's `exec` command prints on stdout.
// Properties: only ConfigError escapes; a credential that parses has a token or a certificate
// with its key (never one of the pair alone) and, when the reply has an expirationTimestamp, an
// expiration; the credential material never appears in an error message (checked by planting
// marker values as status.token and status.clientKeyData and parsing again); ParseRfc3339 of
// the raw bytes never throws, and a time it accepts is also accepted, to the same second, by
// the workloads' RFC 3339 reader (internal::ParseTimestamp, which is more lenient).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "auth/exec_plugin.hpp"
#include "fuzz_util.hpp"
#include "workloads/cron.hpp"

namespace {

constexpr std::string_view kTokenMarker = "MARKER-TOKEN-6f1c0b";
constexpr std::string_view kKeyMarker = "MARKER-KEY-93ad27";

// Parses `text`; true with *out on success, false on its documented refusals (the message in
// *message): ConfigError, or DecodeError for a reply nested deeper than the decoders' bound.
bool Parse(const std::string& text, const tfk8s::ExecConfig& exec,
           tfk8s::internal::ExecCredential* out, std::string* message) {
  try {
    *out = tfk8s::internal::ParseExecCredential(text, exec);
    return true;
  } catch (const tfk8s::ConfigError& e) {
    *message = e.what();
    return false;
  } catch (const tfk8s::DecodeError& e) {
    *message = e.what();
    tfk8s::fuzz::Check(message->find("nested deeper than") != std::string::npos,
                       "ParseExecCredential threw a DecodeError other than the depth bound's",
                       *message);
    return false;
  } catch (const std::exception& e) {
    tfk8s::fuzz::Fail("ParseExecCredential threw something other than ConfigError", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  const std::string text(reinterpret_cast<const char*>(data), size);
  tfk8s::ExecConfig exec;
  exec.api_version = "client.authentication.k8s.io/v1";
  exec.command = "fuzz-plugin";

  tfk8s::internal::ExecCredential credential;
  std::string message;
  if (Parse(text, exec, &credential, &message)) {
    Check(!credential.token.empty() || !credential.client_cert_pem.empty(),
          "a parsed credential holds neither a token nor a certificate", text);
    Check(credential.client_cert_pem.empty() == credential.client_key_pem.empty(),
          "a parsed credential holds a certificate without its key or the reverse", text);
    const auto reply = ParseJsonInput(data, size);
    const bool has_expiration = reply.is_object() && reply.contains("status") &&
                                reply["status"].is_object() &&
                                reply["status"].contains("expirationTimestamp") &&
                                reply["status"]["expirationTimestamp"].is_string() &&
                                !reply["status"]["expirationTimestamp"].get<std::string>().empty();
    Check(credential.expiration.has_value() == has_expiration,
          "expirationTimestamp given but no expiration, or the reverse", text);
  }

  // The same reply with marker credentials: a refusal must not quote them.
  auto reply = ParseJsonInput(data, size);
  if (reply.is_object() && reply.contains("status") && reply["status"].is_object() &&
      text.find("MARKER-") == std::string::npos) {
    reply["status"]["token"] = kTokenMarker;
    if (reply["status"].contains("clientKeyData")) reply["status"]["clientKeyData"] = kKeyMarker;
    const std::string planted = Dump(reply);
    if (!Parse(planted, exec, &credential, &message)) {
      Check(message.find(kTokenMarker) == std::string::npos &&
                message.find(kKeyMarker) == std::string::npos,
            "an exec plugin error quotes the credential", planted + "\n" + message);
    } else {
      Check(credential.token == kTokenMarker, "the planted token was not returned", planted);
    }
  }

  std::optional<std::chrono::system_clock::time_point> time;
  Check(Guarded("ParseRfc3339", [&] { time = tfk8s::internal::ParseRfc3339(text); }),
        "ParseRfc3339 threw", text);
  if (time) {
    const auto seconds = tfk8s::internal::ParseTimestamp(text);
    Check(seconds.has_value(), "ParseRfc3339 accepts a time ParseTimestamp refuses", text);
    Check(std::chrono::floor<std::chrono::seconds>(*time) == *seconds,
          "ParseRfc3339 and ParseTimestamp read different times", text);
  }
  return 0;
}
