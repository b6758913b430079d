#pragma once
// Internal: the one way tfk8s turns JSON text into nlohmann::json, with a bound on nesting.
//
// nlohmann's parser is iterative, but copying, comparing and converting a value recurse once per
// level: a watch event 100,000 levels deep crashed the process on its first copy (30,000 did
// not). Every decoder of text tfk8s did not write itself (server answers, watch lines, exec and
// port-forward Status frames, an exec plugin's reply, annotations and pod output read back)
// goes through here, so the limit holds everywhere and is named in one place.

#include <string_view>

#include <nlohmann/json.hpp>

namespace tfk8s::internal {

/// Deepest nesting of arrays and objects accepted in JSON text (`[]` is depth 1). Kubernetes
/// objects nest about 15 levels; 512 leaves room for any CRD and user annotation while keeping
/// every recursive walk of a value (copy, dump, compare, Python conversion) far from the stack's
/// end. The YAML reader and the Python converters use the same limit.
inline constexpr int kMaxJsonDepth = 512;

/// Throws DecodeError when `text` nests arrays/objects deeper than kMaxJsonDepth. `source`
/// names where the text came from (e.g. "watch stream", "GET pods/web-0") and starts the
/// message. Malformed text is not reported here (the parser does that); this only counts
/// brackets outside strings, and stops at the first one too many.
void CheckJsonDepth(std::string_view text, std::string_view source);

/// Parses `text` after CheckJsonDepth(text, source): throws DecodeError when it nests too
/// deeply; returns a discarded value (is_discarded()) when it is not JSON, so each caller words
/// that error for its own context (or falls back, as error bodies and annotations do).
/// `callback` is nlohmann's parser callback (e.g. to drop fields while a list is read).
nlohmann::json ParseJson(std::string_view text, std::string_view source,
                         const nlohmann::json::parser_callback_t& callback = nullptr);

}  // namespace tfk8s::internal
