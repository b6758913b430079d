// The specs of tests/data/specs/agreement.json, read the way the library reads every spec
// (Spec::FromJson, Validate, Render): each is accepted, or refused with a ValidationError naming
// the table's field. Python (tests/python/test_spec_agreement.py) and the CLI
// (tests/cli/test_cli.py::test_specs_agree_with_the_library) check the same table, so the three
// accept and refuse the same specs (defaults and inference live only in FromJson).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/quota.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;

namespace {

Json Table() {
  std::ifstream in(std::string(TFK8S_TEST_DATA_DIR) + "/specs/agreement.json");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str());
}

// "" when accepted, else the refused field.
std::string Verdict(const std::string& kind, const Json& spec) {
  try {
    if (kind == "TFCluster") {
      auto s = TFClusterSpec::FromJson(spec);
      s.Validate();
      (void)RenderTFCluster(s);
    } else if (kind == "DevInstance") {
      auto s = DevInstanceSpec::FromJson(spec);
      s.Validate();
      (void)RenderDevInstance(s);
    } else if (kind == "ScheduledJob") {
      auto s = ScheduledJobSpec::FromJson(spec);
      s.Validate();
      (void)RenderScheduledJob(s);
    } else {
      FAIL("unknown kind in the table: " << kind);
    }
  } catch (const ValidationError& e) {
    return e.field().empty() ? "<no field>" : e.field();
  }
  return "";
}

}  // namespace

TEST_CASE("spec agreement: the C++ library accepts and refuses the table's specs") {
  const Json table = Table();
  REQUIRE(table["cases"].size() >= 10);
  for (const auto& c : table["cases"]) {
    const std::string expected = c["field"].is_null() ? "" : c["field"].get<std::string>();
    INFO(c["case"].get<std::string>());
    CHECK(Verdict(c["kind"], c["spec"]) == expected);
  }
}

TEST_CASE("spec agreement: an inferred strategy follows the parameter servers") {
  const Json table = Table();
  for (const auto& c : table["cases"]) {
    if (c["kind"] != "TFCluster" || !c["field"].is_null() || c["spec"].contains("strategy")) {
      continue;
    }
    auto s = TFClusterSpec::FromJson(c["spec"]);
    CHECK(s.strategy ==
          (s.ps.replicas > 0 ? TFStrategy::kParameterServer : TFStrategy::kMultiWorkerMirrored));
    // Stored with the strategy it inferred: a reload reads the same one.
    CHECK(s.ToJson()["strategy"] == ToString(s.strategy));
  }
}

TEST_CASE("spec agreement: unknown fields are refused at their paths, every one named") {
  Json input = {{"name", "a"},
                {"worker", {{"replica", 2}, {"replicas", 1}}},
                {"sesion", {{"image", "x"}}},
                {"labels", {{"team", "a"}}},
                {"tensorboard", nullptr},
                {"notes", ""}};
  try {
    (void)TFClusterSpec::FromJson(input);
    FAIL("a misspelt key was accepted");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "sesion");
    CHECK(e.server_message() == "is not a field of TFCluster (nor worker.replica)");
  }
  // Known keys, and unknown ones with nothing in them (null, ""), pass; so does every spec's
  // own JSON (what is stored on the objects reads back).
  input.erase("sesion");
  input["worker"].erase("replica");
  const TFClusterSpec s = TFClusterSpec::FromJson(input);
  CHECK(s.worker.replicas == 1);
  CHECK(TFClusterSpec::FromJson(s.ToJson()).ToJson() == s.ToJson());
  QuotaSpec q;
  q.name = "team";
  q.hard = {{"cpu", "4"}};
  CHECK(QuotaSpec::FromJson(q.ToJson()).ToJson() == q.ToJson());
  Json bad_quota = q.ToJson();
  bad_quota["limit_range"] = {{"max", {{"cpu", "2"}}}, {"maximum", {{"cpu", "2"}}}};
  CHECK_THROWS_WITH_AS(QuotaSpec::FromJson(bad_quota), doctest::Contains("limit_range.maximum"),
                       ValidationError);
}
