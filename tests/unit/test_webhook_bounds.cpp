// Bounds of the ScheduledJob webhook sender (issue #35): credentials never travel over http://
// unless explicitly allowed (custom headers, user:password@ in the URL), and only the first
// 64 KiB of a receiver's answer is read; the status alone decides the delivery.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "http/transport.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "webhook_receiver.hpp"

using namespace tfk8s;
using tfk8s::testing::WebhookReceiver;

namespace {

ScheduledJobAlert TestAlert() {
  ScheduledJobAlert alert;
  alert.scheduled_job = "nightly-train";
  alert.time = std::chrono::system_clock::now();
  return alert;
}

// Expects `webhook` refused by ValidateWebhook, by SendWebhookAlert and by the watcher, with
// `field` and `value`, a message without `secret`, and nothing sent to `receiver`.
void ExpectRefused(const AlertWebhook& webhook, const std::string& field, const std::string& value,
                   const std::string& secret, const WebhookReceiver& receiver) {
  ClientConfig config;
  config.server = "https://127.0.0.1:1";
  ScheduledJobWatcherOptions options;
  options.webhook = webhook;
  const std::function<void()> calls[] = {
      [&] { ValidateWebhook(webhook); },
      [&] { SendWebhookAlert(webhook, TestAlert()); },
      [&] { ScheduledJobWatcher watcher(Client(config), options); },
  };
  for (const auto& call : calls) {
    try {
      call();
      FAIL("not refused");
    } catch (const ValidationError& e) {
      const std::string what = e.what();
      CHECK(e.field() == field);
      CHECK(e.value() == value);
      CHECK_MESSAGE(what.find("clear text") != std::string::npos, what);
      CHECK_MESSAGE(what.find("allow_insecure_headers") != std::string::npos, what);
      CHECK_MESSAGE(what.find(secret) == std::string::npos, what);
    }
  }
  CHECK(receiver.requests() == 0);
}

}  // namespace

TEST_SUITE("webhook_bounds") {
  TEST_CASE("http:// webhooks with headers or user info are refused unless explicitly allowed") {
    WebhookReceiver receiver;
    AlertWebhook hook;
    hook.url = receiver.url("/alerts?key=q-SECRET");
    hook.headers = {{"Authorization", "Bearer tok-SECRET"}, {"X-Team", "vision"}};
    // Header names are shown, never their values.
    ExpectRefused(hook, "webhook.headers", "Authorization, X-Team", "SECRET", receiver);

    AlertWebhook basic;
    basic.url = "http://alice:pw-SECRET@127.0.0.1:" + std::to_string(receiver.port()) + "/a";
    ExpectRefused(basic, "webhook.url",
                  "http://127.0.0.1:" + std::to_string(receiver.port()) + "/…", "SECRET", receiver);

    // Basic auth as a header is a header like any other.
    AlertWebhook basic_header;
    basic_header.url = receiver.url();
    basic_header.headers = {{"Authorization", "Basic YWxpY2U6cHctU0VDUkVU"}};
    ExpectRefused(basic_header, "webhook.headers", "Authorization", "YWxpY2U6", receiver);

    // What stays allowed: https with headers, http without credentials, and the opt-in.
    AlertWebhook https = hook;
    https.url = "https://alerts.example.com/hook";
    CHECK_NOTHROW(ValidateWebhook(https));
    AlertWebhook plain;
    plain.url = receiver.url();
    CHECK(SendWebhookAlert(plain, TestAlert()).delivered);
    hook.allow_insecure_headers = true;
    basic.allow_insecure_headers = true;
    CHECK_NOTHROW(ValidateWebhook(basic));
    WebhookDelivery d = SendWebhookAlert(hook, TestAlert());
    CHECK(d.delivered);
    CHECK(receiver.requests() == 2);
    CHECK(receiver.last_headers().find("Authorization: Bearer tok-SECRET") != std::string::npos);
  }

  TEST_CASE("a webhook's answer: at most 64 KiB read, the status decides") {
    constexpr std::size_t kHuge = std::size_t{1} << 30;  // 1 GiB announced and offered
    AlertWebhook hook;
    hook.timeout = std::chrono::milliseconds(5000);
    hook.retry_backoff = std::chrono::milliseconds(10);
    {
      WebhookReceiver receiver;
      receiver.AnswerWithBody(kHuge);
      hook.url = receiver.url();
      auto start = std::chrono::steady_clock::now();
      WebhookDelivery d = SendWebhookAlert(hook, TestAlert());
      CHECK(d.delivered);
      CHECK(d.attempts == 1);
      CHECK(d.status == 200);
      // Cut at the cap, not read for the attempt's whole timeout.
      CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
      // The connection was dropped: what the receiver got rid of is its socket buffers' worth,
      // nowhere near the gigabyte on offer.
      CHECK(receiver.answer_bytes_sent() < (std::size_t{64} << 20));
    }
    {
      // A long error answer is still an error, judged (and retried) by its status.
      WebhookReceiver receiver({500, 500});
      receiver.AnswerWithBody(kHuge);
      hook.url = receiver.url();
      hook.attempts = 2;
      WebhookDelivery d = SendWebhookAlert(hook, TestAlert());
      CHECK_FALSE(d.delivered);
      CHECK(d.attempts == 2);
      CHECK(d.status == 500);
      CHECK(d.error == "HTTP 500");
    }
    {
      // The transport keeps exactly the cap and reports the cut.
      WebhookReceiver receiver;
      receiver.AnswerWithBody(kHuge);
      internal::HttpRequest request;
      request.method = "POST";
      request.url = receiver.url();
      request.body = "{}";
      request.timeout = std::chrono::milliseconds(5000);
      request.max_body_bytes = kWebhookMaxResponseBytes;
      request.truncate_body = true;
      internal::HttpResponse r = internal::MakeCurlTransport()->Send(request).get();
      CHECK(r.status == 200);
      CHECK(r.body.size() == kWebhookMaxResponseBytes);
      CHECK(r.body_truncated);
      // A body within the cap is whole and not marked.
      WebhookReceiver small;
      small.AnswerWithBody(1000);
      request.url = small.url();
      internal::HttpResponse s = internal::MakeCurlTransport()->Send(request).get();
      CHECK(s.body.size() == 1000);
      CHECK_FALSE(s.body_truncated);
    }
  }
}
