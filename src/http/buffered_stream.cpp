#include "http/transport.hpp"

#include "tfk8s/error.hpp"

namespace tfk8s::internal {

BufferedStream::BufferedStream(std::function<void()> on_cancel, std::function<void()> on_drained)
    : on_cancel_(std::move(on_cancel)), on_drained_(std::move(on_drained)) {}

int BufferedStream::WaitForHeaders(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return has_headers_ || finished_; });
  if (has_headers_) return status_;
  if (error_) std::rethrow_exception(error_);
  if (finished_) throw TransportError("stream ended before any response headers", true);
  throw TransportError("timed out waiting for response headers", true, ErrorKind::kTimeout);
}

std::map<std::string, std::string> BufferedStream::headers() const {
  std::lock_guard lock(mu_);
  return headers_;
}

HttpStream::ReadResult BufferedStream::Read(std::string* out, std::chrono::milliseconds wait) {
  std::function<void()> resume;
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return !buffer_.empty() || finished_; });
    if (buffer_.empty()) return finished_ ? ReadResult::kEnd : ReadResult::kTimeout;
    out->append(buffer_);
    buffer_.clear();
    if (paused_) {
      paused_ = false;
      resume = on_drained_;
    }
  }
  if (resume) resume();
  return ReadResult::kData;
}

std::exception_ptr BufferedStream::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

void BufferedStream::Cancel() {
  std::function<void()> cancel;
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    cancel = on_cancel_;
  }
  cv_.notify_all();
  if (cancel) cancel();
}

void BufferedStream::SetHeaders(int status, std::map<std::string, std::string> headers) {
  {
    std::lock_guard lock(mu_);
    status_ = status;
    headers_ = std::move(headers);
    has_headers_ = true;
  }
  cv_.notify_all();
}

bool BufferedStream::Push(std::string_view data) {
  bool keep_going;
  {
    std::lock_guard lock(mu_);
    buffer_.append(data);
    keep_going = buffer_.size() < kHighWater;
    if (!keep_going) paused_ = true;
  }
  cv_.notify_all();
  return keep_going;
}

void BufferedStream::Finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    finished_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

bool BufferedStream::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

}  // namespace tfk8s::internal
