// The ckpt.load/1 report of `ckpt load`: what happened to each tensor, key matching against --model,
// totals and timings. The checks it reports are elsewhere (storage.h, values.h, keys.h); src/torch/ fills
// it while turning the tensors into at::Tensors on a device; render_report.h renders it as text or JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/keys.h"
#include "core/stream.h"
#include "core/values.h"

namespace ckpt {

// ---- the report (schema ckpt.load/1) ----
// Loaded: on the device; Meta: a meta tensor in the file, left on meta; Skipped: not materialized.
enum class LoadState : uint8_t { Loaded, Meta, Skipped };
inline const char* to_string(LoadState s) {
  switch (s) {
    case LoadState::Loaded: return "loaded";
    case LoadState::Meta: return "meta";
    case LoadState::Skipped: return "skipped";
  }
  return "?";
}

struct LoadedTensor {
  std::string name;  // after renaming
  std::string dtype;  // as loaded (after --dtype)
  std::vector<int64_t> shape;
  bool shape_known = true;  // false: a lazy (uninitialized) entry whose shape the file does not give
  LoadState state = LoadState::Skipped;
  std::string reason;  // why skipped / left on meta
  bool zero_copy = false;  // CPU: a view of the mapped file
  ValueStats stats;
  std::optional<uint32_t> crc32;
};

struct LoadReport {
  std::string file, format, device, libtorch;
  std::string dtype;  // --dtype, "" = as stored
  bool empty_init = false;
  // --model
  std::string model;  // ARCH path, "" = none
  std::string strip_prefix, add_prefix;
  std::optional<KeyMatch> match;
  uint64_t arch_bytes_read = 0;  // bytes of ARCH's own weights LibTorch read and copied
  uint64_t arch_bytes_skipped = 0;  // bytes of ARCH's weights empty init did not read
  uint64_t bytes_written_twice = 0;  // destination bytes written by ARCH first, then by FILE
  double arch_seconds = 0.0;
  // totals
  uint64_t tensors = 0, loaded = 0, meta = 0, skipped = 0;
  uint64_t bytes = 0;  // logical bytes of the loaded tensors (tied counted once)
  uint64_t bytes_read = 0;  // file bytes read (each storage once)
  uint64_t zero_copy_bytes = 0, copied_bytes = 0;
  uint64_t device_bytes = 0;  // bytes ckpt allocated on the device
  uint64_t nan = 0, inf = 0;
  double startup_seconds = 0.0;  // process start to the command (exec, loading LibTorch)
  double read_seconds = 0.0;  // parsing the file's structure
  double check_seconds = 0.0;  // reading and checking every byte in the ckpt process, overlapped
                               // with LibTorch's start-up (0 when done inside load_seconds)
  double load_seconds = 0.0;  // materializing tensors
  // The streaming load's phases (cuda, cpu --stream; 0 elsewhere). The ring's are spent on its own thread,
  // overlapped with start-up and reading, and reported by the run's first load only.
  double context_seconds = 0.0;  // the CUDA context and LibTorch's CUDA state (ring's thread)
  double ring_seconds = 0.0;  // allocating the staging ring (ring's thread)
  double ring_wait_seconds = 0.0;  // how long the load waited for the ring
  double plan_seconds = 0.0;  // planning the chunks (inside load_seconds)
  double count_seconds = 0.0;  // NaN / Inf by LibTorch's reductions where the tensors are (inside load_seconds)
  double seconds = 0.0;  // the whole process, startup included
  uint64_t peak_rss = 0;  // bytes: this process's own high-water mark (VmHWM)
  // cuda: the streaming load (core/stream.h): ring, threads, bytes by read path, --checksum readback
  std::optional<StreamStats> stream;
  std::string staging;  // the ring's memory: "pinned" (cuda) or "host" (cpu --stream)
  bool ring_reused = false;  // the ring was made for an earlier input of this run
  bool device_crc = false;  // CRC-32s computed from the device's copy, read back
  std::vector<LoadedTensor> rows;
  std::vector<std::string> notes;  // one line each, shown under the table
  // something a strict load would refuse
  bool incomplete() const { return skipped > 0 || (match && !match->ok()); }
  bool checked_values() const { return device != "meta"; }  // NaN / Inf counted (cpu, cuda)
};

}  // namespace ckpt
