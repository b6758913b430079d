// The pure part of the `tfk8s` command; see cli_core.hpp.

#include "cli_core.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include "tfk8s/error.hpp"
#include "tfk8s/yaml.hpp"

namespace tfk8s::cli {

namespace {

std::string Trim(std::string_view s) {
  std::size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  std::size_t e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

bool IsEmptyValue(const Json& v) {
  if (v.is_null()) return true;
  if (v.is_string()) return v.get_ref<const std::string&>().empty();
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number()) return v == 0;
  if (v.is_array() || v.is_object()) return v.empty();
  return false;
}

void CollectUnknown(const Json& input, const Json& known, const std::string& path,
                    std::vector<std::string>* out) {
  if (input.is_object()) {
    for (const auto& [key, value] : input.items()) {
      std::string here = path.empty() ? key : path + "." + key;
      if (!known.is_object() || !known.contains(key)) {
        if (!IsEmptyValue(value)) out->push_back(here);
        continue;
      }
      CollectUnknown(value, known[key], here, out);
    }
  } else if (input.is_array() && known.is_array()) {
    for (std::size_t i = 0; i < input.size() && i < known.size(); ++i) {
      CollectUnknown(input[i], known[i], path + "[" + std::to_string(i) + "]", out);
    }
  }
}

// Words safe inside a shell `case` pattern and a double-quoted list (command and flag names).
void BashCases(const CommandNode& node, const std::string& path, std::string* out) {
  std::string words;
  for (const auto& child : node.children) words += child.name + " ";
  for (const auto& flag : node.flags) words += flag + " ";
  if (!words.empty()) words.pop_back();
  *out += "    \"" + path + "\") words=\"" + words + "\" ;;\n";
  for (const auto& child : node.children) BashCases(child, path + " " + child.name, out);
}

}  // namespace

std::vector<Json> ReadSpecDocuments(std::string_view text, const std::string& origin,
                                    const std::string& expected_kind) {
  std::vector<Json> documents;
  try {
    documents = FromYamlDocuments(text);
  } catch (const ValidationError& e) {
    throw ValidationError(origin, "", e.server_message());
  }
  if (documents.empty()) throw ValidationError(origin, "", "holds no document");
  for (std::size_t i = 0; i < documents.size(); ++i) {
    Json& doc = documents[i];
    std::string where = origin + " document " + std::to_string(i + 1);
    if (!doc.is_object()) throw ValidationError(where, doc.dump(), "must be a mapping");
    if (doc.contains("kind")) {
      const Json& kind = doc["kind"];
      if (!kind.is_string() || kind.get<std::string>() != expected_kind) {
        throw ValidationError(where + ": kind", kind.is_string() ? kind.get<std::string>() : kind.dump(),
                              "must be " + expected_kind + " (or absent) for this command");
      }
      doc.erase("kind");
    }
  }
  return documents;
}

std::vector<std::string> UnknownFields(const Json& input, const Json& round_trip) {
  std::vector<std::string> out;
  CollectUnknown(input, round_trip, "", &out);
  return out;
}

std::vector<LabelRequirement> ParseLabelSelector(std::string_view selector) {
  std::vector<LabelRequirement> out;
  std::size_t start = 0;
  while (start <= selector.size()) {
    std::size_t comma = selector.find(',', start);
    std::string part =
        Trim(selector.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                    : comma - start));
    start = comma == std::string_view::npos ? selector.size() + 1 : comma + 1;
    if (part.empty()) {
      if (selector.empty()) break;
      throw ValidationError("selector", std::string(selector), "has an empty requirement");
    }
    if (part.find('(') != std::string::npos || part.find(" in ") != std::string::npos ||
        part.find(" notin ") != std::string::npos) {
      throw ValidationError("selector", part, "set-based requirements are not supported");
    }
    LabelRequirement r;
    std::size_t op = std::string::npos;
    if ((op = part.find("!=")) != std::string::npos) {
      r.op = LabelRequirement::Op::kNotEquals;
      r.key = Trim(part.substr(0, op));
      r.value = Trim(part.substr(op + 2));
    } else if ((op = part.find("==")) != std::string::npos) {
      r.op = LabelRequirement::Op::kEquals;
      r.key = Trim(part.substr(0, op));
      r.value = Trim(part.substr(op + 2));
    } else if ((op = part.find('=')) != std::string::npos) {
      r.op = LabelRequirement::Op::kEquals;
      r.key = Trim(part.substr(0, op));
      r.value = Trim(part.substr(op + 1));
    } else if (part.front() == '!') {
      r.op = LabelRequirement::Op::kNotExists;
      r.key = Trim(part.substr(1));
    } else {
      r.op = LabelRequirement::Op::kExists;
      r.key = part;
    }
    if (r.key.empty()) throw ValidationError("selector", part, "has no label key");
    out.push_back(std::move(r));
  }
  return out;
}

bool MatchesSelector(const std::vector<LabelRequirement>& selector,
                     const std::map<std::string, std::string>& labels) {
  return std::all_of(selector.begin(), selector.end(), [&](const LabelRequirement& r) {
    auto it = labels.find(r.key);
    switch (r.op) {
      case LabelRequirement::Op::kEquals: return it != labels.end() && it->second == r.value;
      case LabelRequirement::Op::kNotEquals: return it == labels.end() || it->second != r.value;
      case LabelRequirement::Op::kExists: return it != labels.end();
      case LabelRequirement::Op::kNotExists: return it == labels.end();
    }
    return false;
  });
}

std::chrono::milliseconds ParseDuration(std::string_view text, const std::string& field) {
  std::string t = Trim(text);
  std::size_t digits = 0;
  while (digits < t.size() && t[digits] >= '0' && t[digits] <= '9') ++digits;
  std::string unit = t.substr(digits);
  if (digits == 0 || digits > 9) {
    throw ValidationError(field, t, "must be a whole number with an optional unit (ms, s, m, h)");
  }
  std::int64_t n = std::stoll(t.substr(0, digits));
  if (unit.empty() || unit == "s") return std::chrono::seconds(n);
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit == "m") return std::chrono::minutes(n);
  if (unit == "h") return std::chrono::hours(n);
  throw ValidationError(field, t, "has an unknown unit (use ms, s, m or h)");
}

std::string ErrorLine(const std::exception& error) {
  std::string reason = "Error";
  if (const auto* e = dynamic_cast<const Error*>(&error)) {
    reason = std::string(ToString(e->kind()));
    if (e->kind() == ErrorKind::kTransport && dynamic_cast<const DecodeError*>(e)) {
      reason = "DecodeError";
    }
  }
  std::string message = error.what();
  std::replace(message.begin(), message.end(), '\n', ' ');
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return "error: " + reason + ": " + message;
}

std::string BashCompletion(const CommandNode& root) {
  std::string out =
      "# bash completion for " + root.name + " (generated by `" + root.name +
      " completion bash`)\n"
      "_" + root.name + "_complete() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"" + root.name + "\" words=\"\" i w\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=\"${COMP_WORDS[i]}\"\n"
      "    [[ \"$w\" == -* ]] && continue\n"
      "    case \" $(_" + root.name + "_children \"$path\") \" in\n"
      "      *\" $w \"*) path=\"$path $w\" ;;\n"
      "    esac\n"
      "  done\n"
      "  words=\"$(_" + root.name + "_words \"$path\")\"\n"
      "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      "}\n"
      "_" + root.name + "_words() {\n"
      "  local words=\"\"\n"
      "  case \"$1\" in\n";
  BashCases(root, root.name, &out);
  out += "  esac\n"
         "  echo \"$words\"\n"
         "}\n"
         "_" + root.name + "_children() {\n"
         "  local w out=\"\"\n"
         "  for w in $(_" + root.name + "_words \"$1\"); do [[ \"$w\" == -* ]] || out=\"$out $w\"; done\n"
         "  echo \"$out\"\n"
         "}\n"
         "complete -F _" + root.name + "_complete " + root.name + "\n";
  return out;
}

std::string ZshCompletion(const CommandNode& root) {
  return "# zsh completion for " + root.name + " (generated by `" + root.name +
         " completion zsh`)\n"
         "autoload -U +X bashcompinit && bashcompinit\n" +
         BashCompletion(root);
}

}  // namespace tfk8s::cli
