// `check --verify` and `check --values`: the two checks that read every byte of a file. --verify
// compares each zip member's bytes with the CRC-32 its central directory records (what `python -m
// zipfile -t` does; torch.load does not); --values counts NaN / Inf per tensor (what torch.isfinite
// would find). Both report as findings (rules zip-crc-mismatch, nonfinite-values).
#pragma once

#include <cstdint>
#include <vector>

#include "core/checkpoint.h"
#include "core/error.h"

namespace ckpt {

struct ZipVerify {
  uint64_t members = 0;  // central directory records checked
  uint64_t bytes = 0;  // their bytes (as stored; deflated members as inflated)
  uint64_t unrecorded = 0;  // members whose recorded CRC-32 is 0 over bytes (torch.save with compute_crc32=False)
  std::vector<Finding> findings;  // zip-crc-mismatch: one finding naming every member that disagrees
};
// Every member of the checkpoint's zip archive (torch.save, TorchScript, .pt2) read once on `threads`
// threads (a big member in 64 MiB pieces, joined with crc32_join), through the mapping in windows of
// `window` bytes per thread (0: window_bytes(threads)), each released once read (PageWindow): the
// resident memory does not grow with the file. Nothing for formats without stored checksums
// (safetensors, legacy, DCP, sharded). Throws InputError for a member it cannot read.
ZipVerify verify_zip(const Checkpoint& ck, const Limits& limits, unsigned threads, uint64_t window = 0);

// nonfinite-values: every materialized floating / complex tensor's NaN and Inf counts; one finding
// naming each tensor that holds any, with its counts (none when all are finite). `window` as above.
std::vector<Finding> nonfinite_findings(const Checkpoint& ck, unsigned threads, uint64_t window = 0);

}  // namespace ckpt
