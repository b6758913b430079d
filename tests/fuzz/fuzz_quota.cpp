// Harness: the quota code that reads server objects (src/workloads/quota*.cpp): UsageOf on a
// ResourceQuota, ParseResourceList, QuotaDemandOf and EvaluateQuota on arbitrary JSON (Quota has
// no spec FromJson: its inputs from outside are the server's ResourceQuota, LimitRange and
// workload objects). Input: a JSON object {"objects": [...], "quotas": [...]} or any JSON value
// (then used as both).
// Properties: only tfk8s errors escape; a usage's resources are sorted and unique; a FitResult
// that fits has no shortfalls.

#include <cstddef>
#include <cstdint>

#include "fuzz_util.hpp"
#include "tfk8s/quota.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  nlohmann::json input = ParseJsonInput(data, size);
  if (input.is_discarded()) return 0;
  std::vector<nlohmann::json> objects{input};
  std::vector<nlohmann::json> quotas{input};
  if (input.is_object() && input.contains("objects") && input["objects"].is_array()) {
    objects = input["objects"].get<std::vector<nlohmann::json>>();
  }
  if (input.is_object() && input.contains("quotas") && input["quotas"].is_array()) {
    quotas = input["quotas"].get<std::vector<nlohmann::json>>();
  }
  for (const auto& q : quotas) {
    tfk8s::QuotaUsage usage;
    if (Guarded("UsageOf", [&] { usage = tfk8s::UsageOf(q); })) {
      for (std::size_t i = 1; i < usage.resources.size(); ++i) {
        Check(usage.resources[i - 1].resource < usage.resources[i].resource,
              "UsageOf: resources not sorted/unique", Dump(q));
      }
      Guarded("QuotaUsage::ToJson", [&] { (void)usage.ToJson(); });
    }
    Guarded("ParseResourceList", [&] { (void)tfk8s::ParseResourceList(q, "fuzz"); });
  }
  Guarded("QuotaDemandOf", [&] { (void)tfk8s::QuotaDemandOf(objects); });
  tfk8s::FitResult fit;
  if (Guarded("EvaluateQuota", [&] { fit = tfk8s::EvaluateQuota(objects, quotas); })) {
    if (fit.fits) Check(fit.shortfalls.empty(), "fits but has shortfalls", Dump(input));
  }
  return 0;
}
