// The pure part of the `tfk8s` command; see cli_core.hpp.

#include "cli_core.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"
#include "tfk8s/yaml.hpp"

namespace tfk8s::cli {

namespace {

std::string Trim(std::string_view s) {
  std::size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  std::size_t e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
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

// `"tfk8s tfcluster get") echo tfcluster ;;` for each verb that takes names.
void BashNameCases(const CommandNode& node, const std::string& path, std::string* out) {
  if (!node.names_of.empty()) *out += "    \"" + path + "\") echo " + node.names_of + " ;;\n";
  for (const auto& child : node.children) BashNameCases(child, path + " " + child.name, out);
}

// Every document of the stream, each a mapping; `where(i)` names document i in messages.
std::vector<Json> ReadMappings(std::string_view text, const std::string& origin) {
  std::vector<Json> documents;
  try {
    documents = FromYamlDocuments(text);
  } catch (const ValidationError& e) {
    throw ValidationError(origin, "", e.server_message());
  }
  if (documents.empty()) throw ValidationError(origin, "", "holds no document");
  for (std::size_t i = 0; i < documents.size(); ++i) {
    if (!documents[i].is_object()) {
      throw ValidationError(origin + " document " + std::to_string(i + 1), documents[i].dump(),
                            "must be a mapping");
    }
  }
  return documents;
}

std::string KindText(const Json& kind) {
  return kind.is_string() ? kind.get<std::string>() : kind.dump();
}

// A Kubernetes-style object of kObjectApiVersion (its kind already checked and removed) as the
// spec it describes; any other document unchanged. `where` names it in messages.
Json FromObject(Json doc, const std::string& where) {
  if (!doc.contains("apiVersion")) return doc;
  const Json& version = doc["apiVersion"];
  if (!version.is_string() || version.get<std::string>() != kObjectApiVersion) {
    throw ValidationError(where + ": apiVersion", KindText(version),
                          std::string("must be ") + kObjectApiVersion +
                              " (a tfk8s workload as `get -o yaml` prints it) or absent (a spec)");
  }
  for (const auto& [key, value] : doc.items()) {
    if (key != "apiVersion" && key != "metadata" && key != "spec" && key != "status") {
      throw ValidationError(where + ": " + key, "",
                            "is not a field of a tfk8s object (apiVersion, kind, metadata, spec, "
                            "status)");
    }
  }
  const Json metadata = doc.value("metadata", Json::object());
  Json spec = doc.value("spec", Json::object());
  if (!metadata.is_object() || !spec.is_object()) {
    throw ValidationError(where + ": " + (metadata.is_object() ? "spec" : "metadata"), "",
                          "must be a mapping");
  }
  for (const auto& [key, value] : metadata.items()) {
    if (key != "name" && key != "namespace" && key != "labels") {
      throw ValidationError(where + ": metadata." + key, "",
                            "is not read (a tfk8s object's metadata has name, namespace and "
                            "labels)");
    }
    if (spec.contains(key)) {
      throw ValidationError(where + ": spec." + key, "", "belongs in metadata." + key);
    }
    spec[key] = value;
  }
  return spec;
}

}  // namespace

std::vector<Json> ReadSpecDocuments(std::string_view text, const std::string& origin,
                                    const std::string& expected_kind) {
  std::vector<Json> documents = ReadMappings(text, origin);
  for (std::size_t i = 0; i < documents.size(); ++i) {
    Json& doc = documents[i];
    if (doc.contains("kind")) {
      const Json& kind = doc["kind"];
      if (!kind.is_string() || kind.get<std::string>() != expected_kind) {
        throw ValidationError(origin + " document " + std::to_string(i + 1) + ": kind",
                              KindText(kind),
                              "must be " + expected_kind + " (or absent) for this command");
      }
      doc.erase("kind");
    }
    doc = FromObject(std::move(doc), origin + " document " + std::to_string(i + 1));
  }
  return documents;
}

std::vector<KindedDocument> ReadKindedDocuments(std::string_view text, const std::string& origin,
                                                const std::vector<std::string>& kinds) {
  std::string known;
  for (const auto& k : kinds) known += (known.empty() ? "" : ", ") + k;
  std::vector<KindedDocument> out;
  std::vector<Json> documents = ReadMappings(text, origin);
  for (std::size_t i = 0; i < documents.size(); ++i) {
    Json& doc = documents[i];
    std::string where = origin + " document " + std::to_string(i + 1) + ": kind";
    if (!doc.contains("kind"))
      throw ValidationError(where, "", "is required here (one of " + known + ")");
    const Json& kind = doc["kind"];
    if (!kind.is_string() ||
        std::find(kinds.begin(), kinds.end(), kind.get<std::string>()) == kinds.end()) {
      throw ValidationError(where, KindText(kind), "must be one of " + known);
    }
    KindedDocument d{kind.get<std::string>(), std::move(doc)};
    d.document.erase("kind");
    d.document = FromObject(std::move(d.document), where.substr(0, where.size() - 6));
    out.push_back(std::move(d));
  }
  return out;
}

namespace {

// The tokens of a selector, as Kubernetes' labels.Parse lexes them: identifiers are runs of
// characters other than whitespace and the special ones (`!`, `=`, `<`, `>`, `(`, `)`, `,`);
// `in` and `notin` are keywords.
struct SelectorToken {
  enum class Type {
    kIdentifier,
    kIn,
    kNotIn,
    kNot,
    kEquals,
    kDoubleEquals,
    kNotEquals,
    kGreater,
    kLess,
    kOpen,
    kClose,
    kComma,
    kEnd
  } type;
  std::string text;
};

bool IsSelectorSpecial(char c) {
  return c == '!' || c == '=' || c == '<' || c == '>' || c == '(' || c == ')' || c == ',';
}

std::vector<SelectorToken> LexSelector(std::string_view s) {
  using T = SelectorToken::Type;
  std::vector<SelectorToken> out;
  std::size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (IsSelectorSpecial(c)) {
      std::string two(s.substr(i, 2));
      if (two == "==")
        out.push_back({T::kDoubleEquals, two});
      else if (two == "!=")
        out.push_back({T::kNotEquals, two});
      if (two == "==" || two == "!=") {
        i += 2;
        continue;
      }
      T type = c == '!'   ? T::kNot
               : c == '=' ? T::kEquals
               : c == '<' ? T::kLess
               : c == '>' ? T::kGreater
               : c == '(' ? T::kOpen
               : c == ')' ? T::kClose
                          : T::kComma;
      out.push_back({type, std::string(1, c)});
      ++i;
      continue;
    }
    std::size_t b = i;
    while (i < s.size() && !IsSelectorSpecial(s[i]) && s[i] != ' ' && s[i] != '\t' &&
           s[i] != '\n' && s[i] != '\r') {
      ++i;
    }
    std::string word(s.substr(b, i - b));
    out.push_back({word == "in" ? T::kIn : word == "notin" ? T::kNotIn : T::kIdentifier, word});
  }
  out.push_back({T::kEnd, ""});
  return out;
}

}  // namespace

std::vector<LabelRequirement> ParseLabelSelector(std::string_view selector) {
  using T = SelectorToken::Type;
  using Op = LabelRequirement::Op;
  const std::string whole(selector);
  auto fail = [&](const std::string& why) -> void {
    throw ValidationError("selector", whole, why);
  };
  std::vector<SelectorToken> tokens = LexSelector(selector);
  std::size_t at = 0;
  auto next = [&]() -> const SelectorToken& { return tokens[at++]; };
  auto peek = [&]() -> const SelectorToken& { return tokens[at]; };
  auto check_key = [&](const std::string& key) {
    auto errors = validation::IsQualifiedName(key);
    if (!errors.empty()) fail("key \"" + key + "\": " + errors.front());
  };
  auto check_value = [&](const std::string& value) {
    auto errors = validation::IsValidLabelValue(value);
    if (!errors.empty()) fail("value \"" + value + "\": " + errors.front());
  };

  std::vector<LabelRequirement> out;
  if (peek().type == T::kEnd) return out;
  while (true) {
    LabelRequirement r;
    bool negated = false;
    if (peek().type == T::kNot) {
      next();
      negated = true;
    }
    const SelectorToken& key = next();
    if (key.type != T::kIdentifier) {
      fail(key.type == T::kEnd ? "ends where a label key is expected"
                               : "found '" + key.text + "' where a label key is expected");
    }
    r.key = key.text;
    check_key(r.key);
    if (negated) {
      r.op = Op::kNotExists;
    } else {
      switch (peek().type) {
        case T::kEnd:
        case T::kComma:
          r.op = Op::kExists;
          break;
        case T::kEquals:
        case T::kDoubleEquals:
        case T::kNotEquals:
        case T::kGreater:
        case T::kLess: {
          T op = next().type;
          r.op = op == T::kNotEquals ? Op::kNotEquals
                 : op == T::kGreater ? Op::kGreaterThan
                 : op == T::kLess    ? Op::kLessThan
                                     : Op::kEquals;
          std::string value;
          if (peek().type == T::kIdentifier) {
            value = next().text;
          } else if (peek().type != T::kEnd && peek().type != T::kComma) {
            fail("found '" + peek().text + "' where a value is expected after '" + r.key + "'");
          }
          if (r.op == Op::kGreaterThan || r.op == Op::kLessThan) {
            bool integer = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
              return c >= '0' && c <= '9';
            });
            if (!integer) fail("'" + r.key + "' must be compared with a whole number");
          }
          check_value(value);
          r.values = {value};
          break;
        }
        case T::kIn:
        case T::kNotIn: {
          r.op = next().type == T::kIn ? Op::kIn : Op::kNotIn;
          if (next().type != T::kOpen) fail("'" + r.key + "': a value set must start with '('");
          // Values separated by commas; an empty place is the empty value, as in Kubernetes.
          std::set<std::string> values;
          bool expect_value = true;
          while (true) {
            const SelectorToken& t = next();
            if (t.type == T::kClose) {
              if (expect_value && !values.empty()) values.insert("");
              break;
            }
            if (t.type == T::kIdentifier && expect_value) {
              values.insert(t.text);
              expect_value = false;
            } else if (t.type == T::kComma) {
              if (expect_value) values.insert("");
              expect_value = true;
            } else {
              fail(t.type == T::kEnd
                       ? "a value set is not closed with ')'"
                       : "found '" + t.text + "' in the value set of '" + r.key + "'");
            }
          }
          if (values.empty()) fail("the value set of '" + r.key + "' is empty");
          for (const auto& v : values) check_value(v);
          r.values.assign(values.begin(), values.end());
          break;
        }
        default:
          fail("found '" + peek().text + "' after the key '" + r.key + "'");
      }
    }
    out.push_back(std::move(r));
    const SelectorToken& sep = next();
    if (sep.type == T::kEnd) break;
    if (sep.type != T::kComma) fail("found '" + sep.text + "' where ',' or the end is expected");
  }
  return out;
}

std::string FormatLabelSelector(const std::vector<LabelRequirement>& selector) {
  using Op = LabelRequirement::Op;
  std::string out;
  for (const LabelRequirement& r : selector) {
    if (!out.empty()) out += ',';
    auto first = [&] { return r.values.empty() ? std::string() : r.values.front(); };
    auto set = [&] {
      std::string joined;
      for (std::size_t i = 0; i < r.values.size(); ++i) joined += (i ? "," : "") + r.values[i];
      // The set of just the empty value: "()" would read as an empty set, "(,)" reads as {""}.
      if (r.values.size() == 1 && joined.empty()) joined = ",";
      return " (" + joined + ")";
    };
    switch (r.op) {
      case Op::kEquals:
        out += r.key + "=" + first();
        break;
      case Op::kNotEquals:
        out += r.key + "!=" + first();
        break;
      case Op::kIn:
        out += r.key + " in" + set();
        break;
      case Op::kNotIn:
        out += r.key + " notin" + set();
        break;
      case Op::kExists:
        out += r.key;
        break;
      case Op::kNotExists:
        out += "!" + r.key;
        break;
      case Op::kGreaterThan:
        out += r.key + ">" + first();
        break;
      case Op::kLessThan:
        out += r.key + "<" + first();
        break;
    }
  }
  return out;
}

bool MatchesSelector(const std::vector<LabelRequirement>& selector,
                     const std::map<std::string, std::string>& labels) {
  return std::all_of(selector.begin(), selector.end(), [&](const LabelRequirement& r) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    auto in_values = [&] {
      return has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    };
    auto compare = [&](bool greater) {
      if (!has || it->second.empty() || r.values.empty()) return false;
      if (!std::all_of(it->second.begin(), it->second.end(),
                       [](char c) { return c >= '0' && c <= '9'; })) {
        return false;
      }
      // Whole numbers of at most 63 digits: compare by length, then lexically.
      const std::string a =
          it->second.substr(std::min(it->second.find_first_not_of('0'), it->second.size() - 1));
      const std::string& v = r.values.front();
      const std::string b = v.substr(std::min(v.find_first_not_of('0'), v.size() - 1));
      int cmp = a.size() != b.size() ? (a.size() < b.size() ? -1 : 1) : a.compare(b);
      return greater ? cmp > 0 : cmp < 0;
    };
    switch (r.op) {
      case LabelRequirement::Op::kEquals:
      case LabelRequirement::Op::kIn:
        return in_values();
      case LabelRequirement::Op::kNotEquals:
      case LabelRequirement::Op::kNotIn:
        return !in_values();
      case LabelRequirement::Op::kExists:
        return has;
      case LabelRequirement::Op::kNotExists:
        return !has;
      case LabelRequirement::Op::kGreaterThan:
        return compare(true);
      case LabelRequirement::Op::kLessThan:
        return compare(false);
    }
    return false;
  });
}

std::chrono::milliseconds ParseDuration(std::string_view text, const std::string& field) {
  return validation::ParseDuration(field, Trim(text));
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
      "_" +
      root.name +
      "_complete() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"" +
      root.name +
      "\" words=\"\" i w\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=\"${COMP_WORDS[i]}\"\n"
      "    [[ \"$w\" == -* ]] && continue\n"
      "    case \" $(_" +
      root.name +
      "_children \"$path\") \" in\n"
      "      *\" $w \"*) path=\"$path $w\" ;;\n"
      "    esac\n"
      "  done\n"
      "  words=\"$(_" +
      root.name +
      "_words \"$path\")\"\n"
      "  local noun\n"
      "  noun=\"$(_" +
      root.name +
      "_names \"$path\")\"\n"
      "  if [[ -n \"$noun\" && \"$cur\" != -* ]]; then\n"
      "    local args=() j\n"
      "    for ((j = 1; j < COMP_CWORD; j++)); do\n"
      "      case \"${COMP_WORDS[j]}\" in\n"
      "        -n | --namespace | --context | --kubeconfig) "
      "args+=(\"${COMP_WORDS[j]}\" \"${COMP_WORDS[j + 1]}\") ;;\n"
      "        --namespace=* | --context=* | --kubeconfig=*) "
      "args+=(\"${COMP_WORDS[j]}\") ;;\n"
      "      esac\n"
      "    done\n"
      "    words=\"$words $(\"${COMP_WORDS[0]}\" \"${args[@]}\" \"$noun\" list -o name "
      "2>/dev/null | sed 's|^[^/]*/||')\"\n"
      "  fi\n"
      "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      "}\n"
      "_" +
      root.name +
      "_words() {\n"
      "  local words=\"\"\n"
      "  case \"$1\" in\n";
  BashCases(root, root.name, &out);
  out +=
      "  esac\n"
      "  echo \"$words\"\n"
      "}\n"
      "_" +
      root.name +
      "_names() {\n"
      "  case \"$1\" in\n";
  BashNameCases(root, root.name, &out);
  out +=
      "  esac\n"
      "}\n"
      "_" +
      root.name +
      "_children() {\n"
      "  local w out=\"\"\n"
      "  for w in $(_" +
      root.name +
      "_words \"$1\"); do [[ \"$w\" == -* ]] || out=\"$out $w\"; done\n"
      "  echo \"$out\"\n"
      "}\n"
      "complete -F _" +
      root.name + "_complete " + root.name + "\n";
  return out;
}

std::string ZshCompletion(const CommandNode& root) {
  return "# zsh completion for " + root.name + " (generated by `" + root.name +
         " completion zsh`)\n"
         "autoload -U +X bashcompinit && bashcompinit\n" +
         BashCompletion(root);
}

}  // namespace tfk8s::cli
