// Small value types that keep per-tensor records lean at a million entries: Dims, a tensor's sizes or
// strides (four inline, more on the heap), Boxed<T>, a rarely set part of a record that costs one
// pointer when unset, Interned, a string of a small set (a device) kept once for the process, and
// SharedString, a key two records hold once between them.
#pragma once

#include <algorithm>
#include <atomic>
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

#include <fmt/format.h>

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

// A string from a small set (a device name: "cpu", "cuda:0", "meta"; an inferred class name), kept once
// for the process: one pointer in a record instead of a std::string's 32 bytes, and views of it stay
// valid. Reads as a const std::string&; assigned from any string. Safe to assign from several threads.
class Interned {
 public:
  Interned() = default;  // ""
  Interned(std::string_view s) : p_(intern(s)) {}  // NOLINT: assigned from strings like a std::string
  Interned(const char* s) : Interned(std::string_view(s)) {}  // NOLINT
  Interned(const std::string& s) : Interned(std::string_view(s)) {}  // NOLINT

  const std::string& str() const { return *p_; }
  operator const std::string&() const { return *p_; }  // NOLINT
  bool empty() const { return p_->empty(); }

  friend bool operator==(const Interned& a, const Interned& b) { return a.p_ == b.p_; }
  friend bool operator==(const Interned& a, std::string_view b) { return *a.p_ == b; }
  friend bool operator==(const Interned& a, const std::string& b) { return *a.p_ == b; }
  friend bool operator==(const Interned& a, const char* b) { return *a.p_ == b; }

 private:
  static const std::string* intern(std::string_view s) {
    static const std::string none, cpu = "cpu";
    if (s.empty()) return &none;
    if (s == cpu) return &cpu;  // nearly every tensor's: no lock
    struct Hash {
      using is_transparent = void;
      size_t operator()(std::string_view x) const { return std::hash<std::string_view>()(x); }
    };
    static std::mutex lock;
    static std::unordered_set<std::string, Hash, std::equal_to<>> kept;  // nodes: each string stays where it is
    std::lock_guard<std::mutex> g(lock);
    auto it = kept.find(s);  // found without making a std::string
    if (it == kept.end()) it = kept.emplace(s).first;
    return &*it;
  }
  const std::string* p_ = intern({});
};

// An immutable string that copies share (one block with a count), for a key that two records hold: a
// tensor's storage key and its storage's. 8 bytes in a record; reads as a const std::string&. Copies
// may be made and dropped on several threads.
class SharedString {
 public:
  SharedString() = default;  // ""
  SharedString(std::string s) : b_(s.empty() ? nullptr : new Block{{1}, std::move(s)}) {}  // NOLINT: like a std::string
  SharedString(std::string_view s) : SharedString(std::string(s)) {}  // NOLINT
  SharedString(const char* s) : SharedString(std::string(s)) {}  // NOLINT
  SharedString(const SharedString& o) : b_(o.b_) {
    if (b_) b_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  SharedString(SharedString&& o) noexcept : b_(o.b_) { o.b_ = nullptr; }
  SharedString& operator=(SharedString o) noexcept {
    std::swap(b_, o.b_);
    return *this;
  }
  ~SharedString() {
    if (b_ && b_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete b_;
  }

  const std::string& str() const { return b_ ? b_->s : none(); }
  operator const std::string&() const { return str(); }  // NOLINT
  operator std::string_view() const { return str(); }  // NOLINT
  std::string_view view() const { return str(); }
  bool empty() const { return b_ == nullptr; }
  size_t size() const { return str().size(); }

  friend bool operator==(const SharedString& a, const SharedString& b) { return a.b_ == b.b_ || a.str() == b.str(); }
  friend bool operator==(const SharedString& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const SharedString& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const SharedString& a, const char* b) { return a.str() == b; }
  friend bool operator<(const SharedString& a, const SharedString& b) { return a.str() < b.str(); }
  friend std::string operator+(const std::string& a, const SharedString& b) { return a + b.str(); }
  friend std::string operator+(const SharedString& a, const std::string& b) { return a.str() + b; }
  friend std::string operator+(const char* a, const SharedString& b) { return a + b.str(); }
  friend std::string operator+(const SharedString& a, const char* b) { return a.str() + b; }

 private:
  struct Block {
    std::atomic<uint32_t> refs;
    std::string s;
  };
  static const std::string& none() {
    static const std::string n;
    return n;
  }
  Block* b_ = nullptr;
};

}  // namespace ckpt

// Formatted as its text.
template <>
struct fmt::formatter<ckpt::SharedString> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const ckpt::SharedString& s, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(s.view(), ctx);
  }
};
