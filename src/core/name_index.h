// A hash index from names to positions in a vector, flat: one array of slots (open addressing, linear
// probing), no heap node per name and no copy of it. The names are views: whatever holds their bytes
// (tensor names, a mapped header) must outlive the index. Built for the million-entry checkpoints, where
// std::unordered_map<std::string, size_t> spent more time in malloc than in the lookups.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt {

namespace detail {

// The open-addressed table under NameIndex and PosIndex: linear probing, at most 7 names in 10 slots
// (short probe runs at a third of the memory of a half-empty table). A Slot has `pos` (kEmpty: unused)
// and `hash`, whose low bits place it.
template <class Slot>
class FlatTable {
 public:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  // Room for `n` names without growing.
  void reserve(size_t n) {
    if (n > limit(slots_.size())) rehash(std::bit_ceil(std::max<size_t>(16, n + n / 2 + 1)));
  }
  size_t size() const { return used_; }

 protected:
  // The slot holding what `same` accepts, or the empty slot where it would go (room for one more made
  // first when inserting); nullptr for an empty table looked in.
  template <class Same>
  Slot* probe(uint64_t h, const Same& same, bool inserting) {
    if (inserting && used_ + 1 > limit(slots_.size())) rehash(std::max<size_t>(16, slots_.size() * 2));
    return probe_in(slots_, h, same);
  }
  template <class Same>
  const Slot* probe(uint64_t h, const Same& same) const {
    return probe_in(slots_, h, same);
  }
  void taken() { ++used_; }

 private:
  template <class Slots, class Same>
  static auto* probe_in(Slots& slots, uint64_t h, const Same& same) {
    if (slots.empty()) return static_cast<decltype(&slots[0])>(nullptr);
    const size_t mask = slots.size() - 1;
    for (size_t at = h & mask;; at = (at + 1) & mask)
      if (slots[at].pos == kEmpty || same(slots[at])) return &slots[at];
  }
  static size_t limit(size_t slots) { return slots / 10 * 7; }
  void rehash(size_t n) {
    std::vector<Slot> old(n);
    old.swap(slots_);
    const size_t mask = n - 1;
    for (const Slot& s : old) {
      if (s.pos == kEmpty) continue;
      size_t at = s.hash & mask;
      while (slots_[at].pos != kEmpty) at = (at + 1) & mask;
      slots_[at] = s;
    }
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

// 24 bytes: the name's bytes and length, its hash, and the position.
struct NameSlot {
  const char* data = nullptr;
  uint64_t hash = 0;
  uint32_t len = 0;
  uint32_t pos = UINT32_MAX;
};

// 8 bytes: the position and 32 bits of the name's hash.
struct PosSlot {
  uint32_t pos = UINT32_MAX;
  uint32_t hash = 0;
};

}  // namespace detail

class NameIndex : public detail::FlatTable<detail::NameSlot> {
 public:
  NameIndex() = default;
  explicit NameIndex(size_t expected) { reserve(expected); }

  // The position stored for `name`, inserting `pos` when it has none: {position, inserted}.
  std::pair<uint32_t, bool> try_emplace(std::string_view name, uint32_t pos) {
    const uint64_t h = std::hash<std::string_view>()(name);
    detail::NameSlot* s = probe(h, Same{h, name}, true);
    if (s->pos != kEmpty) return {s->pos, false};
    *s = detail::NameSlot{name.data(), h, static_cast<uint32_t>(name.size()), pos};
    taken();
    return {pos, true};
  }
  // The position stored for `name`, or nullptr.
  const uint32_t* find(std::string_view name) const {
    const uint64_t h = std::hash<std::string_view>()(name);
    const detail::NameSlot* s = probe(h, Same{h, name});
    return s && s->pos != kEmpty ? &s->pos : nullptr;
  }
  bool contains(std::string_view name) const { return find(name) != nullptr; }

 private:
  struct Same {
    uint64_t h;
    std::string_view name;
    bool operator()(const detail::NameSlot& s) const {
      return s.hash == h && s.len == name.size() && std::string_view(s.data, s.len) == name;
    }
  };
};

// A NameIndex for names a table already holds (a vector of views, the rows of a tree): 8 bytes a slot,
// a position and 32 bits of the name's hash, the name read back through the caller's `name_of(position)`
// where the hashes agree. A third of NameIndex's memory, for the indexes that reach a million names.
class PosIndex : public detail::FlatTable<detail::PosSlot> {
 public:
  PosIndex() = default;
  explicit PosIndex(size_t expected) { reserve(expected); }

  // The position stored for `name`, inserting `pos` (whose name_of must be `name`) when it has none.
  template <class NameOf>
  std::pair<uint32_t, bool> try_emplace(std::string_view name, uint32_t pos, const NameOf& name_of) {
    const uint32_t h = hash(name);
    detail::PosSlot* s = probe(h, Same<NameOf>{h, name, name_of}, true);
    if (s->pos != kEmpty) return {s->pos, false};
    *s = detail::PosSlot{pos, h};
    taken();
    return {pos, true};
  }
  template <class NameOf>
  const uint32_t* find(std::string_view name, const NameOf& name_of) const {
    const uint32_t h = hash(name);
    const detail::PosSlot* s = probe(h, Same<NameOf>{h, name, name_of});
    return s && s->pos != kEmpty ? &s->pos : nullptr;
  }

 private:
  // The high half of the 64-bit hash (the low half of std::hash's is as good; either fills 2^32 slots).
  static uint32_t hash(std::string_view name) { return static_cast<uint32_t>(std::hash<std::string_view>()(name) >> 32); }
  template <class NameOf>
  struct Same {
    uint32_t h;
    std::string_view name;
    const NameOf& name_of;
    bool operator()(const detail::PosSlot& s) const { return s.hash == h && std::string_view(name_of(s.pos)) == name; }
  };
};

// A PosIndex with its name_of: the NameIndex interface over names a table holds.
template <class NameOf>
class IndexBy {
 public:
  IndexBy(size_t expected, NameOf name_of) : index_(expected), name_of_(std::move(name_of)) {}
  std::pair<uint32_t, bool> try_emplace(std::string_view name, uint32_t pos) { return index_.try_emplace(name, pos, name_of_); }
  const uint32_t* find(std::string_view name) const { return index_.find(name, name_of_); }
  size_t size() const { return index_.size(); }
  void reserve(size_t n) { index_.reserve(n); }

 private:
  PosIndex index_;
  NameOf name_of_;
};

// A name in canonical decimal ("0", "17", no sign or leading zero, at most 9 digits), or nullopt.
inline std::optional<uint32_t> decimal_name(std::string_view name) {
  if (name.empty() || name.size() > 9 || (name.size() > 1 && name[0] == '0')) return std::nullopt;
  uint32_t n = 0;
  for (const char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  return n;
}

// A NameIndex for storage keys: torch.save's keys (0, 1, 2, ...) by number in a vector while the numbers
// stay near the count of keys (no hashing), any other key (or a sparse number) in the NameIndex.
template <class Names>
class BasicKeyIndex {
 public:
  BasicKeyIndex() = default;
  explicit BasicKeyIndex(Names names) : names_(std::move(names)) {}
  // Whether try_emplace would index `key` by its number (and keep no view of it).
  bool by_number(std::string_view key) const { return number_of(key).has_value(); }
  std::pair<uint32_t, bool> try_emplace(std::string_view key, uint32_t pos) {
    if (const uint32_t* at = find(key)) return {*at, false};
    if (const std::optional<uint32_t> n = number_of(key)) {
      if (by_number_.size() <= *n) by_number_.resize(std::max<size_t>(*n + 1, by_number_.size() * 2), kNone);
      by_number_[*n] = pos;
    } else {
      names_.try_emplace(key, pos);
    }
    ++size_;
    return {pos, true};
  }
  const uint32_t* find(std::string_view key) const {
    if (const std::optional<uint32_t> n = decimal_name(key); n && *n < by_number_.size() && by_number_[*n] != kNone)
      return &by_number_[*n];
    return names_.find(key);
  }
  size_t size() const { return size_; }

 private:
  // The number a key goes by: canonical decimal and not so far past the keys so far that the table would
  // be mostly holes.
  std::optional<uint32_t> number_of(std::string_view key) const {
    const std::optional<uint32_t> n = decimal_name(key);
    return n && *n <= 2 * size_ + 1024 ? n : std::nullopt;
  }
  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> by_number_;
  Names names_;  // NameIndex: views, the keys' bytes must outlive the index; IndexBy: the table's names
  size_t size_ = 0;
};
using KeyIndex = BasicKeyIndex<NameIndex>;

}  // namespace ckpt
