// Harness: the watch-stream line decoder (internal::WatchDecoder, src/client/connection.cpp) and
// the decoding of error responses (MakeApiError, ParseQuotaExceededResources, src/error.cpp).
// Input: byte 0 = where to split the stream into two chunks, byte 1..2 = an HTTP status, the
// rest = the stream / body.
// Properties: the decoder throws only TransportError (DecodeError, ResponseTooLarge); feeding
// the bytes in two chunks gives the same events (or the same failure) as feeding them at once;
// pending() never exceeds what was fed; MakeApiError never throws and always builds a
// tfk8s::Error carrying the status.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "client/connection.hpp"
#include "fuzz_util.hpp"

namespace {

struct Decoded {
  std::vector<tfk8s::WatchEvent> events;
  bool failed = false;
  std::size_t pending = 0;
};

Decoded Decode(std::string_view first, std::string_view second) {
  Decoded d;
  // A small line limit, so that inputs up to -max_len reach the ResponseTooLarge path too.
  tfk8s::internal::WatchDecoder decoder(/*max_line=*/2048);
  try {
    for (auto& e : decoder.Feed(first)) d.events.push_back(std::move(e));
    for (auto& e : decoder.Feed(second)) d.events.push_back(std::move(e));
    d.pending = decoder.pending();
  } catch (const tfk8s::TransportError&) {
    d.failed = true;
  } catch (const std::exception& e) {
    tfk8s::fuzz::Fail("WatchDecoder::Feed threw something other than TransportError", e.what());
  }
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  if (size < 3) return 0;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 3, size - 3);
  std::size_t split = bytes.empty() ? 0 : data[0] % (bytes.size() + 1);
  int status = 100 + (data[1] << 8 | data[2]) % 500;

  Decoded whole = Decode(bytes, {});
  Decoded parts = Decode(bytes.substr(0, split), bytes.substr(split));
  Check(whole.failed == parts.failed, "chunking changes whether decoding fails",
        std::string(bytes));
  if (!whole.failed) {
    Check(whole.events.size() == parts.events.size(), "chunking changes the events",
          std::string(bytes));
    for (std::size_t i = 0; i < whole.events.size(); ++i) {
      Check(whole.events[i].type == parts.events[i].type &&
                whole.events[i].object == parts.events[i].object,
            "chunking changes an event", std::string(bytes));
    }
    Check(whole.pending <= bytes.size() && whole.pending == parts.pending, "pending() is wrong",
          std::string(bytes));
  }

  std::exception_ptr error;
  Check(Guarded("MakeApiError",
                [&] { error = tfk8s::MakeApiError(status, bytes, "GET fuzz", std::nullopt); }),
        "MakeApiError threw", std::string(bytes));
  Check(error != nullptr, "MakeApiError returned no error", std::string(bytes));
  try {
    std::rethrow_exception(error);
  } catch (const tfk8s::Error& e) {
    Check(e.http_code() == status, "the error lost the HTTP status", std::string(bytes));
    Check(std::string_view(e.what()).size() <= 64 * 1024 + bytes.size() + 1024,
          "the error message is unbounded", std::string(bytes));
  } catch (...) {
    Fail("MakeApiError built a non-tfk8s exception", std::string(bytes));
  }
  Check(Guarded("ParseQuotaExceededResources",
                [&] { (void)tfk8s::ParseQuotaExceededResources(bytes); }),
        "ParseQuotaExceededResources threw", std::string(bytes));
  return 0;
}
