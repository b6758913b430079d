// WorkloadLogStream (tfk8s/workload.hpp): a push-style log reader turned into a pull stream by
// one thread and a bounded queue.

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "tfk8s/error.hpp"
#include "tfk8s/workload.hpp"
#include "workloads/common.hpp"

namespace tfk8s {

struct WorkloadLogStream::Impl {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<WorkloadLogLine> lines;
  std::size_t capacity = 1024;
  bool cancelled = false;
  bool finished = false;  // the producer returned (or threw)
  std::exception_ptr error;
  std::thread thread;

  void Stop() {
    {
      std::lock_guard lock(mutex);
      cancelled = true;
      lines.clear();
      changed.notify_all();
    }
    if (thread.joinable() && thread.get_id() != std::this_thread::get_id()) thread.join();
  }
};

WorkloadLogStream WorkloadLogStream::WithOptions(WorkloadLogOptions options,
                                                 OptionsProducer producer) {
  return WorkloadLogStream([options = std::move(options), producer = std::move(producer)](
                               const Emit& emit, const std::function<bool()>& cancelled) mutable {
    auto user_cancelled = std::move(options.cancelled);
    options.cancelled = [&] { return cancelled() || (user_cancelled && user_cancelled()); };
    producer(options, emit);
  });
}

WorkloadLogStream::WorkloadLogStream(Producer producer, std::size_t capacity)
    : impl_(std::make_shared<Impl>()) {
  impl_->capacity = capacity == 0 ? 1 : capacity;
  Impl* impl = impl_.get();  // the thread is joined before impl_ is released
  impl_->thread = std::thread([impl, producer = std::move(producer)] {
    auto emit = [impl](WorkloadLogLine line) {
      std::unique_lock lock(impl->mutex);
      impl->changed.wait(lock,
                         [&] { return impl->cancelled || impl->lines.size() < impl->capacity; });
      if (impl->cancelled) return false;
      impl->lines.push_back(std::move(line));
      impl->changed.notify_all();
      return true;
    };
    auto cancelled = [impl] {
      std::lock_guard lock(impl->mutex);
      return impl->cancelled;
    };
    std::exception_ptr error;
    try {
      producer(emit, cancelled);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(impl->mutex);
    impl->error = error;
    impl->finished = true;
    impl->changed.notify_all();
  });
}

WorkloadLogStream::WorkloadLogStream(WorkloadLogStream&&) noexcept = default;

WorkloadLogStream& WorkloadLogStream::operator=(WorkloadLogStream&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->Stop();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

WorkloadLogStream::~WorkloadLogStream() {
  if (impl_) impl_->Stop();
}

std::optional<WorkloadLogLine> WorkloadLogStream::Next(std::chrono::milliseconds timeout) {
  std::exception_ptr error;
  {
    std::unique_lock lock(impl_->mutex);
    impl_->changed.wait_for(lock, timeout, [&] {
      return impl_->cancelled || impl_->finished || !impl_->lines.empty();
    });
    if (!impl_->lines.empty()) {
      WorkloadLogLine line = std::move(impl_->lines.front());
      impl_->lines.pop_front();
      impl_->changed.notify_all();
      return line;
    }
    if (impl_->cancelled || !impl_->finished) return std::nullopt;
    error = std::exchange(impl_->error, nullptr);  // reported once
  }
  if (error) std::rethrow_exception(error);
  return std::nullopt;
}

bool WorkloadLogStream::ended() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->cancelled || (impl_->finished && impl_->lines.empty());
}

void WorkloadLogStream::Cancel() {
  std::lock_guard lock(impl_->mutex);
  impl_->cancelled = true;
  impl_->lines.clear();
  impl_->changed.notify_all();
}

namespace internal {

LogStream OpenPodLogs(Client& client, const std::string& ns, const std::string& pod,
                      const LogOptions& options, const std::string& who) {
  try {
    return client.StreamLogs(ns, pod, options);
  } catch (const BadRequest& e) {
    const std::string& m = e.server_message();
    std::string what;
    if (options.previous && m.find("previous terminated container") != std::string::npos) {
      what = who +
             " has no previous container: it has not restarted (--previous shows the log of the "
             "container before its last restart)";
    } else if (m.find("does not have a host assigned") != std::string::npos) {
      what = who + " has not started: not scheduled on a node yet";
    } else if (auto at = m.find("is waiting to start"); at != std::string::npos) {
      std::string reason = m.substr(at + std::string_view("is waiting to start").size());
      if (reason.starts_with(": ")) reason.erase(0, 2);
      what = who + " has not started" + (reason.empty() ? "" : ": " + reason);
    } else {
      throw;
    }
    throw BadRequest(ErrorKind::kBadRequest, what + " (" + e.what() + ")", e.http_code(),
                     e.reason(), e.server_message(), e.causes());
  }
}

}  // namespace internal

}  // namespace tfk8s
