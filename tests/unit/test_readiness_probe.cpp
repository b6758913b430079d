// The tools' readiness probe (ToolsReadinessProbe) run for real: the rendered exec command, as
// the kubelet hands it over, executed by /bin/sh against sockets this test opens, in this
// process's own network namespace (the probe reads /proc/net/tcp and tcp6 like in a pod).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "kubelet_expansion.hpp"
#include "tfk8s/devinstance.hpp"
#include "workloads/devinstance_internal.hpp"
#include "workloads/start_script.hpp"

using namespace tfk8s;

namespace {

// A TCP socket bound to an ephemeral loopback port, listening or not.
class Socket {
 public:
  Socket(int family, bool listening) : fd_(::socket(family, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    if (family == AF_INET6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_loopback;
      REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
      socklen_t n = sizeof a;
      REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) == 0);
      port_ = ntohs(a.sin6_port);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
      socklen_t n = sizeof a;
      REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) == 0);
      port_ = ntohs(a.sin_port);
    }
    if (listening) REQUIRE(::listen(fd_, 1) == 0);
  }
  ~Socket() { Close(); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int port() const { return port_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  int port_ = 0;
};

struct ProbeRun {
  int exit_code = -1;
  std::string output;
};

// Runs the probe's exec command as the kubelet would: $(VAR) expansion first, then argv.
ProbeRun RunProbe(const Json& probe) {
  auto argv = testing::KubeletExpand(probe["exec"]["command"].get<std::vector<std::string>>(),
                                     {{"HOME", "/root"}});
  REQUIRE(argv.size() == 3);
  REQUIRE(argv[0] == "/bin/sh");
  REQUIRE(argv[1] == "-c");
  int out[2];
  REQUIRE(::pipe(out) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::close(out[0]);
    ::execl("/bin/sh", "sh", "-c", argv[2].c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  ProbeRun run;
  char buf[512];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) run.output.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  run.exit_code = WEXITSTATUS(status);
  return run;
}

DevTools OnlyJupyterAndSsh(int jupyter, int ssh) {
  DevTools t;
  t.jupyter_port = jupyter;
  t.ssh_port = ssh;
  t.code_server = false;
  t.tensorboard = false;
  return t;
}

}  // namespace

TEST_SUITE("readiness probe") {
  TEST_CASE("every served tool must listen: IPv4 and IPv6, closed and unlistened ports fail") {
    Socket jupyter(AF_INET, true);
    Socket ssh(AF_INET6, true);
    DevTools tools = OnlyJupyterAndSsh(jupyter.port(), ssh.port());
    const Json probe = internal::ToolsReadinessProbe(tools);
    ProbeRun all = RunProbe(probe);
    CHECK(all.exit_code == 0);
    CHECK(all.output.empty());

    ssh.Close();
    ProbeRun no_ssh = RunProbe(probe);
    CHECK(no_ssh.exit_code == 1);
    CHECK(no_ssh.output == "tfk8s: ssh (port " + std::to_string(tools.ssh_port) +
                               ") does not accept connections yet\n");

    // Bound but not listening is not serving.
    Socket bound(AF_INET, false);
    tools.ssh_port = bound.port();
    ProbeRun not_listening = RunProbe(internal::ToolsReadinessProbe(tools));
    CHECK(not_listening.exit_code == 1);
    CHECK(not_listening.output.find("ssh (port " + std::to_string(bound.port()) + ")") !=
          std::string::npos);

    jupyter.Close();
    Socket ssh_again(AF_INET, true);
    tools.ssh_port = ssh_again.port();
    ProbeRun no_jupyter = RunProbe(internal::ToolsReadinessProbe(tools));
    CHECK(no_jupyter.exit_code == 1);
    CHECK(no_jupyter.output.find("tfk8s: jupyter (port ") == 0);
  }

  TEST_CASE("custom ports are the user's: neither probed nor listed as ready tools") {
    DevTools tools = OnlyJupyterAndSsh(8888, 22);
    tools.code_server = true;
    tools.custom_ports = {{"web", 9000}};
    std::vector<std::string> served;
    for (const auto& p : internal::ServedToolPorts(tools)) served.push_back(p.name);
    CHECK(served == std::vector<std::string>{"jupyter", "ssh", "code-server"});
    const std::string script = internal::ToolsReadinessProbe(tools)["exec"]["command"][2];
    CHECK(script.find("jupyter:8888:22B8") != std::string::npos);
    CHECK(script.find("ssh:22:0016") != std::string::npos);
    CHECK(script.find("code-server:8080:1F90") != std::string::npos);
    CHECK(script.find("9000") == std::string::npos);

    DevTools none;
    none.jupyter = none.ssh = none.code_server = none.tensorboard = false;
    none.custom_ports = {{"web", 9000}};
    CHECK(internal::ToolsReadinessProbe(none).is_null());
  }

  TEST_CASE("a DevInstance carries the probe of its tools, and no readiness-tool variable") {
    DevInstanceSpec dev;
    dev.name = "probe";
    dev.namespace_name = "ns";
    dev.owner = "alice";
    dev.image = "img";
    dev.resources.cpu = "1";
    dev.resources.memory = "1Gi";
    dev.tools.custom_ports = {{"web", 9000}};
    const Json c = RenderDevInstance(dev).front()["spec"]["template"]["spec"]["containers"][0];
    CHECK(c["readinessProbe"] == internal::ToolsReadinessProbe(dev.tools));
    CHECK_FALSE(c.dump().find("TFK8S_READINESS_TOOL") != std::string::npos);
  }
}
