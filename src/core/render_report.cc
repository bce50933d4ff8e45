#include "core/render_report.h"
#include "core/render_tensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/lightning_details.h"
#include "core/text.h"

namespace ckpt {

using J = nlohmann::ordered_json;

// Text reports quote names, paths and messages from files through visible() (text.h), one by one, so
// that the colour codes around them stay codes.

// ---- check ----

const char* to_string(CheckStatus s) {
  switch (s) {
    case CheckStatus::Pass: return "pass";
    case CheckStatus::Fail: return "fail";
    case CheckStatus::Incomplete: return "incomplete";
    case CheckStatus::Unscanned: return "unscanned";
  }
  return "unscanned";
}

CheckStatus CheckReport::status() const {
  if (!scanned) return CheckStatus::Unscanned;
  if (failed) return CheckStatus::Fail;
  return read_error.empty() ? CheckStatus::Pass : CheckStatus::Incomplete;
}

std::string render_check_text(const CheckReport& r, bool color) {
  std::string out;
  if (!r.scanned)  // no counts: "0 error(s)" would read as a clean file
    return fmt::format("{}: NOT SCANNED: {}; --fail-on {}: {}\n", visible(r.file), visible(r.read_error), r.fail_on,
                       r.never ? "not failed" : "FAIL");
  for (const Finding& f : r.findings) {
    out += fmt::format("{}{}[{}]{}: {}\n", severity_color(f.severity, color), to_string(f.severity), f.id, color_reset(color),
                       visible(f.message));
    for (size_t k = 0; k < f.where.size() && k < 8; ++k) out += fmt::format("  at: {}\n", visible(f.where[k]));
    if (f.where.size() > 8) out += fmt::format("  ... and {} more\n", f.where.size() - 8);
    out += fmt::format("  fix: {}\n", visible(f.fix));
  }
  for (const std::string& v : r.verified) out += fmt::format("verified: {}\n", visible(v));
  const std::string verdict = r.failed || r.read_error.empty()
                                  ? std::string(r.failed ? "FAIL" : "pass")
                                  : fmt::format("INCOMPLETE, not fully scanned: {}", visible(r.read_error));
  out += fmt::format("{}: {} error(s), {} warning(s), {} info; --fail-on {}: {}\n", visible(r.file), r.counts[2], r.counts[1],
                     r.counts[0], r.fail_on, verdict);
  return out;
}

// A finding's locations as ckpt.check/1 writes them: one object per `where`, every field present
// (null where it does not apply).
namespace {
J locations_json(const Finding& x) {
  J out = J::array();
  auto str = [](const std::string& s) { return s.empty() ? J(nullptr) : J(s); };
  for (size_t k = 0; k < x.where.size(); ++k) {
    const Location l = k < x.locations.size() ? x.locations[k] : Location{};
    out.push_back(J{{"where", x.where[k]},
                    {"file", str(l.file)},
                    {"member", str(l.member)},
                    {"offset", l.offset ? J(*l.offset) : J(nullptr)},
                    {"opcode", str(l.opcode)},
                    {"global", str(l.global)},
                    {"line", l.line ? J(*l.line) : J(nullptr)},
                    {"function", str(l.function)}});
  }
  return out;
}
}  // namespace

nlohmann::ordered_json compile_facts_json(const CompileFacts& c) {
  J fixed = J::object();
  for (const auto& [version, flags] : c.fixed_by) fixed[version] = flags;
  return J{{"breaks_on", c.breaks_on}, {"fixed_by", std::move(fixed)}, {"entries", c.entries}};
}

std::string check_json_text(const CheckReport& r) {
  J j;
  j["schema"] = kCheckSchema;
  j["file"] = r.file;
  j["format"] = r.format.empty() ? J(nullptr) : J(r.format);
  j["fail_on"] = r.fail_on;
  j["failed"] = r.failed;
  j["counts"] = J{{"error", r.counts[2]}, {"warning", r.counts[1]}, {"info", r.counts[0]}};
  j["read_error"] = r.read_error.empty() ? J(nullptr) : J(r.read_error);
  J fs = J::array();
  for (const Finding& x : r.findings)
    fs.push_back(J{{"id", x.id},
                   {"severity", to_string(x.severity)},
                   {"message", x.message},
                   {"fix", x.fix},
                   {"where", x.where},
                   {"locations", locations_json(x)},
                   {"compile", x.compile ? compile_facts_json(*x.compile) : J(nullptr)}});
  j["findings"] = std::move(fs);
  j["verified"] = r.verified;
  j["status"] = to_string(r.status());
  return json_text(j) + "\n";
}

// ---- diff ----

namespace {

// A metadata value on one line: compact JSON (strings bare), at most 80 bytes.
std::string meta_value(const J& v, bool present) {
  if (!present) return "(absent)";
  const std::string text = v.is_string() ? v.get<std::string>() : json_text(v, -1);
  bool cut = false;
  std::string out = visible_prefix(text, 80, &cut);
  return cut ? out + "..." : out;
}

// The top-level key a metadata path starts with ("optimizer_states" for "optimizer_states[0].lr").
std::string top_key(const MetaChange& m) {
  if (m.path.rfind("config.json", 0) == 0) return "config.json";
  return m.path.substr(0, m.path.find_first_of(".["));
}

std::string state_change_text(const MetaChange& m) {
  auto side = [](const J& s, bool present) {
    return present ? fmt::format("{} storages, {} bytes", s.value("storages", 0), s.value("bytes", 0)) : std::string("none");
  };
  if (m.values_changed == 0) return fmt::format("{} -> {}", side(m.a, m.in_a), side(m.b, m.in_b));
  return fmt::format("values of {} of {} storages changed, max abs diff {:.6g}{}", m.values_changed, m.a.value("storages", 0),
                     m.max_abs, m.within ? " (within tolerance)" : "");
}

// Lightning's progress counters (derived from the loops) that moved: "epochs completed 1 -> 3, ...".
std::string progress_moves(const Checkpoint& a, const Checkpoint& b) {
  const J ta = training_json(a.training), tb = training_json(b.training);
  if (!ta.is_object() || !tb.is_object() || !ta["progress"].is_object() || !tb["progress"].is_object()) return "";
  std::vector<std::string> bits;
  for (auto [k, label] : {std::pair{"epochs_completed", "epochs completed"}, std::pair{"batches_completed", "batches"},
                          std::pair{"optimizer_steps", "optimizer steps"}, std::pair{"scheduler_steps", "scheduler steps"}}) {
    const J& x = ta["progress"].contains(k) ? ta["progress"][k] : J();
    const J& y = tb["progress"].contains(k) ? tb["progress"][k] : J();
    if (x != y) bits.push_back(fmt::format("{} {} -> {}", label, meta_value(x, !x.is_null()), meta_value(y, !y.is_null())));
  }
  return join(bits, ", ");
}

std::string tensor_counts(const DiffResult& r) {
  std::vector<std::string> parts;
  auto put = [&](size_t n, const char* what) {
    if (n) parts.push_back(fmt::format("{} {}", n, what));
  };
  put(r.differ, "differ");
  put(r.only_in_a.size(), "only in A");
  put(r.only_in_b.size(), "only in B");
  put(r.tied.size(), "tied (dropped)");
  put(r.within, "within tolerance");
  put(r.same_pairs, "same");
  std::string out = parts.empty() ? std::string("none") : join(parts, ", ");
  if (r.dtype_ignored) out += fmt::format(" ({} of another dtype, --ignore-dtype)", r.dtype_ignored);
  return out;
}

std::string metadata_counts(const DiffResult& r) {
  if (!r.metadata_compared) return "not compared (--ignore-metadata)";
  if (!r.metadata_present) return "none";
  size_t within = 0;
  for (const MetaChange& m : r.metadata) within += m.within;
  if (r.metadata.empty()) return "same";
  if (within == r.metadata.size()) return fmt::format("{} within tolerance", within);
  return fmt::format("{} changed", r.metadata.size() - within) + (within ? fmt::format(", {} within tolerance", within) : "");
}

const char* verdict_json(DiffVerdict v) {
  return v == DiffVerdict::Same ? "same" : v == DiffVerdict::WithinTolerance ? "within_tolerance" : "different";
}

}  // namespace

std::string render_diff_text(const std::string& a_path, const std::string& b_path, const Checkpoint& a, const Checkpoint& b,
                             const DiffResult& r, const DiffOptions& o) {
  std::string out;
  out += fmt::format("A: {} ({}, {} tensors)\n", visible(a_path), format_title(a), a.tensors.size());
  out += fmt::format("B: {} ({}, {} tensors)\n", visible(b_path), format_title(b), b.tensors.size());
  std::vector<std::string> asked;
  if (!o.strip_prefix.empty()) asked.push_back(fmt::format("strip '{}' (both)", visible(o.strip_prefix)));
  if (!o.add_prefix.empty()) asked.push_back(fmt::format("add '{}' (A)", visible(o.add_prefix)));
  if (!asked.empty()) out += "renamed: " + join(asked, ", ") + "\n";
  if (!r.prefix_op.empty())
    out += fmt::format("renamed: B is A {} the '{}' prefix ({} keys paired through it)\n",
                       r.prefix_op == "b_adds" ? "with" : "without", visible(r.prefix), r.paired);
  if (!r.hint_strip_prefix.empty())
    out += fmt::format("hint: keys differ only by that prefix: --strip-prefix '{}' compares them as the same keys\n",
                       visible(r.hint_strip_prefix));
  for (const auto& k : r.only_in_a) out += fmt::format("only in A: {}\n", visible(k));
  for (const auto& k : r.only_in_b) out += fmt::format("only in B: {}\n", visible(k));
  for (const TiedDrop& t : r.tied)
    out += fmt::format("tied, dropped in {}: {} (tied to {})\n", t.side == 'a' ? 'B' : 'A', visible(t.name), visible(t.tied_to));
  // Each pair that differs; pairs within tolerance (or of another dtype under --ignore-dtype) with --verbose.
  for (const TensorDiff& d : r.changed) {
    if (!d.differs && !o.verbose) continue;
    const std::string name = d.a == d.b ? visible(d.a) : visible(d.a) + " -> " + visible(d.b);
    const std::string dtype_a = visible(d.dtype_a), dtype_b = visible(d.dtype_b);
    if (d.dtype_a != d.dtype_b)
      out += fmt::format("dtype: {}: {} -> {}{}\n", name, dtype_a, dtype_b, o.ignore_dtype ? " (--ignore-dtype)" : "");
    if (d.shape_a != d.shape_b) out += fmt::format("shape: {}: {} -> {}\n", name, shape_text(d.shape_a), shape_text(d.shape_b));
    if (d.state_changed) out += fmt::format("state: {}: materialized / meta / uninitialized differ\n", name);
    if (d.tie_changed) {
      auto side = [](const std::string& t) { return t.empty() ? std::string("its own tensor") : "tied to " + visible(t); };
      out += fmt::format("tied: {}: {} -> {}\n", name, side(d.tied_a), side(d.tied_b));
    }
    if (d.compared && !d.values_equal) {
      if (d.comparable)
        out += fmt::format("values: {}: max abs diff {:.6g}, max rel diff {:.6g}{}\n", name, d.max_abs, d.max_rel,
                           d.within ? " (within tolerance)" : "");
      else out += fmt::format("values: {}: bytes differ ({} has no float64 view)\n", name, dtype_a);
    }
  }
  // Metadata: one line per change; without --verbose the loops (Lightning's progress counters, which
  // every step moves) as one line, and at most 10 lines per top-level key.
  constexpr size_t kPerKey = 10;
  std::vector<std::pair<std::string, size_t>> shown;  // top key -> lines so far (few keys: a vector)
  size_t loops = 0;
  std::vector<std::pair<std::string, size_t>> more;
  for (const MetaChange& m : r.metadata) {
    if (m.within && !o.verbose) continue;
    const std::string key = top_key(m);
    if (m.section == "loops" && !o.verbose) {
      ++loops;
      continue;
    }
    auto it = std::find_if(shown.begin(), shown.end(), [&](const auto& p) { return p.first == key; });
    if (it == shown.end()) it = shown.insert(shown.end(), {key, 0});
    if (++it->second > kPerKey && !o.verbose) {
      auto jt = std::find_if(more.begin(), more.end(), [&](const auto& p) { return p.first == key; });
      if (jt == more.end()) more.push_back({key, 1});
      else ++jt->second;
      continue;
    }
    if (m.section == "optimizer_state") out += fmt::format("metadata: {} (optimizer state): {}\n", m.path, state_change_text(m));
    else out += fmt::format("metadata: {}: {} -> {}\n", visible(m.path), meta_value(m.a, m.in_a), meta_value(m.b, m.in_b));
  }
  for (const auto& [key, n] : more) out += fmt::format("metadata: {}: {} more changed (--verbose lists them)\n", visible(key), n);
  if (loops) {
    const std::string moves = progress_moves(a, b);
    out += fmt::format("metadata: loops: {} value{} changed{} (--verbose lists them)\n", loops, loops == 1 ? "" : "s",
                       moves.empty() ? "" : ": " + moves);
  }
  const DiffVerdict v = r.verdict(o);
  const bool meta_only = v == DiffVerdict::Different && (o.values ? r.within_tolerance : r.equal);
  if (meta_only) out += "hint: only the metadata differs: --ignore-metadata compares the tensors alone\n";
  const std::string renamed = r.prefix_op.empty() ? "" : fmt::format("keys renamed ('{}'); ", visible(r.prefix));
  const bool paint = o.color && v != DiffVerdict::Same;
  const Severity tone = v == DiffVerdict::Different ? Severity::Error : Severity::Warning;
  out += fmt::format("{}{}{}: {}tensors: {}; metadata: {}; {}\n", paint ? severity_color(tone, true) : "", to_string(v),
                     paint ? color_reset(true) : "", renamed, tensor_counts(r), metadata_counts(r),
                     o.values ? fmt::format("values compared for {} (atol {}, rtol {})", r.compared, o.atol, o.rtol)
                              : std::string("values not compared (--values)"));
  return out;
}

std::string diff_json_text(const std::string& a_path, const std::string& b_path, const Checkpoint& a, const Checkpoint& b,
                           const DiffResult& r, const DiffOptions& o) {
  J j;
  j["schema"] = kDiffSchema;
  j["a"] = {{"file", a_path}, {"format", to_string(a.format)}, {"tensors", a.tensors.size()}};
  j["b"] = {{"file", b_path}, {"format", to_string(b.format)}, {"tensors", b.tensors.size()}};
  j["values_compared"] = o.values;
  j["atol"] = o.atol;
  j["rtol"] = o.rtol;
  j["ignore_dtype"] = o.ignore_dtype;
  j["ignore_metadata"] = o.ignore_metadata;
  j["keys_equal"] = r.keys_equal;
  j["prefix"] = r.prefix_op.empty() ? J(nullptr) : J{{r.prefix_op, r.prefix}};
  j["strip_prefix"] = o.strip_prefix;
  j["add_prefix"] = o.add_prefix;
  j["hint_strip_prefix"] = r.hint_strip_prefix.empty() ? J(nullptr) : J(r.hint_strip_prefix);
  j["paired"] = r.paired;
  j["only_in_a"] = r.only_in_a;
  j["only_in_b"] = r.only_in_b;
  J tied = J::array();
  for (const TiedDrop& t : r.tied) tied.push_back({{"name", t.name}, {"side", std::string(1, t.side)}, {"tied_to", t.tied_to}});
  j["tied"] = std::move(tied);
  J changed = J::array();
  for (const TensorDiff& d : r.changed) {
    J c{{"a", d.a}, {"b", d.b}, {"dtype_a", d.dtype_a}, {"dtype_b", d.dtype_b}, {"shape_a", d.shape_a}, {"shape_b", d.shape_b}};
    c["values_compared"] = d.compared;
    if (d.compared) {
      c["values_equal"] = d.values_equal;
      c["max_abs_diff"] = d.comparable ? J(d.max_abs) : J(nullptr);
      c["max_rel_diff"] = d.comparable ? J(d.max_rel) : J(nullptr);
      c["within_tolerance"] = d.within;
    }
    if (d.tie_changed) {
      c["tied_a"] = d.tied_a.empty() ? J(nullptr) : J(d.tied_a);
      c["tied_b"] = d.tied_b.empty() ? J(nullptr) : J(d.tied_b);
    }
    c["differs"] = d.differs;
    changed.push_back(std::move(c));
  }
  j["changed"] = std::move(changed);
  j["max_abs_diff"] = r.max_abs;
  j["equal"] = r.equal;
  j["within_tolerance"] = o.values ? J(r.within_tolerance) : J(nullptr);
  if (r.metadata_compared) {
    J changes = J::array();
    for (const MetaChange& m : r.metadata) {
      J c{{"section", m.section}, {"path", m.path}, {"a", m.a}, {"b", m.b}, {"in_a", m.in_a}, {"in_b", m.in_b}};
      if (m.section == "optimizer_state" && m.values_changed > 0) {
        c["values_changed"] = m.values_changed;
        c["max_abs_diff"] = m.max_abs;
        c["within_tolerance"] = m.within;
      }
      changes.push_back(std::move(c));
    }
    j["metadata"] = {{"present", r.metadata_present}, {"changes", std::move(changes)}};
  } else {
    j["metadata"] = nullptr;
  }
  size_t meta_within = 0;
  for (const MetaChange& m : r.metadata) meta_within += m.within;
  j["counts"] = {{"differ", r.differ},
                 {"within_tolerance", r.within},
                 {"same", r.same_pairs},
                 {"only_in_a", r.only_in_a.size()},
                 {"only_in_b", r.only_in_b.size()},
                 {"tied", r.tied.size()},
                 {"dtype_ignored", r.dtype_ignored},
                 {"metadata_changed", r.metadata.size() - meta_within},
                 {"metadata_within_tolerance", meta_within}};
  j["verdict"] = verdict_json(r.verdict(o));
  return json_text(j) + "\n";
}

// ---- load ----

namespace {

J shape_json(const std::vector<int64_t>& s) {
  J a = J::array();
  for (int64_t d : s) a.push_back(d);
  return a;
}
J opt(const std::optional<std::string>& s) { return s ? J(*s) : J(nullptr); }

double gbps(uint64_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0; }
}  // namespace

std::string load_json_text(const LoadReport& r) {
  J j;
  j["schema"] = "ckpt.load/1";
  j["file"] = r.file;
  j["format"] = r.format;
  j["device"] = r.device;
  j["libtorch"] = r.libtorch;
  j["dtype"] = r.dtype.empty() ? J(nullptr) : J(r.dtype);
  j["empty_init"] = r.empty_init;
  if (!r.model.empty()) {
    J m;
    m["file"] = r.model;
    m["strip_prefix"] = r.strip_prefix;
    m["add_prefix"] = r.add_prefix;
    if (r.match) {
      m["matched"] = r.match->matched;
      m["missing_keys"] = r.match->missing;
      m["unexpected_keys"] = r.match->unexpected;
      J mm = J::array();
      for (const KeyMismatch& x : r.match->mismatched)
        mm.push_back(J{{"key", x.key},
                       {"file_shape", shape_json(x.file_shape)},
                       {"model_shape", shape_json(x.model_shape)},
                       {"file_dtype", x.file_dtype},
                       {"model_dtype", x.model_dtype}});
      m["mismatched_keys"] = mm;
      m["suggested_strip_prefix"] = opt(r.match->suggested_strip_prefix);
      m["suggested_add_prefix"] = opt(r.match->suggested_add_prefix);
      m["ok"] = r.match->ok();
    }
    m["arch_bytes_read"] = r.arch_bytes_read;
    m["arch_bytes_skipped"] = r.arch_bytes_skipped;
    m["bytes_written_twice"] = r.bytes_written_twice;
    m["arch_seconds"] = r.arch_seconds;
    j["model"] = m;
  } else {
    j["model"] = nullptr;
  }
  j["totals"] = J{{"tensors", r.tensors},
                  {"loaded", r.loaded},
                  {"meta", r.meta},
                  {"skipped", r.skipped},
                  {"bytes", r.bytes},
                  {"bytes_read", r.bytes_read},
                  {"zero_copy_bytes", r.zero_copy_bytes},
                  {"copied_bytes", r.copied_bytes},
                  {"device_bytes", r.device_bytes},
                  {"nan", r.checked_values() ? J(r.nan) : J(nullptr)},
                  {"inf", r.checked_values() ? J(r.inf) : J(nullptr)}};
  j["time"] = J{{"startup_seconds", r.startup_seconds},
                {"read_seconds", r.read_seconds},
                {"check_seconds", r.check_seconds},
                {"load_seconds", r.load_seconds},
                {"context_seconds", r.context_seconds},
                {"ring_seconds", r.ring_seconds},
                {"ring_wait_seconds", r.ring_wait_seconds},
                {"plan_seconds", r.plan_seconds},
                {"count_seconds", r.count_seconds},
                {"seconds", r.seconds},
                {"gb_per_s", gbps(r.bytes_read, r.check_seconds + r.load_seconds)}};
  j["memory"] = J{{"peak_rss_bytes", r.peak_rss}, {"device_bytes", r.device_bytes}};
  if (r.stream) {
    const StreamStats& st = *r.stream;
    J read;
    for (size_t i = 0; i < kReadPaths; ++i) read[to_string(static_cast<ReadPath>(i))] = st.bytes[i];
    j["stream"] = J{{"staging", r.staging},
                    {"threads", st.threads},
                    {"slots", st.slots},
                    {"chunk_bytes", st.chunk_bytes},
                    {"ring_bytes", st.slots * st.chunk_bytes},
                    {"chunks", st.chunks},
                    {"read", read},
                    {"file_bytes", st.file_bytes},
                    {"seconds", st.seconds},
                    {"checksums", r.device_crc ? J("device") : J(nullptr)},
                    {"readback_bytes", st.readback_bytes},
                    {"readback_seconds", st.readback_seconds},
                    {"ring_reused", r.ring_reused}};
  } else {
    j["stream"] = nullptr;
  }
  j["complete"] = !r.incomplete();
  J rows = J::array();
  for (const LoadedTensor& t : r.rows) {
    J x;
    x["name"] = t.name;
    x["dtype"] = t.dtype;
    x["shape"] = t.shape_known ? shape_json(t.shape) : J(nullptr);
    x["state"] = to_string(t.state);
    if (!t.reason.empty()) x["reason"] = t.reason;
    x["zero_copy"] = t.zero_copy;
    if (r.checked_values() && t.state == LoadState::Loaded) {
      x["nan"] = t.stats.nan;
      x["inf"] = t.stats.inf;
    }
    if (t.crc32) x["crc32"] = *t.crc32;
    rows.push_back(std::move(x));
  }
  j["tensors"] = rows;
  j["notes"] = r.notes;
  return json_text(j) + "\n";
}

namespace {

// load's table: the tensors worth a look (skipped, meta, non-finite values), or every one with --tensors.
void load_table(std::string& out, const LoadReport& r, bool color, bool all_rows) {
  std::vector<const LoadedTensor*> shown;
  for (const LoadedTensor& t : r.rows)
    if (all_rows || t.state != LoadState::Loaded || t.stats.nan || t.stats.inf) shown.push_back(&t);
  if (!shown.empty()) {
    const bool values = r.checked_values();
    bool notes = false;
    for (const LoadedTensor* t : shown) notes |= !t->reason.empty();
    std::vector<std::string> heads{"Name", "dtype", "Shape", "State"};
    if (values) heads.insert(heads.end(), {"NaN", "Inf"});
    if (notes) heads.push_back("Note");
    std::vector<std::vector<std::string>> rows;
    std::vector<bool> bad;
    for (const LoadedTensor* t : shown) {  // escaped before the columns are measured
      std::vector<std::string> row{visible(t->name), visible(t->dtype), t->shape_known ? shape_text(t->shape) : "?",
                                   to_string(t->state)};
      if (values) {
        const bool counted = t->state == LoadState::Loaded;
        row.push_back(counted ? std::to_string(t->stats.nan) : "-");
        row.push_back(counted ? std::to_string(t->stats.inf) : "-");
      }
      if (notes) row.push_back(visible(t->reason));
      rows.push_back(std::move(row));
      bad.push_back(t->state == LoadState::Skipped || t->stats.nan || t->stats.inf);
    }
    // The index is the entry's position in the file (as summary's tensor table), so that it survives the filter.
    std::vector<std::string> index;
    for (const LoadedTensor* t : shown) index.push_back(std::to_string(static_cast<size_t>(t - r.rows.data())));
    std::vector<size_t> widths{std::max<size_t>(1, index.back().size())};
    for (size_t c = 0; c < heads.size(); ++c) {
      size_t w = heads[c].size();
      for (const auto& row : rows) w = std::max(w, row[c].size());
      widths.push_back(w);
    }
    const std::string dashes(table_width(widths), '-');
    out += "\n";
    table_line(out, " ", heads, widths);
    out += dashes + "\n";
    for (size_t k = 0; k < rows.size(); ++k) {
      std::string row_text;
      table_line(row_text, index[k], rows[k], widths);
      out += bad[k] && color ? std::string(severity_color(Severity::Warning, true)) +
                                   row_text.substr(0, row_text.size() - 1) + color_reset(true) + "\n"
                             : row_text;
    }
    out += dashes + "\n";
  }
}

// load's timing lines: where the time went, the bandwidth, the streaming load's chunks and ring, ARCH's own weights.
void load_times(std::string& out, const LoadReport& r) {
  auto foot = [&](const std::string& v, const std::string& label) { out += fmt::format("{:<10}{}\n", v, label); };
  const bool meta = r.device == "meta";
  auto secs = [](double s) { return fmt::format("{:.3f} s", s); };
  foot(secs(r.seconds), "Total time");
  foot(secs(r.startup_seconds), "Start-up to the command (exec, LibTorch)");
  if (r.check_seconds > 0) foot(secs(r.check_seconds), "Reading and checking every byte (in ckpt, while LibTorch started)");
  foot(secs(r.read_seconds), "Reading the structure");
  if (r.stream && !r.ring_reused) {
    if (r.device.rfind("cuda", 0) == 0) foot(secs(r.context_seconds), "CUDA context (ring's thread, overlapped)");
    foot(secs(r.ring_seconds), fmt::format("Allocating the staging ring (ring's thread, overlapped; waited {:.3f} s)",
                                           r.ring_wait_seconds));
  }
  foot(secs(r.load_seconds), r.stream ? fmt::format("Loading (planning {:.3f} s, NaN/Inf on {} {:.3f} s)", r.plan_seconds,
                                                     visible(r.device), r.count_seconds)
                                      : std::string("Loading"));
  if (!meta)
    foot(fmt::format("{:.2f} GB/s", gbps(r.bytes_read, r.check_seconds + r.load_seconds)),
         "Bandwidth (bytes read / (checking + loading))");
  if (r.stream) {
    const StreamStats& st = *r.stream;
    std::string paths;
    for (size_t i = 0; i < kReadPaths; ++i)
      if (st.bytes[i])
        paths += fmt::format("{}{} {}", paths.empty() ? "" : ", ", human_bytes(st.bytes[i]), to_string(static_cast<ReadPath>(i)));
    foot(std::to_string(st.chunks),
         fmt::format("Chunks streamed: {} thread(s), ring {} ({} x {}, {}{}); read: {}", st.threads,
                     human_bytes(st.slots * st.chunk_bytes), st.slots, human_bytes(st.chunk_bytes), r.staging,
                     r.ring_reused ? ", reused" : "", paths.empty() ? "nothing" : paths));
    if (r.device_crc)
      foot(secs(st.readback_seconds),
           fmt::format("CRC-32s of {} read back from {}", human_bytes(st.readback_bytes), visible(r.device)));
  }
  if (!r.model.empty()) {
    if (r.empty_init)
      foot(human_bytes(r.arch_bytes_skipped),
           fmt::format("Of {}'s own weights not read (empty init: nothing initialized or written twice)", visible(r.model)));
    else
      foot(human_bytes(r.arch_bytes_read),
           fmt::format("Of {}'s own weights read in {:.3f} s, then {} overwritten (--empty-init avoids both)",
                       visible(r.model), r.arch_seconds, human_bytes(r.bytes_written_twice)));
  }
}

}  // namespace

std::string render_load_text(const LoadReport& r, bool color, bool all_rows) {
  std::string out;
  // summary's look: `Key:` lines, a Lightning-style table, then value-first total lines.
  auto line = [&](const char* k, const std::string& v) { out += fmt::format("{:<10}{}\n", std::string(k) + ":", visible(v)); };
  auto foot = [&](const std::string& v, const std::string& label) { out += fmt::format("{:<10}{}\n", v, label); };
  line("File", fmt::format("{} ({})", r.file, r.format));
  line("Device", fmt::format("{} (LibTorch {}){}{}", r.device, r.libtorch, r.empty_init ? ", empty init" : "",
                             r.dtype.empty() ? "" : ", as " + r.dtype));
  if (!r.model.empty() && r.match) {
    const KeyMatch& m = *r.match;
    line("Model", fmt::format("{}: {} keys matched, {} missing, {} unexpected, {} mismatched", r.model, m.matched,
                              m.missing.size(), m.unexpected.size(), m.mismatched.size()));
    std::vector<std::string> renamed;  // only what was asked
    if (!r.strip_prefix.empty()) renamed.push_back(fmt::format("strip '{}'", r.strip_prefix));
    if (!r.add_prefix.empty()) renamed.push_back(fmt::format("add '{}'", r.add_prefix));
    if (!renamed.empty()) line("Renamed", join(renamed, ", "));
  }
  load_table(out, r, color, all_rows);
  if (r.match) {
    const KeyMatch& m = *r.match;
    auto list = [&](const char* what, const std::vector<std::string>& keys) {
      if (!keys.empty()) out += fmt::format("{} ({}): {}\n", what, keys.size(), visible(join(keys, ", ", 20, ", ... ({} more)")));
    };
    list("missing keys", m.missing);
    list("unexpected keys", m.unexpected);
    for (const KeyMismatch& x : m.mismatched)
      out += fmt::format("mismatched: {}: file {} {}, model {} {}\n", visible(x.key), visible(x.file_dtype),
                         shape_text(x.file_shape), visible(x.model_dtype), shape_text(x.model_shape));
    if (m.suggested_strip_prefix)
      out += fmt::format("hint: keys match with --strip-prefix '{}'\n", visible(*m.suggested_strip_prefix));
    if (m.suggested_add_prefix) out += fmt::format("hint: keys match with --add-prefix '{}'\n", visible(*m.suggested_add_prefix));
  }
  out += "\n";
  const bool meta = r.device == "meta";
  foot(std::to_string(r.loaded),
       meta ? "Tensors on meta (shapes and dtypes only: no byte read)" : "Tensors loaded on " + visible(r.device));
  if (r.meta) foot(std::to_string(r.meta), "Left on meta (meta tensors in the file: no data)");
  if (r.skipped) foot(std::to_string(r.skipped), "Skipped (not materialized: see the table)");
  foot(std::to_string(r.tensors), "Tensors in the file");
  foot(human_bytes(r.bytes), meta ? "Tensor size (none of it read)"
                                  : fmt::format("Tensor size ({} read from the file: {} zero-copy, {} copied)",
                                                human_bytes(r.bytes_read), human_bytes(r.zero_copy_bytes),
                                                human_bytes(r.copied_bytes)));
  if (r.checked_values()) {
    foot(std::to_string(r.nan), "NaN values");
    foot(std::to_string(r.inf), "Inf values");
  }
  foot(human_bytes(r.peak_rss), "Peak RSS of ckpt-torch");
  if (r.device_bytes) foot(human_bytes(r.device_bytes), "Allocated on " + visible(r.device));
  out += "\n";
  load_times(out, r);
  for (const std::string& n : r.notes) out += "note: " + visible(n) + "\n";
  return out;
}

}  // namespace ckpt
