// Harness: TFClusterSpec::FromJson on arbitrary JSON (see spec_roundtrip.hpp for the properties),
// then RenderTFCluster.
#include "spec_roundtrip.hpp"
#include "tfk8s/tfcluster.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tfk8s::fuzz::SpecRoundTrip<tfk8s::TFClusterSpec>(
      data, size, [](const tfk8s::TFClusterSpec& s) { (void)tfk8s::RenderTFCluster(s); });
}
