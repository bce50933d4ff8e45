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

// Whether the loop below materializes `t` from its storage's bytes (not skipped, not left on meta).
bool reads_bytes(const Tensor& t, const c10::Device& device, bool stream) {
  return t.state == TensorState::Materialized && t.dtype && scalar_type(*t.dtype) && loadable_layout(t) && t.dtype->pack == 1 &&
         !t.storage.empty() && !(t.layout == Layout::Quantized && (device.is_cuda() || stream));
}

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
  for (const Target& tg : targets) list.push_back(reads_bytes(*tg.tensor, o.device, o.stream) ? tg.tensor : nullptr);
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

std::vector<std::pair<std::string, at::Tensor>> materialize(const Checkpoint& ck, const std::vector<Target>& targets,
                                                            const MaterializeOptions& o, LoadReport& rep) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  StorageIndex index(ck);
  const bool meta = o.device.is_meta(), cuda = o.device.is_cuda(), streamed = cuda || o.stream;
  struct Made {
    c10::Storage storage;
    ByteView bytes;
  };
  std::unordered_map<const Storage*, Made> made;
  // cpu: every byte read and checked first, on every core (or by the parent ckpt process), then the
  // tensors are wrapped / copied. cuda: checked while streamed.
  std::vector<TensorCheck> checks;
  if (streamed) {
    Streamed st = stream_to_device(ck, index, targets, o, rep);
    checks = std::move(st.checks);
    for (auto& [s, storage] : st.storages) made.emplace(s, Made{std::move(storage), ByteView()});
  } else if (!meta && o.prechecked && o.prechecked->size() == targets.size()) {
    checks = *o.prechecked;
  } else if (!meta) {
    std::vector<const Tensor*> list;
    for (const Target& tg : targets) list.push_back(tg.tensor);
    checks = check_values(ck, index, list, o.checksum, std::max(1u, std::thread::hardware_concurrency()), o.progress);
  }
  std::set<std::tuple<std::string, int64_t, std::vector<int64_t>, std::vector<int64_t>>> unique_views;

  for (size_t k = 0; k < targets.size(); ++k) {
    const Target& tg = targets[k];
    const Tensor& t = *tg.tensor;
    LoadedTensor row;
    row.name = tg.name;
    row.dtype = t.dtype ? std::string(t.dtype->name) : "?";
    row.shape = t.shape;
    row.shape_known = !(t.state == TensorState::Uninitialized && !t.resolved);
    ++rep.tensors;
    auto skip = [&](std::string why) {
      row.state = LoadState::Skipped;
      row.reason = std::move(why);
      ++rep.skipped;
      rep.rows.push_back(std::move(row));
    };
    if (t.state == TensorState::Uninitialized) {
      skip(std::string("uninitialized (lazy) ") + (t.kind == TensorKind::Buffer ? "buffer" : "parameter") +
           ": no shape until a forward");
      continue;
    }
    const auto st = t.dtype ? scalar_type(*t.dtype) : std::nullopt;
    if (!st) {
      skip(fmt::format("dtype {} is unknown to LibTorch {}", row.dtype, libtorch_version()));
      continue;
    }
    const bool quantized = t.layout == Layout::Quantized;
    if (!loadable_layout(t) || t.dtype->pack != 1) {
      skip(quantized ? fmt::format("{} {} tensors are not materialized by ckpt load", t.x->qscheme, row.dtype)
                     : fmt::format("{} tensors are not materialized by ckpt load",
                                   t.layout == Layout::Strided ? row.dtype : t.layout_text()));
      continue;
    }
    if (quantized && streamed) {
      skip(cuda ? fmt::format("quantized tensors load on cpu and meta only (asked: {})", o.device.str())
                : std::string("quantized tensors are not streamed (load them without --stream)"));
      continue;
    }
    const auto opts = at::TensorOptions().dtype(*st);
    if (t.state == TensorState::Meta || meta) {
      at::Tensor x;
      try {
        x = quantized ? at::_empty_affine_quantized(t.shape, opts.device(c10::kMeta), t.x->q_scale, t.x->q_zero_point)
                      : at::empty_strided(t.shape, t.stride, opts.device(c10::kMeta));
      } catch (const c10::Error&) {
        skip(fmt::format("LibTorch {} cannot make a {} {} tensor on meta", libtorch_version(), t.layout_text(), row.dtype));
        continue;
      }
      if (o.dtype && x.is_floating_point()) x = x.to(*o.dtype);
      row.dtype = dtype_name(x.scalar_type());
      if (t.state == TensorState::Meta && !meta) {
        row.state = LoadState::Meta;
        row.reason = "meta tensor in the file: it has no data (load_state_dict: Cannot copy out of meta tensor)";
        ++rep.meta;
        ++rep.skipped;
      } else {
        row.state = LoadState::Loaded;
        ++rep.loaded;
        if (unique_views.insert({t.storage.empty() ? t.name : t.storage.str(), t.offset, t.shape, t.stride}).second)
          rep.bytes += static_cast<uint64_t>(x.numel()) * x.element_size();
      }
      out.emplace_back(tg.name, std::move(x));
      rep.rows.push_back(std::move(row));
      continue;
    }

    if (t.storage.empty() && !t.x->subclass.empty()) {  // a pickled wrapper (TwoTensor, ...): no storage of its own
      skip(fmt::format("tensor subclass {} keeps its data in a pickled object, which ckpt does not build", t.x->subclass));
      continue;
    }
    const Storage* s = t.storage.empty() ? nullptr : index.find(t.storage);
    if (!s) throw InputError(ck.path, fmt::format("tensor '{}': storage '{}' is not in the file", t.name, t.storage));
    checked_extent(ck, t, *s);
    auto it = made.find(s);
    if (it == made.end()) {
      ByteView bytes = index.bytes(*s);
      if (streamed)  // every storage reads_bytes() admits was streamed
        throw std::logic_error(fmt::format("tensor '{}': storage '{}' was not streamed to the device", t.name, t.storage));
      c10::Storage storage;
      const uint64_t align = std::min<uint64_t>(t.dtype->itemsize, 16);
      if (!quantized && !StorageIndex::assembled(*s) && reinterpret_cast<uintptr_t>(bytes.data()) % align == 0) {
        storage = borrowed_storage(bytes.data(), bytes.size());
        rep.zero_copy_bytes += s->nbytes;
      } else {
        at::Tensor copy = at::empty({static_cast<int64_t>(s->nbytes)}, at::TensorOptions().dtype(at::kByte));
        std::memcpy(copy.data_ptr<uint8_t>(), bytes.data(), bytes.size());
        storage = copy.storage();
        rep.copied_bytes += s->nbytes;
      }
      rep.bytes_read += s->nbytes;
      it = made.emplace(s, Made{std::move(storage), bytes}).first;
    }
    row.zero_copy = !streamed && it->second.storage.data() == static_cast<const void*>(it->second.bytes.data());
    at::Tensor x;
    if (quantized) {  // its own allocation, filled with the stored integers
      x = at::_empty_affine_quantized(t.shape, opts, t.x->q_scale, t.x->q_zero_point);
      std::memcpy(x.data_ptr(), it->second.bytes.data() + static_cast<uint64_t>(t.offset) * t.dtype->itemsize,
                  static_cast<size_t>(t.bytes));
      row.zero_copy = false;
    } else {
      x = view_of(t, it->second.storage, cuda ? o.device : c10::Device(c10::kCPU));
    }
    row.stats = checks[k].stats;
    row.crc32 = checks[k].crc32;
    rep.nan += row.stats.nan;
    rep.inf += row.stats.inf;
    if (o.dtype && x.is_floating_point() && x.scalar_type() != *o.dtype) {
      x = x.to(*o.dtype);
      row.zero_copy = false;
      if (cuda) rep.device_bytes += static_cast<uint64_t>(x.numel()) * x.element_size();
    }
    row.dtype = dtype_name(x.scalar_type());
    row.state = LoadState::Loaded;
    ++rep.loaded;
    if (unique_views.insert({t.storage, t.offset, t.shape, t.stride}).second)
      rep.bytes += static_cast<uint64_t>(x.numel()) * x.element_size();
    out.emplace_back(tg.name, std::move(x));
    rep.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace ckpt::torchb
