#pragma once
// kubectl-shaped output for the `tfk8s` command (issue #40 item 5), pure (no I/O, no server):
// `-o jsonpath=TEMPLATE` as k8s.io/client-go/util/jsonpath evaluates it, `-o custom-columns=`
// as kubectl's custom-columns printer lays it out, quantities as resource.Quantity prints them
// and ages as duration.HumanDuration writes them. Unit-tested in tests/unit/test_cli_output.cpp.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/client.hpp"

namespace tfk8s::cli {

namespace jsonpath_internal {
struct Segment;  // One piece of a parsed template (text, action or range block).
}  // namespace jsonpath_internal

/// A parsed `-o jsonpath=` template: text with `{...}` actions, as kubectl reads it.
///
/// Actions: fields `.a.b` (a `\.` inside a name is a literal dot), `['key.with.dots']`, `.*`,
/// indexes `[n]`, `[-1]`, slices `[start:end:step]`, `[*]`, unions `[0,2]` / `['a','b']`,
/// recursive descent `..name`, filters `[?(@.a=="x")]` with `==`, `!=`, `<`, `>`, `<=`, `>=`
/// against a quoted string, a number, `true`/`false` or another `@` path, existence
/// `[?(@.a)]`, string literals `{"\n"}` / `{'\t'}`, `{@}` for the current object and
/// `{range PATH}...{end}` blocks (nested too).
///
/// Output, as kubectl prints it: the text between actions as is; each action's results joined
/// by one space; strings raw, numbers as Go prints them, objects and arrays as compact JSON,
/// null as `<nil>`. Differences from client-go, all deliberate: keys of an object are visited
/// in sorted order (Go's map order is random); `['a.b']` is the key "a.b" where the object
/// has one (a label such as 'app.kubernetes.io/name'), else the path `.a.b` as in client-go
/// (`\.` escapes a dot in a `.name` too); text after a
/// `{range}` over nothing is still printed; with allow_missing_keys, a filter whose left side
/// is missing does not match (client-go fails with "can only compare one element at a time");
/// numbers compare numerically whether integer or not.
class JsonPath {
 public:
  /// Parses `text`. A syntax error (unclosed action, unterminated quote/array/filter, a bad
  /// index, an unknown identifier or function, `{end}` without `{range}`, an empty template)
  /// throws ValidationError with field "output", the template as value and the reason.
  static JsonPath Parse(std::string_view text);

  /// The template evaluated on `data`. A key that is missing is an error "<key> is not found"
  /// unless `allow_missing_keys` (kubectl's --allow-missing-template-keys, true by default
  /// there); an index out of range, a filter comparing incompatible values, an index on a
  /// non-array are errors always. Errors are ValidationError (field "output", the template).
  /// `as_json` is `-o jsonpath-as-json=`: each action's results as an indented JSON array.
  [[nodiscard]] std::string Execute(const Json& data, bool allow_missing_keys = false,
                                    bool as_json = false) const;

  /// The template text as given.
  [[nodiscard]] const std::string& text() const noexcept { return text_; }

  /// Every value the template finds in `data`, its actions' results in order (what a
  /// custom-columns cell shows). Missing keys give no value; other evaluation errors throw as
  /// in Execute.
  [[nodiscard]] std::vector<Json> FindAll(const Json& data) const;

 private:
  std::string text_;
  std::shared_ptr<const std::vector<jsonpath_internal::Segment>> segments_;
};

/// Shorthand: JsonPath::Parse(text).Execute(data, allow_missing_keys).
std::string RenderJsonPath(std::string_view text, const Json& data,
                           bool allow_missing_keys = false);

/// One column of `-o custom-columns=`.
struct CustomColumn {
  std::string header;  ///< e.g. "NAME".
  std::string path;    ///< The JSONPath as a template, e.g. "{.metadata.name}".
};

/// Parses `NAME:.path,NAME2:path2` as kubectl does: comma-separated `<header>:<path>` pairs;
/// a path may be written `a.b`, `.a.b`, `{a.b}` or `{.a.b}` (kubectl's
/// RelaxedJSONPathExpression) and must be a valid JSONPath. Errors (an empty spec, a column
/// without `:`, a bad path) are ValidationError with field "output".
std::vector<CustomColumn> ParseCustomColumns(std::string_view spec);

/// The table `kubectl get -o custom-columns=SPEC` prints for `objects` (each a Kubernetes
/// object, or a List whose `items` are printed one per row): a header line unless
/// `no_headers`, then one line per object; a column's values are joined by ","; a missing
/// value prints `<none>`. Columns are aligned as kubectl's tab writer does (AlignColumns).
std::string CustomColumnsTable(std::string_view spec, const std::vector<Json>& objects,
                               bool no_headers = false);

/// Rows laid out as kubectl's printers do (text/tabwriter, minimum width 10, padding 3, spaces):
/// every column but the last is padded to max(longest cell + 3, 10) characters (counted in
/// UTF-8 code points); the last is not padded. Each row ends with "\n".
std::string AlignColumns(const std::vector<std::vector<std::string>>& rows);

/// CPU for display, as resource.Quantity prints a milli-CPU value (decimal SI, canonical):
/// 2 -> "2", 2.7 -> "2700m", 0.5 -> "500m", 0 -> "0". Fractions of a millicore round up, as
/// Kubernetes rounds. Reuses tfk8s::Quantity.
std::string CpuQuantityText(double cores);

/// Bytes for display, as resource.Quantity's String() prints a binary-SI value of that many
/// bytes: the largest binary suffix that divides exactly (17179869184 -> "16Gi", 536870912 ->
/// "512Mi", 1610612736 -> "1536Mi"), else the plain number (1500000000 -> "1500000000");
/// below 1024 decimal SI (512 -> "512", 1000 -> "1k"). Reuses tfk8s::Quantity.
std::string ByteQuantityText(std::int64_t bytes);

/// A duration as k8s.io/apimachinery/pkg/util/duration.HumanDuration writes it (kubectl's
/// AGE): below -1 s "<invalid>", -1 s..0 "0s"; under 2 minutes seconds ("119s"); under 10
/// minutes "XmYs" ("5m", "9m59s"); under 3 hours minutes ("179m"); under 8 hours "XhYm";
/// under 2 days hours ("47h"); under 8 days "XdYh"; under 2 years days ("729d"); under 8
/// years "XyYd"; then years ("8y"). Years are 365 days.
std::string HumanDuration(std::chrono::nanoseconds d);

/// kubectl's AGE of an object created at `rfc3339` (metadata.creationTimestamp, e.g.
/// "2024-05-01T10:00:00Z", fractions and offsets accepted) as seen at `now`: HumanDuration of
/// the difference, or "<unknown>" when the timestamp is empty or unreadable.
std::string Age(std::string_view rfc3339, std::chrono::system_clock::time_point now);

}  // namespace tfk8s::cli
