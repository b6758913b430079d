// The pure part of the `tfk8s` command (tools/cli/cli_core.hpp): spec documents, unknown
// fields, label selectors, durations, the one-line errors and the completion scripts.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>

#include "cli_core.hpp"
#include "error_text.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using namespace tfk8s::cli;

TEST_SUITE("cli") {
  TEST_CASE("spec documents: several, JSON or YAML, the matching kind removed") {
    auto docs = ReadSpecDocuments(
        "kind: TFCluster\nname: a\n---\n{\"name\": \"b\", \"worker\": {\"replicas\": 2}}\n",
        "f.yaml", "TFCluster");
    REQUIRE(docs.size() == 2);
    CHECK(docs[0] == Json{{"name", "a"}});
    CHECK(docs[1]["worker"]["replicas"] == 2);
  }

  TEST_CASE("spec documents: a wrong kind, a non-mapping and an empty stream are refused") {
    CHECK(tfk8s::testing::ValidationMessage([] {
            ReadSpecDocuments("name: a\n---\nkind: Deployment\n", "f.yaml", "TFCluster");
          }).find("f.yaml document 2: kind") != std::string::npos);
    CHECK(tfk8s::testing::ValidationMessage([] {
            ReadSpecDocuments("- a\n- b\n", "f.yaml", "TFCluster");
          }).find("must be a mapping") != std::string::npos);
    CHECK(tfk8s::testing::ValidationMessage([] {
            ReadSpecDocuments("\n", "f.yaml", "TFCluster");
          }).find("holds no document") != std::string::npos);
  }

  TEST_CASE("spec documents: malformed YAML names the file and the line") {
    std::string message = tfk8s::testing::ValidationMessage([] {
      ReadSpecDocuments("name: a\nworker:\n  replicas: [1, 2\n", "bad.yaml", "TFCluster");
    });
    CHECK(message.find("bad.yaml") != std::string::npos);
    CHECK(message.find("line ") != std::string::npos);
  }

  TEST_CASE("label selectors: equality, inequality, existence") {
    auto sel = ParseLabelSelector("team=a, tier!=gpu,owner,!debug");
    REQUIRE(sel.size() == 4);
    CHECK(MatchesSelector(sel, {{"team", "a"}, {"owner", "ann"}}));
    CHECK_FALSE(MatchesSelector(sel, {{"team", "b"}, {"owner", "ann"}}));
    CHECK_FALSE(MatchesSelector(sel, {{"team", "a"}, {"owner", "ann"}, {"tier", "gpu"}}));
    CHECK_FALSE(MatchesSelector(sel, {{"team", "a"}, {"owner", "ann"}, {"debug", ""}}));
    CHECK_FALSE(MatchesSelector(sel, {{"team", "a"}}));
    CHECK(MatchesSelector(ParseLabelSelector("team==a"), {{"team", "a"}}));
    CHECK(ParseLabelSelector("").empty());
    CHECK_THROWS_AS(ParseLabelSelector("a,,b"), ValidationError);
    CHECK_THROWS_AS(ParseLabelSelector("=a"), ValidationError);
  }

  TEST_CASE("label selectors: set-based requirements and comparisons, as labels.Parse reads them") {
    auto sel = ParseLabelSelector("team in (a, b),tier notin (gpu),!debug");
    REQUIRE(sel.size() == 3);
    CHECK(sel[0].op == LabelRequirement::Op::kIn);
    CHECK(sel[0].values == std::vector<std::string>{"a", "b"});
    CHECK(sel[1].op == LabelRequirement::Op::kNotIn);
    CHECK(MatchesSelector(sel, {{"team", "a"}}));
    CHECK(MatchesSelector(sel, {{"team", "b"}, {"tier", "cpu"}}));
    CHECK_FALSE(MatchesSelector(sel, {{"team", "c"}}));
    CHECK_FALSE(MatchesSelector(sel, {}));  // in: the key must be there
    CHECK_FALSE(MatchesSelector(sel, {{"team", "a"}, {"tier", "gpu"}}));
    CHECK_FALSE(MatchesSelector(sel, {{"team", "a"}, {"debug", "1"}}));
    // notin and != match an absent key, as in Kubernetes.
    CHECK(MatchesSelector(ParseLabelSelector("tier notin (gpu)"), {}));
    CHECK(MatchesSelector(ParseLabelSelector("tier!=gpu"), {}));
    // An empty place in a set is the empty value.
    CHECK(ParseLabelSelector("k in (a,)")[0].values == std::vector<std::string>{"", "a"});
    auto gt = ParseLabelSelector("rank>9,size<100");
    CHECK(MatchesSelector(gt, {{"rank", "10"}, {"size", "99"}}));
    CHECK_FALSE(MatchesSelector(gt, {{"rank", "9"}, {"size", "99"}}));
    CHECK_FALSE(MatchesSelector(gt, {{"rank", "x"}, {"size", "99"}}));
    CHECK(ParseLabelSelector("example.com/team = a")[0].key == "example.com/team");
    // Canonical text (what the fuzz harness round-trips): the parsed meaning, written one way.
    CHECK(FormatLabelSelector(ParseLabelSelector(" team in (b,a,b), !debug,tier==gpu, k>07")) ==
          "team in (a,b),!debug,tier=gpu,k>07");
    CHECK(FormatLabelSelector(ParseLabelSelector("k in (,), j notin (a,), e=, x")) ==
          "k in (,),j notin (,a),e=,x");
    CHECK(ParseLabelSelector("k in (,)")[0].values == std::vector<std::string>{""});
    for (const char* bad :
         {"team in (a,b", "team in a", "team in ()", "team notin", "k in (a b)", "k=(a)", "k>x",
          "!k=v", "a b", "bad key=1", "k=v=w", "k=-v", "!", ",", "in (a)"}) {
      CAPTURE(bad);
      CHECK_THROWS_AS(ParseLabelSelector(bad), ValidationError);
    }
  }

  TEST_CASE("durations: units and bare seconds") {
    CHECK(ParseDuration("90", "t") == std::chrono::seconds(90));
    CHECK(ParseDuration("90s", "t") == std::chrono::seconds(90));
    CHECK(ParseDuration("250ms", "t") == std::chrono::milliseconds(250));
    CHECK(ParseDuration("5m", "t") == std::chrono::minutes(5));
    CHECK(ParseDuration("2h", "t") == std::chrono::hours(2));
    CHECK_THROWS_AS(ParseDuration("5d", "t"), ValidationError);
    CHECK_THROWS_AS(ParseDuration("m", "t"), ValidationError);
    CHECK_THROWS_AS(ParseDuration("-1s", "t"), ValidationError);
  }

  TEST_CASE("errors: one line naming the typed reason") {
    CHECK(ErrorLine(NotFound(ErrorKind::kNotFound, "tfcluster x\nnot found", 404, "NotFound")) ==
          "error: NotFound: tfcluster x not found");
    CHECK(ErrorLine(ValidationError("worker.replicas", "-1", "must be >= 0"))
              .rfind("error: ValidationError: ", 0) == 0);
    CHECK(ErrorLine(TransportError("connection refused", false)) ==
          "error: TransportError: connection refused");
    CHECK(ErrorLine(std::runtime_error("plain")) == "error: Error: plain");
  }

  TEST_CASE("completion: every command path lists its children and flags, and bash reads it") {
    CommandNode root{
        "tfk8s",
        {"-n", "--namespace"},
        {{"tfcluster", {"-n"}, {{"apply", {"-f", "--filename"}, {}}, {"status", {}, {}}}},
         {"version", {"--client"}, {}}}};
    std::string bash = BashCompletion(root);
    CHECK(bash.find("\"tfk8s\") words=\"tfcluster version -n --namespace\"") != std::string::npos);
    CHECK(bash.find("\"tfk8s tfcluster\") words=\"apply status -n\"") != std::string::npos);
    CHECK(bash.find("\"tfk8s tfcluster apply\") words=\"-f --filename\"") != std::string::npos);
    CHECK(bash.find("complete -F _tfk8s_complete tfk8s") != std::string::npos);
    CHECK(ZshCompletion(root).find("bashcompinit") != std::string::npos);
    // The script is valid bash and completes "tfk8s tfcluster a" to "apply".
    std::string path = "tfk8s_completion_test.bash";
    std::ofstream(path) << bash
                        << "COMP_WORDS=(tfk8s tfcluster a); COMP_CWORD=2; _tfk8s_complete; "
                           "echo \"${COMPREPLY[*]}\" > tfk8s_completion_test.out\n";
    REQUIRE(std::system(("bash " + path).c_str()) == 0);
    std::ifstream in("tfk8s_completion_test.out");
    std::string got;
    std::getline(in, got);
    CHECK(got == "apply");
    std::remove(path.c_str());
    std::remove("tfk8s_completion_test.out");
  }
}
