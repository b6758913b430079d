#pragma once
// The property shared by the workload-spec harnesses: FromJson accepts or rejects with a
// tfk8s error; whatever it accepts round-trips (FromJson(ToJson(s)).ToJson() == ToJson(s));
// rendering an accepted spec validates and either builds objects or throws a tfk8s error.

#include <cstddef>
#include <cstdint>

#include "fuzz_util.hpp"

namespace tfk8s::fuzz {

template <typename Spec, typename Render>
int SpecRoundTrip(const std::uint8_t* data, std::size_t size, Render render) {
  nlohmann::json input = ParseJsonInput(data, size);
  if (input.is_discarded()) return 0;
  Spec spec;
  if (!Guarded("FromJson", [&] { spec = Spec::FromJson(input); })) return 0;
  nlohmann::json out;
  Check(Guarded("ToJson", [&] { out = spec.ToJson(); }), "ToJson threw", Dump(input));
  Spec again;
  Check(Guarded("FromJson(ToJson)", [&] { again = Spec::FromJson(out); }),
        "FromJson(ToJson(spec)) threw", Dump(input) + "\n--- ToJson:\n" + Dump(out));
  nlohmann::json out2 = again.ToJson();
  Check(out2 == out, "FromJson(ToJson(spec)) != spec",
        Dump(input) + "\n--- ToJson:\n" + Dump(out) + "\n--- again:\n" + Dump(out2));
  Guarded("Render", [&] { render(spec); });
  return 0;
}

}  // namespace tfk8s::fuzz
