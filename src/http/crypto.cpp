// CSPRNG secrets and password hashes over OpenSSL and libargon2 (see crypto.hpp for the
// choices).

#include "http/crypto.hpp"

#include <argon2.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <climits>
#include <memory>

#include "tfk8s/error.hpp"
#include "util/base64.hpp"

namespace tfk8s::internal {

namespace {

// Overwrites a buffer that held key material before it is freed (the compiler may not elide
// OPENSSL_cleanse).
class Wiped {
 public:
  explicit Wiped(std::string* s) : s_(s) {}
  Wiped(const Wiped&) = delete;
  Wiped& operator=(const Wiped&) = delete;
  ~Wiped() {
    if (!s_->empty()) OPENSSL_cleanse(s_->data(), s_->size());
  }

 private:
  std::string* s_;
};

[[noreturn]] void ThrowCryptoError(const char* what) {
  unsigned long code = ERR_get_error();
  char detail[256] = "no OpenSSL error code";
  if (code != 0) ERR_error_string_n(code, detail, sizeof(detail));
  ERR_clear_error();
  throw Error(ErrorKind::kUnknown, std::string("crypto: ") + what + " (" + detail + ")");
}

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

const EVP_MD* DigestByName(std::string_view algorithm) {
  if (algorithm == "sha1") return EVP_sha1();
  if (algorithm == "sha256") return EVP_sha256();
  if (algorithm == "sha512") return EVP_sha512();
  throw Error(ErrorKind::kUnknown, "crypto: unsupported digest \"" + std::string(algorithm) +
                                       "\" (sha1, sha256 or sha512)");
}

// An incremental SHA-512, the building block of SHA-512 crypt.
class Sha512 {
 public:
  Sha512() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha512(), nullptr) != 1) {
      ThrowCryptoError("SHA-512 initialisation failed");
    }
  }
  void Add(std::string_view data) {
    if (EVP_DigestUpdate(ctx_.get(), data.data(), data.size()) != 1) {
      ThrowCryptoError("SHA-512 update failed");
    }
  }
  // Returns the 64-byte digest; the object must not be used afterwards.
  std::string Finish() {
    std::string out(64, '\0');
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), reinterpret_cast<unsigned char*>(out.data()), &len) != 1 ||
        len != 64) {
      ThrowCryptoError("SHA-512 finalisation failed");
    }
    return out;
  }

 private:
  MdCtx ctx_;
};

constexpr std::string_view kCryptAlphabet =
    "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Salt characters for crypt: 64 symbols, so `byte & 63` maps random bytes without bias.
std::string RandomCryptSalt(std::size_t length) {
  std::string bytes = RandomBytes(length);
  std::string salt;
  salt.reserve(length);
  for (unsigned char b : bytes) salt.push_back(kCryptAlphabet[b & 63U]);
  return salt;
}

// `length` bytes made of copies of `block` (the specification's "P" and "S" sequences).
std::string Repeat(const std::string& block, std::size_t length) {
  std::string out;
  out.reserve(length);
  while (out.size() + block.size() <= length) out += block;
  out.append(block, 0, length - out.size());
  return out;
}

}  // namespace

std::string RandomBytes(std::size_t count) {
  std::string out(count, '\0');
  if (count == 0) return out;
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw Error(ErrorKind::kUnknown, "crypto: too many random bytes requested");
  }
  // RAND_bytes returns 1 on success, 0 or -1 otherwise: anything but 1 is a failure.
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(count)) != 1) {
    ThrowCryptoError("the CSPRNG (RAND_bytes) failed; no secret was generated");
  }
  return out;
}

std::string Base64UrlEncode(std::string_view bytes) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t w = (static_cast<unsigned char>(bytes[i]) << 16) |
                      (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                      static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(kAlphabet[(w >> 18) & 63]);
    out.push_back(kAlphabet[(w >> 12) & 63]);
    out.push_back(kAlphabet[(w >> 6) & 63]);
    out.push_back(kAlphabet[w & 63]);
  }
  std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t w = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) w |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out.push_back(kAlphabet[(w >> 18) & 63]);
    out.push_back(kAlphabet[(w >> 12) & 63]);
    if (rest == 2) out.push_back(kAlphabet[(w >> 6) & 63]);
  }
  return out;
}

std::string GeneratePassword(std::size_t bytes) {
  std::string raw = RandomBytes(bytes);
  Wiped wipe(&raw);
  return Base64UrlEncode(raw);
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::string Digest(std::string_view algorithm, std::string_view data) {
  const EVP_MD* md = DigestByName(algorithm);
  std::string out(static_cast<std::size_t>(EVP_MD_get_size(md)), '\0');
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), reinterpret_cast<unsigned char*>(out.data()), &len, md,
                 nullptr) != 1) {
    ThrowCryptoError("digest failed");
  }
  out.resize(len);
  return out;
}

std::string JupyterPasswordHash(std::string_view password, std::string_view salt,
                                std::string_view algorithm) {
  // passwd_check(): h = hashlib.new(algorithm); h.update(passphrase.encode("utf-8") +
  // salt.encode("ascii")); the password is taken as UTF-8 bytes, the salt must be ASCII and
  // free of ':' (the separator).
  for (char c : salt) {
    if (static_cast<unsigned char>(c) > 127 || c == ':') {
      throw Error(ErrorKind::kUnknown, "crypto: a Jupyter salt must be ASCII without ':'");
    }
  }
  std::string input(password);
  input += salt;
  Wiped wipe(&input);
  return std::string(algorithm) + ":" + std::string(salt) + ":" +
         HexEncode(Digest(algorithm, input));
}

std::string NewJupyterSha512Hash(std::string_view password) {
  return JupyterPasswordHash(password, HexEncode(RandomBytes(8)), "sha512");
}

namespace {

// Standard base64 (RFC 4648 §4) without padding, as the PHC string format writes it.
std::string Base64NoPad(std::string_view bytes) {
  std::string out = Base64Encode(bytes);
  while (!out.empty() && out.back() == '=') out.pop_back();
  return out;
}

}  // namespace

std::string Argon2idHash(std::string_view password, std::string_view salt, Argon2Cost cost) {
  constexpr std::size_t kHashBytes = 32;
  if (salt.size() < ARGON2_MIN_SALT_LENGTH) {
    throw Error(ErrorKind::kUnknown, "crypto: an argon2 salt needs at least 8 bytes");
  }
  std::string pwd(password);
  Wiped wipe_pwd(&pwd);
  std::string salt_copy(salt);
  std::string hash(kHashBytes, '\0');
  argon2_context ctx{};
  ctx.out = reinterpret_cast<std::uint8_t*>(hash.data());
  ctx.outlen = static_cast<std::uint32_t>(hash.size());
  ctx.pwd = reinterpret_cast<std::uint8_t*>(pwd.data());
  ctx.pwdlen = static_cast<std::uint32_t>(pwd.size());
  ctx.salt = reinterpret_cast<std::uint8_t*>(salt_copy.data());
  ctx.saltlen = static_cast<std::uint32_t>(salt_copy.size());
  ctx.t_cost = cost.time;
  ctx.m_cost = cost.memory;
  ctx.lanes = cost.lanes;
  ctx.threads = 1;  // the lanes are a parameter of the hash; no threads started by a library
  ctx.version = ARGON2_VERSION_13;
  ctx.flags = ARGON2_DEFAULT_FLAGS;
  int rc = argon2_ctx(&ctx, Argon2_id);
  if (rc != ARGON2_OK) {
    throw Error(ErrorKind::kUnknown,
                std::string("crypto: argon2 failed: ") + argon2_error_message(rc));
  }
  return fmt::format("$argon2id$v={}$m={},t={},p={}${}${}", static_cast<int>(ARGON2_VERSION_13),
                     cost.memory, cost.time, cost.lanes, Base64NoPad(salt), Base64NoPad(hash));
}

std::string NewJupyterPasswordHash(std::string_view password) {
  return "argon2:" + Argon2idHash(password, RandomBytes(16));
}

std::string Sha512Crypt(std::string_view password, std::string_view salt_in, int rounds) {
  constexpr int kDefaultRounds = 5000;
  bool custom_rounds = rounds != kDefaultRounds;
  rounds = std::clamp(rounds, 1000, 999999999);
  for (char c : salt_in) {
    if (c == '$' || c == ':' || c == '\n') {
      throw Error(ErrorKind::kUnknown, "crypto: a crypt salt must not contain '$', ':' or newline");
    }
  }
  std::string salt(salt_in.substr(0, 16));
  std::string key(password);
  Wiped wipe_key(&key);
  const std::size_t key_len = key.size();

  // Digest B = SHA512(key, salt, key).
  Sha512 b_ctx;
  b_ctx.Add(key);
  b_ctx.Add(salt);
  b_ctx.Add(key);
  std::string b = b_ctx.Finish();
  Wiped wipe_b(&b);

  // Digest A = SHA512(key, salt, B repeated to the key's length, then key or B per key-length bit).
  Sha512 a_ctx;
  a_ctx.Add(key);
  a_ctx.Add(salt);
  std::string b_run = Repeat(b, key_len);
  Wiped wipe_b_run(&b_run);
  a_ctx.Add(b_run);
  for (std::size_t n = key_len; n > 0; n >>= 1) {
    if (n & 1) {
      a_ctx.Add(b);
    } else {
      a_ctx.Add(key);
    }
  }
  std::string a = a_ctx.Finish();
  Wiped wipe_a(&a);

  // P: SHA512(key repeated key_len times) stretched to key_len bytes.
  Sha512 dp_ctx;
  for (std::size_t i = 0; i < key_len; ++i) dp_ctx.Add(key);
  std::string dp = dp_ctx.Finish();
  Wiped wipe_dp(&dp);
  std::string p = Repeat(dp, key_len);
  Wiped wipe_p(&p);

  // S: SHA512(salt repeated 16 + A[0] times) cut to the salt's length.
  Sha512 ds_ctx;
  for (int i = 0; i < 16 + static_cast<unsigned char>(a[0]); ++i) ds_ctx.Add(salt);
  std::string ds = ds_ctx.Finish();
  std::string s = Repeat(ds, salt.size());

  // The rounds make brute force slower (fixed cost per guess).
  for (int i = 0; i < rounds; ++i) {
    Sha512 c;
    if (i & 1) {
      c.Add(p);
    } else {
      c.Add(a);
    }
    if (i % 3 != 0) c.Add(s);
    if (i % 7 != 0) c.Add(p);
    if (i & 1) {
      c.Add(a);
    } else {
      c.Add(p);
    }
    std::string next = c.Finish();
    a.swap(next);
    OPENSSL_cleanse(next.data(), next.size());
  }

  std::string out = "$6$";
  if (custom_rounds) out += "rounds=" + std::to_string(rounds) + "$";
  out += salt;
  out += "$";
  auto emit = [&](unsigned char b2, unsigned char b1, unsigned char b0, int chars) {
    std::uint32_t w =
        (static_cast<std::uint32_t>(b2) << 16) | (static_cast<std::uint32_t>(b1) << 8) | b0;
    for (int i = 0; i < chars; ++i) {
      out.push_back(kCryptAlphabet[w & 63]);
      w >>= 6;
    }
  };
  // The specification's byte order for the final encoding.
  static constexpr int kOrder[21][3] = {
      {0, 21, 42},  {22, 43, 1},  {44, 2, 23},  {3, 24, 45},  {25, 46, 4},  {47, 5, 26},
      {6, 27, 48},  {28, 49, 7},  {50, 8, 29},  {9, 30, 51},  {31, 52, 10}, {53, 11, 32},
      {12, 33, 54}, {34, 55, 13}, {56, 14, 35}, {15, 36, 57}, {37, 58, 16}, {59, 17, 38},
      {18, 39, 60}, {40, 61, 19}, {62, 20, 41}};
  auto byte = [&](int i) { return static_cast<unsigned char>(a[static_cast<std::size_t>(i)]); };
  for (const auto& g : kOrder) emit(byte(g[0]), byte(g[1]), byte(g[2]), 4);
  emit(0, 0, byte(63), 2);
  return out;
}

std::string NewSha512Crypt(std::string_view password) {
  return Sha512Crypt(password, RandomCryptSalt(16));
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tfk8s::internal
