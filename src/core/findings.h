// Every finding ckpt reports, made in one place: the rule catalogue of DESIGN.md section 5 and the
// rules themselves, run on what the readers recorded, what summarize() counted and what the pickle
// scan saw. Each finding has a stable id, severity, where, message and fix.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/security.h"
#include "core/summary.h"

namespace ckpt {

struct RuleInfo {
  const char* id;
  Severity severity;  // default
  const char* detects;
  const char* fix;  // the usual fix (a finding's own fix may name its keys); SARIF's rule help
};

// Every rule id ckpt knows, in catalogue order.
const std::vector<RuleInfo>& rule_catalogue();

// What both `summary` and `check` report on a checkpoint that was read, in this order: what the readers
// recorded (frozen modules), what counting found (lazy and meta entries, tied weights, storage views),
// the key rules, the TorchScript code rules. `s` is summarize(ck).
std::vector<Finding> findings(const Checkpoint& ck, const Summary& s);

// dangerous-global / unknown-global / scan-incomplete from what a pickle scan saw: grouped by global,
// dangerous first, then the scan's problems in the order met.
std::vector<Finding> scan_findings(const PickleScan& scan);

// The security findings of the file at `path` (its pickles scanned as torch.load would read them), or
// of a sharded / DCP checkpoint's files as its reader recorded them in `ck` (none when `ck` is null).
// `summary` and `check` both report these. Throws InputError when a file's container is broken.
std::vector<Finding> security_findings(const std::string& path, const Checkpoint* ck, const Limits& limits,
                                       ScanScope scope = ScanScope::Full);
std::vector<Finding> security_findings(const MappedFile& file, const Limits& limits);

// Everything `ckpt check` reports for a file: findings() and the security scan of the file's pickles.
// A file the reader rejects still gets its security scan (Python would run what comes before the
// error); `read_error` then holds the reader's message.
struct CheckResult {
  std::vector<Finding> findings;
  std::string format;
  std::string read_error;
  bool scanned = false;  // whether anything was checked: the reader read the file or its pickle scan ran
  std::shared_ptr<const Checkpoint> checkpoint;  // what the reader read (null when it could not): check's
                                                 // --verify / --values read its bytes, not the file again
};
CheckResult run_checks(const std::shared_ptr<MappedFile>& file, const Limits& limits);
// By path: a file, or a sharded / DCP checkpoint, whose files to scan its reader recorded.
CheckResult run_checks(const std::string& path, const Limits& limits);

}  // namespace ckpt
