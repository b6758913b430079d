#include "tfk8s/yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "tfk8s/error.hpp"

namespace tfk8s {
namespace {

// Strings that a YAML 1.1 reader would take for something else must be quoted.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const char* kSpecial[] = {"true", "false", "yes", "no", "on", "off", "null", "~",
                                   "True", "False", "Yes", "No", "On", "Off", "Null", "NULL",
                                   "TRUE", "FALSE", "YES", "NO", "ON", "OFF", "y", "n", "Y", "N"};
  for (const char* k : kSpecial) {
    if (s == k) return true;
  }
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  if (end && *end == '\0') return true;  // numeric-looking
  return false;
}

void Emit(YAML::Emitter& out, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out << YAML::Key << it.key() << YAML::Value;
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
      const auto& s = j.get_ref<const std::string&>();
      // A literal block ("|") keeps exactly one trailing newline; other multi-line strings are
      // double-quoted so they survive a round trip byte for byte.
      bool one_trailing_newline = s.size() >= 2 && s.back() == '\n' && s[s.size() - 2] != '\n';
      if (s.find('\n') != std::string::npos && one_trailing_newline &&
          s.find_first_of("\r\t") == std::string::npos && s.front() != ' ') {
        out << YAML::Literal << s;
      } else if (s.find('\n') != std::string::npos) {
        out << YAML::DoubleQuoted << s;
      } else if (NeedsQuotes(s)) {
        out << YAML::DoubleQuoted << s;
      } else {
        out << s;
      }
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

nlohmann::json Convert(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = Convert(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& v : n) a.push_back(Convert(v));
      return a;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted in the source: always a string
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      if (s == "null" || s == "~" || s == "Null" || s == "NULL") return nullptr;
      if (!s.empty()) {
        char* end = nullptr;
        long long i = std::strtoll(s.c_str(), &end, 10);
        if (end && *end == '\0') return i;
        double d = std::strtod(s.c_str(), &end);
        if (end && *end == '\0' && s.find_first_of("0123456789") != std::string::npos) return d;
      }
      return s;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
    default:
      return nullptr;
  }
}

}  // namespace

std::string ToYaml(const nlohmann::json& object) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  Emit(out, object);
  return std::string(out.c_str()) + "\n";
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
    throw ValidationError("yaml", "", "expected one YAML document, found " +
                                          std::to_string(docs.size()));
  }
  return docs.front();
}

std::vector<nlohmann::json> FromYamlDocuments(std::string_view text) {
  std::vector<nlohmann::json> out;
  try {
    for (const auto& doc : YAML::LoadAll(std::string(text))) {
      if (doc.IsNull()) continue;
      out.push_back(Convert(doc));
    }
  } catch (const YAML::Exception& e) {
    throw ValidationError("yaml", "", std::string("not valid YAML: ") + e.what());
  }
  return out;
}

}  // namespace tfk8s
