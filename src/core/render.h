// Renderers: data in, text out. Nothing here reads files or decides what counts.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "core/diff.h"
#include "core/summary.h"

namespace ckpt {

struct RenderOptions {
  int depth = 1;        // module rows up to this depth (Lightning's max_depth): -1 all, 0 none
  bool color = false;   // ANSI colour for severities
};

constexpr const char* kSummarySchema = "ckpt.summary/1";

std::string render_summary_text(const Summary& s, const RenderOptions& o);
std::string render_summary_markdown(const Summary& s, const RenderOptions& o);
// The ckpt.summary/1 document, newline-terminated. Per-entry arrays are streamed, one entry a line.
std::string summary_json_text(const Summary& s);
// The same, written to `f` in bounded chunks.
void write_summary_json(const Summary& s, std::FILE* f);

// ANSI colour for a severity label ("" without colour), and the reset after it.
const char* severity_color(Severity s, bool color);
inline const char* color_reset(bool color) { return color ? "\x1b[0m" : ""; }

// JSON text; strings from pickles need not be valid UTF-8, so bad bytes become U+FFFD.
std::string json_text(const nlohmann::ordered_json& j, int indent = 2);

// The ckpt.check/1 document: findings (already filtered and ordered), counts by severity (info, warning,
// error), the --fail-on level and verdict, and the read error when the file could not be read whole.
constexpr const char* kCheckSchema = "ckpt.check/1";
void write_check_json(const std::string& file, const std::string& format, const std::vector<Finding>& findings,
                      const size_t counts[3], const std::string& fail_on, bool failed, const std::string& read_error,
                      std::FILE* out);

// `ckpt diff`: text, and the ckpt.diff/1 document.
constexpr const char* kDiffSchema = "ckpt.diff/1";
std::string render_diff_text(const std::string& a_path, const std::string& b_path, const Checkpoint& a, const Checkpoint& b,
                             const DiffResult& r, const DiffOptions& o);
std::string diff_json_text(const std::string& a_path, const std::string& b_path, const Checkpoint& a, const Checkpoint& b,
                           const DiffResult& r, const DiffOptions& o);

// Lightning's get_human_readable_count: 999 -> "999  ", 1234 -> "1.2 K", 132000 -> "132 K".
std::string human_count(uint64_t n);
// "[4, 3]", "[]" for 0-dim.
std::string shape_text(const std::vector<int64_t>& s);
// Bytes in decimal units: "512 B", "4.9 kB", "3.1 GB".
std::string human_bytes(uint64_t n);

}  // namespace ckpt
