// kubectl-shaped output (output.hpp): JSONPath templates, custom columns, quantities and ages.
#include "output.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <utility>

#include "tfk8s/error.hpp"
#include "tfk8s/quantity.hpp"

namespace tfk8s::cli {

namespace jsonpath_internal {

struct Node;
using NodeList = std::vector<Node>;

/// One bound of `[start:end:step]`, as client-go's ParamsEntry.
struct Param {
  bool known = false;
  long long value = 0;
  bool derived = false;  ///< end = start + 1 of a single index.
};

struct Node {
  enum class Kind {
    kText,
    kLiteral,
    kField,
    kKey,
    kWildcard,
    kRecursive,
    kArray,
    kUnion,
    kFilter,
    kIdent
  };
  Kind kind = Kind::kText;
  std::string name;  ///< Field name, identifier or filter operator.
  Json literal;      ///< kText and kLiteral: the value.
  std::array<Param, 3> params{};
  /// kUnion: the branches; kFilter: {left, right}; kKey: {the key read as a dotted path}.
  std::vector<NodeList> lists;
};

struct Segment {
  enum class Kind { kText, kAction, kRange };
  Kind kind = Kind::kText;
  std::string text;
  NodeList nodes;
  std::vector<Segment> body;  ///< kRange: what is printed for each value.
};

}  // namespace jsonpath_internal

namespace {

using jsonpath_internal::Node;
using jsonpath_internal::NodeList;
using jsonpath_internal::Param;
using jsonpath_internal::Segment;
using Values = std::vector<const Json*>;

// The reason of a template error; the caller turns it into a ValidationError.
struct TemplateError {
  std::string why;
};

[[noreturn]] void Fail(std::string why) { throw TemplateError{std::move(why)}; }

bool IsTerminator(int c) {
  switch (c) {
    case -1:
    case ' ':
    case '\t':
    case '\r':
    case '\n':
    case '.':
    case ',':
    case '[':
    case ']':
    case '$':
    case '@':
    case '{':
    case '}':
      return true;
    default:
      return false;
  }
}

bool IsDigit(int c) { return c >= '0' && c <= '9'; }
// Letters, digits, '_' and any non-ASCII byte (a UTF-8 letter, as unicode.IsLetter mostly is).
bool IsAlphaNumeric(int c) {
  return c == '_' || IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

// "U+0021 '!'", as Go's %#U.
std::string DescribeChar(unsigned char c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
  std::string out = buf;
  if (c >= 0x20 && c < 0x7f) out += std::string(" '") + static_cast<char>(c) + "'";
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A quoted literal ("..." or '...', quotes included) unquoted as Go's strconv rules (client-go's
// UnquoteExtend): \a \b \f \n \r \t \v \\ \' \" \xHH \uHHHH \UHHHHHHHH \ooo.
std::string Unquote(std::string_view quoted) {
  const char quote = quoted.front();
  std::string_view s = quoted.substr(1, quoted.size() - 2);
  auto bad = [&]() -> void {
    Fail("unquote string " + std::string(quoted) + " error invalid syntax");
  };
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    char c = s[i];
    if (c == quote) bad();
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= s.size()) bad();
    char e = s[i + 1];
    i += 2;
    switch (e) {
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
      case '"':
        if (e != quote) bad();
        out += e;
        break;
      case 'x':
      case 'u':
      case 'U': {
        std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (i + n > s.size()) bad();
        std::uint32_t v = 0;
        for (std::size_t k = 0; k < n; ++k) {
          int h = HexValue(s[i + k]);
          if (h < 0) bad();
          v = v * 16 + static_cast<std::uint32_t>(h);
        }
        i += n;
        if (e == 'x') {
          out += static_cast<char>(v);
        } else {
          if (v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) bad();
          AppendUtf8(out, v);
        }
        break;
      }
      default: {
        if (e < '0' || e > '7' || i + 2 > s.size()) bad();
        std::uint32_t v = static_cast<std::uint32_t>(e - '0');
        for (std::size_t k = 0; k < 2; ++k) {
          if (s[i + k] < '0' || s[i + k] > '7') bad();
          v = v * 8 + static_cast<std::uint32_t>(s[i + k] - '0');
        }
        if (v > 255) bad();
        i += 2;
        out += static_cast<char>(v);
      }
    }
  }
  return out;
}

// The template parser, after client-go's jsonpath Parser (same grammar, same messages).
class Parser {
 public:
  explicit Parser(std::string_view input) : in_(input) {}

  // One top-level item: text, or the nodes of one `{...}` action.
  struct Item {
    bool is_text = false;
    std::string text;
    NodeList nodes;
  };

  std::vector<Item> ParseTemplate() {
    std::vector<Item> items;
    while (pos_ < in_.size()) {
      std::size_t open = in_.find('{', pos_);
      if (open == std::string_view::npos) open = in_.size();
      if (open > pos_) items.push_back({true, std::string(in_.substr(pos_, open - pos_)), {}});
      if (open == in_.size()) break;
      pos_ = open + 1;
      Item action;
      ParseAction(action.nodes);
      items.push_back(std::move(action));
    }
    return items;
  }

  // The nodes of "text" as client-go's parseAction reads "{text}"; all of it must be used.
  static NodeList ParseSub(std::string_view text) {
    std::string wrapped = std::string(text) + "}";
    Parser p(wrapped);
    NodeList nodes;
    p.ParseAction(nodes);
    if (p.pos_ != wrapped.size())
      Fail("unexpected \"" + wrapped.substr(p.pos_) + "\" in " + std::string(text));
    return nodes;
  }

 private:
  int Peek(std::size_t ahead = 0) const {
    return pos_ + ahead < in_.size() ? static_cast<unsigned char>(in_[pos_ + ahead]) : -1;
  }
  bool StartsWith(std::string_view prefix) const { return in_.substr(pos_).starts_with(prefix); }

  // Inside an action, up to and including its closing '}'.
  void ParseAction(NodeList& cur) {
    while (true) {
      if (StartsWith("}")) {
        ++pos_;
        return;
      }
      if (StartsWith("[?(")) {
        ParseFilter(cur);
        continue;
      }
      if (StartsWith("..")) {
        ParseRecursive(cur);
        continue;
      }
      int c = Peek();
      if (c == -1 || c == '\n' || c == '\r') Fail("unclosed action");
      ++pos_;
      if (c == ' ' || c == '@' || c == '$') continue;
      if (c == '[') {
        ParseArray(cur);
      } else if (c == '"' || c == '\'') {
        ParseQuote(cur, static_cast<char>(c));
      } else if (c == '.') {
        ParseField(cur);
      } else if (c == '+' || c == '-' || IsDigit(c)) {
        --pos_;
        ParseNumber(cur);
      } else if (IsAlphaNumeric(c)) {
        --pos_;
        ParseIdentifier(cur);
      } else {
        Fail("unrecognized character in action: " + DescribeChar(static_cast<unsigned char>(c)));
      }
    }
  }

  void ParseField(NodeList& cur) {
    std::string name;
    while (true) {
      int c = Peek();
      if (c == '\\') {
        ++pos_;
        if (Peek() != -1) name += in_[pos_++];
        continue;
      }
      if (IsTerminator(c)) break;
      name += static_cast<char>(c);
      ++pos_;
    }
    Node n;
    if (name == "*") {
      n.kind = Node::Kind::kWildcard;
    } else {
      n.kind = Node::Kind::kField;
      n.name = std::move(name);
    }
    cur.push_back(std::move(n));
  }

  void ParseRecursive(NodeList& cur) {
    if (!cur.empty() && cur.back().kind == Node::Kind::kRecursive) {
      Fail("invalid multiple recursive descent");
    }
    pos_ += 2;
    Node n;
    n.kind = Node::Kind::kRecursive;
    cur.push_back(std::move(n));
    if (IsAlphaNumeric(Peek())) ParseField(cur);
  }

  void ParseNumber(NodeList& cur) {
    std::size_t start = pos_;
    if (Peek() == '+' || Peek() == '-') ++pos_;
    while (Peek() == '.' || IsDigit(Peek())) ++pos_;
    std::string text(in_.substr(start, pos_ - start));
    std::string digits = text[0] == '+' ? text.substr(1) : text;
    Node n;
    n.kind = Node::Kind::kLiteral;
    long long i = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty()) {
      n.literal = i;
    } else {
      double d = 0;
      auto [fend, fec] = std::from_chars(digits.data(), digits.data() + digits.size(), d);
      if (fec != std::errc() || fend != digits.data() + digits.size() || digits.empty()) {
        Fail("cannot parse number " + text);
      }
      n.literal = d;
    }
    cur.push_back(std::move(n));
  }

  void ParseIdentifier(NodeList& cur) {
    std::size_t start = pos_;
    while (!IsTerminator(Peek())) ++pos_;
    std::string value(in_.substr(start, pos_ - start));
    Node n;
    if (value == "true" || value == "false") {
      n.kind = Node::Kind::kLiteral;
      n.literal = value == "true";
    } else {
      n.kind = Node::Kind::kIdent;
      n.name = std::move(value);
    }
    cur.push_back(std::move(n));
  }

  void ParseQuote(NodeList& cur, char quote) {
    std::size_t start = pos_ - 1;
    while (true) {
      int c = Peek();
      if (c == -1 || c == '\n') Fail("unterminated quoted string");
      ++pos_;
      if (c == quote && in_[pos_ - 2] != '\\') break;
    }
    Node n;
    n.kind = Node::Kind::kText;
    n.literal = Unquote(in_.substr(start, pos_ - start));
    cur.push_back(std::move(n));
  }

  // `[...]` after its '[': an index, a slice, `*`, a quoted key or a union.
  void ParseArray(NodeList& cur) {
    std::size_t start = pos_;
    while (true) {
      int c = Peek();
      if (c == -1 || c == '\n') Fail("unterminated array");
      ++pos_;
      if (c == ']') break;
    }
    std::string text(in_.substr(start, pos_ - 1 - start));
    if (text == "*") text = ":";

    if (text.find(',') != std::string::npos) {
      Node u;
      u.kind = Node::Kind::kUnion;
      std::size_t from = 0;
      while (true) {
        std::size_t comma = text.find(',', from);
        std::string part = Trim(std::string_view(text).substr(
            from, comma == std::string::npos ? std::string::npos : comma - from));
        u.lists.push_back(ParseSub("[" + part + "]"));
        if (comma == std::string::npos) break;
        from = comma + 1;
      }
      cur.push_back(std::move(u));
      return;
    }

    if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') &&
        text.back() == text.front() && text.find(text.front(), 1) == text.size() - 1) {
      // client-go reads ['a.b'] as the path .a.b; a key that holds dots (a label such as
      // 'app.kubernetes.io/name') is tried first, then that path.
      Node n;
      n.kind = Node::Kind::kField;
      n.name = text.substr(1, text.size() - 2);
      if (n.name.find('.') != std::string::npos) {
        n.kind = Node::Kind::kKey;
        n.lists.push_back(ParseSub("." + n.name));
      }
      cur.push_back(std::move(n));
      return;
    }

    // Slice: (-?\d*)(:-?\d*)?(:-?\d*)?
    std::vector<std::string> parts;
    std::size_t from = 0;
    while (true) {
      std::size_t colon = text.find(':', from);
      parts.push_back(
          text.substr(from, colon == std::string::npos ? std::string::npos : colon - from));
      if (colon == std::string::npos) break;
      from = colon + 1;
    }
    auto well_formed = [](const std::string& p) {
      std::size_t i = (!p.empty() && p[0] == '-') ? 1 : 0;
      for (; i < p.size(); ++i) {
        if (!IsDigit(static_cast<unsigned char>(p[i]))) return false;
      }
      return true;
    };
    if (parts.size() > 3) Fail("invalid array index " + text);
    for (const auto& p : parts) {
      if (!well_formed(p)) Fail("invalid array index " + text);
    }
    Node n;
    n.kind = Node::Kind::kArray;
    for (std::size_t i = 0; i < 3; ++i) {
      Param& param = n.params[i];
      if (i < parts.size() && !parts[i].empty()) {
        long long v = 0;
        auto [end, ec] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), v);
        if (ec != std::errc() || end != parts[i].data() + parts[i].size()) {
          Fail("array index " + parts[i] + " is not a number");
        }
        param.known = true;
        param.value = v;
      } else if (i == 1 && parts.size() == 1) {
        param.known = true;
        param.value = n.params[0].value + 1;
        param.derived = true;
      }
    }
    cur.push_back(std::move(n));
  }

  // `[?(left OP right)]` or `[?(path)]`.
  void ParseFilter(NodeList& cur) {
    pos_ += 3;
    std::size_t start = pos_;
    bool begin = false;
    bool end = false;
    char pair = 0;
    while (true) {
      int c = Peek();
      if (c == -1 || c == '\n') Fail("unterminated filter");
      ++pos_;
      if (c == '"' || c == '\'') {
        if (!begin) {
          begin = true;
          pair = static_cast<char>(c);
        } else if (in_[pos_ - 2] != '\\' && c == pair) {
          end = true;
        }
      } else if (c == ')' && begin == end) {
        break;
      }
    }
    std::string text(in_.substr(start, pos_ - 1 - start));
    if (Peek() != ']') Fail("unclosed array expect ]");
    ++pos_;

    static constexpr std::string_view kOps = "!<>=";
    std::size_t op_at = text.find_first_of(kOps);
    Node f;
    f.kind = Node::Kind::kFilter;
    if (op_at == std::string::npos || op_at == 0) {
      f.name = "exists";
      f.lists = {ParseSub(text), {}};
    } else {
      std::size_t op_end = text.find_first_not_of(kOps, op_at);
      if (op_end == std::string::npos) op_end = text.size();
      if (op_end == text.size()) {
        // The regexp's right side needs one character: it takes the operator's last one.
        if (op_end - op_at < 2) {
          f.name = "exists";
          f.lists = {ParseSub(text), {}};
          cur.push_back(std::move(f));
          return;
        }
        --op_end;
      }
      f.name = text.substr(op_at, op_end - op_at);
      if (f.name != "==" && f.name != "!=" && f.name != "<" && f.name != ">" && f.name != "<=" &&
          f.name != ">=") {
        Fail("unrecognized filter operator " + f.name);
      }
      f.lists = {ParseSub(text.substr(0, op_at)), ParseSub(text.substr(op_end))};
    }
    cur.push_back(std::move(f));
  }

  std::string_view in_;
  std::size_t pos_ = 0;
};

// `range` and `end` only where they belong; any other identifier is unknown.
void CheckIdentifiers(const NodeList& nodes) {
  for (const Node& n : nodes) {
    if (n.kind == Node::Kind::kIdent) {
      if (n.name == "range" || n.name == "end") {
        Fail("\"" + n.name + "\" must be an action of its own, as {range .path} or {end}");
      }
      Fail("unrecognized identifier " + n.name);
    }
    for (const NodeList& sub : n.lists) CheckIdentifiers(sub);
  }
}

std::vector<Segment> BuildSegments(std::vector<Parser::Item> items) {
  std::vector<Segment> root;
  std::vector<std::vector<Segment>*> stack{&root};
  for (auto& item : items) {
    Segment s;
    if (item.is_text) {
      s.kind = Segment::Kind::kText;
      s.text = std::move(item.text);
      stack.back()->push_back(std::move(s));
      continue;
    }
    NodeList& nodes = item.nodes;
    if (!nodes.empty() && nodes.front().kind == Node::Kind::kIdent &&
        (nodes.front().name == "range" || nodes.front().name == "end")) {
      if (nodes.front().name == "end") {
        if (nodes.size() != 1) Fail("{end} takes nothing more");
        if (stack.size() == 1) Fail("not in range, nothing to end");
        stack.pop_back();
        continue;
      }
      s.kind = Segment::Kind::kRange;
      s.nodes.assign(std::make_move_iterator(nodes.begin() + 1),
                     std::make_move_iterator(nodes.end()));
      CheckIdentifiers(s.nodes);
      stack.back()->push_back(std::move(s));
      stack.push_back(&stack.back()->back().body);
      continue;
    }
    CheckIdentifiers(nodes);
    s.kind = Segment::Kind::kAction;
    s.nodes = std::move(nodes);
    stack.back()->push_back(std::move(s));
  }
  // A {range} without {end} runs to the end of the template, as client-go does.
  return root;
}

std::string TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::null:
      return "null";
    default:
      return "number";
  }
}

// A float as Go's fmt %v prints a float64: %g with the shortest digits, in exponent form when
// the exponent is below -4 or from 6 on (1e+06, 1.5e-05, 123456, 0.5).
std::string GoFloat(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  int exp = std::atoi(sci.c_str() + sci.find('e') + 1);
  if (exp < -4 || exp >= 6) return sci;
  r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

// One value as kubectl prints it: strings raw, objects and arrays as JSON, null as <nil>.
std::string ValueText(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return v.get<std::string>();
    case Json::value_t::null:
      return "<nil>";
    case Json::value_t::number_float:
      return GoFloat(v.get<double>());
    default:
      return v.dump();
  }
}

class Evaluator {
 public:
  explicit Evaluator(bool allow_missing) : allow_missing_(allow_missing) {}

  Values EvalList(Values in, const NodeList& nodes) const {
    for (const Node& n : nodes) in = Walk(in, n);
    return in;
  }

 private:
  Values Walk(const Values& in, const Node& n) const {
    switch (n.kind) {
      case Node::Kind::kText:
        return {&n.literal};
      case Node::Kind::kLiteral:
        return Values(in.size(), &n.literal);
      case Node::Kind::kField:
        return Field(in, n.name);
      case Node::Kind::kKey:
        return Key(in, n);
      case Node::Kind::kWildcard:
        return Wildcard(in);
      case Node::Kind::kRecursive: {
        Values out;
        for (const Json* v : in) Recurse(*v, out);
        return out;
      }
      case Node::Kind::kArray:
        return Array(in, n.params);
      case Node::Kind::kUnion: {
        Values out;
        for (const NodeList& branch : n.lists) {
          Values part = EvalList(in, branch);
          out.insert(out.end(), part.begin(), part.end());
        }
        return out;
      }
      case Node::Kind::kFilter:
        return Filter(in, n);
      case Node::Kind::kIdent:
        break;
    }
    Fail("unrecognized identifier " + n.name);
  }

  Values Field(const Values& in, const std::string& name) const {
    if (in.empty()) return {};
    if (name.empty()) return in;  // `{.}`: the current object.
    Values out;
    for (const Json* v : in) {
      if (!v->is_object()) continue;
      auto it = v->find(name);
      if (it != v->end()) out.push_back(&*it);
    }
    if (out.empty() && !allow_missing_) Fail(name + " is not found");
    return out;
  }

  // ['a.b']: the key "a.b" where an object has it, else the path .a.b.
  Values Key(const Values& in, const Node& n) const {
    if (in.empty()) return {};
    Values out;
    const Evaluator lenient(true);
    for (const Json* v : in) {
      if (!v->is_object()) continue;
      auto it = v->find(n.name);
      if (it != v->end()) {
        out.push_back(&*it);
        continue;
      }
      Values path = lenient.EvalList({v}, n.lists[0]);
      out.insert(out.end(), path.begin(), path.end());
    }
    if (out.empty() && !allow_missing_) Fail(n.name + " is not found");
    return out;
  }

  static Values Wildcard(const Values& in) {
    Values out;
    for (const Json* v : in) {
      if (v->is_object() || v->is_array()) {
        for (const Json& e : *v) out.push_back(&e);
      }
    }
    return out;
  }

  // The value and every object or array under it, depth first (non-empty containers only).
  static void Recurse(const Json& v, Values& out) {
    if ((!v.is_object() && !v.is_array()) || v.empty()) return;
    out.push_back(&v);
    for (const Json& e : v) Recurse(e, out);
  }

  static Values Array(const Values& in, const std::array<Param, 3>& p) {
    Values out;
    for (const Json* v : in) {
      if (v->is_null()) continue;
      if (!v->is_array()) Fail(TypeName(*v) + " is not array or slice");
      const auto len = static_cast<long long>(v->size());
      long long start = p[0].known ? p[0].value : 0;
      if (start < 0) start += len;
      long long end = p[1].known ? p[1].value : len;
      if (end < 0 || (end == 0 && p[1].derived)) end += len;
      if (end == start) continue;  // Zero elements asked for: none, no error.
      if (start >= len || start < 0) {
        Fail("array index out of bounds: index " + std::to_string(start) + ", length " +
             std::to_string(len));
      }
      if (end > len || end < 0) {
        Fail("array index out of bounds: index " + std::to_string(end - 1) + ", length " +
             std::to_string(len));
      }
      if (start > end) {
        Fail("starting index " + std::to_string(start) + " is greater than ending index " +
             std::to_string(end));
      }
      long long step = 1;
      if (p[2].known) {
        if (p[2].value <= 0) Fail("step must be > 0");
        step = p[2].value;
      }
      for (long long i = start; i < end; i += step) {
        out.push_back(&(*v)[static_cast<std::size_t>(i)]);
      }
    }
    return out;
  }

  Values Filter(const Values& in, const Node& f) const {
    Values out;
    for (const Json* v : in) {
      if (v->is_null()) continue;
      if (!v->is_array()) Fail(TypeName(*v) + " is not array or slice and cannot be filtered");
      for (const Json& e : *v) {
        if (f.name == "exists") {
          Values left;
          try {
            left = EvalList({&e}, f.lists[0]);
          } catch (const TemplateError&) {
          }
          if (!left.empty()) out.push_back(&e);
          continue;
        }
        Values left = EvalList({&e}, f.lists[0]);
        if (left.empty() && allow_missing_) continue;
        if (left.size() != 1) Fail("can only compare one element at a time");
        Values right = EvalList({&e}, f.lists[1]);
        if (right.size() != 1) Fail("can only compare one element at a time");
        if (Compare(*left[0], f.name, *right[0])) out.push_back(&e);
      }
    }
    return out;
  }

  static bool Compare(const Json& a, const std::string& op, const Json& b) {
    auto scalar = [](const Json& x) { return x.is_string() || x.is_number() || x.is_boolean(); };
    if (!scalar(a) || !scalar(b)) Fail("invalid type for comparison");
    int c = 0;
    if (a.is_number() && b.is_number()) {
      if (a.is_number_float() || b.is_number_float()) {
        double x = a.get<double>();
        double y = b.get<double>();
        c = x < y ? -1 : x > y ? 1 : 0;
      } else if (a.is_number_unsigned() || b.is_number_unsigned()) {
        // One side beyond int64 (unsigned): a negative other side is smaller.
        auto key = [](const Json& x) -> std::pair<bool, std::uint64_t> {
          if (x.is_number_unsigned()) return {true, x.get<std::uint64_t>()};
          auto i = x.get<std::int64_t>();
          return {i >= 0, static_cast<std::uint64_t>(i)};
        };
        auto x = key(a);
        auto y = key(b);
        c = x < y ? -1 : x > y ? 1 : 0;
      } else {
        auto x = a.get<std::int64_t>();
        auto y = b.get<std::int64_t>();
        c = x < y ? -1 : x > y ? 1 : 0;
      }
    } else if (a.is_string() && b.is_string()) {
      int r = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
      c = r < 0 ? -1 : r > 0 ? 1 : 0;
    } else if (a.is_boolean() && b.is_boolean()) {
      if (op != "==" && op != "!=") Fail("invalid type for comparison");
      c = a.get<bool>() == b.get<bool>() ? 0 : 1;
    } else {
      Fail("incompatible types for comparison");
    }
    if (op == "==") return c == 0;
    if (op == "!=") return c != 0;
    if (op == "<") return c < 0;
    if (op == ">") return c > 0;
    if (op == "<=") return c <= 0;
    return c >= 0;
  }

  bool allow_missing_;
};

ValidationError TemplateFailure(std::string_view text, const std::string& why) {
  return ValidationError("output", std::string(text), why);
}

}  // namespace

JsonPath JsonPath::Parse(std::string_view text) {
  if (text.empty()) throw TemplateFailure(text, "template format specified but no template given");
  JsonPath out;
  out.text_ = std::string(text);
  try {
    Parser parser(out.text_);
    out.segments_ =
        std::make_shared<const std::vector<Segment>>(BuildSegments(parser.ParseTemplate()));
  } catch (const TemplateError& e) {
    throw TemplateFailure(text, e.why);
  }
  return out;
}

namespace {

// Runs the template and hands each printed result list to `sink`; text segments come as one
// string value.
template <typename Sink>
void Run(const std::vector<Segment>& segments, const Evaluator& ev, const Json* cur, Sink&& sink) {
  for (const Segment& s : segments) {
    switch (s.kind) {
      case Segment::Kind::kText: {
        Json text = s.text;
        sink(Values{&text});
        break;
      }
      case Segment::Kind::kAction:
        sink(ev.EvalList({cur}, s.nodes));
        break;
      case Segment::Kind::kRange:
        for (const Json* v : ev.EvalList({cur}, s.nodes)) Run(s.body, ev, v, sink);
        break;
    }
  }
}

}  // namespace

std::string JsonPath::Execute(const Json& data, bool allow_missing_keys, bool as_json) const {
  std::string out;
  try {
    Evaluator ev(allow_missing_keys);
    Run(*segments_, ev, &data, [&](const Values& results) {
      if (as_json) {
        Json array = Json::array();
        for (const Json* r : results) array.push_back(*r);
        out += array.dump(4) + "\n";
        return;
      }
      for (std::size_t i = 0; i < results.size(); ++i) {
        if (i) out += ' ';
        out += ValueText(*results[i]);
      }
    });
  } catch (const TemplateError& e) {
    throw TemplateFailure(text_, e.why);
  }
  return out;
}

std::vector<Json> JsonPath::FindAll(const Json& data) const {
  std::vector<Json> out;
  try {
    Evaluator ev(true);
    Run(*segments_, ev, &data, [&](const Values& results) {
      for (const Json* r : results) out.push_back(*r);
    });
  } catch (const TemplateError& e) {
    throw TemplateFailure(text_, e.why);
  }
  return out;
}

std::string RenderJsonPath(std::string_view text, const Json& data, bool allow_missing_keys) {
  return JsonPath::Parse(text).Execute(data, allow_missing_keys);
}

std::vector<CustomColumn> ParseCustomColumns(std::string_view spec) {
  if (spec.empty()) {
    throw ValidationError(
        "output", "custom-columns=", "custom-columns format specified but no custom columns given");
  }
  std::vector<CustomColumn> columns;
  std::size_t from = 0;
  while (true) {
    std::size_t comma = spec.find(',', from);
    std::string_view part =
        spec.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from);
    std::size_t colon = part.find(':');
    if (colon == std::string_view::npos) {
      throw ValidationError("output", std::string(spec),
                            "unexpected custom-columns spec: " + std::string(part) +
                                ", expected <header>:<json-path-expr>");
    }
    std::string_view path = part.substr(colon + 1);
    // RelaxedJSONPathExpression: ^\{\.?([^{}]+)\}$|^\.?([^{}]+)$ -> {.X}
    std::string field;
    if (!path.empty()) {
      std::string_view inner = path;
      if (inner.size() >= 2 && inner.front() == '{' && inner.back() == '}') {
        inner = inner.substr(1, inner.size() - 2);
      }
      if (!inner.empty() && inner.front() == '.') inner.remove_prefix(1);
      if (inner.empty() || inner.find_first_of("{}") != std::string_view::npos) {
        throw ValidationError("output", std::string(spec),
                              "unexpected path string " + std::string(path) +
                                  ", expected a 'name1.name2' or '.name1.name2' or "
                                  "'{name1.name2}' or '{.name1.name2}'");
      }
      field = "{." + std::string(inner) + "}";
      try {
        (void)JsonPath::Parse(field);
      } catch (const ValidationError& e) {
        throw ValidationError(
            "output", std::string(spec),
            "column " + std::string(part.substr(0, colon)) + ": " + e.server_message());
      }
    }
    columns.push_back({std::string(part.substr(0, colon)), field});
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  return columns;
}

std::string CustomColumnsTable(std::string_view spec, const std::vector<Json>& objects,
                               bool no_headers) {
  std::vector<CustomColumn> columns = ParseCustomColumns(spec);
  std::vector<JsonPath> paths;
  paths.reserve(columns.size());
  for (const auto& c : columns) {
    paths.push_back(c.path.empty() ? JsonPath() : JsonPath::Parse(c.path));
  }
  std::vector<const Json*> items;
  for (const Json& o : objects) {
    if (o.is_object() && o.contains("items") && o["items"].is_array()) {
      for (const Json& i : o["items"]) items.push_back(&i);
    } else {
      items.push_back(&o);
    }
  }
  if (items.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  if (!no_headers) {
    std::vector<std::string> header;
    header.reserve(columns.size());
    for (const auto& c : columns) header.push_back(c.header);
    rows.push_back(std::move(header));
  }
  for (const Json* item : items) {
    std::vector<std::string> row;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      std::vector<Json> values;
      if (!columns[i].path.empty()) values = paths[i].FindAll(*item);
      std::string cell;
      for (std::size_t k = 0; k < values.size(); ++k) {
        if (k) cell += ',';
        cell += ValueText(values[k]);
      }
      row.push_back(values.empty() ? "<none>" : cell);
    }
    rows.push_back(std::move(row));
  }
  return AlignColumns(rows);
}

namespace {

std::size_t CodePoints(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

}  // namespace

std::string AlignColumns(const std::vector<std::vector<std::string>>& rows) {
  constexpr std::size_t kMinWidth = 10;
  constexpr std::size_t kPadding = 3;
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    for (std::size_t j = 0; j + 1 < row.size(); ++j) {
      if (widths.size() <= j) widths.resize(j + 1, kMinWidth);
      widths[j] = std::max(widths[j], CodePoints(row[j]) + kPadding);
    }
  }
  std::string out;
  for (const auto& row : rows) {
    for (std::size_t j = 0; j < row.size(); ++j) {
      out += row[j];
      if (j + 1 < row.size()) out.append(widths[j] - CodePoints(row[j]), ' ');
    }
    out += '\n';
  }
  return out;
}

std::string CpuQuantityText(double cores) {
  if (!std::isfinite(cores)) {
    throw ValidationError("cpu", std::to_string(cores), "is not a finite number");
  }
  // Round up to whole millicores (away from zero), tolerating binary noise (2.7 * 1000 is
  // 2700.0000000000005).
  double milli = cores * 1000.0;
  double rounded = milli >= 0 ? std::ceil(milli - 1e-6) : -std::ceil(-milli - 1e-6);
  constexpr double kMax = 9.2e18;
  if (std::fabs(rounded) > kMax) {
    throw ValidationError("cpu", std::to_string(cores), "is out of range");
  }
  return Quantity::FromMilli(static_cast<std::int64_t>(rounded)).ToString();
}

std::string ByteQuantityText(std::int64_t bytes) {
  return Quantity::FromInt(bytes, Quantity::Format::kBinarySI).ToString();
}

std::string HumanDuration(std::chrono::nanoseconds d) {
  using std::chrono::duration_cast;
  const long long seconds = duration_cast<std::chrono::seconds>(d).count();  // toward zero
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60LL * 2) return std::to_string(seconds) + "s";
  const long long minutes = seconds / 60;
  if (minutes < 10) {
    long long s = seconds % 60;
    return s == 0 ? std::to_string(minutes) + "m"
                  : std::to_string(minutes) + "m" + std::to_string(s) + "s";
  }
  if (minutes < 60LL * 3) return std::to_string(minutes) + "m";
  const long long hours = minutes / 60;
  if (hours < 8) {
    long long m = minutes % 60;
    return m == 0 ? std::to_string(hours) + "h"
                  : std::to_string(hours) + "h" + std::to_string(m) + "m";
  }
  if (hours < 48) return std::to_string(hours) + "h";
  const long long days = hours / 24;
  if (hours < 24LL * 8) {
    long long h = hours % 24;
    return h == 0 ? std::to_string(days) + "d"
                  : std::to_string(days) + "d" + std::to_string(h) + "h";
  }
  if (hours < 24LL * 365 * 2) return std::to_string(days) + "d";
  const long long years = days / 365;
  if (hours < 24LL * 365 * 8) {
    long long dy = days % 365;
    return dy == 0 ? std::to_string(years) + "y"
                   : std::to_string(years) + "y" + std::to_string(dy) + "d";
  }
  return std::to_string(years) + "y";
}

std::string Age(std::string_view rfc3339, std::chrono::system_clock::time_point now) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
  auto digits = [&](std::size_t at, std::size_t n, int* out) {
    if (at + n > rfc3339.size()) return false;
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (!IsDigit(static_cast<unsigned char>(rfc3339[i]))) return false;
      v = v * 10 + (rfc3339[i] - '0');
    }
    *out = v;
    return true;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (rfc3339.size() < 20 || !digits(0, 4, &year) || rfc3339[4] != '-' || !digits(5, 2, &month) ||
      rfc3339[7] != '-' || !digits(8, 2, &day) || (rfc3339[10] != 'T' && rfc3339[10] != 't') ||
      !digits(11, 2, &hour) || rfc3339[13] != ':' || !digits(14, 2, &minute) ||
      rfc3339[16] != ':' || !digits(17, 2, &second) || month < 1 || month > 12 || day < 1 ||
      day > 31 || hour > 23 || minute > 59 || second > 60) {
    return "<unknown>";
  }
  std::size_t at = 19;
  long long nanos = 0;
  if (rfc3339[at] == '.') {
    ++at;
    long long scale = 100000000;
    std::size_t begin = at;
    while (at < rfc3339.size() && IsDigit(static_cast<unsigned char>(rfc3339[at]))) {
      nanos += (rfc3339[at] - '0') * scale;
      scale /= 10;
      ++at;
    }
    if (at == begin) return "<unknown>";
  }
  long long offset = 0;
  if (at < rfc3339.size() && (rfc3339[at] == 'Z' || rfc3339[at] == 'z') &&
      at + 1 == rfc3339.size()) {
    offset = 0;
  } else if (at + 6 == rfc3339.size() && (rfc3339[at] == '+' || rfc3339[at] == '-') &&
             rfc3339[at + 3] == ':') {
    int oh = 0, om = 0;
    if (!digits(at + 1, 2, &oh) || !digits(at + 4, 2, &om)) return "<unknown>";
    offset = (oh * 3600LL + om * 60LL) * (rfc3339[at] == '-' ? -1 : 1);
  } else {
    return "<unknown>";
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t t = timegm(&tm);
  const auto created = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(static_cast<long long>(t) - offset) +
          std::chrono::nanoseconds(nanos)));
  return HumanDuration(std::chrono::duration_cast<std::chrono::nanoseconds>(now - created));
}

}  // namespace tfk8s::cli
