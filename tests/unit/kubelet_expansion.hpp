#pragma once
// A model of what the kubelet does to a container's command and args before execve(): it
// expands `$(NAME)` from the container's environment (an unknown NAME stays `$(NAME)`), turns
// `$$` into `$`, and keeps any other `$` (Kubernetes' third_party/forked/golang/expansion, as
// documented for container commands). Rendering tests run rendered argv through it to check
// what the process really receives.

#include <map>
#include <string>
#include <vector>

namespace tfk8s::testing {

inline std::string KubeletExpand(const std::string& in,
                                 const std::map<std::string, std::string>& env) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '$' || i + 1 == in.size()) {
      out += in[i];
      continue;
    }
    const char next = in[i + 1];
    if (next == '$') {  // an escaped '$'
      out += '$';
      ++i;
    } else if (next == '(') {
      const std::size_t close = in.find(')', i + 2);
      if (close == std::string::npos) {  // incomplete reference: kept
        out += "$(";
        ++i;
        continue;
      }
      const std::string name = in.substr(i + 2, close - i - 2);
      auto it = env.find(name);
      out += it != env.end() ? it->second : "$(" + name + ")";
      i = close;
    } else {
      out += '$';
    }
  }
  return out;
}

inline std::vector<std::string> KubeletExpand(std::vector<std::string> argv,
                                              const std::map<std::string, std::string>& env) {
  for (auto& word : argv) word = KubeletExpand(word, env);
  return argv;
}

}  // namespace tfk8s::testing
