// The CSPRNG helpers and password hashes behind DevInstance credentials, checked against
// known-answer vectors from the formats' own sources (jupyter_server's tests and docstrings,
// Drepper's SHA-crypt specification, glibc's crypt(3) via `openssl passwd -6`, the argon2
// reference implementation's test.c).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>

#include "http/crypto.hpp"
#include "util/base64.hpp"

using namespace tfk8s::internal;

TEST_SUITE("crypto") {
  TEST_CASE("random bytes: requested length, different every call") {
    CHECK(RandomBytes(0).empty());
    CHECK(RandomBytes(1).size() == 1);
    CHECK(RandomBytes(64).size() == 64);
    std::set<std::string> seen;
    for (int i = 0; i < 100; ++i) seen.insert(RandomBytes(16));
    CHECK(seen.size() == 100);
  }

  TEST_CASE("passwords: 192 bits, URL-safe alphabet, unique, roughly uniform") {
    std::string p = GeneratePassword();
    CHECK(kPasswordBytes * 8 >= 128);
    CHECK(p.size() == 32);  // 24 bytes of base64url, unpadded
    auto url_safe = [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '-' || c == '_';
    };
    std::set<std::string> seen;
    std::array<int, 128> counts{};
    constexpr int kSamples = 2000;
    for (int i = 0; i < kSamples; ++i) {
      std::string s = GeneratePassword();
      REQUIRE(s.size() == 32);
      CHECK(std::all_of(s.begin(), s.end(), url_safe));
      seen.insert(s);
      for (char c : s) ++counts[static_cast<unsigned char>(c)];
    }
    CHECK(seen.size() == kSamples);
    // Entropy sanity: 64 symbols, 64000 draws → about 1000 each; a broken generator (constant
    // bytes, a reduced alphabet) fails this by far. The bounds are > 8 standard deviations.
    int used = 0;
    for (int n : counts) {
      if (n == 0) continue;
      ++used;
      CHECK(n > 700);
      CHECK(n < 1300);
    }
    CHECK(used == 64);
    CHECK(GeneratePassword(16).size() == 22);  // the 128-bit floor
  }

  TEST_CASE("base64url and hex") {
    CHECK(Base64UrlEncode("") == "");
    CHECK(Base64UrlEncode("f") == "Zg");
    CHECK(Base64UrlEncode("fo") == "Zm8");
    CHECK(Base64UrlEncode("foo") == "Zm9v");
    CHECK(Base64UrlEncode("foob") == "Zm9vYg");
    CHECK(Base64UrlEncode(std::string("\xfb\xff\xbf", 3)) == "-_-_");
    CHECK(HexEncode(std::string("\x00\x01\xab\xff", 4)) == "0001abff");
  }

  TEST_CASE("digests: FIPS 180 vectors") {
    CHECK(HexEncode(Digest("sha1", "abc")) == "a9993e364706816aba3e25717850c26c9cd0d89d");
    CHECK(HexEncode(Digest("sha256", "abc")) ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(HexEncode(Digest("sha512", "abc")) ==
          "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
          "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");
    CHECK_THROWS(Digest("md5", "abc"));
  }

  TEST_CASE("Jupyter hash: jupyter_server's own vectors verify") {
    // jupyter_server/auth/security.py docstring: passwd_check(<this>, 'mypassword') is True.
    CHECK(JupyterPasswordHash("mypassword", "0e112c3ddfce", "sha1") ==
          "sha1:0e112c3ddfce:a68df677475c2b47b6e86d0467eec97ac5f4b85a");
    // tests/auth/test_security.py (GH issue #4524): a non-ASCII password, hashed as UTF-8.
    CHECK(JupyterPasswordHash("\xc5\x82"
                              "e\xc2\xb6\xc5\xa7\xe2\x86\x90\xe2\x86\x93\xe2\x86\x92",
                              "23862bc21dd3", "sha1") ==
          "sha1:23862bc21dd3:7a415a95ae4580582e314072143d9c382c491e4f");
    // The SHA-512 form tfk8s uses (hashlib.sha512(b"mypassword" + b"0123456789abcdef")).
    CHECK(JupyterPasswordHash("mypassword", "0123456789abcdef") ==
          "sha512:0123456789abcdef:63d79bbf61fd390135c11dbe1ba9d32a62e050d0f928844ce8d41669190682"
          "40098b26b80bf82fdb54297930049ba48a690ee4ec271f864596a0aa2fc5f3aef8");
    CHECK_THROWS(JupyterPasswordHash("p", "bad:salt"));
  }

  TEST_CASE("argon2id: the reference implementation's vector and Jupyter's parameters") {
    // phc-winner-argon2 test.c (argon2id, v=19, t=2, m=2^16 KiB, p=1).
    CHECK(Argon2idHash("password", "somesalt", {2, 65536, 1}) ==
          "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc");
    // jupyter_server's parameters (8 lanes, computed here on one thread), as argon2-cffi's
    // hash_secret(b"password", b"somesalt", time_cost=10, memory_cost=10240, parallelism=8,
    // hash_len=32, type=Type.ID) gives it.
    CHECK(
        Argon2idHash("password", "somesalt") ==
        "$argon2id$v=19$m=10240,t=10,p=8$c29tZXNhbHQ$Nk/jf0b89NmqMSX3xNuGovncIqcOLGq9M+AJj2VPnkQ");
    CHECK_THROWS(Argon2idHash("password", "short"));
  }

  TEST_CASE("Jupyter hash: argon2 with a fresh 16-byte salt, recomputable from it") {
    std::string pw = GeneratePassword();
    std::string h1 = NewJupyterPasswordHash(pw);
    std::string h2 = NewJupyterPasswordHash(pw);
    CHECK(h1 != h2);
    const std::string prefix = "argon2:$argon2id$v=19$m=10240,t=10,p=8$";
    REQUIRE(h1.rfind(prefix, 0) == 0);
    // Recompute as argon2's verify does: the salt is the field after the parameters.
    std::string salt_b64 = h1.substr(prefix.size(), h1.find('$', prefix.size()) - prefix.size());
    CHECK(salt_b64.size() == 22);  // 16 bytes, unpadded base64
    auto salt = tfk8s::internal::Base64Decode(salt_b64 + "==");
    REQUIRE(salt);
    CHECK(salt->size() == 16);
    CHECK(ConstantTimeEquals("argon2:" + Argon2idHash(pw, *salt), h1));
    CHECK_FALSE(ConstantTimeEquals("argon2:" + Argon2idHash(pw + "x", *salt), h1));
    CHECK(h1.find(pw) == std::string::npos);
  }

  TEST_CASE("Jupyter SHA-512 fallback hash: fresh salt each time, recomputable from its own salt") {
    std::string pw = GeneratePassword();
    std::string h1 = NewJupyterSha512Hash(pw);
    std::string h2 = NewJupyterSha512Hash(pw);
    CHECK(h1 != h2);
    CHECK(h1.rfind("sha512:", 0) == 0);
    // Verify as passwd_check() does: split on the first two ':' and recompute.
    auto first = h1.find(':');
    auto second = h1.find(':', first + 1);
    std::string salt = h1.substr(first + 1, second - first - 1);
    CHECK(salt.size() == 16);
    CHECK(ConstantTimeEquals(JupyterPasswordHash(pw, salt), h1));
    CHECK_FALSE(ConstantTimeEquals(JupyterPasswordHash(pw + "x", salt), h1));
    CHECK(h1.find(pw) == std::string::npos);
  }

  TEST_CASE("SHA-512 crypt: specification and glibc vectors") {
    // From "Unix crypt using SHA-256 and SHA-512" (Drepper), test vectors.
    CHECK(Sha512Crypt("Hello world!", "saltstring") ==
          "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdF"
          "CoEOfaS35inz1");
    CHECK(Sha512Crypt("Hello world!", "saltstringsaltstring", 10000) ==
          "$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVeXbDWra3Oeqh0sbHbbMCVNSnCM/UrjmM0Dp8"
          "vOuZeHBy/YTBmSK6H9qs/y3RnOaw5v.");
    CHECK(Sha512Crypt("This is just a test", "toolongsaltstring", 5000) ==
          "$6$toolongsaltstrin$lQ8jolhgVRVhY4b5pZKaysCLi0QBxGoNeKQzQ3glMhwllF7oGDZxUhx1yxdYcz/e1JSb"
          "q3y6JMxxl8audkUEm0");
    // glibc crypt(3): an empty password, and a key longer than one SHA-512 block.
    CHECK(Sha512Crypt("", "abc") ==
          "$6$abc$mJP3a6FyA8uCnzRtlnNypPwjnvpi5TP9qOrInzrfDmwxUQG38PkpCPdqfTb8JQfAngapMxeim4AZ..hSd"
          "RRzD.");
    CHECK(Sha512Crypt(std::string(200, 'x'), "0123456789abcdef") ==
          "$6$0123456789abcdef$Rru0YcJdWAfylTzYkMBaHfdgEjT2jeUewuTfATTJEn/Inu1Ma3JNgneCwDVl2NaWmk"
          "gDKZzdSV8VisQ10exaF.");
    CHECK_THROWS(Sha512Crypt("p", "bad$salt"));
  }

  TEST_CASE("SHA-512 crypt: fresh 16-character salts") {
    std::string h1 = NewSha512Crypt("secret");
    std::string h2 = NewSha512Crypt("secret");
    CHECK(h1 != h2);
    REQUIRE(h1.size() == 3 + 16 + 1 + 86);
    CHECK(h1.rfind("$6$", 0) == 0);
    std::string salt = h1.substr(3, 16);
    CHECK(Sha512Crypt("secret", salt) == h1);
  }

  TEST_CASE("constant-time comparison") {
    CHECK(ConstantTimeEquals("", ""));
    CHECK(ConstantTimeEquals("abc", "abc"));
    CHECK_FALSE(ConstantTimeEquals("abc", "abd"));
    CHECK_FALSE(ConstantTimeEquals("abc", "ab"));
  }
}
