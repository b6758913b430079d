// Harness: ScheduledJobSpec::FromJson on arbitrary JSON (see spec_roundtrip.hpp for the
// properties), then RenderScheduledJob.
#include "spec_roundtrip.hpp"
#include "tfk8s/scheduledjob.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tfk8s::fuzz::SpecRoundTrip<tfk8s::ScheduledJobSpec>(
      data, size, [](const tfk8s::ScheduledJobSpec& s) { (void)tfk8s::RenderScheduledJob(s); });
}
