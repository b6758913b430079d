#pragma once
// The pure part of the `tfk8s` command (no I/O, no server): reading spec documents, finding
// fields a spec does not know, label selectors, the one-line error text and the completion
// scripts. Unit-tested in tests/unit/test_cli.cpp; main.cpp wires it to CLI11 and the library.

#include <chrono>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/client.hpp"

namespace tfk8s::cli {

/// Exit codes (docs/cli.md).
inline constexpr int kExitOk = 0;     ///< Success.
inline constexpr int kExitError = 1;  ///< Any error (validation, server, transport, config).
inline constexpr int kExitUsage = 2;  ///< Bad command line.

/// The apiVersion of a workload printed as a Kubernetes-style object (`get -o yaml`): a
/// client-side version, no CRD is involved.
inline constexpr const char* kObjectApiVersion = "tfk8s.io/v1";

/// Every document of a YAML or JSON stream, each a mapping in the spec's own format, or a
/// Kubernetes-style object of apiVersion kObjectApiVersion (what `get -o yaml` prints:
/// metadata.name/namespace/labels and spec become the spec; status is ignored). A document
/// may carry `kind: <expected_kind>` (removed here); another kind is a ValidationError naming
/// the document. Malformed YAML is a ValidationError whose message has the line number.
/// `origin` (a file name or "-") names the source in messages.
std::vector<Json> ReadSpecDocuments(std::string_view text, const std::string& origin,
                                    const std::string& expected_kind);

/// A document of a stream that mixes kinds.
struct KindedDocument {
  std::string kind;  ///< Its `kind`, one of the allowed ones.
  Json document;     ///< The spec, `kind` removed.
};

/// Every document of a YAML or JSON stream that may mix kinds: each must say `kind:`, one of
/// `kinds`; otherwise a ValidationError naming the document. Malformed YAML as in
/// ReadSpecDocuments.
std::vector<KindedDocument> ReadKindedDocuments(std::string_view text, const std::string& origin,
                                                const std::vector<std::string>& kinds);

/// One requirement of a label selector.
struct LabelRequirement {
  std::string key;
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kNotExists, kGreaterThan, kLessThan };
  Op op = Op::kExists;
  /// One value for =, ==, != , > and <; the set (sorted, distinct) for in and notin.
  std::vector<std::string> values;
};

/// Parses a selector as Kubernetes' labels.Parse does: comma-joined requirements `k=v`, `k==v`,
/// `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>N`, `k<N`; keys must be qualified names
/// and values label values. Anything else is a ValidationError (field "selector") saying where.
std::vector<LabelRequirement> ParseLabelSelector(std::string_view selector);
/// The selector as canonical text, as labels.Selector's String() writes it: requirements in the
/// given order joined by ",", `k=v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>N`,
/// `k<N`. ParseLabelSelector reads it back to the same requirements.
std::string FormatLabelSelector(const std::vector<LabelRequirement>& selector);
/// Whether `labels` satisfy every requirement.
bool MatchesSelector(const std::vector<LabelRequirement>& selector,
                     const std::map<std::string, std::string>& labels);

/// A duration as "90", "90s", "5m", "1h", "250ms" (plain numbers are seconds); a
/// ValidationError naming `field` otherwise.
std::chrono::milliseconds ParseDuration(std::string_view text, const std::string& field);

/// The error as one line for stderr: "error: <TypedReason>: <message>" (newlines folded).
std::string ErrorLine(const std::exception& error);

/// A command of the completion tree.
struct CommandNode {
  std::string name;
  std::vector<std::string> flags;  ///< e.g. "-n", "--namespace".
  std::vector<CommandNode> children;
  /// A verb that takes workload names: the noun whose `list -o name` completes them ("" none).
  std::string names_of;
};

/// A bash completion script (`source <(tfk8s completion bash)`) for the tree: subcommands by
/// position, then the flags of the command reached; for a verb that takes names (`get`,
/// `delete`, `logs` …), also the names `NOUN list -o name` prints, asked of the cluster with
/// the -n/--namespace, --context and --kubeconfig of the line being completed.
std::string BashCompletion(const CommandNode& root);
/// A zsh completion script (`source <(tfk8s completion zsh)`), through bashcompinit.
std::string ZshCompletion(const CommandNode& root);

}  // namespace tfk8s::cli
