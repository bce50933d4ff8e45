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