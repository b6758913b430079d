// Error mapping from real apiserver Status bodies (captured from kube-apiserver v1.20).
#include <doctest/doctest.h>

#include "tfk8s/error.hpp"

using namespace tfk8s;

namespace {

template <typename T>
T Catch(int code, std::string_view body) {
  try {
    ThrowApiError(code, body, "ctx");
  } catch (const T& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL("wrong exception type: " << e.what());
  }
  FAIL("no exception");
  throw;  // unreachable
}

}  // namespace

TEST_SUITE("errors") {
  TEST_CASE("NotFound from a Status body") {
    auto e = Catch<NotFound>(
        404,
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"nope\" not found","reason":"NotFound","details":{"name":"nope","kind":"pods"},"code":404})");
    CHECK(e.kind() == ErrorKind::kNotFound);
    CHECK(e.http_code() == 404);
    CHECK(e.reason() == "NotFound");
    CHECK(e.server_message() == "pods \"nope\" not found");
    CHECK(std::string(e.what()).find("ctx: pods \"nope\" not found") == 0);
  }

  TEST_CASE("AlreadyExists and Conflict are both 409 but different classes") {
    auto a = Catch<AlreadyExists>(
        409,
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"x\" already exists","reason":"AlreadyExists","details":{"name":"x","kind":"configmaps"},"code":409})");
    CHECK(a.kind() == ErrorKind::kAlreadyExists);
    auto c = Catch<Conflict>(
        409,
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"x","kind":"configmaps"},"code":409})");
    CHECK(c.kind() == ErrorKind::kConflict);
  }

  TEST_CASE("Invalid carries field causes") {
    auto e = Catch<Invalid>(
        422,
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Pod \"BAD\" is invalid: metadata.name: Invalid value: \"BAD\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters","reason":"Invalid","details":{"name":"BAD","kind":"Pod","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \"BAD\": a lowercase RFC 1123 subdomain","field":"metadata.name"},{"reason":"FieldValueRequired","message":"Required value","field":"spec.containers"}]},"code":422})");
    REQUIRE(e.causes().size() == 2);
    CHECK(e.causes()[0].field == "metadata.name");
    CHECK(e.causes()[0].reason == "FieldValueInvalid");
    CHECK(e.causes()[1].field == "spec.containers");
    CHECK(std::string(e.what()).find("spec.containers: Required value") != std::string::npos);
  }

  TEST_CASE("quota 403 is QuotaExceeded naming the resources, and still a Forbidden") {
    std::string body =
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"gpu\" is forbidden: exceeded quota: team-a, requested: limits.cpu=4,requests.nvidia.com/gpu=2, used: limits.cpu=0,requests.nvidia.com/gpu=0, limited: limits.cpu=2,requests.nvidia.com/gpu=1","reason":"Forbidden","details":{"name":"gpu","kind":"pods"},"code":403})";
    auto q = Catch<QuotaExceeded>(403, body);
    CHECK(q.kind() == ErrorKind::kQuotaExceeded);
    CHECK(q.resources() == std::vector<std::string>{"limits.cpu", "requests.nvidia.com/gpu"});
    auto f = Catch<Forbidden>(403, body);
    CHECK(f.kind() == ErrorKind::kQuotaExceeded);
  }

  TEST_CASE("RBAC 403 is a plain Forbidden") {
    auto e = Catch<Forbidden>(
        403,
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"limited\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403})");
    CHECK(e.kind() == ErrorKind::kForbidden);
  }

  TEST_CASE("410 Expired is Gone") {
    auto e = Catch<Gone>(
        410,
        R"json({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (200)","reason":"Expired","code":410})json");
    CHECK(e.reason() == "Expired");
  }

  TEST_CASE("429 keeps retryAfterSeconds from the details") {
    auto e = Catch<TooManyRequests>(
        429,
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":3},"code":429})");
    CHECK(e.retry_after_seconds() == 3);
  }

  TEST_CASE("non-JSON bodies become the message, truncated") {
    auto e = Catch<ServerError>(502, "<html>bad gateway</html>");
    CHECK(e.server_message() == "<html>bad gateway</html>");
    auto big = Catch<ServerError>(500, std::string(5000, 'x'));
    CHECK(big.server_message().size() < 600);
    auto t = Catch<Timeout>(504, "upstream timed out");
    CHECK(t.kind() == ErrorKind::kTimeout);
    auto u = Catch<Unauthorized>(
        401,
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})");
    CHECK(u.http_code() == 401);
  }

  TEST_CASE("quota message parsing") {
    CHECK(ParseQuotaExceededResources("not a quota message").empty());
    CHECK(ParseQuotaExceededResources(
              "exceeded quota: q, requested: requests.storage=10Gi, used: requests.storage=0, "
              "limited: requests.storage=5Gi") == std::vector<std::string>{"requests.storage"});
    // Older servers: no "limited:" section.
    CHECK(ParseQuotaExceededResources("exceeded quota: q, requested: pods=1, used: pods=3") ==
          std::vector<std::string>{"pods"});
  }

  TEST_CASE("client-side errors name field and value") {
    ValidationError v("spec.worker.replicas", "-1", "must be >= 0");
    CHECK(v.field() == "spec.worker.replicas");
    CHECK(std::string(v.what()) == "invalid spec.worker.replicas \"-1\": must be >= 0");
    ConfigError c("/k/config", "users[a].client-key-data", "bad base64");
    CHECK(std::string(c.what()) == "/k/config: users[a].client-key-data: bad base64");
    CHECK(ToString(ErrorKind::kQuotaExceeded) == "QuotaExceeded");
  }
}
