#include "tfk8s/yaml.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "tfk8s/error.hpp"
#include "util/json_parse.hpp"

namespace tfk8s {
namespace {

// Strings that a YAML 1.1 reader would take for something else must be quoted.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const char* kSpecial[] = {"true", "false", "yes",   "no",    "on",  "off", "null",
                                   "~",    "True",  "False", "Yes",   "No",  "On",  "Off",
                                   "Null", "NULL",  "TRUE",  "FALSE", "YES", "NO",  "ON",
                                   "OFF",  "y",     "n",     "Y",     "N"};
  for (const char* k : kSpecial) {
    if (s == k) return true;
  }
  // Document markers: yaml-cpp's emitter writes "..." and "---" plain, which end or start a
  // document when read back (found by tests/fuzz/fuzz_yaml).
  if (s.rfind("---", 0) == 0 || s.rfind("...", 0) == 0) return true;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  if (end && *end == '\0') return true;  // numeric-looking
  return false;
}

// Characters below U+0020 and DEL; `allow_newline` lets '\n' through (literal blocks).
bool HasControlCharacters(const std::string& s, bool allow_newline) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 || u == 0x7F) && !(allow_newline && c == '\n')) return true;
  }
  return false;
}

// A string, quoted whenever a reader would take it for something else; keys get the same
// rules (a plain key "... x" at a line start ends the document) but never a literal block.
void EmitString(YAML::Emitter& out, const std::string& s, bool is_key) {
  // A literal block ("|") keeps exactly one trailing newline; other multi-line strings are
  // double-quoted so they survive a round trip byte for byte.
  // Control characters (NUL included) are escaped inside double quotes: YAML allows them
  // nowhere else.
  bool one_trailing_newline = s.size() >= 2 && s.back() == '\n' && s[s.size() - 2] != '\n';
  if (!is_key && s.find('\n') != std::string::npos && one_trailing_newline &&
      !HasControlCharacters(s, /*allow_newline=*/true) && s.front() != ' ') {
    out << YAML::Literal << s;
  } else if (s.find('\n') != std::string::npos || HasControlCharacters(s, false) ||
             NeedsQuotes(s)) {
    out << YAML::DoubleQuoted << s;
  } else {
    out << s;
  }
}

void Emit(YAML::Emitter& out, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out << YAML::Key;
        EmitString(out, it.key(), /*is_key=*/true);  // keys are read back like values
        out << YAML::Value;
        Emit(out, it.value());
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& v : j) Emit(out, v);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      EmitString(out, j.get_ref<const std::string&>(), /*is_key=*/false);
      break;
    }
    case nlohmann::json::value_t::boolean:
      out << (j.get<bool>() ? "true" : "false");
      break;
    case nlohmann::json::value_t::number_integer:
      out << j.get<std::int64_t>();
      break;
    case nlohmann::json::value_t::number_unsigned:
      out << j.get<std::uint64_t>();
      break;
    case nlohmann::json::value_t::number_float:
      out << j.dump();
      break;
    case nlohmann::json::value_t::null:
    default:
      out << YAML::Null;
      break;
  }
}

// Limits of one FromYaml call. Anchors and aliases let a few bytes stand for a huge document
// ("billion laughs") and an alias may refer to the node that contains it; both are refused, as
// Kubernetes' YAML decoder refuses excessive aliasing, instead of exhausting time, memory or the
// stack (found by tests/fuzz/fuzz_yaml).
// Nesting: yaml-cpp 0.7's recursive parser stops first, at 500 levels of its own recursion
// (about 498 containers: YAML::DeepRecursion, reported below); the builder's own bound is the
// one every JSON decoder has, for a yaml-cpp whose guard is looser.
constexpr int kMaxDepth = internal::kMaxJsonDepth;
// Output bytes allowed per input byte (plus a floor): without aliases the output is never
// larger than the input, so only alias expansion can reach it.
constexpr std::size_t kExpansionFactor = 16;
constexpr std::size_t kExpansionFloor = std::size_t{64} * 1024;

// True for well-formed UTF-8 (no overlong forms, surrogates, code points above U+10FFFF, nor
// Unicode noncharacters).
// JSON text must be UTF-8: a string that is not would make every later dump() throw.
bool IsUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    const auto second = static_cast<unsigned char>(s[i + 1]);
    if (second < lo || second > hi) return false;
    for (std::size_t k = 2; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < 0x80 || b > 0xBF) return false;
    }
    // Noncharacters (U+FDD0..U+FDEF, U+nFFFE, U+nFFFF): yaml-cpp's emitter replaces them with
    // U+FFFD, so they could not be written back (found by tests/fuzz/fuzz_yaml).
    std::uint32_t cp = c & (0xFF >> (len + 1));
    for (std::size_t k = 1; k < len; ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
    }
    if ((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) return false;
    i += len;
  }
  return true;
}

// A plain scalar that is a decimal number, as YAML's core schema writes one: digits, an optional
// sign, point and exponent. Hex, octal-looking words with letters, "inf" and "nan" stay strings.
bool LooksDecimal(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789+-.eE") == std::string::npos &&
         s.find_first_of("0123456789") != std::string::npos;
}

nlohmann::json PlainScalar(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "null" || s == "~" || s == "Null" || s == "NULL") return nullptr;
  if (!LooksDecimal(s)) return s;
  char* end = nullptr;
  errno = 0;
  long long i = std::strtoll(s.c_str(), &end, 10);
  if (*end == '\0' && errno == 0) return i;
  if (*end == '\0' && s[0] != '-') {  // above INT64_MAX: unsigned, then a double
    errno = 0;
    unsigned long long u = std::strtoull(s.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return u;
  }
  // An integer beyond 64 bits or a decimal fraction: a double, like Kubernetes' YAML decoder.
  errno = 0;
  double d = std::strtod(s.c_str(), &end);
  if (*end == '\0' && errno == 0) return d;
  return s;  // out of double's range (1e999): kept as written rather than turned into inf
}

// Builds JSON straight from yaml-cpp's parse events (no intermediate YAML::Node tree), so
// anchors, aliases and nesting are under our control:
//  - an alias copies the anchored value and is charged its size against the budget;
//  - an alias to a node that is still open (it contains itself) is refused;
//  - nesting deeper than kMaxDepth is refused.
class JsonBuilder : public YAML::EventHandler {
 public:
  explicit JsonBuilder(std::size_t input_size)
      : budget_(input_size * kExpansionFactor + kExpansionFloor) {}

  // The document's root; null for an empty document.
  nlohmann::json TakeRoot() { return std::move(root_); }

  void OnDocumentStart(const YAML::Mark&) override {
    stack_.clear();
    anchors_.clear();
    root_ = nullptr;
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override {
    Spend(1);
    Add(nullptr, "null", anchor, 1);  // yaml-cpp reads a null key as "null"
  }

  void OnAlias(const YAML::Mark&, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) {
      // yaml-cpp only reports aliases of anchors it has seen: this one is still open.
      throw ValidationError("yaml", "", "an alias refers to a node that contains it");
    }
    Spend(it->second.cost);
    Add(it->second.value, it->second.raw, YAML::NullAnchor, it->second.cost, it->second.scalar);
  }

  void OnScalar(const YAML::Mark&, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    const std::size_t cost = value.size() + 1;
    Spend(cost);
    RequireUtf8(value);
    // Quoted in the source ("!") or tagged !!str: always a string.
    nlohmann::json j =
        tag == "!" || tag == "tag:yaml.org,2002:str" ? nlohmann::json(value) : PlainScalar(value);
    Add(std::move(j), value, anchor, cost);
  }

  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Push(nlohmann::json::array(), anchor);
  }
  void OnSequenceEnd() override { Pop(); }

  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Push(nlohmann::json::object(), anchor);
  }
  void OnMapEnd() override { Pop(); }

 private:
  struct Frame {
    nlohmann::json value;
    YAML::anchor_t anchor;
    std::size_t budget_at_start;
    std::optional<std::string> key;  // a map's key waiting for its value
  };
  struct Anchored {
    nlohmann::json value;
    std::string raw;  // the scalar's text, for use as a map key
    std::size_t cost;
    bool scalar;
  };

  void Push(nlohmann::json value, YAML::anchor_t anchor) {
    if (stack_.size() >= static_cast<std::size_t>(kMaxDepth)) {
      throw ValidationError("yaml", "", fmt::format("nested deeper than {} levels", kMaxDepth));
    }
    Spend(1);
    stack_.push_back(Frame{std::move(value), anchor, budget_, std::nullopt});
  }

  void Pop() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    if (frame.key) throw ValidationError("yaml", "", "a mapping key has no value");
    const std::size_t cost = frame.budget_at_start - budget_ + 1;
    Add(std::move(frame.value), {}, frame.anchor, cost, /*scalar=*/false);
  }

  // Places a finished value: into the open sequence or map, or as the root.
  void Add(nlohmann::json value, const std::string& raw, YAML::anchor_t anchor, std::size_t cost,
           bool scalar = true) {
    if (anchor != YAML::NullAnchor) anchors_[anchor] = Anchored{value, raw, cost, scalar};
    if (stack_.empty()) {
      root_ = std::move(value);
      return;
    }
    Frame& top = stack_.back();
    if (top.value.is_array()) {
      top.value.push_back(std::move(value));
    } else if (!top.key) {
      if (!scalar) throw ValidationError("yaml", "", "mapping keys must be scalars");
      RequireUtf8(raw);
      top.key = raw;
    } else {
      top.value[*top.key] = std::move(value);
      top.key.reset();
    }
  }

  void Spend(std::size_t bytes) {
    if (bytes > budget_) {
      throw ValidationError("yaml", "",
                            "aliases expand to far more data than the document holds (refused "
                            "as an alias bomb)");
    }
    budget_ -= bytes;
  }

  static void RequireUtf8(std::string_view s) {
    if (!IsUtf8(s)) throw ValidationError("yaml", "", "not valid UTF-8");
  }

  std::size_t budget_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  nlohmann::json root_;
};

}  // namespace

std::string ToYaml(const nlohmann::json& object) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  Emit(out, object);
  return std::string(out.c_str(), out.size()) + "\n";
}

std::string ToYamlDocuments(const std::vector<nlohmann::json>& objects) {
  std::string text;
  for (const auto& o : objects) text += "---\n" + ToYaml(o);
  return text;
}

nlohmann::json FromYaml(std::string_view text) {
  auto docs = FromYamlDocuments(text);
  if (docs.empty()) return nlohmann::json::object();
  if (docs.size() > 1) {
    throw ValidationError("yaml", "",
                          "expected one YAML document, found " + std::to_string(docs.size()));
  }
  return docs.front();
}

std::vector<nlohmann::json> FromYamlDocuments(std::string_view text) {
  std::vector<nlohmann::json> out;
  try {
    std::string copy(text);
    std::istringstream in(copy);
    YAML::Parser parser(in);
    JsonBuilder builder(text.size());  // one budget for all documents of the stream
    // yaml-cpp 0.7 can report documents forever on some malformed input (",]": jbeder/yaml-cpp
    // #1040, fixed upstream after 0.8). Every real document takes at least one input byte.
    std::size_t documents = 0;
    while (parser.HandleNextDocument(builder)) {
      if (++documents > text.size() + 1) {
        throw ValidationError("yaml", "", "not valid YAML: the parser does not advance");
      }
      nlohmann::json doc = builder.TakeRoot();
      if (doc.is_null()) continue;
      out.push_back(std::move(doc));
    }
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message is "bad file".
    throw ValidationError("yaml", "",
                          fmt::format("nested deeper than the YAML parser reads ({} levels, at "
                                      "line {})",
                                      e.depth(), e.mark.line + 1));
  } catch (const YAML::Exception& e) {
    throw ValidationError("yaml", "", std::string("not valid YAML: ") + e.what());
  }
  return out;
}

}  // namespace tfk8s
