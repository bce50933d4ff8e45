#include "core/pickle.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>

#include <sys/mman.h>
#include <unistd.h>

#include "core/allowlist.h"
#include "core/pickle_text.h"

namespace ckpt {

std::string Value::qualified() const {
  const Value* g = this;
  if (kind == PKind::Object) g = callable();
  if (g == nullptr || g->kind != PKind::Global) return {};
  std::string out(g->str());
  out += '.';
  out += g->name();
  return out;
}

void* Heap::alloc(size_t bytes, size_t align) {
  size_t pad = -reinterpret_cast<uintptr_t>(cur_) & (align - 1);  // align: a power of two
  if (cur_ == nullptr || pad + bytes > left_) {
    // The first block, 64 KiB from malloc, is memory the process has touched before when it reads many
    // small files; a pickle that outgrows it gets populated blocks of 256 KiB doubling to 4 MiB.
    const size_t n = blocks_.size();
    const size_t grow = n == 0 ? size_t{64} << 10 : std::min<size_t>(size_t{256} << 10 << std::min<size_t>(n - 1, 4), size_t{4} << 20);
    const size_t block = std::max<size_t>(bytes + align, grow);
#if defined(__SANITIZE_ADDRESS__) || defined(CKPT_ASAN)
    const bool mapped = false;  // the sanitizer sees every block
#else
    const bool mapped = n > 0;
#endif
    if (!mapped) {
      blocks_.emplace_back(new unsigned char[block], Unmap{0});
    } else {
      void* m = ::mmap(nullptr, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
      if (m == MAP_FAILED) throw std::bad_alloc();
      blocks_.emplace_back(static_cast<unsigned char*>(m), Unmap{block});
    }
    cur_ = blocks_.back().get();
    left_ = block;
    pad = -reinterpret_cast<uintptr_t>(cur_) & (align - 1);
  }
  void* p = cur_ + pad;
  cur_ += pad + bytes;
  left_ -= pad + bytes;
  return p;
}

void Heap::trim() {
  if (blocks_.empty() || blocks_.back().get_deleter().size == 0) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t from = (reinterpret_cast<uintptr_t>(cur_) + page - 1) & ~(page - 1);
  const uintptr_t to = reinterpret_cast<uintptr_t>(cur_) + left_;  // the block's end, a page boundary
  if (from < to) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

void Heap::Unmap::operator()(unsigned char* p) const {
  if (size == 0) delete[] p;  // a malloc'd block
  else ::munmap(p, size);
}

void Kids::push(Heap& h, Value* v) {
  if (n_ == cap_) reserve(h, cap_ ? size_t{cap_} * 2 : 4);
  p_[n_++] = v;
}

void Kids::reserve(Heap& h, size_t n) {
  if (n <= cap_) return;
  const size_t cap = cap_ ? std::max<size_t>(n, size_t{cap_} * 2) : n;  // the first room is exactly what is asked
  auto** p = static_cast<Value**>(h.alloc(sizeof(Value*) * cap, alignof(Value*)));
  if (n_) std::memcpy(p, p_, sizeof(Value*) * n_);
  p_ = p;
  cap_ = static_cast<uint32_t>(cap);
}

void Kids::assign(Heap& h, std::span<Value* const> vs) {
  p_ = vs.empty() ? nullptr : static_cast<Value**>(h.alloc(sizeof(Value*) * vs.size(), alignof(Value*)));
  if (!vs.empty()) std::memcpy(p_, vs.data(), sizeof(Value*) * vs.size());
  n_ = cap_ = static_cast<uint32_t>(vs.size());
}

Value* Value::get(std::string_view key) const {
  const auto& p = pairs();
  Value* found = nullptr;
  for (size_t k = 0; k + 1 < p.size(); k += 2)
    if (p[k]->kind == PKind::Str && p[k]->str() == key) found = p[k + 1];
  return found;
}

// dict_entries (pickle.h).
std::vector<uint32_t> dict_entries(const Kids& p) {
  const uint32_t n = static_cast<uint32_t>(p.size() / 2);
  std::vector<uint32_t> take;
  if (n < 2) return take;
  std::vector<uint64_t> order, scratch;  // (hash << 32) | position
  order.reserve(n);
  for (uint32_t k = 0; k < n; ++k) {
    const Value* key = p[2 * k];
    uint64_t h;
    if (key->is_str()) h = std::hash<std::string_view>()(key->str());
    else if (key->is_int()) h = std::hash<int64_t>()(key->i) * 0x9E3779B97F4A7C15ull + 1;  // apart from the strs
    else continue;
    order.push_back((h >> 32) << 32 | k);
  }
  scratch.resize(order.size());
  for (int shift = 32; shift < 64; shift += 8) {  // LSD radix on the hash's four bytes: stable, positions stay in order
    size_t count[257] = {};
    for (const uint64_t x : order) ++count[((x >> shift) & 0xff) + 1];
    for (size_t d = 1; d < 257; ++d) count[d] += count[d - 1];
    for (const uint64_t x : order) scratch[count[(x >> shift) & 0xff]++] = x;
    order.swap(scratch);
  }
  // Keys whose hashes agree, sorted by the key itself (then by position), so a run of crafted collisions
  // costs n log n, never n^2: in each group of equal keys the first position takes the last one's value.
  auto before = [&p](uint32_t a, uint32_t b) {
    const Value* x = p[2 * a];
    const Value* y = p[2 * b];
    if (x->kind != y->kind) return x->kind < y->kind;
    if (x->is_str() && x->str() != y->str()) return x->str() < y->str();
    if (x->is_int() && x->i != y->i) return x->i < y->i;
    return a < b;
  };
  auto equal = [&p](uint32_t a, uint32_t b) {
    const Value* x = p[2 * a];
    const Value* y = p[2 * b];
    return x->kind == y->kind && (x->is_str() ? x->str() == y->str() : x->i == y->i);
  };
  std::vector<uint32_t> ks;
  for (size_t run = 0; run < order.size();) {
    size_t end = run + 1;
    while (end < order.size() && order[end] >> 32 == order[run] >> 32) ++end;
    if (end - run > 1) {
      ks.clear();
      for (size_t i = run; i < end; ++i) ks.push_back(static_cast<uint32_t>(order[i]));
      std::sort(ks.begin(), ks.end(), before);
      for (size_t g = 0; g < ks.size();) {
        size_t h = g + 1;
        while (h < ks.size() && equal(ks[g], ks[h])) ++h;
        if (h - g > 1) {
          if (take.empty()) {
            take.resize(n);
            for (uint32_t q = 0; q < n; ++q) take[q] = q;
          }
          take[ks[g]] = ks[h - 1];
          for (size_t r = g + 1; r < h; ++r) take[ks[r]] = kRepeatedKey;
        }
        g = h;
      }
    }
    run = end;
  }
  return take;
}


}  // namespace ckpt


namespace ckpt {



Value* unpack_args(ObjExt* e) {
  const PackedTensor& p = *e->packed;
  Heap& h = *p.heap;
  auto at = [&](size_t k) { return p.reduce_at - p.back[k]; };
  auto tuple = [&](uint64_t offset, std::span<Value* const> items) {
    Value* t = h.make(PKind::Tuple, offset);
    for (const Value* c : items) t->depth = std::max(t->depth, c->depth + 1);
    t->mut_kids().assign(h, items);
    return t;
  };
  auto int_at = [&](int64_t x, uint64_t offset) {
    Value* v = h.make(PKind::Int, offset);
    v->i = x;
    return v;
  };
  Value* pid_items[5] = {p.storage_word, p.cls, p.key, p.location, int_at(p.numel, at(1))};
  Value* pid = tuple(at(1), pid_items);
  Value* pers = h.make(PKind::PersId, at(2));
  h.ext(pers)->args = pid;
  pers->depth = pid->depth + 1;
  std::vector<Value*> dims(p.ndim);
  for (size_t k = 0; k < p.ndim; ++k) dims[k] = int_at(p.sizes()[k], at(3));
  Value* size = tuple(at(3), dims);
  for (size_t k = 0; k < p.ndim; ++k) dims[k] = int_at(p.strides()[k], at(4));
  Value* stride = tuple(at(4), dims);
  Value* grad = h.make(PKind::Bool, at(0));
  grad->b = p.requires_grad;
  Value* hooks = nullptr;
  if (p.hooks_fn) {
    hooks = h.make(PKind::Object, at(5));
    ObjExt* he = h.ext(hooks);
    he->callable = p.hooks_fn;
    he->args = tuple(at(5) > 0 ? at(5) - 1 : 0, {});
    hooks->depth = 2;
  } else {
    hooks = h.make(PKind::Dict, at(5));
  }
  Value* args_items[6] = {pers, int_at(p.offset, at(2)), size, stride, grad, hooks};
  e->args = tuple(at(0), args_items);
  return e->args;
}

std::string bigint_decimal(const Value* v) { return v->kind == PKind::BigInt ? bigint_decimal_text(v->str()) : std::string(); }

}  // namespace ckpt