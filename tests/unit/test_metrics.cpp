// Prometheus text exposition (controller/metrics.hpp), byte for byte: counters, gauges,
// histograms (cumulative buckets, +Inf, _sum, _count), escaping, and refused misuse.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "controller/metrics.hpp"
#include "tfk8s/error.hpp"

using namespace tfk8s;
using namespace tfk8s::internal::metrics;

TEST_CASE("metrics: counters and gauges in the text format, series sorted by label values") {
  Registry r;
  r.Declare("tfk8s_alerts_sent_total", "Alerts delivered to their target.", Type::kCounter,
            {"namespace"});
  r.Declare("tfk8s_workloads", "Workloads by kind and phase.", Type::kGauge, {"kind", "phase"});
  r.Declare("tfk8s_leader", "1 while this process leads.", Type::kGauge, {});
  r.Add("tfk8s_alerts_sent_total", {"team-b"});
  r.Add("tfk8s_alerts_sent_total", {"team-a"}, 2);
  r.Add("tfk8s_alerts_sent_total", {"team-a"});
  r.Set("tfk8s_workloads", {"TFCluster", "Running"}, 3);
  r.Set("tfk8s_workloads", {"DevInstance", "Stopped"}, 0.5);
  r.Set("tfk8s_leader", {}, 1);
  CHECK(r.Expose() ==
        "# HELP tfk8s_alerts_sent_total Alerts delivered to their target.\n"
        "# TYPE tfk8s_alerts_sent_total counter\n"
        "tfk8s_alerts_sent_total{namespace=\"team-a\"} 3\n"
        "tfk8s_alerts_sent_total{namespace=\"team-b\"} 1\n"
        "# HELP tfk8s_workloads Workloads by kind and phase.\n"
        "# TYPE tfk8s_workloads gauge\n"
        "tfk8s_workloads{kind=\"DevInstance\",phase=\"Stopped\"} 0.5\n"
        "tfk8s_workloads{kind=\"TFCluster\",phase=\"Running\"} 3\n"
        "# HELP tfk8s_leader 1 while this process leads.\n"
        "# TYPE tfk8s_leader gauge\n"
        "tfk8s_leader 1\n");
  CHECK(r.Value("tfk8s_alerts_sent_total", {"team-a"}) == 3);
  CHECK(r.Value("tfk8s_alerts_sent_total", {"nobody"}) == 0);
  r.Reset("tfk8s_workloads");
  CHECK(r.Expose().find("tfk8s_workloads{") == std::string::npos);
  r.Reset("tfk8s_alerts_sent_total");  // a counter starts again from zero
  CHECK(r.Expose().find("tfk8s_alerts_sent_total{") == std::string::npos);
  CHECK(r.Value("tfk8s_alerts_sent_total", {"team-a"}) == 0);
  r.Add("tfk8s_alerts_sent_total", {"team-a"});
  CHECK(r.Value("tfk8s_alerts_sent_total", {"team-a"}) == 1);
}

TEST_CASE("metrics: a histogram has cumulative buckets, +Inf, _sum and _count") {
  Registry r;
  r.Declare("tfk8s_api_request_seconds", "API request latency.", Type::kHistogram, {"verb"},
            {0.01, 0.1, 1});
  for (double v : {0.005, 0.01, 0.05, 0.5, 3.0}) r.Observe("tfk8s_api_request_seconds", {"GET"}, v);
  CHECK(r.Expose() ==
        "# HELP tfk8s_api_request_seconds API request latency.\n"
        "# TYPE tfk8s_api_request_seconds histogram\n"
        "tfk8s_api_request_seconds_bucket{verb=\"GET\",le=\"0.01\"} 2\n"
        "tfk8s_api_request_seconds_bucket{verb=\"GET\",le=\"0.1\"} 3\n"
        "tfk8s_api_request_seconds_bucket{verb=\"GET\",le=\"1\"} 4\n"
        "tfk8s_api_request_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 5\n"
        "tfk8s_api_request_seconds_sum{verb=\"GET\"} 3.565\n"
        "tfk8s_api_request_seconds_count{verb=\"GET\"} 5\n");
}

TEST_CASE("metrics: label values and help are escaped, values written as Prometheus reads them") {
  Registry r;
  r.Declare("m", "a \\ backslash\nand a newline", Type::kGauge, {"owner"});
  r.Set("m", {"a\"b\\c\nd"}, 1);
  CHECK(r.Expose() ==
        "# HELP m a \\\\ backslash\\nand a newline\n"
        "# TYPE m gauge\n"
        "m{owner=\"a\\\"b\\\\c\\nd\"} 1\n");
  CHECK(FormatValue(0) == "0");
  CHECK(FormatValue(-2) == "-2");
  CHECK(FormatValue(1e20) == "1e+20");
  CHECK(FormatValue(0.1) == "0.1");
  CHECK(FormatValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(FormatValue(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(FormatValue(std::nan("")) == "NaN");
}

TEST_CASE("metrics: misuse is refused, naming the metric") {
  Registry r;
  CHECK_THROWS_AS(r.Declare("9lives", "", Type::kGauge, {}), ValidationError);
  CHECK_THROWS_AS(r.Declare("m", "", Type::kGauge, {"__reserved"}), ValidationError);
  CHECK_THROWS_AS(r.Declare("h", "", Type::kHistogram, {"le"}, {1}), ValidationError);
  CHECK_THROWS_AS(r.Declare("h", "", Type::kHistogram, {}, {1, 0.5}), ValidationError);
  r.Declare("c", "", Type::kCounter, {"a"});
  CHECK_THROWS_AS(r.Declare("c", "", Type::kGauge, {}), ValidationError);
  CHECK_THROWS_AS(r.Add("c", {"x"}, -1), ValidationError);
  CHECK_THROWS_AS(r.Add("c", {}), ValidationError);
  CHECK_THROWS_AS(r.Set("c", {"x"}, 1), ValidationError);
  CHECK_THROWS_AS(r.Add("nope", {}), ValidationError);
  try {
    r.Add("c", {"x", "y"});
    FAIL("accepted two label values for one label");
  } catch (const ValidationError& e) {
    CHECK(e.field() == "metric c");
  }
}

TEST_CASE("metrics: updates from several threads all count") {
  Registry r;
  r.Declare("n_total", "", Type::kCounter, {});
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r] {
      for (int i = 0; i < 1000; ++i) r.Add("n_total", {});
    });
  }
  for (int i = 0; i < 50; ++i)
    CHECK(r.Expose().find("# TYPE n_total counter") != std::string::npos);
  for (auto& t : threads) t.join();
  CHECK(r.Value("n_total", {}) == 4000);
}
