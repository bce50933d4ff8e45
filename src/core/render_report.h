// The reports of `ckpt check`, `ckpt diff` and `ckpt load`: text and their JSON documents.
// Data in, text out: nothing here reads files or decides what counts.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/diff.h"
#include "core/load_report.h"

namespace ckpt {

// `ckpt check`: the findings (already filtered and ordered), counts by severity (info, warning, error),
// the --fail-on level and verdict, and the read error when the file could not be read whole.
// pass; fail (a finding reached --fail-on); incomplete (read_error, but the pickle scan or the reader
// ran: the findings are those of what was read); unscanned (nothing checked). JSON and SARIF name them
// so (to_string).
enum class CheckStatus : uint8_t { Pass, Fail, Incomplete, Unscanned };
const char* to_string(CheckStatus s);

struct CheckReport {
  std::string file, format;
  std::vector<Finding> findings;
  size_t counts[3] = {0, 0, 0};
  std::string fail_on;
  bool never = false;  // --fail-on never: nothing fails
  bool failed = false;
  std::string read_error;
  bool scanned = true;  // false: nothing was checked (read_error says why), so nothing may read "pass"
  std::vector<std::string> verified;  // what --verify / --values read and found sound ("437 zip members, ...")
  CheckStatus status() const;
};

constexpr const char* kCheckSchema = "ckpt.check/1";
std::string render_check_text(const CheckReport& r, bool color);
// The ckpt.check/1 document (indented, newline-terminated).
std::string check_json_text(const CheckReport& r);
// A finding's `compile` object in ckpt.check/1 (and SARIF's result properties): breaks_on, fixed_by, entries.
nlohmann::ordered_json compile_facts_json(const CompileFacts& c);
// The same report as a SARIF 2.1.0 log: one run, the whole rule catalogue, a result per finding.
// `version` is ckpt's, `information_uri` the project's page ("" leaves it out).
std::string check_sarif_text(const CheckReport& r, const std::string& version, const std::string& information_uri);
// Several files' reports as ONE log whose single run holds every file's results, one artifact per file
// (with its status in the artifact's properties) and a notification per file not fully scanned.
std::string check_sarif_text(const std::vector<CheckReport>& reports, const std::string& version,
                             const std::string& information_uri);

// `ckpt diff`: text, and the ckpt.diff/1 document.
constexpr const char* kDiffSchema = "ckpt.diff/1";
std::string render_diff_text(const std::string& a_path, const std::string& b_path, const Checkpoint& a, const Checkpoint& b,
                             const DiffResult& r, const DiffOptions& o);
std::string diff_json_text(const std::string& a_path, const std::string& b_path, const Checkpoint& a, const Checkpoint& b,
                           const DiffResult& r, const DiffOptions& o);

// `ckpt load`: text, and the ckpt.load/1 document. The table lists skipped / meta tensors and ones
// holding NaN or Inf, or every tensor with all_rows.
std::string render_load_text(const LoadReport& r, bool color, bool all_rows = false);
std::string load_json_text(const LoadReport& r);

}  // namespace ckpt
