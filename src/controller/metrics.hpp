#pragma once
// Internal: metrics in Prometheus' text exposition format (version 0.0.4), for the controller's
// /metrics (issue #38). Families are declared once (name, help, type, label names); series are
// addressed by their label values. Written by hand — a counter, a gauge, a histogram and the
// format's escaping rules are all it takes — and tested byte for byte.
//
//   # HELP tfk8s_alerts_sent_total Alerts delivered to their target.
//   # TYPE tfk8s_alerts_sent_total counter
//   tfk8s_alerts_sent_total{namespace="team-a"} 3

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tfk8s::internal::metrics {

enum class Type { kCounter, kGauge, kHistogram };

/// Thread-safe: any thread may update while another exposes.
class Registry {
 public:
  /// Declares a family; throws ValidationError for a bad metric or label name, or a name
  /// declared before. A histogram's buckets are its upper bounds, ascending (+Inf is implied).
  void Declare(const std::string& name, const std::string& help, Type type,
               std::vector<std::string> label_names, std::vector<double> buckets = {});

  /// Adds `v` (>= 0) to a counter's series (created at 0).
  void Add(const std::string& name, const std::vector<std::string>& label_values, double v = 1);
  /// Sets a gauge's series.
  void Set(const std::string& name, const std::vector<std::string>& label_values, double v);
  /// Removes every series of a gauge (before setting those that exist now: a gauge of
  /// workloads by phase must not keep a phase nothing is in any more) or of a counter (it
  /// starts again from zero, which Prometheus reads as a counter reset).
  void Reset(const std::string& name);
  /// Records one observation in a histogram's series.
  void Observe(const std::string& name, const std::vector<std::string>& label_values, double v);

  /// The current value of a counter's or gauge's series (0 when absent); for tests and
  /// readiness logic.
  [[nodiscard]] double Value(const std::string& name,
                             const std::vector<std::string>& label_values) const;

  /// Every family in declaration order, each series sorted by its label values.
  [[nodiscard]] std::string Expose() const;

 private:
  struct Series {
    double value = 0;                 // counter, gauge; a histogram's sum
    std::vector<std::uint64_t> hits;  // a histogram's per-bucket counts (not cumulative)
    std::uint64_t count = 0;          // a histogram's observations
  };
  struct Family {
    std::string name, help;
    Type type = Type::kCounter;
    std::vector<std::string> label_names;
    std::vector<double> buckets;
    std::map<std::vector<std::string>, Series> series;
  };
  Family& Find(const std::string& name, Type type);
  const Family& Find(const std::string& name) const;
  static void CheckLabels(const Family& f, const std::vector<std::string>& label_values);

  mutable std::mutex mu_;
  std::vector<Family> families_;
};

/// A sample value as Prometheus writes one: integers without a fraction, others in the
/// shortest form that reads back exactly, "+Inf", "-Inf", "NaN".
std::string FormatValue(double v);
/// A label value escaped for the format (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& value);
/// HELP text escaped for the format (backslash, newline).
std::string EscapeHelp(const std::string& help);

}  // namespace tfk8s::internal::metrics
