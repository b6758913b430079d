#pragma once
// Internal: the few cryptographic primitives the workloads need (random secrets and password
// hashes for development containers). They live in src/http/ because that is the only place
// allowed to include OpenSSL; nothing here is part of the public API.
//
// Every random value comes from OpenSSL's CSPRNG (RAND_bytes) and its result is checked for
// exactly 1: a failure throws instead of returning a buffer that may be uninitialised (Tor
// TROVE-2021-004 accepted 0 as success). No other random source is used on these paths.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfk8s::internal {

/// `count` bytes from the CSPRNG. Throws tfk8s::Error when OpenSSL cannot provide them.
std::string RandomBytes(std::size_t count);

/// Default entropy of generated passwords: 24 bytes = 192 bits (Jupyter's token size), above
/// the 128-bit floor of the DevInstance design.
inline constexpr std::size_t kPasswordBytes = 24;

/// A fresh password of `bytes` random bytes, encoded as unpadded base64url (RFC 4648 §5:
/// `A-Z a-z 0-9 - _`), so it survives URLs, shells, YAML and `chpasswd` without quoting.
/// 24 bytes give 32 characters. Throws tfk8s::Error when the CSPRNG fails.
std::string GeneratePassword(std::size_t bytes = kPasswordBytes);

/// Unpadded base64url (RFC 4648 §5) of raw bytes.
std::string Base64UrlEncode(std::string_view bytes);

/// Lower-case hexadecimal of raw bytes.
std::string HexEncode(std::string_view bytes);

/// Digest of `data` with "sha1", "sha256" or "sha512" (raw bytes). Throws on another name.
std::string Digest(std::string_view algorithm, std::string_view data);

/// Jupyter's salted password hash, `"<algorithm>:<salt>:<hex(H(password + salt))>"`, the format
/// that jupyter_server's (and classic notebook's) `passwd_check()` verifies for every hashlib
/// algorithm. tfk8s uses it only as the fallback for images whose Jupyter cannot verify argon2
/// (no argon2-cffi): see Argon2idHash.
std::string JupyterPasswordHash(std::string_view password, std::string_view salt,
                                std::string_view algorithm = "sha512");

/// JupyterPasswordHash with SHA-512 and a fresh random 16-hex-digit salt.
std::string NewJupyterSha512Hash(std::string_view password);

/// Argon2's cost parameters. The defaults are jupyter_server's (`passwd()`: argon2-cffi's
/// PasswordHasher(memory_cost=10240, time_cost=10, parallelism=8)).
struct Argon2Cost {
  std::uint32_t time = 10;       ///< Passes over memory.
  std::uint32_t memory = 10240;  ///< KiB.
  std::uint32_t lanes = 8;       ///< Parallelism `p` (computed on one thread here).
};

/// The argon2id hash of `password` with `salt` (raw bytes, at least 8) in the PHC string format
/// `$argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<b64 salt>$<b64 hash>` (unpadded standard base64,
/// a 32-byte hash), computed with libargon2 (the reference implementation). The string is what
/// argon2-cffi's and libargon2's `verify` read, so jupyter_server (`"argon2:" + it`) and
/// code-server (`hashed-password`) verify it. Throws tfk8s::Error if libargon2 fails.
std::string Argon2idHash(std::string_view password, std::string_view salt, Argon2Cost cost = {});

/// `"argon2:" + Argon2idHash(password, <16 fresh random bytes>)`: jupyter_server's own format
/// (and classic notebook's since 6.1). The part after `argon2:` is code-server's hashed password.
std::string NewJupyterPasswordHash(std::string_view password);

/// glibc's SHA-512 crypt (`$6$`, Ulrich Drepper's "Unix crypt using SHA-256 and SHA-512"), the
/// format `chpasswd -e`, `usermod -p` and `openssl passwd -6` use. `salt` is at most 16
/// characters of `./0-9A-Za-z` (longer salts are truncated, as the specification says);
/// `rounds` 5000 (the default) is omitted from the output, other values are clamped to
/// [1000, 999999999] and written as `rounds=N$`.
std::string Sha512Crypt(std::string_view password, std::string_view salt, int rounds = 5000);

/// Sha512Crypt with a fresh random 16-character salt.
std::string NewSha512Crypt(std::string_view password);

/// Compares two strings in time independent of where they differ (CRYPTO_memcmp).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace tfk8s::internal
