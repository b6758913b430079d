// Prometheus text exposition format 0.0.4 (controller/metrics.hpp).
#include "controller/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "tfk8s/error.hpp"

namespace tfk8s::internal::metrics {

namespace {

const char* TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

bool ValidMetricName(const std::string& s) {
  static const std::regex re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  return std::regex_match(s, re);
}

bool ValidLabelName(const std::string& s) {
  static const std::regex re("[a-zA-Z_][a-zA-Z0-9_]*");
  return std::regex_match(s, re) && s.rfind("__", 0) != 0;
}

std::string LabelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     const std::string& extra_name = "", const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out +=
        fmt::format("{}{}=\"{}\"", out.empty() ? "" : ",", names[i], EscapeLabelValue(values[i]));
  }
  if (!extra_name.empty()) {
    out += fmt::format("{}{}=\"{}\"", out.empty() ? "" : ",", extra_name, extra_value);
  }
  return out.empty() ? "" : "{" + out + "}";
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{}", v);
}

namespace {

// The format's escapes: backslash and newline always, the double quote inside label values.
std::string Escape(const std::string& text, bool quote) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) { return Escape(value, true); }

std::string EscapeHelp(const std::string& help) { return Escape(help, false); }

void Registry::Declare(const std::string& name, const std::string& help, Type type,
                       std::vector<std::string> label_names, std::vector<double> buckets) {
  if (!ValidMetricName(name)) throw ValidationError("metric", name, "is not a metric name");
  for (const auto& l : label_names) {
    if (!ValidLabelName(l) || (type == Type::kHistogram && l == "le")) {
      throw ValidationError("metric " + name, l, "is not a label name it may use");
    }
  }
  if (type == Type::kHistogram &&
      (buckets.empty() || !std::is_sorted(buckets.begin(), buckets.end()) ||
       std::adjacent_find(buckets.begin(), buckets.end()) != buckets.end())) {
    throw ValidationError("metric " + name, "buckets", "must be ascending and distinct");
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : families_) {
    if (f.name == name) throw ValidationError("metric", name, "is declared already");
  }
  Family f;
  f.name = name;
  f.help = help;
  f.type = type;
  f.label_names = std::move(label_names);
  f.buckets = std::move(buckets);
  families_.push_back(std::move(f));
}

Registry::Family& Registry::Find(const std::string& name, Type type) {
  for (auto& f : families_) {
    if (f.name == name) {
      if (f.type != type) {
        throw ValidationError("metric", name, fmt::format("is a {}", TypeName(f.type)));
      }
      return f;
    }
  }
  throw ValidationError("metric", name, "is not declared");
}

const Registry::Family& Registry::Find(const std::string& name) const {
  for (const auto& f : families_) {
    if (f.name == name) return f;
  }
  throw ValidationError("metric", name, "is not declared");
}

void Registry::CheckLabels(const Family& f, const std::vector<std::string>& label_values) {
  if (label_values.size() != f.label_names.size()) {
    throw ValidationError("metric " + f.name, fmt::format("{} label values", label_values.size()),
                          fmt::format("it has {} labels", f.label_names.size()));
  }
}

void Registry::Add(const std::string& name, const std::vector<std::string>& label_values,
                   double v) {
  if (!(v >= 0)) throw ValidationError("metric " + name, FormatValue(v), "a counter only grows");
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = Find(name, Type::kCounter);
  CheckLabels(f, label_values);
  f.series[label_values].value += v;
}

void Registry::Set(const std::string& name, const std::vector<std::string>& label_values,
                   double v) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = Find(name, Type::kGauge);
  CheckLabels(f, label_values);
  f.series[label_values].value = v;
}

void Registry::Reset(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  const Family& declared = Find(name);
  if (declared.type == Type::kHistogram) {
    throw ValidationError("metric", name, "is a histogram");
  }
  Find(name, declared.type).series.clear();
}

void Registry::Observe(const std::string& name, const std::vector<std::string>& label_values,
                       double v) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = Find(name, Type::kHistogram);
  CheckLabels(f, label_values);
  Series& s = f.series[label_values];
  if (s.hits.empty()) s.hits.assign(f.buckets.size(), 0);
  auto bucket = std::lower_bound(f.buckets.begin(), f.buckets.end(), v);  // first bound >= v
  if (bucket != f.buckets.end()) ++s.hits[static_cast<size_t>(bucket - f.buckets.begin())];
  s.value += v;
  ++s.count;
}

double Registry::Value(const std::string& name,
                       const std::vector<std::string>& label_values) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Family& f = Find(name);
  auto it = f.series.find(label_values);
  return it == f.series.end() ? 0 : it->second.value;
}

std::string Registry::Expose() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& f : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, EscapeHelp(f.help), f.name,
                       TypeName(f.type));
    for (const auto& [values, s] : f.series) {
      if (f.type != Type::kHistogram) {
        out +=
            fmt::format("{}{} {}\n", f.name, LabelSet(f.label_names, values), FormatValue(s.value));
        continue;
      }
      std::uint64_t cumulative = 0;
      for (size_t i = 0; i < f.buckets.size(); ++i) {
        cumulative += s.hits[i];
        out += fmt::format("{}_bucket{} {}\n", f.name,
                           LabelSet(f.label_names, values, "le", FormatValue(f.buckets[i])),
                           cumulative);
      }
      out += fmt::format("{}_bucket{} {}\n", f.name, LabelSet(f.label_names, values, "le", "+Inf"),
                         s.count);
      out += fmt::format("{}_sum{} {}\n", f.name, LabelSet(f.label_names, values),
                         FormatValue(s.value));
      out += fmt::format("{}_count{} {}\n", f.name, LabelSet(f.label_names, values), s.count);
    }
  }
  return out;
}

}  // namespace tfk8s::internal::metrics
