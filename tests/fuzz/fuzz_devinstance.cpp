// Harness: DevInstanceSpec::FromJson on arbitrary JSON (see spec_roundtrip.hpp for the
// properties), then RenderDevInstance.
#include "spec_roundtrip.hpp"
#include "tfk8s/devinstance.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tfk8s::fuzz::SpecRoundTrip<tfk8s::DevInstanceSpec>(
      data, size, [](const tfk8s::DevInstanceSpec& s) { (void)tfk8s::RenderDevInstance(s); });
}
