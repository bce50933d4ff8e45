// The LibTorch-free half of `ckpt load`: where each tensor's bytes are, the checks every byte goes
// through (bounds, NaN / Inf counts, CRC-32 of the values), key matching against an architecture as
// load_state_dict(strict=True) does it, and the ckpt.load/1 report with its renderers.
// src/torch/ turns the same plan into at::Tensors on a device.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/checkpoint.h"

namespace ckpt {

// Storage lookup by key, and the bytes of a storage as a view naming its zip member (errors then say
// "model.pt: archive/data/3+0x0: ..."). Throws InputError when the bytes are not in the file.
// DCP storages are assembled from their chunks on first use into memory this index owns (thread-safe):
// views of those live as long as the index.
class StorageIndex {
 public:
  explicit StorageIndex(const Checkpoint& ck, Limits limits = Limits{});
  const Storage* find(const std::string& key) const;
  ByteView bytes(const Storage& s) const;
  // True when bytes(s) is memory of this index rather than a view of a mapped file.
  static bool assembled(const Storage& s) { return !s.chunks.empty(); }

 private:
  ByteView assemble(const Storage& s) const;
  const Checkpoint& ck_;
  Limits limits_;
  std::unordered_map<std::string, const Storage*> by_key_;
  mutable std::mutex lock_;
  mutable std::map<const Storage*, std::pair<std::vector<uint8_t>, std::shared_ptr<const Origin>>> assembled_;
};

// Checks that a strided tensor lies inside its storage (offset + extent) and returns the number of
// storage bytes from the tensor's first element to one past its last. Throws InputError naming the tensor.
uint64_t checked_extent(const Checkpoint& ck, const Tensor& t, const Storage& s);
bool is_contiguous(const Tensor& t);
// Layouts `ckpt load` materializes: strided, and contiguous per-tensor affine qint8 / quint8 / qint32.
bool loadable_layout(const Tensor& t);

// Calls fn(byte offset in the storage, byte length) for each contiguous run of a strided tensor's
// elements in row-major order: one run for a contiguous tensor, one per innermost row when the last
// stride is 1, one per element otherwise.
template <typename Fn>
void for_each_run(const Tensor& t, Fn&& fn) {
  const uint64_t item = t.dtype->itemsize;
  if (t.numel == 0) return;
  if (is_contiguous(t)) {
    fn(static_cast<uint64_t>(t.offset) * item, static_cast<uint64_t>(t.numel) * item);
    return;
  }
  const size_t nd = t.shape.size();
  const bool inner = nd > 0 && t.stride[nd - 1] == 1;
  const int64_t run = inner ? t.shape[nd - 1] : 1;
  const size_t outer_dims = inner ? nd - 1 : nd;
  std::vector<int64_t> idx(outer_dims, 0);
  for (int64_t k = 0; k < t.numel / run; ++k) {
    int64_t off = t.offset;
    for (size_t d = 0; d < outer_dims; ++d) off += idx[d] * t.stride[d];
    fn(static_cast<uint64_t>(off) * item, static_cast<uint64_t>(run) * item);
    for (size_t d = outer_dims; d-- > 0;) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
}

struct ValueStats {
  uint64_t nan = 0, inf = 0;
};
// NaN / Inf counts over `numel` contiguous elements (floating and complex dtypes; zero for others).
// Complex elements count as torch.isnan / torch.isinf do: either part.
ValueStats count_nonfinite(const DType& d, const uint8_t* p, uint64_t numel);
// Same over a strided tensor whose storage bytes start at `storage`.
ValueStats tensor_nonfinite(const Tensor& t, const uint8_t* storage);
// zlib CRC-32 of the tensor's elements in row-major order, bytes as stored (what
// zlib.crc32(t.contiguous().numpy().tobytes()) gives).
uint32_t tensor_crc32(const Tensor& t, const uint8_t* storage);

// Every byte of the tensors' storages read once, split over `threads`: bounds checked, NaN / Inf counted,
// CRC-32 taken when asked. Checked pages of mapped files are released from this process (they stay in
// the page cache, and zero-copy tensors over them fault them back in when read). Entries that are not materialized strided tensors get empty results.
// Throws the first InputError any thread met.
struct TensorCheck {
  ValueStats stats;
  std::optional<uint32_t> crc32;
};
// `progress(bytes done, bytes total)` is called from the calling thread only.
std::vector<TensorCheck> check_values(const Checkpoint& ck, const StorageIndex& index, const std::vector<const Tensor*>& tensors, bool crc,
                                      unsigned threads,
                                      const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

// ---- key matching (load_state_dict(strict=True)) ----
struct KeyMismatch {
  std::string key;
  std::string file_dtype, model_dtype;
  std::vector<int64_t> file_shape, model_shape;
};
struct KeyMatch {
  std::vector<std::string> missing;      // model keys FILE does not provide
  std::vector<std::string> unexpected;   // FILE keys the model does not have
  std::vector<KeyMismatch> mismatched;   // both have it, shape or dtype differ
  std::optional<std::string> suggested_strip_prefix, suggested_add_prefix;
  size_t matched = 0;                    // keys present in both with equal shape and dtype
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
};
// FILE's key after --strip-prefix (only where the key starts with it) and --add-prefix.
std::string renamed_key(const std::string& key, const std::string& strip, const std::string& add);
// `file` are FILE's tensors under their original names; renaming is applied here. Suggestions are made
// when keys do not match and one prefix, stripped from or added to every FILE key, makes them match.
KeyMatch match_keys(const std::vector<const Tensor*>& file, const std::vector<const Tensor*>& model,
                    const std::string& strip, const std::string& add);

// ---- the report (schema ckpt.load/1) ----
// Loaded: on the device; Meta: a meta tensor in the file, left on meta; Skipped: not materialized.
enum class LoadState : uint8_t { Loaded, Meta, Skipped };
const char* to_string(LoadState s);

struct LoadedTensor {
  std::string name;                      // after renaming
  std::string dtype;                     // as loaded (after --dtype)
  std::vector<int64_t> shape;
  LoadState state = LoadState::Skipped;
  std::string reason;                    // why skipped / left on meta
  bool zero_copy = false;                // CPU: a view of the mapped file
  ValueStats stats;
  std::optional<uint32_t> crc32;
};

struct LoadReport {
  std::string file, format, device, libtorch;
  std::string dtype;                     // --dtype, "" = as stored
  bool empty_init = false;
  // --model
  std::string model;                     // ARCH path, "" = none
  std::string strip_prefix, add_prefix;
  std::optional<KeyMatch> match;
  uint64_t arch_bytes_read = 0;          // bytes of ARCH's own weights LibTorch read and copied
  uint64_t arch_bytes_skipped = 0;       // bytes of ARCH's weights empty init did not read
  uint64_t bytes_written_twice = 0;      // destination bytes written by ARCH first, then by FILE
  double arch_seconds = 0.0;
  // totals
  uint64_t tensors = 0, loaded = 0, meta = 0, skipped = 0;
  uint64_t bytes = 0;                    // logical bytes of the loaded tensors (tied counted once)
  uint64_t bytes_read = 0;               // file bytes read (each storage once)
  uint64_t zero_copy_bytes = 0, copied_bytes = 0;
  uint64_t device_bytes = 0;             // bytes ckpt allocated on the device
  uint64_t nan = 0, inf = 0;
  double startup_seconds = 0.0;          // process start to the command (exec, loading LibTorch)
  double read_seconds = 0.0;             // parsing the file's structure
  double check_seconds = 0.0;            // reading and checking every byte in the ckpt process, overlapped
                                         // with LibTorch's start-up (0 when done inside load_seconds)
  double load_seconds = 0.0;             // materializing tensors
  double seconds = 0.0;                  // the whole process, startup included
  uint64_t peak_rss = 0;                 // bytes
  std::vector<LoadedTensor> rows;
  std::vector<std::string> notes;        // one line each, shown under the table
  bool incomplete() const;               // something a strict load would refuse
  bool checked_values() const { return device != "meta"; }  // NaN / Inf counted (cpu, cuda)
};

// The table lists skipped / meta tensors and ones holding NaN or Inf, or every tensor with all_rows.
std::string render_load_text(const LoadReport& r, bool color, bool all_rows = false);
std::string load_json_text(const LoadReport& r);

}  // namespace ckpt
