#include "http/transport.hpp"

namespace tfk8s::internal {

UrlParts SplitUrl(const std::string& url) {
  UrlParts p;
  auto scheme_end = url.find("://");
  std::size_t host_start = 0;
  if (scheme_end != std::string::npos) {
    p.scheme = url.substr(0, scheme_end);
    host_start = scheme_end + 3;
  }
  auto path_start = url.find('/', host_start);
  std::string authority = url.substr(
      host_start, path_start == std::string::npos ? std::string::npos : path_start - host_start);
  p.rest = path_start == std::string::npos ? "" : url.substr(path_start);
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    auto close = authority.find(']');
    p.host = authority.substr(0, close + 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') {
      p.port = authority.substr(close + 2);
    }
  } else {
    auto colon = authority.rfind(':');
    p.host = authority.substr(0, colon);
    if (colon != std::string::npos) p.port = authority.substr(colon + 1);
  }
  if (p.port.empty()) p.port = p.scheme == "http" ? "80" : "443";
  return p;
}

}  // namespace tfk8s::internal
