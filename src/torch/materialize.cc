#include "torch/materialize.h"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "core/device.h"
#include "core/storage.h"
#include "core/values.h"
#include "torch/compat.h"
#include "torch/nonfinite.h"

namespace ckpt::torchb {

std::string libtorch_version() { return TORCH_VERSION; }

c10::Device parse_device(const DeviceSpec& ds, const std::string& spec) {
  c10::Device d(ds.kind == DeviceSpec::Kind::Meta ? c10::kMeta : ds.kind == DeviceSpec::Kind::Cuda ? c10::kCUDA : c10::kCPU);
  // As c10::Device("cuda:N") stores it: narrowed to DeviceIndex, and unchecked (the constructor taking an
  // index asserts in debug builds of ckpt; the string one, compiled into LibTorch, never did).
  if (ds.index >= 0) d.set_index(static_cast<c10::DeviceIndex>(ds.index));
  if (d.is_cuda()) {
#ifndef CKPT_CUDA
    throw EnvironmentError(
        fmt::format("--device {}: CUDA is not available: this ckpt-torch is linked against LibTorch {} "
                    "built without CUDA (rebuild against a CUDA LibTorch, see README)",
                    spec, libtorch_version()));
#else
    // A CUDA LibTorch (CKPT_CUDA: CMake found its CUDA libraries) answers hasCUDA() false where no driver or
    // device is there: that is no device, not a LibTorch without CUDA.
    const auto n = at::hasCUDA() ? c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).deviceCount() : 0;
    if (n == 0)
      throw EnvironmentError(
          fmt::format("--device {}: CUDA is not available: LibTorch {} has CUDA but no CUDA device is "
                      "visible (driver, CUDA_VISIBLE_DEVICES)",
                      spec, libtorch_version()));
    if (d.has_index() && d.index() >= n)
      throw EnvironmentError(fmt::format("--device {}: CUDA has {} device(s) here", spec, static_cast<int>(n)));
    if (!d.has_index()) d = c10::Device(c10::kCUDA, 0);
#endif
  }
  return d;
}

namespace {
using S = at::ScalarType;
const std::pair<std::string_view, S> kTypes[] = {
    {"float64", S::Double},
    {"float32", S::Float},
    {"float16", S::Half},
    {"bfloat16", S::BFloat16},
    {"int64", S::Long},
    {"int32", S::Int},
    {"int16", S::Short},
    {"int8", S::Char},
    {"uint8", S::Byte},
    {"bool", S::Bool},
    {"complex128", S::ComplexDouble},
    {"complex64", S::ComplexFloat},
    {"complex32", S::ComplexHalf},
    {"qint8", S::QInt8},
    {"quint8", S::QUInt8},
    {"qint32", S::QInt32},
    {"quint4x2", S::QUInt4x2},
    {"quint2x4", S::QUInt2x4},
#if CKPT_TORCH_AT_LEAST(2, 1)
    {"float8_e5m2", S::Float8_e5m2},
    {"float8_e4m3fn", S::Float8_e4m3fn},
#endif
#if CKPT_TORCH_AT_LEAST(2, 2)
    {"float8_e5m2fnuz", S::Float8_e5m2fnuz},
    {"float8_e4m3fnuz", S::Float8_e4m3fnuz},
#endif
#if CKPT_TORCH_AT_LEAST(2, 3)
    {"uint16", S::UInt16},
    {"uint32", S::UInt32},
    {"uint64", S::UInt64},
#endif
#if CKPT_TORCH_AT_LEAST(2, 7)
    {"float8_e8m0fnu", S::Float8_e8m0fnu},
#endif
#if CKPT_TORCH_AT_LEAST(2, 8)
    {"float4_e2m1fn_x2", S::Float4_e2m1fn_x2},
#endif
};
}  // namespace

std::optional<at::ScalarType> scalar_type(const DType& d) {
  for (const auto& [name, s] : kTypes)
    if (name == d.name) return s;
  return std::nullopt;
}

std::string dtype_name(at::ScalarType t) {
  for (const auto& [name, s] : kTypes)
    if (s == t) return std::string(name);
  return c10::toString(t);
}

namespace {

void no_delete(void*) {}

// c10::Storage over bytes that stay owned by the mapped file (which outlives the tensors: the Checkpoint
// keeps it, and ckpt's commands keep the Checkpoint until exit).
c10::Storage borrowed_storage(const uint8_t* p, uint64_t n) {
  c10::DataPtr ptr(const_cast<uint8_t*>(p), nullptr, &no_delete, c10::Device(c10::kCPU));
  return c10::Storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(n), std::move(ptr), nullptr, false);
}


bool libtorch_makes(const DType& d) { return scalar_type(d).has_value(); }

at::Tensor view_of(const Tensor& t, const c10::Storage& storage, const c10::Device& device) {
  return at::empty({0}, at::TensorOptions().dtype(*scalar_type(*t.dtype)).device(device)).set_(storage, t.offset, t.shape, t.stride);
}

// The streaming load (cuda, or cpu with --stream): every storage streamed into its allocation
// (core/stream.h), then NaN / Inf counted there by LibTorch's reductions; with --checksum the CRC-32s
// read back through the ring.
struct Streamed {
  std::unordered_map<const Storage*, c10::Storage> storages;
  std::vector<TensorCheck> checks;
};
Streamed stream_to_device(const Checkpoint& ck, const StorageIndex& index, const std::vector<Target>& targets,
                          const MaterializeOptions& o, LoadReport& rep) {
  using Clock = std::chrono::steady_clock;
  if (!o.ring) throw std::logic_error("materialize: a streaming load without its ring");
  const auto tp = Clock::now();
  std::vector<const Tensor*> list;
  for (const Target& tg : targets) list.push_back(why_not_loaded(*tg.tensor, true, &libtorch_makes) == Unread::No ? tg.tensor : nullptr);
  StreamLoad load(ck, index, list);
  const double plan = std::chrono::duration<double>(Clock::now() - tp).count();
  std::unique_ptr<TensorSink> sink = make_tensor_sink(o.device);
  Watchdog dog(o.stall_seconds);
  StreamOptions so;
  so.progress = o.progress;
  StreamStats stats;
  Streamed out;
  out.checks.resize(targets.size());
  const bool first_use = o.ring->uses() == 0;
  try {
    load.run(*sink, *o.ring, dog, so, &stats);
    const auto tc = Clock::now();
    std::vector<at::Tensor> views(targets.size());
    for (size_t k = 0; k < targets.size(); ++k)
      if (load.storage_of(k) != SIZE_MAX) views[k] = view_of(*list[k], sink->storage(load.storage_of(k)).storage(), o.device);
    const std::vector<ValueStats> values = count_nonfinite(views, [&] {
      sink->fence(dog, stall_message(ck.path, "", std::nullopt, "counting NaN / Inf on the device", dog.seconds()));
    });
    views.clear();
    rep.count_seconds = std::chrono::duration<double>(Clock::now() - tc).count();
    std::vector<std::optional<uint32_t>> crcs;
    if (o.checksum) crcs = load.readback_crc(*sink, *o.ring, dog, so, &stats);
    for (size_t k = 0; k < targets.size(); ++k) {
      out.checks[k].stats = values[k];
      if (o.checksum) out.checks[k].crc32 = crcs[k];
    }
  } catch (const InputError&) {
    sink->abort();
    throw;
  } catch (const EnvironmentError&) {  // a stall, a CUDA error: it names the file already
    sink->abort();
    throw;
  } catch (const std::exception& e) {  // the device refused (out of memory, a CUDA error): exit 4
    sink->abort();
    const std::string what = e.what();
    throw EnvironmentError(fmt::format("{}: loading onto {}: {}", ck.path, o.device.str(), what.substr(0, what.find('\n'))));
  }
  for (size_t id = 0; id < load.storages().size(); ++id) {
    out.storages.emplace(load.storages()[id], sink->storage(id).storage());
    rep.device_bytes += load.storages()[id]->nbytes;
    rep.copied_bytes += load.storages()[id]->nbytes;
    rep.bytes_read += load.storages()[id]->nbytes;
  }
  stats.plan_seconds += plan;
  rep.stream = stats;
  rep.staging = o.device.is_cuda() ? "pinned" : "host";
  rep.device_crc = o.checksum;
  rep.plan_seconds = stats.plan_seconds;
  rep.ring_reused = !first_use;
  if (first_use) {  // made once per run, overlapped with everything before the first load
    rep.context_seconds = o.ring->init_seconds();
    rep.ring_seconds = o.ring->alloc_seconds();
    rep.ring_wait_seconds = o.ring->waited_seconds();
  }
  return out;
}

}  // namespace

namespace {

// The reason a load row gives for a tensor whose bytes it leaves unread (core's Unread, in LibTorch's words).
std::string unread_text(Unread u, const Tensor& t, const std::string& dtype, const MaterializeOptions& o) {
  switch (u) {
    case Unread::Lazy:
      return std::string("uninitialized (lazy) ") + (t.kind == TensorKind::Buffer ? "buffer" : "parameter") +
             ": no shape until a forward";
    case Unread::Dtype: return fmt::format("dtype {} is unknown to LibTorch {}", dtype, libtorch_version());
    case Unread::Layout:
      return t.layout == Layout::Quantized
                 ? fmt::format("{} {} tensors are not materialized by ckpt load", t.x->qscheme, dtype)
                 : fmt::format("{} tensors are not materialized by ckpt load",
                               t.layout == Layout::Strided ? dtype : t.layout_text());
    case Unread::QuantizedStreamed:
      return o.device.is_cuda() ? fmt::format("quantized tensors load on cpu and meta only (asked: {})", o.device.str())
                                : std::string("quantized tensors are not streamed (load them without --stream)");
    case Unread::NoStorage:  // a pickled wrapper (TwoTensor, ...): no storage of its own
      return fmt::format("tensor subclass {} keeps its data in a pickled object, which ckpt does not build", t.x->subclass);
    case Unread::No:
    case Unread::Meta: break;
  }
  return {};
}

// One materialize() call: each target becomes a row of the report and, unless skipped, a tensor on
// meta, on the cpu (over the file's bytes where they are aligned, else a copy) or on the device.
class Materializer {
 public:
  Materializer(const Checkpoint& ck, const MaterializeOptions& o, LoadReport& rep)
      : ck_(ck), o_(o), rep_(rep), index_(ck), meta_(o.device.is_meta()), cuda_(o.device.is_cuda()),
        streamed_(cuda_ || o.stream) {}

  std::vector<std::pair<std::string, at::Tensor>> run(const std::vector<Target>& targets) {
    read_and_check(targets);
    for (size_t k = 0; k < targets.size(); ++k) {
      const Target& tg = targets[k];
      const Tensor& t = *tg.tensor;
      LoadedTensor row;
      row.name = tg.name;
      row.dtype = t.dtype ? std::string(t.dtype->name) : "?";
      row.shape = t.shape;
      row.shape_known = !(t.state == TensorState::Uninitialized && !t.resolved);
      ++rep_.tensors;
      const Unread u = why_not_loaded(t, streamed_, &libtorch_makes);
      if (u == Unread::Meta || (meta_ && (u == Unread::No || u == Unread::NoStorage))) {
        on_meta(tg, t, std::move(row));
      } else if (u == Unread::No) {
        from_bytes(tg, t, checks_[k], std::move(row));
      } else {
        if (u == Unread::NoStorage && t.x->subclass.empty())
          throw InputError(ck_.path, fmt::format("tensor '{}': storage '{}' is not in the file", t.name, t.storage));
        std::string why = unread_text(u, t, row.dtype, o_);
        skip(std::move(row), std::move(why));
      }
    }
    return std::move(out_);
  }

 private:
  struct Made {
    c10::Storage storage;
    ByteView bytes;
  };

  // cpu: every byte read and checked first, on every core (or by the parent ckpt process), then the
  // tensors are wrapped / copied. cuda: checked while streamed.
  void read_and_check(const std::vector<Target>& targets) {
    if (streamed_) {
      Streamed st = stream_to_device(ck_, index_, targets, o_, rep_);
      checks_ = std::move(st.checks);
      for (auto& [s, storage] : st.storages) made_.emplace(s, Made{std::move(storage), ByteView()});
    } else if (!meta_ && o_.prechecked && o_.prechecked->size() == targets.size()) {
      checks_ = *o_.prechecked;
    } else if (!meta_) {
      std::vector<const Tensor*> list;
      for (const Target& tg : targets) list.push_back(tg.tensor);
      checks_ = check_values(ck_, index_, list, o_.checksum, std::max(1u, std::thread::hardware_concurrency()), o_.progress);
    }
    if (checks_.empty()) checks_.resize(targets.size());  // meta: nothing read, nothing counted
  }

  void skip(LoadedTensor row, std::string why) {
    row.state = LoadState::Skipped;
    row.reason = std::move(why);
    ++rep_.skipped;
    rep_.rows.push_back(std::move(row));
  }

  // Counts a tensor's bytes once per distinct view of a storage (a tied weight is one).
  void count_view(std::string storage, const Tensor& t, const at::Tensor& x) {
    if (unique_views_.insert({std::move(storage), t.offset, t.shape, t.stride}).second)
      rep_.bytes += static_cast<uint64_t>(x.numel()) * x.element_size();
  }

  void loaded(const Target& tg, const Tensor& t, std::string storage, at::Tensor x, LoadedTensor row) {
    row.state = LoadState::Loaded;
    ++rep_.loaded;
    count_view(std::move(storage), t, x);
    out_.emplace_back(tg.name, std::move(x));
    rep_.rows.push_back(std::move(row));
  }

  // A meta tensor of the file, or any tensor on --device meta: shape, strides and dtype only.
  void on_meta(const Target& tg, const Tensor& t, LoadedTensor row) {
    const auto opts = at::TensorOptions().dtype(*scalar_type(*t.dtype)).device(c10::kMeta);
    at::Tensor x;
    try {
      x = t.layout == Layout::Quantized ? at::_empty_affine_quantized(t.shape, opts, t.x->q_scale, t.x->q_zero_point)
                                        : at::empty_strided(t.shape, t.stride, opts);
    } catch (const c10::Error&) {
      std::string why = fmt::format("LibTorch {} cannot make a {} {} tensor on meta", libtorch_version(), t.layout_text(), row.dtype);
      skip(std::move(row), std::move(why));
      return;
    }
    if (o_.dtype && x.is_floating_point()) x = x.to(*o_.dtype);
    row.dtype = dtype_name(x.scalar_type());
    if (t.state == TensorState::Meta && !meta_) {
      row.state = LoadState::Meta;
      row.reason = "meta tensor in the file: it has no data (load_state_dict: Cannot copy out of meta tensor)";
      ++rep_.meta;
      ++rep_.skipped;
      out_.emplace_back(tg.name, std::move(x));
      rep_.rows.push_back(std::move(row));
      return;
    }
    loaded(tg, t, t.storage.empty() ? t.name : t.storage.str(), std::move(x), std::move(row));
  }

  // The storage's c10::Storage: the device's copy (streamed), the file's own bytes where they are aligned
  // for the dtype, else a copy; made once per storage.
  const Made& storage_of(const Tensor& t, const Storage& s) {
    auto it = made_.find(&s);
    if (it != made_.end()) return it->second;
    ByteView bytes = index_.bytes(s);
    if (streamed_)  // every storage why_not_loaded() admits was streamed
      throw std::logic_error(fmt::format("tensor '{}': storage '{}' was not streamed to the device", t.name, t.storage));
    c10::Storage storage;
    const uint64_t align = std::min<uint64_t>(t.dtype->itemsize, 16);
    if (t.layout != Layout::Quantized && !StorageIndex::assembled(s) && reinterpret_cast<uintptr_t>(bytes.data()) % align == 0) {
      storage = borrowed_storage(bytes.data(), bytes.size());
      rep_.zero_copy_bytes += s.nbytes;
    } else {
      at::Tensor copy = at::empty({static_cast<int64_t>(s.nbytes)}, at::TensorOptions().dtype(at::kByte));
      std::memcpy(copy.data_ptr<uint8_t>(), bytes.data(), bytes.size());
      storage = copy.storage();
      rep_.copied_bytes += s.nbytes;
    }
    rep_.bytes_read += s.nbytes;
    return made_.emplace(&s, Made{std::move(storage), bytes}).first->second;
  }

  // A tensor whose bytes were read (and checked): a view of its storage, or a quantized tensor's own copy.
  void from_bytes(const Target& tg, const Tensor& t, const TensorCheck& check, LoadedTensor row) {
    const Storage* s = index_.find(t.storage);
    if (!s) throw InputError(ck_.path, fmt::format("tensor '{}': storage '{}' is not in the file", t.name, t.storage));
    checked_extent(ck_, t, *s);
    const Made& m = storage_of(t, *s);
    row.zero_copy = !streamed_ && m.storage.data() == static_cast<const void*>(m.bytes.data());
    at::Tensor x;
    if (t.layout == Layout::Quantized) {  // its own allocation, filled with the stored integers
      x = at::_empty_affine_quantized(t.shape, at::TensorOptions().dtype(*scalar_type(*t.dtype)), t.x->q_scale,
                                      t.x->q_zero_point);
      std::memcpy(x.data_ptr(), m.bytes.data() + static_cast<uint64_t>(t.offset) * t.dtype->itemsize,
                  static_cast<size_t>(t.bytes));
      row.zero_copy = false;
    } else {
      x = view_of(t, m.storage, cuda_ ? o_.device : c10::Device(c10::kCPU));
    }
    row.stats = check.stats;
    row.crc32 = check.crc32;
    rep_.nan += row.stats.nan;
    rep_.inf += row.stats.inf;
    if (o_.dtype && x.is_floating_point() && x.scalar_type() != *o_.dtype) {
      x = x.to(*o_.dtype);
      row.zero_copy = false;
      if (cuda_) rep_.device_bytes += static_cast<uint64_t>(x.numel()) * x.element_size();
    }
    row.dtype = dtype_name(x.scalar_type());
    loaded(tg, t, t.storage.str(), std::move(x), std::move(row));
  }

  const Checkpoint& ck_;
  const MaterializeOptions& o_;
  LoadReport& rep_;
  StorageIndex index_;
  const bool meta_, cuda_, streamed_;
  std::unordered_map<const Storage*, Made> made_;
  std::vector<TensorCheck> checks_;
  std::set<std::tuple<std::string, int64_t, std::vector<int64_t>, std::vector<int64_t>>> unique_views_;
  std::vector<std::pair<std::string, at::Tensor>> out_;
};

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> materialize(const Checkpoint& ck, const std::vector<Target>& targets,
                                                            const MaterializeOptions& o, LoadReport& rep) {
  return Materializer(ck, o, rep).run(targets);
}

}  // namespace ckpt::torchb
