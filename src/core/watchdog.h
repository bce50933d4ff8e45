// Bounds every wait on a device (`--limit stall-seconds`): a copy, an event, an allocation or a stream that
// has not completed in time stops the load instead of hanging it.
//
// Two kinds of wait, one deadline:
//   - waits that can poll (a copy's event, a stream) poll their own deadline in wait() and throw StallError;
//   - calls that block (an allocation, a CUDA call inside LibTorch) run under a Guard: when the deadline
//     passes, the watchdog's thread calls the interrupt hooks (a sink whose call is blocked makes it return,
//     throwing), and the caller, back from the call, throws the StallError (check()).
// A call that still has not returned `grace()` seconds after its deadline can be neither freed nor joined:
// the watchdog then prints the error on stderr and ends the process with exit 4 (_exit; the driver frees a
// dead process's device memory). Nothing here knows CUDA: the sinks do (src/torch).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace ckpt {

// A device wait that outran --limit stall-seconds: exit 4, like every failure of the environment.
class StallError : public EnvironmentError {
 public:
  using EnvironmentError::EnvironmentError;
};

// "FILE: MEMBER+0xOFF: STAGE has not completed in N s (--limit stall-seconds); the load was stopped"
// (member and offset left out when empty / unknown), one line through visible().
std::string stall_message(const std::string& file, const std::string& member, std::optional<uint64_t> offset,
                          const std::string& stage, double seconds);

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Watchdog(double seconds);
  ~Watchdog();  // joins its thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double seconds() const { return seconds_; }
  // How long a blocked call may outlive its deadline before the process ends: half the limit, 0.5 to 5 s.
  double grace() const;
  // What arm() and on_stall() return: disarms the call, or removes the hook, when it goes out of scope.
  class Handle {
   public:
    Handle(Handle&& h) noexcept : dog_(h.dog_), id_(h.id_) { h.dog_ = nullptr; }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle();

   private:
    friend class Watchdog;
    Handle(Watchdog* dog, uint64_t id) : dog_(dog), id_(id) {}
    Watchdog* dog_;
    uint64_t id_;
  };
  using Guard = Handle;
  using Hook = Handle;
  // `interrupt` is called from the watchdog's thread when a guarded call outruns its deadline, while the
  // returned Hook lives. Must not block.
  [[nodiscard]] Hook on_stall(std::function<void()> interrupt);
  // A blocking call under the deadline while the returned Guard lives. `message`: the whole error line
  // should it stall (stall_message()).
  [[nodiscard]] Guard arm(std::string message);
  // Runs `call` under a guard; a call that returns or throws after the watchdog fired throws its
  // StallError instead.
  template <typename F>
  decltype(auto) guarded(std::string message, F&& call) {
    Guard g = arm(std::move(message));
    try {
      if constexpr (std::is_void_v<decltype(call())>) {
        call();
        check();
      } else {
        decltype(auto) r = call();
        check();
        return r;
      }
    } catch (const StallError&) {
      throw;
    } catch (...) {
      check();
      throw;
    }
  }
  // Polls `done()` until it says true: spinning a little, then sleeping up to 0.2 ms between polls. Throws
  // StallError(message) when `seconds()` pass first, or when the watchdog has fired for another call.
  void wait(const std::function<bool()>& done, const std::string& message);
  // Throws the first stall's StallError, if there was one.
  void check() const;
  bool fired() const;

 private:
  void monitor();
  void fire(const std::string& message, std::unique_lock<std::mutex>& l);

  const double seconds_;
  mutable std::mutex lock_;
  std::condition_variable cv_;
  struct Armed {
    uint64_t id;
    Clock::time_point deadline;
    std::string message;
  };
  std::vector<Armed> armed_;
  std::vector<std::pair<uint64_t, std::function<void()>>> hooks_;
  uint64_t next_id_ = 0;
  bool stop_ = false;
  std::string fired_;  // the first stall's message, "" while none
  std::thread thread_;  // started with the first arm()
};

}  // namespace ckpt
