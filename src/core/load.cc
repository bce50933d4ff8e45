#include "core/load.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <map>
#include <set>
#include <unordered_set>

#include "core/diff.h"
#include "core/reader.h"
#include "core/text.h"
#include "core/torch_pickle.h"

namespace ckpt {

// ---- storages ----

StorageIndex::StorageIndex(const Checkpoint& ck, Limits limits) : ck_(ck), limits_(limits) {
  for (const Storage& s : ck.storages) by_key_.emplace(s.key, &s);
}

const Storage* StorageIndex::find(const std::string& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

ByteView StorageIndex::bytes(const Storage& s) const {
  if (assembled(s)) return assemble(s);
  const MappedFile* f = s.source ? s.source : ck_.file.get();
  const ByteView v = f->view();
  const std::string member = s.member.empty() ? std::string() : std::string(s.member);
  if (!s.present) throw InputError(f->path(), member, 0, fmt::format("storage '{}' has no bytes in the file", s.key));
  uint64_t off = s.file_offset;
  if (s.local_header != UINT64_MAX) {
    const ByteView lh = v.sub(s.local_header, 30, "zip local header").as_member(member);
    off = s.local_header + 30 + lh.le<uint16_t>(26) + lh.le<uint16_t>(28);
  }
  if (off > v.size() || v.size() - off < s.nbytes)
    throw InputError(f->path(), member, 0,
                     fmt::format("storage '{}' needs {} bytes at file offset {:#x}; the file has {}", s.key, s.nbytes,
                                 off, off > v.size() ? 0 : v.size() - off));
  return v.sub(off, s.nbytes, "storage data").as_member(member);
}

// A DCP tensor: each chunk is a torch.save blob of that piece, read by ckpt's own reader and copied
// row by row into the whole (contiguous) tensor.
ByteView StorageIndex::assemble(const Storage& s) const {
  std::lock_guard<std::mutex> g(lock_);
  auto it = assembled_.find(&s);
  if (it == assembled_.end()) {
    std::vector<uint8_t> whole(s.nbytes, 0);
    const uint64_t item = s.dtype->itemsize;
    const std::vector<int64_t> strides = contiguous_strides(s.shape);
    for (const Chunk& c : s.chunks) {
      const ByteView region = c.file->view().sub(c.offset, c.length, "DCP region");
      const std::string name = fmt::format("{}+{:#x}", c.file->path(), c.offset);
      Checkpoint part = read_checkpoint(MappedFile::from_memory(std::string(region.data(), region.data() + region.size()), name), limits_);
      auto fail = [&](const std::string& why) { throw InputError(c.file->path(), "", c.offset, fmt::format("DCP chunk of '{}': {}", s.key, why)); };
      if (part.tensors.size() != 1) fail(fmt::format("the region holds {} tensors, not one", part.tensors.size()));
      const Tensor& pt = part.tensors.front();
      if (pt.dtype != s.dtype || pt.shape != c.sizes || pt.layout != "strided" || pt.state != TensorState::Materialized)
        fail(fmt::format("the region holds {} {}, the metadata says {} {}", pt.dtype ? pt.dtype->name : "?",
                         shape_text(pt.shape), s.dtype->name, shape_text(c.sizes)));
      StorageIndex sub(part, limits_);
      const Storage* ps = sub.find(pt.storage);
      if (!ps) fail("its tensor has no storage");
      checked_extent(part, pt, *ps);
      const uint8_t* src = sub.bytes(*ps).data();
      // the piece at its place in the whole, one innermost row at a time when the piece's rows are
      // contiguous (they are in what torch.distributed.checkpoint writes), else one element at a time
      const size_t nd = c.sizes.size();
      if (pt.numel == 0) continue;
      const bool rows = nd > 0 && pt.stride[nd - 1] == 1;
      const int64_t run = rows ? c.sizes[nd - 1] : 1;
      const size_t outer = rows ? nd - 1 : nd;
      std::vector<int64_t> idx(outer, 0);
      for (int64_t k = 0; k < pt.numel / run; ++k) {
        int64_t from = pt.offset, to = rows ? c.offsets[nd - 1] : 0;
        for (size_t d = 0; d < outer; ++d) {
          from += idx[d] * pt.stride[d];
          to += (c.offsets[d] + idx[d]) * strides[d];
        }
        std::memcpy(whole.data() + static_cast<uint64_t>(to) * item, src + static_cast<uint64_t>(from) * item,
                    static_cast<uint64_t>(run) * item);
        for (size_t d = outer; d-- > 0;) {
          if (++idx[d] < c.sizes[d]) break;
          idx[d] = 0;
        }
      }
    }
    auto origin = std::make_shared<Origin>(Origin{ck_.path, s.key});
    it = assembled_.emplace(&s, std::make_pair(std::move(whole), std::move(origin))).first;
  }
  return ByteView(it->second.first.data(), it->second.first.size(), it->second.second, 0);
}

bool loadable_layout(const Tensor& t) {
  if (t.layout == "strided") return true;
  return t.layout == "quantized" && t.qscheme == "per_tensor_affine" && t.dtype && t.dtype->pack == 1 && is_contiguous(t);
}

bool is_contiguous(const Tensor& t) {
  int64_t expect = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

uint64_t checked_extent(const Checkpoint& ck, const Tensor& t, const Storage& s) {
  auto fail = [&](const std::string& why) -> uint64_t {
    const MappedFile* f = s.source ? s.source : ck.file.get();
    throw InputError(f->path(), std::string(s.member), 0, fmt::format("tensor '{}': {}", t.name, why));
  };
  if (!t.dtype) return fail("no dtype");
  if (t.stride.size() != t.shape.size()) return fail("stride and shape differ in length");
  if (t.offset < 0) return fail("negative storage offset");
  if (t.numel == 0) return 0;
  // last element offset: offset + sum (shape-1)*stride, overflow-checked
  uint64_t last = static_cast<uint64_t>(t.offset);
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] < 0 || t.stride[d] < 0) return fail("negative size or stride");
    uint64_t step;
    if (mul_overflows(static_cast<uint64_t>(t.shape[d] - 1), static_cast<uint64_t>(t.stride[d]), &step) ||
        add_overflows(last, step, &last))
      return fail("extent overflows");
  }
  uint64_t end_elems, begin_bytes, end_bytes;
  if (add_overflows(last, 1, &end_elems) || mul_overflows(end_elems, t.dtype->itemsize, &end_bytes) ||
      mul_overflows(static_cast<uint64_t>(t.offset), t.dtype->itemsize, &begin_bytes))
    return fail("extent overflows");
  if (end_bytes > s.nbytes)
    return fail(fmt::format("shape {} stride {} offset {} needs {} bytes of storage '{}', which holds {}",
                            shape_text(t.shape), shape_text(t.stride), t.offset, end_bytes, s.key, s.nbytes));
  return end_bytes - begin_bytes;
}

// ---- value checks ----
namespace {

template <typename U, U kAbs, U kInf>
ValueStats count_bits(const uint8_t* p, uint64_t n, uint64_t step) {
  uint64_t nan = 0, inf = 0;
  for (uint64_t k = 0; k < n; ++k) {
    U u;
    std::memcpy(&u, p + k * step, sizeof(U));
    u &= kAbs;
    nan += u > kInf;
    inf += u == kInf;
  }
  return {nan, inf};
}

// Complex: each element is two parts; an element is NaN (Inf) when either part is.
template <typename U, U kAbs, U kInf>
ValueStats count_pairs(const uint8_t* p, uint64_t n) {
  uint64_t nan = 0, inf = 0;
  for (uint64_t k = 0; k < n; ++k) {
    U a, b;
    std::memcpy(&a, p + 2 * k * sizeof(U), sizeof(U));
    std::memcpy(&b, p + (2 * k + 1) * sizeof(U), sizeof(U));
    a &= kAbs;
    b &= kAbs;
    nan += (a > kInf) | (b > kInf);
    inf += (a == kInf) | (b == kInf);
  }
  return {nan, inf};
}

}  // namespace

ValueStats count_nonfinite(const DType& d, const uint8_t* p, uint64_t n) {
  const std::string_view name = d.name;
  if (name == "float32") return count_bits<uint32_t, 0x7fffffffu, 0x7f800000u>(p, n, 4);
  if (name == "float64") return count_bits<uint64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ull>(p, n, 8);
  if (name == "float16") return count_bits<uint16_t, 0x7fff, 0x7c00>(p, n, 2);
  if (name == "bfloat16") return count_bits<uint16_t, 0x7fff, 0x7f80>(p, n, 2);
  if (name == "complex64") return count_pairs<uint32_t, 0x7fffffffu, 0x7f800000u>(p, n);
  if (name == "complex128") return count_pairs<uint64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ull>(p, n);
  if (name == "complex32") return count_pairs<uint16_t, 0x7fff, 0x7c00>(p, n);
  if (name == "float8_e5m2") return count_bits<uint8_t, 0x7f, 0x7c>(p, n, 1);
  ValueStats s;
  if (name == "float8_e4m3fn")  // no Inf; NaN is S.1111.111
    for (uint64_t k = 0; k < n; ++k) s.nan += (p[k] & 0x7f) == 0x7f;
  if (name == "float8_e4m3fnuz" || name == "float8_e5m2fnuz")  // no Inf; NaN is 0x80 alone
    for (uint64_t k = 0; k < n; ++k) s.nan += p[k] == 0x80;
  if (name == "float8_e8m0fnu")
    for (uint64_t k = 0; k < n; ++k) s.nan += p[k] == 0xff;
  return s;
}

ValueStats tensor_nonfinite(const Tensor& t, const uint8_t* storage) {
  ValueStats total;
  if (t.dtype->pack != 1) return total;
  for_each_run(t, [&](uint64_t off, uint64_t len) {
    ValueStats s = count_nonfinite(*t.dtype, storage + off, len / t.dtype->itemsize);
    total.nan += s.nan;
    total.inf += s.inf;
  });
  return total;
}

uint32_t tensor_crc32(const Tensor& t, const uint8_t* storage) {
  uLong crc = crc32(0L, Z_NULL, 0);
  if (t.dtype->pack != 1) {  // packed sub-byte dtypes: the stored bytes
    const uint64_t n = dtype_bytes(*t.dtype, static_cast<uint64_t>(t.numel));
    return static_cast<uint32_t>(crc32_z(crc, storage + t.offset * t.dtype->itemsize, n));
  }
  for_each_run(t, [&](uint64_t off, uint64_t len) { crc = crc32_z(crc, storage + off, len); });
  return static_cast<uint32_t>(crc);
}

std::vector<TensorCheck> check_values(const Checkpoint& ck, const StorageIndex& index, const std::vector<const Tensor*>& tensors, bool crc,
                                      unsigned threads, const std::function<void(uint64_t, uint64_t)>& progress) {
  std::vector<TensorCheck> out(tensors.size());
  std::vector<size_t> order;  // biggest first, so the last tensor handed out is a small one
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = *tensors[k];
    if (t.state == TensorState::Materialized && t.dtype && !t.storage.empty() && loadable_layout(t)) order.push_back(k);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors[a]->bytes > tensors[b]->bytes; });
  uint64_t total = 0;
  for (size_t k : order) total += tensors[k]->bytes;
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::exception_ptr error;
  std::mutex error_lock;
  auto work = [&](bool report) {
    try {
      for (size_t i = next++; i < order.size(); i = next++) {
        const Tensor& t = *tensors[order[i]];
        const Storage* s = index.find(t.storage);
        if (!s) throw InputError(ck.path, fmt::format("tensor '{}': storage '{}' is not in the file", t.name, t.storage));
        checked_extent(ck, t, *s);
        const ByteView b = index.bytes(*s);
        const MappedFile& file = s->source ? *s->source : *ck.file;
        file.prefetch(b.data(), b.size());
        TensorCheck& c = out[order[i]];
        c.stats = tensor_nonfinite(t, b.data());
        if (crc) c.crc32 = tensor_crc32(t, b.data());
        if (!StorageIndex::assembled(*s)) file.release(b.data(), b.size());  // checked: back to the page cache
        done += t.bytes;
        if (report && progress) progress(done, total);
      }
    } catch (...) {
      std::lock_guard<std::mutex> g(error_lock);
      if (!error) error = std::current_exception();
      next = order.size();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < std::max(1u, threads); ++k) pool.emplace_back(work, false);
  work(true);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

// ---- key matching ----

std::string renamed_key(const std::string& key, const std::string& strip, const std::string& add) {
  std::string k = key;
  if (!strip.empty() && k.compare(0, strip.size(), strip) == 0) k = k.substr(strip.size());
  return add + k;
}

namespace {
std::string dtype_name(const Tensor* t) { return t->dtype ? std::string(t->dtype->name) : std::string("?"); }

}  // namespace

KeyMatch match_keys(const std::vector<const Tensor*>& file, const std::vector<const Tensor*>& model,
                    const std::string& strip, const std::string& add) {
  KeyMatch m;
  std::map<std::string, const Tensor*> by_model;
  for (const Tensor* t : model) by_model.emplace(t->name, t);
  std::set<std::string> seen;
  std::vector<std::string> renamed;
  for (const Tensor* t : file) {
    std::string k = renamed_key(t->name, strip, add);
    renamed.push_back(k);
    auto it = by_model.find(k);
    if (it == by_model.end()) {
      m.unexpected.push_back(k);
      continue;
    }
    seen.insert(k);
    const Tensor* mt = it->second;
    // lazy entries have no shape: an UninitializedParameter takes any shape, as load_state_dict does
    const bool lazy = t->state == TensorState::Uninitialized || mt->state == TensorState::Uninitialized;
    if (!lazy && (t->shape != mt->shape || t->dtype != mt->dtype))
      m.mismatched.push_back({k, dtype_name(t), dtype_name(mt), t->shape, mt->shape});
    else
      ++m.matched;
  }
  for (const auto& [k, t] : by_model)
    if (!seen.count(k)) m.missing.push_back(k);
  std::sort(m.unexpected.begin(), m.unexpected.end());
  std::sort(m.mismatched.begin(), m.mismatched.end(), [](const KeyMismatch& a, const KeyMismatch& b) { return a.key < b.key; });
  if (m.missing.empty() && m.unexpected.empty()) return m;

  // One prefix, stripped from or added to FILE's keys, that pairs more keys than now and at least half
  // of the model's.
  std::unordered_set<std::string> model_keys;
  for (const auto& [k, t] : by_model) model_keys.insert(k);
  const PrefixRename best = best_prefix_rename(renamed, model_keys);
  if (best.op != PrefixRename::None && best.paired > m.matched + m.mismatched.size() && best.paired * 2 >= by_model.size()) {
    if (best.op == PrefixRename::Strip) m.suggested_strip_prefix = best.prefix;
    else m.suggested_add_prefix = best.prefix;
  }
  return m;
}

// ---- report ----

bool LoadReport::incomplete() const { return skipped > 0 || (match && !match->ok()); }

namespace {
using J = nlohmann::ordered_json;

J shape_json(const std::vector<int64_t>& s) {
  J a = J::array();
  for (int64_t d : s) a.push_back(d);
  return a;
}
J opt(const std::optional<std::string>& s) { return s ? J(*s) : J(nullptr); }

double gbps(uint64_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0; }
}  // namespace

std::string load_json_text(const LoadReport& r) {
  J j;
  j["schema"] = "ckpt.load/1";
  j["file"] = r.file;
  j["format"] = r.format;
  j["device"] = r.device;
  j["libtorch"] = r.libtorch;
  j["dtype"] = r.dtype.empty() ? J(nullptr) : J(r.dtype);
  j["empty_init"] = r.empty_init;
  if (!r.model.empty()) {
    J m;
    m["file"] = r.model;
    m["strip_prefix"] = r.strip_prefix;
    m["add_prefix"] = r.add_prefix;
    if (r.match) {
      m["matched"] = r.match->matched;
      m["missing_keys"] = r.match->missing;
      m["unexpected_keys"] = r.match->unexpected;
      J mm = J::array();
      for (const KeyMismatch& x : r.match->mismatched)
        mm.push_back(J{{"key", x.key}, {"file_shape", shape_json(x.file_shape)}, {"model_shape", shape_json(x.model_shape)},
                       {"file_dtype", x.file_dtype}, {"model_dtype", x.model_dtype}});
      m["mismatched_keys"] = mm;
      m["suggested_strip_prefix"] = opt(r.match->suggested_strip_prefix);
      m["suggested_add_prefix"] = opt(r.match->suggested_add_prefix);
      m["ok"] = r.match->ok();
    }
    m["arch_bytes_read"] = r.arch_bytes_read;
    m["arch_bytes_skipped"] = r.arch_bytes_skipped;
    m["bytes_written_twice"] = r.bytes_written_twice;
    m["arch_seconds"] = r.arch_seconds;
    j["model"] = m;
  } else {
    j["model"] = nullptr;
  }
  j["totals"] = J{{"tensors", r.tensors}, {"loaded", r.loaded}, {"meta", r.meta}, {"skipped", r.skipped},
                  {"bytes", r.bytes}, {"bytes_read", r.bytes_read}, {"zero_copy_bytes", r.zero_copy_bytes},
                  {"copied_bytes", r.copied_bytes}, {"device_bytes", r.device_bytes},
                  {"nan", r.checked_values() ? J(r.nan) : J(nullptr)}, {"inf", r.checked_values() ? J(r.inf) : J(nullptr)}};
  j["time"] = J{{"startup_seconds", r.startup_seconds}, {"read_seconds", r.read_seconds},
                {"check_seconds", r.check_seconds}, {"load_seconds", r.load_seconds}, {"seconds", r.seconds},
                {"gb_per_s", gbps(r.bytes_read, r.check_seconds + r.load_seconds)}};
  j["memory"] = J{{"peak_rss_bytes", r.peak_rss}, {"device_bytes", r.device_bytes}};
  j["complete"] = !r.incomplete();
  J rows = J::array();
  for (const LoadedTensor& t : r.rows) {
    J x;
    x["name"] = t.name;
    x["dtype"] = t.dtype;
    x["shape"] = shape_json(t.shape);
    x["state"] = t.state;
    if (!t.reason.empty()) x["reason"] = t.reason;
    x["zero_copy"] = t.zero_copy;
    if (r.checked_values() && t.state == "loaded") {
      x["nan"] = t.stats.nan;
      x["inf"] = t.stats.inf;
    }
    if (t.crc32) x["crc32"] = *t.crc32;
    rows.push_back(std::move(x));
  }
  j["tensors"] = rows;
  j["notes"] = r.notes;
  return json_text(j) + "\n";
}

std::string render_load_text(const LoadReport& r, bool color, bool all_rows) {
  std::string out;
  auto line = [&](const char* k, const std::string& v) { out += fmt::format("{:<13}{}\n", k, v); };
  line("File", fmt::format("{} ({})", r.file, r.format));
  line("Device", fmt::format("{} (LibTorch {}){}{}", r.device, r.libtorch, r.empty_init ? ", empty init" : "",
                             r.dtype.empty() ? "" : ", as " + r.dtype));
  if (!r.model.empty() && r.match) {
    const KeyMatch& m = *r.match;
    line("Model", fmt::format("{}: {} keys matched, {} missing, {} unexpected, {} mismatched", r.model, m.matched,
                              m.missing.size(), m.unexpected.size(), m.mismatched.size()));
    if (!r.strip_prefix.empty() || !r.add_prefix.empty())
      line("Renamed", fmt::format("strip '{}', add '{}'", r.strip_prefix, r.add_prefix));
  }
  // the table: only tensors worth a look (skipped, meta, non-finite values), Lightning-style columns
  std::vector<const LoadedTensor*> shown;
  for (const LoadedTensor& t : r.rows)
    if (all_rows || t.state != "loaded" || t.stats.nan || t.stats.inf) shown.push_back(&t);
  if (!shown.empty()) {
    size_t wn = 4, wd = 5, ws = 5, wst = 5;
    for (const LoadedTensor* t : shown) {
      wn = std::max(wn, t->name.size());
      wd = std::max(wd, t->dtype.size());
      ws = std::max(ws, shape_text(t->shape).size());
      wst = std::max(wst, t->state.size());
    }
    const std::string head = fmt::format("   | {:<{}} | {:<{}} | {:<{}} | {:<{}} | {:>6} | {:>6} | {}", "Name", wn, "Dtype", wd,
                                         "Shape", ws, "State", wst, "NaN", "Inf", "Note");
    out += "\n" + head + "\n" + std::string(head.size(), '-') + "\n";
    size_t k = 0;
    for (const LoadedTensor* t : shown) {
      const bool bad = t->state == "skipped" || t->stats.nan || t->stats.inf;
      const char* on = bad ? severity_color(Severity::Warning, color) : "";
      out += fmt::format("{:<3}| {:<{}} | {:<{}} | {:<{}} | {}{:<{}}{} | {:>6} | {:>6} | {}\n", k++, t->name, wn, t->dtype, wd,
                         shape_text(t->shape), ws, on, t->state, wst, bad ? color_reset(color) : "",
                         t->state == "loaded" && r.checked_values() ? std::to_string(t->stats.nan) : "-",
                         t->state == "loaded" && r.checked_values() ? std::to_string(t->stats.inf) : "-", t->reason);
    }
    out += std::string(head.size(), '-') + "\n";
  }
  if (r.match) {
    const KeyMatch& m = *r.match;
    auto list = [&](const char* what, const std::vector<std::string>& keys) {
      if (keys.empty()) return;
      out += fmt::format("{} ({}):", what, keys.size());
      for (size_t k = 0; k < keys.size() && k < 20; ++k) out += (k ? ", " : " ") + keys[k];
      out += keys.size() > 20 ? fmt::format(", ... ({} more)\n", keys.size() - 20) : "\n";
    };
    list("missing keys", m.missing);
    list("unexpected keys", m.unexpected);
    for (const KeyMismatch& x : m.mismatched)
      out += fmt::format("mismatched: {}: file {} {}, model {} {}\n", x.key, x.file_dtype, shape_text(x.file_shape),
                         x.model_dtype, shape_text(x.model_shape));
    if (m.suggested_strip_prefix)
      out += fmt::format("hint: keys match with --strip-prefix '{}'\n", *m.suggested_strip_prefix);
    if (m.suggested_add_prefix) out += fmt::format("hint: keys match with --add-prefix '{}'\n", *m.suggested_add_prefix);
  }
  out += "\n";
  out += fmt::format("{:<10} {} loaded, {} on meta, {} skipped (of {})\n", "tensors", r.loaded, r.meta, r.skipped, r.tensors);
  out += fmt::format("{:<10} {} ({} read from the file: {} zero-copy, {} copied)\n", "bytes", human_bytes(r.bytes),
                     human_bytes(r.bytes_read), human_bytes(r.zero_copy_bytes), human_bytes(r.copied_bytes));
  if (r.checked_values()) out += fmt::format("{:<10} {} NaN, {} Inf\n", "values", r.nan, r.inf);
  const std::string checked =
      r.check_seconds > 0 ? fmt::format("{:.3f} s reading and checking every byte while LibTorch started, ", r.check_seconds) : "";
  out += fmt::format("{:<10} {:.3f} s ({}{:.3f} s to the command, {:.3f} s reading the structure, {:.3f} s loading: {:.2f} GB/s)\n",
                     "time", r.seconds, checked, r.startup_seconds, r.read_seconds, r.load_seconds,
                     gbps(r.bytes_read, r.check_seconds + r.load_seconds));
  out += fmt::format("{:<10} peak RSS {}{}\n", "memory", human_bytes(r.peak_rss),
                     r.device_bytes ? fmt::format(", {} on {}", human_bytes(r.device_bytes), r.device) : std::string());
  if (!r.model.empty()) {
    if (r.empty_init)
      out += fmt::format("{:<10} {} of {}'s own weights not read, nothing initialized or written twice\n", "empty init",
                         human_bytes(r.arch_bytes_skipped), r.model);
    else
      out += fmt::format("{:<10} {} of {}'s own weights read in {:.3f} s, then {} overwritten (--empty-init avoids both)\n",
                         "plain init", human_bytes(r.arch_bytes_read), r.model, r.arch_seconds, human_bytes(r.bytes_written_twice));
  }
  for (const std::string& n : r.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace ckpt
