// `ckpt load` on cpu overlaps LibTorch's start-up (~0.4 s of static initialization in ckpt-torch)
// with reading and checking every byte: ckpt forks, the child execs ckpt-torch at once, and the parent
// (which has no LibTorch to start) reads the file's structure and runs check_values, then hands the
// per-tensor results to the child through a pipe (fd in $CKPT_PRECHECK_FD). The child uses them when
// they describe the same file and tensors, and checks by itself otherwise. The parent prints nothing
// but the progress bar; the child reports, and its exit status is the command's. With several inputs the
// parent checks them in order and sends one block per input (a failed one says so), so it checks the
// next file while the child loads the one before. stdin (`-`) is spooled by the parent before the fork
// and becomes the child's stdin as a regular file (inputs.h); a spool that failed reaches the child as
// $CKPT_STDIN_ERROR.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/values.h"

namespace ckpt::cli {

// ckpt: fork, exec ckpt-torch in the child, check in the parent; returns the child's exit status.
int run_load_overlapped(int argc, char** argv, const LoadOptions& o);

// ckpt-torch: the parent's results for input `index` (read in increasing order; blocks before it are
// skipped), or nullopt (no pipe, the parent failed, or another file).
std::optional<std::vector<TensorCheck>> read_prechecked(size_t index, const Checkpoint& ck, bool need_crc, double* seconds);

// A one-line progress bar on stderr for work that lasts over a second, on a TTY only.
struct Progress {
  bool enabled = false;
  bool shown = false;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  void operator()(uint64_t done, uint64_t total);
  void clear();
};

}  // namespace ckpt::cli
