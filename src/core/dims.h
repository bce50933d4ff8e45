// Small value types that keep per-tensor records lean at a million entries: Dims, a tensor's sizes or
// strides (four inline, more on the heap), Boxed<T>, a rarely set part of a record that costs one
// pointer when unset, and Interned, a string of a small set (a device) kept once for the process.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <span>
#include <vector>

namespace ckpt {

// A vector of int64_t with the std::vector interface the readers use, holding up to four dimensions
// without an allocation (40 bytes; std::vector: 24 plus a heap block).
class Dims {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  static constexpr uint32_t kInline = 4;

  Dims() = default;
  Dims(std::initializer_list<int64_t> l) { assign(l.begin(), l.end()); }
  Dims(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: a drop-in for std::vector
  Dims(std::span<const int64_t> s) { assign(s.begin(), s.end()); }  // NOLINT
  template <class It>
  Dims(It first, It last) {
    assign(first, last);
  }
  Dims(const Dims& o) { assign(o.begin(), o.end()); }
  Dims(Dims&& o) noexcept { steal(o); }
  Dims& operator=(const Dims& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Dims& operator=(Dims&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  Dims& operator=(std::initializer_list<int64_t> l) {
    assign(l.begin(), l.end());
    return *this;
  }
  ~Dims() { release(); }

  operator std::vector<int64_t>() const { return {begin(), end()}; }  // NOLINT
  operator std::span<const int64_t>() const { return {data(), size()}; }  // NOLINT

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t* data() { return cap_ > kInline ? u_.heap : u_.in; }
  const int64_t* data() const { return cap_ > kInline ? u_.heap : u_.in; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + n_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + n_; }
  int64_t& operator[](size_t k) { return data()[k]; }
  int64_t operator[](size_t k) const { return data()[k]; }
  int64_t& front() { return data()[0]; }
  int64_t front() const { return data()[0]; }
  int64_t& back() { return data()[n_ - 1]; }
  int64_t back() const { return data()[n_ - 1]; }

  void clear() { n_ = 0; }
  void reserve(size_t n) {
    if (n <= cap_) return;
    auto* p = new int64_t[n];
    std::copy(begin(), end(), p);
    release();
    u_.heap = p;
    cap_ = static_cast<uint32_t>(n);
  }
  void push_back(int64_t x) {
    if (n_ == cap_) reserve(std::max<size_t>(2 * cap_, kInline));
    data()[n_++] = x;
  }
  void resize(size_t n, int64_t fill = 0) {
    reserve(n);
    for (size_t k = n_; k < n; ++k) data()[k] = fill;
    n_ = static_cast<uint32_t>(n);
  }
  template <class It>
  void assign(It first, It last) {
    const auto n = static_cast<size_t>(std::distance(first, last));
    n_ = 0;
    reserve(n);
    std::copy(first, last, data());
    n_ = static_cast<uint32_t>(n);
  }

  friend bool operator==(const Dims& a, const Dims& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const Dims& a, const std::vector<int64_t>& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  void release() {
    if (cap_ > kInline) delete[] u_.heap;
    cap_ = kInline;
    n_ = 0;
  }
  void steal(Dims& o) {
    n_ = o.n_;
    cap_ = o.cap_;
    if (cap_ > kInline) u_.heap = o.u_.heap;
    else std::memcpy(u_.in, o.u_.in, sizeof(u_.in));
    o.cap_ = kInline;
    o.n_ = 0;
  }
  union U {
    int64_t in[kInline];
    int64_t* heap;
  } u_{};
  uint32_t n_ = 0;
  uint32_t cap_ = kInline;
};

// A part of a record that few records have: unset costs one pointer and reads as T{}; copies are deep.
template <class T>
class Boxed {
 public:
  Boxed() = default;
  Boxed(const Boxed& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(const Boxed& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  const T& operator*() const { return p_ ? *p_ : none(); }
  const T* operator->() const { return &**this; }
  T& mut() {
    if (!p_) p_ = std::make_unique<T>();
    return *p_;
  }

 private:
  static const T& none() {
    static const T n{};
    return n;
  }
  std::unique_ptr<T> p_;
};

// A string from a small set, a device name ("cpu", "cuda:0", "meta"), kept once for the process: one
// pointer in a record instead of a std::string's 32 bytes. Reads as a const std::string&; assigned
// from any string. Safe to assign from several threads.
class Interned {
 public:
  Interned() = default;  // ""
  Interned(std::string_view s) : p_(intern(s)) {}  // NOLINT: assigned from strings like a std::string
  Interned(const char* s) : Interned(std::string_view(s)) {}  // NOLINT
  Interned(const std::string& s) : Interned(std::string_view(s)) {}  // NOLINT

  const std::string& str() const { return *p_; }
  operator const std::string&() const { return *p_; }  // NOLINT
  bool empty() const { return p_->empty(); }
  size_t size() const { return p_->size(); }
  const char* c_str() const { return p_->c_str(); }
  size_t rfind(std::string_view s, size_t at = std::string::npos) const { return p_->rfind(s, at); }

  friend bool operator==(const Interned& a, const Interned& b) { return a.p_ == b.p_; }
  friend bool operator==(const Interned& a, std::string_view b) { return *a.p_ == b; }
  friend bool operator==(const Interned& a, const std::string& b) { return *a.p_ == b; }
  friend bool operator==(const Interned& a, const char* b) { return *a.p_ == b; }

 private:
  static const std::string* intern(std::string_view s) {
    static const std::string none, cpu = "cpu";
    if (s.empty()) return &none;
    if (s == cpu) return &cpu;  // nearly every tensor's: no lock
    static std::mutex lock;
    static std::unordered_set<std::string> kept;  // nodes: each string stays where it is
    std::lock_guard<std::mutex> g(lock);
    return &*kept.emplace(s).first;
  }
  const std::string* p_ = intern({});
};

}  // namespace ckpt
