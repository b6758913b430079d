// Tests for tfk8s::validation. Good/bad vectors come from Kubernetes'
// k8s.io/apimachinery/pkg/util/validation/validation_test.go; messages are the ones
// validation.go produces.

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"

namespace v = tfk8s::validation;

namespace {

using Strings = std::vector<std::string>;

// Kubernetes' words and examples; the regular expression Kubernetes appends is left out.

const std::string kLabelRuleMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name' or '123-abc')";
const std::string kSubdomainRuleMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com')";
const std::string kQualifiedNameRuleMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName' or 'my.name' or '123-abc')";
const std::string kLabelValueRuleMsg =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue' or 'my_value' or "
    "'12345')";

// Runs `fn(field, value)`, expecting a ValidationError; returns its what().
template <typename Fn>
std::string ExpectRejected(Fn fn, std::string_view field, std::string_view value) {
  try {
    fn(field, value);
  } catch (const tfk8s::ValidationError& e) {
    CHECK(e.field() == field);
    CHECK(e.value() == value);
    const std::string what = e.what();
    CHECK(what.find(field) != std::string::npos);
    CHECK(what.find(value) != std::string::npos);
    return what;
  }
  FAIL("expected a ValidationError for \"" << value << "\"");
  return {};
}

}  // namespace

TEST_SUITE("validation") {
  TEST_CASE("IsDns1123Label: Kubernetes good and bad values") {
    for (const std::string& good :
         {std::string("a"), std::string("ab"), std::string("abc"), std::string("a1"),
          std::string("a-1"), std::string("a--1--2--b"), std::string("0"), std::string("01"),
          std::string("012"), std::string("1a"), std::string("1-a"), std::string("1--a--b--2"),
          std::string(63, 'a')}) {
      CAPTURE(good);
      CHECK(v::IsDns1123Label(good).empty());
    }
    for (const std::string& bad :
         {std::string(""),    std::string("A"),    std::string("ABC"), std::string("aBc"),
          std::string("A1"),  std::string("A-1"),  std::string("1-A"), std::string("-"),
          std::string("a-"),  std::string("-a"),   std::string("1-"),  std::string("-1"),
          std::string("_"),   std::string("a_"),   std::string("_a"),  std::string("a_b"),
          std::string("1_"),  std::string("_1"),   std::string("1_2"), std::string("."),
          std::string("a."),  std::string(".a"),   std::string("a.b"), std::string("1."),
          std::string(".1"),  std::string("1.2"),  std::string(" "),   std::string("a "),
          std::string(" a"),  std::string("a b"),  std::string("1 "),  std::string(" 1"),
          std::string("1 2"), std::string(64, 'a')}) {
      CAPTURE(bad);
      CHECK_FALSE(v::IsDns1123Label(bad).empty());
    }
  }

  TEST_CASE("IsDns1123Label: messages") {
    CHECK(v::IsDns1123Label("A") == Strings{kLabelRuleMsg});
    CHECK(v::IsDns1123Label("") == Strings{kLabelRuleMsg});
    // A valid subdomain that is not a label can only be wrong because of dots.
    CHECK(v::IsDns1123Label("a.b") == Strings{"must not contain dots"});
    CHECK(v::IsDns1123Label(std::string(64, 'a')) == Strings{"must be no more than 63 characters"});
    CHECK(v::IsDns1123Label(std::string(64, 'A')) ==
          Strings{"must be no more than 63 characters", kLabelRuleMsg});
  }

  TEST_CASE("IsDns1123Subdomain: Kubernetes good and bad values") {
    for (const char* good : {"a",
                             "ab",
                             "abc",
                             "a1",
                             "a-1",
                             "a--1--2--b",
                             "0",
                             "01",
                             "012",
                             "1a",
                             "1-a",
                             "1--a--b--2",
                             "a.a",
                             "ab.a",
                             "abc.a",
                             "a1.a",
                             "a-1.a",
                             "a--1--2--b.a",
                             "a.1",
                             "ab.1",
                             "abc.1",
                             "a1.1",
                             "a-1.1",
                             "a--1--2--b.1",
                             "0.a",
                             "01.a",
                             "012.a",
                             "1a.a",
                             "1-a.a",
                             "0.1",
                             "01.1",
                             "012.1",
                             "1a.1",
                             "1-a.1",
                             "1--a--b--2.1",
                             "a.b.c.d.e",
                             "aa.bb.cc.dd.ee",
                             "1.2.3.4.5",
                             "11.22.33.44.55"}) {
      CAPTURE(good);
      CHECK(v::IsDns1123Subdomain(good).empty());
    }
    CHECK(v::IsDns1123Subdomain(std::string(253, 'a')).empty());
    for (const char* bad : {"",
                            "A",
                            "ABC",
                            "aBc",
                            "A1",
                            "A-1",
                            "1-A",
                            "-",
                            "a-",
                            "-a",
                            "1-",
                            "-1",
                            "_",
                            "a_",
                            "_a",
                            "a_b",
                            "1_",
                            "_1",
                            "1_2",
                            ".",
                            "a.",
                            ".a",
                            "a..b",
                            "1.",
                            ".1",
                            "1..2",
                            " ",
                            "a ",
                            " a",
                            "a b",
                            "1 ",
                            " 1",
                            "1 2",
                            "A.a",
                            "aB.a",
                            "ab.A",
                            "A1.a",
                            "a1.A",
                            "A.1",
                            "aB.1",
                            "A1.1",
                            "1A.1",
                            "0.A",
                            "01.A",
                            "012.A",
                            "1A.a",
                            "1a.A",
                            "A.B.C.D.E",
                            "AA.BB.CC.DD.EE",
                            "a.B.c.d.e",
                            "aa.bB.cc.dd.ee",
                            "a@b",
                            "a,b",
                            "a;b",
                            "a:b",
                            "a%b",
                            "a?b",
                            "a$b"}) {
      CAPTURE(bad);
      CHECK_FALSE(v::IsDns1123Subdomain(bad).empty());
    }
    CHECK_FALSE(v::IsDns1123Subdomain(std::string(254, 'a')).empty());
  }

  TEST_CASE("IsDns1123Subdomain: messages") {
    CHECK(v::IsDns1123Subdomain("Example.com") == Strings{kSubdomainRuleMsg});
    CHECK(v::IsDns1123Subdomain(std::string(254, 'a')) ==
          Strings{"must be no more than 253 characters"});
    CHECK(v::IsDns1123Subdomain(std::string(254, '-')) ==
          Strings{"must be no more than 253 characters", kSubdomainRuleMsg});
  }

  TEST_CASE("IsQualifiedName: Kubernetes good and bad values") {
    for (const std::string& good :
         {std::string("simple"), std::string("now-with-dashes"), std::string("1-starts-with-num"),
          std::string("1234"), std::string("simple/simple"), std::string("now-with-dashes/simple"),
          std::string("now-with-dashes/now-with-dashes"), std::string("now.with.dots/simple"),
          std::string("now-with.dashes-and.dots/simple"), std::string("1-num.2-num/3-num"),
          std::string("1234/5678"), std::string("1.2.3.4/5678"), std::string("Uppercase_Is_OK_123"),
          std::string("example.com/Uppercase_Is_OK_123"), std::string("requests.storage-foo"),
          std::string(63, 'a'), std::string(253, 'a') + "/" + std::string(63, 'b'),
          std::string("app.kubernetes.io/name"), std::string("nvidia.com/gpu")}) {
      CAPTURE(good);
      CHECK(v::IsQualifiedName(good).empty());
    }
    for (const std::string& bad :
         {std::string("nospecialchars%^=@"), std::string("cantendwithadash-"),
          std::string("-cantstartwithadash-"), std::string("only/one/slash"),
          std::string("Example.com/abc"), std::string("example_com/abc"),
          std::string("example.com/"), std::string("/simple"), std::string(64, 'a'),
          std::string(254, 'a') + "/abc", std::string(""), std::string("/")}) {
      CAPTURE(bad);
      CHECK_FALSE(v::IsQualifiedName(bad).empty());
    }
  }

  TEST_CASE("IsQualifiedName: messages") {
    CHECK(v::IsQualifiedName("only/one/slash") ==
          Strings{"a qualified name " + kQualifiedNameRuleMsg +
                  " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"});
    CHECK(v::IsQualifiedName("/simple") == Strings{"prefix part must be non-empty"});
    CHECK(v::IsQualifiedName("example.com/") ==
          Strings{"name part must be non-empty", "name part " + kQualifiedNameRuleMsg});
    CHECK(v::IsQualifiedName("Example.com/abc") == Strings{"prefix part " + kSubdomainRuleMsg});
    CHECK(v::IsQualifiedName(std::string(64, 'a')) ==
          Strings{"name part must be no more than 63 characters"});
    CHECK(v::IsQualifiedName("-x") == Strings{"name part " + kQualifiedNameRuleMsg});
  }

  TEST_CASE("IsValidLabelValue: Kubernetes good and bad values and messages") {
    for (const std::string& good :
         {std::string("simple"), std::string("now-with-dashes"), std::string("1-starts-with-num"),
          std::string("end-with-num-1"), std::string("1234"), std::string(63, 'a'), std::string(""),
          std::string("My_Value.1")}) {
      CAPTURE(good);
      CHECK(v::IsValidLabelValue(good).empty());
    }
    for (const std::string& bad :
         {std::string("nospecialchars%^=@"), std::string("Tama-nui-te-rā.is.Māori.sun"),
          std::string("\\backslashes\\are\\bad"), std::string("-starts-with-dash"),
          std::string("ends-with-dash-"), std::string(".starts.with.dot"),
          std::string("ends.with.dot."), std::string(64, 'a'), std::string("a/b")}) {
      CAPTURE(bad);
      CHECK_FALSE(v::IsValidLabelValue(bad).empty());
    }
    CHECK(v::IsValidLabelValue("-bad") == Strings{kLabelValueRuleMsg});
    CHECK(v::IsValidLabelValue(std::string(64, 'a')) ==
          Strings{"must be no more than 63 characters"});
  }

  TEST_CASE("Require helpers throw ValidationError naming field and value") {
    CHECK_NOTHROW(v::RequireDns1123Label("metadata.namespace", "team-a"));
    CHECK_NOTHROW(v::RequireDns1123Subdomain("metadata.name", "web.v1"));
    CHECK_NOTHROW(v::RequireLabelKey("metadata.labels", "app.kubernetes.io/name"));
    CHECK_NOTHROW(v::RequireLabelValue("metadata.labels[app]", ""));

    std::string what = ExpectRejected(v::RequireDns1123Label, "metadata.namespace", "Team_A");
    CHECK(what.find("a lowercase RFC 1123 label") != std::string::npos);
    what = ExpectRejected(v::RequireDns1123Label, "spec.serviceName", "a.b");
    CHECK(what.find("must not contain dots") != std::string::npos);
    what = ExpectRejected(v::RequireDns1123Subdomain, "metadata.name", "Web");
    CHECK(what.find("RFC 1123 subdomain") != std::string::npos);
    what = ExpectRejected(v::RequireLabelKey, "metadata.labels", "a/b/c");
    CHECK(what.find("a qualified name") != std::string::npos);
    what = ExpectRejected(v::RequireLabelValue, "metadata.labels[app]", "-x-");
    CHECK(what.find("a valid label must be an empty string") != std::string::npos);
    // Several problems are all reported.
    what = ExpectRejected(v::RequireLabelKey, "metadata.labels", "Bad_Prefix/-name");
    CHECK(what.find("prefix part") != std::string::npos);
    CHECK(what.find("name part") != std::string::npos);
  }

  TEST_CASE("RequireStatefulSetName: subdomain rules plus the 52-character limit") {
    CHECK(v::kStatefulSetNameMaxLength == 52);
    CHECK_NOTHROW(v::RequireStatefulSetName("metadata.name", "web"));
    CHECK_NOTHROW(v::RequireStatefulSetName("metadata.name", "trainer.v2"));
    CHECK_NOTHROW(v::RequireStatefulSetName("metadata.name", std::string(52, 'a')));

    const std::string too_long = std::string(53, 'a');
    std::string what = ExpectRejected(v::RequireStatefulSetName, "metadata.name", too_long);
    CHECK(what.find("must be no more than 52 characters") != std::string::npos);
    CHECK(what.find("controller-revision-hash") != std::string::npos);

    what = ExpectRejected(v::RequireStatefulSetName, "metadata.name", "My_Set");
    CHECK(what.find("RFC 1123 subdomain") != std::string::npos);
    CHECK(what.find("52") == std::string::npos);  // short enough: no length complaint

    what = ExpectRejected(v::RequireStatefulSetName, "metadata.name", "");
    CHECK(what.find("RFC 1123 subdomain") != std::string::npos);
  }
}
