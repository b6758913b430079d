// Result structs declared with TFK8S_FIELDS (include/tfk8s/fields.hpp): one list makes the
// members and the JSON, by the type rules of FieldJson.
#include <doctest/doctest.h>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/fields.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;

namespace {

struct Inner {
  int n = 0;
  [[nodiscard]] Json ToJson() const { return {{"n", n}, {"by", "ToJson"}}; }
};

#define TOY_ROW_FIELDS(X) X(std::string, label, "label", )
struct Row {
  TFK8S_FIELDS(TOY_ROW_FIELDS)
};

#define TOY_FIELDS(X)                                                     \
  X(bool, flag, "flag", = true)                                           \
  X(int, count, "count", = 3)                                             \
  X(double, ratio, "ratio", = 0.5)                                        \
  X(std::string, namespace_name, "namespace", = "team-a")                 \
  X(DevPhase, phase, "phase", = DevPhase::kRunning)                       \
  X(Inner, inner, "inner", )                                              \
  X(std::vector<Row>, rows, "rows", )                                     \
  X(std::vector<std::string>, names, "names", )                           \
  X(std::optional<int>, maybe, "maybe", )                                 \
  X(std::optional<std::chrono::system_clock::time_point>, when, "when", ) \
  X(std::chrono::seconds, took, "took", = std::chrono::seconds(90))       \
  X(std::chrono::milliseconds, waited, "waited", = std::chrono::milliseconds(1500))
struct Toy {
  TFK8S_FIELDS(TOY_FIELDS)
};

}  // namespace

TEST_SUITE("fields") {
  TEST_CASE("one list makes the members, their defaults and the JSON of every value type") {
    Toy t;
    CHECK(t.flag);
    CHECK(t.count == 3);
    CHECK(t.namespace_name == "team-a");
    t.inner.n = 7;
    t.rows = {Row{"a"}, Row{"b"}};
    t.names = {"x", "y"};
    Json j = FieldsToJson(t);
    CHECK(j == Json{{"flag", true},
                    {"count", 3},
                    {"ratio", 0.5},
                    {"namespace", "team-a"},
                    {"phase", "Running"},
                    {"inner", {{"n", 7}, {"by", "ToJson"}}},
                    {"rows", Json::array({{{"label", "a"}}, {{"label", "b"}}})},
                    {"names", {"x", "y"}},
                    {"maybe", nullptr},
                    {"when", nullptr},
                    {"took", 90},
                    {"waited", 1.5}});
    t.maybe = 4;
    t.when = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'500'250));
    j = FieldsToJson(t);
    CHECK(j.at("maybe") == 4);
    CHECK(j.at("when") == 1500.25);
  }

  TEST_CASE("a Kubernetes object's status: camelCase keys, RFC 3339 times, only the fields") {
    Toy t;
    t.inner.n = 7;
    t.rows = {Row{"a"}};
    t.when = std::chrono::system_clock::time_point(std::chrono::seconds(1714557600)) +
             std::chrono::milliseconds(250);
    Json j = FieldsToKubernetesJson(t);
    CHECK(j.at("when") == "2024-05-01T10:00:00Z");
    CHECK(j.at("namespace") == "team-a");
    CHECK(j.at("inner") == Json{{"n", 7}, {"by", "ToJson"}});
    CHECK(j.at("rows") == Json::array({{{"label", "a"}}}));
    CHECK(j.at("maybe") == nullptr);

    DevInstanceStatus dev;
    dev.ready_tools = {"ssh"};
    dev.started_at = std::chrono::system_clock::time_point(std::chrono::seconds(0));
    j = FieldsToKubernetesJson(dev);
    CHECK(j.at("readyTools") == Json::array({"ssh"}));
    CHECK(j.at("startedAt") == "1970-01-01T00:00:00Z");
    CHECK_FALSE(j.contains("ready_tools"));
    TFClusterStatus tf;
    tf.replicas.push_back({"worker", 0, "m-worker-0", "Running", "n1", 1, ""});
    j = FieldsToKubernetesJson(tf);
    CHECK_FALSE(j.contains("table"));  // the bindings' text table is not a field
    CHECK(j.at("replicas")[0].at("pod") == "m-worker-0");
    ScheduleStatus sched;
    j = FieldsToKubernetesJson(sched);
    CHECK(j.contains("lastScheduleTime"));
    CHECK(j.contains("apiVersion"));
  }

  TEST_CASE("every workload status's JSON holds each of its fields under its key") {
    auto keys = [](const auto& s) {
      std::vector<std::string> out;
      s.VisitFields([&out](const char* key, const auto&) { out.emplace_back(key); });
      return out;
    };
    TFClusterStatus tf;
    tf.replicas.push_back({"worker", 0, "m-worker-0", "Running", "n1", 1, ""});
    Json j = tf.ToJson();
    for (const auto& k : keys(tf)) CHECK_MESSAGE(j.contains(k), k);
    CHECK(j.at("namespace") == "");
    CHECK(j.at("not_ready") == 0);
    CHECK(j.at("replicas")[0].at("restarts") == 1);
    CHECK(j.contains("table"));

    DevInstanceStatus dev;
    j = dev.ToJson();
    for (const auto& k : keys(dev)) CHECK_MESSAGE(j.contains(k), k);
    CHECK(j.at("phase") == "Unknown");

    ScheduleStatus sched;
    j = sched.ToJson();
    for (const auto& k : keys(sched)) CHECK_MESSAGE(j.contains(k), k);
    CHECK(j.size() == keys(sched).size());

    JobRun run;
    run.duration = std::chrono::seconds(12);
    j = run.ToJson();
    for (const auto& k : keys(run)) CHECK_MESSAGE(j.contains(k), k);
    CHECK(j.at("duration") == 12);
    CHECK(j.at("finished") == false);
  }
}
