// Harness: strict base64 (internal::Base64Decode / Base64Encode, src/util/base64.cpp), which
// reads kubeconfig `*-data` fields, Secrets' data and exec plugin output.
// Properties: nothing throws; a refusal's reason is one of the decoder's fixed texts with
// offsets, never the input (it may be a key); decoding never yields more than 3 bytes per 4
// symbols; what decodes re-encodes to the same text without line breaks, except for the unused
// low bits of the last symbol before padding (Go's StdEncoding accepts them too), and that
// canonical text decodes to the same bytes; any bytes encode to text that decodes back to them.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "util/base64.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  using tfk8s::internal::Base64Decode;
  using tfk8s::internal::Base64Encode;
  const std::string text(reinterpret_cast<const char*>(data), size);

  std::string why;
  std::optional<std::string> decoded;
  Check(Guarded("Base64Decode", [&] { decoded = Base64Decode(text, &why); }), "Base64Decode threw",
        text);
  Check(Guarded("Base64Decode(no error)",
                [&] {
                  Check(Base64Decode(text) == decoded,
                        "the error "
                        "pointer changes the result",
                        text);
                }),
        "Base64Decode threw", text);
  std::string stripped;
  for (char c : text) {
    if (c != '\r' && c != '\n') stripped += c;
  }
  if (!decoded) {
    // The reason is one of the fixed texts with its numbers (offsets, counts), never input.
    std::string shape;
    for (char c : why) {
      if (c < '0' || c > '9') shape += c;
    }
    Check(shape == "data continues after padding (offset )" ||
              shape == "misplaced padding at offset " || shape == "invalid character at offset " ||
              shape == "misplaced padding before offset " ||
              shape == "truncated input:  symbols is not a multiple of ",
          "the reason is not one of Base64Decode's own", why);
  } else {
    Check(decoded->size() <= stripped.size() / 4 * 3, "more bytes than 3 per 4 symbols", text);
    const std::string canonical = Base64Encode(*decoded);
    Check(canonical.size() == stripped.size(), "the re-encoding has another length", text);
    const std::size_t last = !stripped.empty() && stripped.back() == '='
                                 ? stripped.find_last_not_of('=')
                                 : std::string::npos;
    for (std::size_t i = 0; i < stripped.size(); ++i) {
      if (i != last) Check(canonical[i] == stripped[i], "the re-encoding differs", text);
    }
    Check(Base64Decode(canonical) == decoded, "the canonical text decodes to other bytes", text);
  }

  // Any bytes: encoding then decoding gives them back.
  const std::string encoded = Base64Encode(text);
  Check(encoded.size() == (size + 2) / 3 * 4, "the encoding's length is not 4 per 3 bytes", text);
  Check(Base64Decode(encoded) == text, "encode then decode lost bytes", text);
  return 0;
}
