// The rule catalogue of DESIGN.md section 5, run on a read Checkpoint (plus the security scan, which
// reads the file's pickles itself). Each finding has a stable id, severity, where, message and fix.
#pragma once

#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/mapped_file.h"

#include <memory>

namespace ckpt {

struct RuleInfo {
  const char* id;
  Severity severity;  // default
  const char* detects;
};

// Every rule id ckpt knows, in catalogue order.
const std::vector<RuleInfo>& rule_catalogue();

// Key-prefix, lazy / meta, Lightning and TorchScript rules on what the reader found.
std::vector<Finding> model_findings(const Checkpoint& ck);

// Everything `ckpt check` reports for a file: the reader's and summary's findings, the model rules and
// the security scan. A file the reader rejects still gets its security scan (Python would run what
// comes before the error); `read_error` then holds the reader's message.
struct CheckResult {
  std::vector<Finding> findings;
  std::string format;
  std::string read_error;
};
CheckResult run_checks(const std::shared_ptr<MappedFile>& file, const Limits& limits);
// By path: a file, or a sharded checkpoint (directory or *.index.json) whose every shard is scanned.
CheckResult run_checks(const std::string& path, const Limits& limits);

}  // namespace ckpt
