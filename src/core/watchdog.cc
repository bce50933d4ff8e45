#include "core/watchdog.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/text.h"
#include "core/vfs.h"

namespace ckpt {

std::string stall_message(const std::string& file, const std::string& member, std::optional<uint64_t> offset,
                          const std::string& stage, double seconds) {
  std::string out = vfs::display(file);  // a signed URL's signature is never shown
  if (!member.empty() || offset) {
    out += ": " + member;
    if (offset) out += fmt::format("+0x{:x}", *offset);
  }
  out += fmt::format(": {} has not completed in {:g} s (--limit stall-seconds); the load was stopped", stage, seconds);
  return visible(out);
}

Watchdog::Watchdog(double seconds) : seconds_(seconds) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> l(lock_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

double Watchdog::grace() const { return std::clamp(seconds_ / 2, 0.5, 5.0); }

Watchdog::Hook Watchdog::on_stall(std::function<void()> interrupt) {
  std::lock_guard<std::mutex> l(lock_);
  hooks_.emplace_back(next_id_, std::move(interrupt));
  return Hook(this, next_id_++);
}

Watchdog::Guard Watchdog::arm(std::string message) {
  std::lock_guard<std::mutex> l(lock_);
  // After a stall, what is left (freeing, joining) gets the grace alone.
  const double limit = fired_.empty() ? seconds_ : grace();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit));
  armed_.push_back({next_id_, deadline, std::move(message)});
  if (!thread_.joinable()) thread_ = std::thread([this] { monitor(); });
  cv_.notify_all();
  return Guard(this, next_id_++);
}

Watchdog::Handle::~Handle() {
  if (!dog_) return;
  std::lock_guard<std::mutex> l(dog_->lock_);  // ids are unique across calls and hooks
  auto& a = dog_->armed_;
  a.erase(std::remove_if(a.begin(), a.end(), [&](const Armed& x) { return x.id == id_; }), a.end());
  auto& h = dog_->hooks_;
  h.erase(std::remove_if(h.begin(), h.end(), [&](const auto& x) { return x.first == id_; }), h.end());
  dog_->cv_.notify_all();
}

void Watchdog::fire(const std::string& message, std::unique_lock<std::mutex>& l) {
  if (fired_.empty()) fired_ = message;
  const auto hooks = hooks_;
  l.unlock();
  for (const auto& h : hooks) h.second();
  l.lock();
}

void Watchdog::monitor() {
  std::unique_lock<std::mutex> l(lock_);
  while (!stop_) {
    if (armed_.empty()) {
      cv_.wait(l);
      continue;
    }
    const auto first = std::min_element(armed_.begin(), armed_.end(),
                                         [](const Armed& a, const Armed& b) { return a.deadline < b.deadline; });
    const auto deadline = first->deadline;
    const uint64_t id = first->id;
    if (Clock::now() < deadline) {
      cv_.wait_until(l, deadline);
      continue;
    }
    const std::string message = first->message;
    fire(message, l);
    // The blocked call was asked to return; where it cannot (a driver that does not answer), nothing can
    // be freed or joined: say why and end the process.
    const auto last = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace()));
    cv_.wait_until(l, last, [&] {
      return stop_ || std::none_of(armed_.begin(), armed_.end(), [&](const Armed& a) { return a.id == id; });
    });
    if (stop_) break;
    if (std::any_of(armed_.begin(), armed_.end(), [&](const Armed& a) { return a.id == id; })) {
      const std::string line = fmt::format("ckpt: error: {} (a device call that does not return: exiting)\n", message);
      (void)!::write(STDERR_FILENO, line.data(), line.size());
      ::_exit(kExitEnvironment);
    }
  }
}

void Watchdog::wait(const std::function<bool()>& done, const std::string& message) {
  if (done()) return;
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds_));
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    if (done()) return;
    check();  // another call stalled: stop waiting for this one
    const auto now = Clock::now();
    if (now >= deadline) {
      std::unique_lock<std::mutex> l(lock_);
      fire(message, l);
      throw StallError(fired_);
    }
    if (now - t0 < std::chrono::microseconds(200)) {
      std::this_thread::yield();  // a chunk's copy takes tens to hundreds of microseconds
    } else {
      pause = std::min(std::chrono::microseconds(200), pause + std::chrono::microseconds(20));
      std::this_thread::sleep_for(pause);
    }
  }
}

void Watchdog::check() const {
  std::lock_guard<std::mutex> l(lock_);
  if (!fired_.empty()) throw StallError(fired_);
}

bool Watchdog::fired() const {
  std::lock_guard<std::mutex> l(lock_);
  return !fired_.empty();
}

}  // namespace ckpt
