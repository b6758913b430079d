// Harness: a DevInstance's (or TFCluster session's) credentials read back from its Secret
// (internal::DecodeCredentialsSecret, the reading half of CredentialsFromSecret,
// src/workloads/start_script.cpp): whatever the server returns for `<name>-credentials`, which
// anyone allowed to write that Secret controls. CredentialsFromSecret itself is called only on
// Secrets that hold both hashes: on the others it makes an argon2 hash (tens of milliseconds by
// design), which would leave the fuzzer a few inputs a second.
// Properties: nothing throws (an incomplete Secret is nullopt); the credentials are the Secret's
// base64 fields decoded; rewriting them (CredentialsSecretData) and reading again gives the same
// credentials; a Secret with both hashes reads the same through CredentialsFromSecret;
// DevCredentials::ToString does not depend on them.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "util/base64.hpp"
#include "workloads/start_script.hpp"

namespace {

bool Same(const tfk8s::DevCredentials& a, const tfk8s::DevCredentials& b) {
  return a.password == b.password && a.jupyter_hash == b.jupyter_hash &&
         a.jupyter_fallback_hash == b.jupyter_fallback_hash && a.ssh_hash == b.ssh_hash;
}

// Decodes, failing the run on any exception.
std::optional<tfk8s::DevCredentials> Decode(const nlohmann::json& secret) {
  try {
    return tfk8s::internal::DecodeCredentialsSecret(secret);
  } catch (const std::exception& e) {
    tfk8s::fuzz::Fail("DecodeCredentialsSecret threw (an incomplete Secret is nullopt)", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  const auto secret = ParseJsonInput(data, size);
  if (secret.is_discarded()) return 0;
  const auto credentials = Decode(secret);
  if (!credentials) return 0;
  const tfk8s::DevCredentials& c = *credentials;
  const auto& fields = secret["data"];
  auto decoded = [&](const char* key) {
    return tfk8s::internal::Base64Decode(fields[key].get<std::string>()).value_or("<invalid>");
  };
  Check(c.password == decoded("password") && c.jupyter_hash == decoded("jupyter-hashed-password") &&
            c.ssh_hash == decoded("ssh-password-hash"),
        "the credentials are not the Secret's fields", Dump(secret));

  const nlohmann::json rewritten = {{"data", tfk8s::internal::CredentialsSecretData(c)}};
  const auto again = Decode(rewritten);
  Check(again && Same(*again, c), "the rewritten Secret reads as other credentials", Dump(secret));

  if (c.jupyter_hash.rfind("argon2:", 0) == 0 && !c.jupyter_fallback_hash.empty()) {
    std::optional<tfk8s::DevCredentials> full;
    Check(Guarded("CredentialsFromSecret",
                  [&] { full = tfk8s::internal::CredentialsFromSecret(secret); }),
          "CredentialsFromSecret threw", Dump(secret));
    Check(full && Same(*full, c), "CredentialsFromSecret changed a complete Secret", Dump(secret));
  }
  Check(c.ToString() == tfk8s::DevCredentials{}.ToString(), "ToString depends on the secrets",
        Dump(secret));
  return 0;
}
