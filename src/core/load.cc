#include "core/load.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/render.h"

namespace ckpt {

const char* to_string(LoadState s) {
  switch (s) {
    case LoadState::Loaded: return "loaded";
    case LoadState::Meta: return "meta";
    case LoadState::Skipped: return "skipped";
  }
  return "?";
}

bool LoadReport::incomplete() const { return skipped > 0 || (match && !match->ok()); }

namespace {
using J = nlohmann::ordered_json;

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
        mm.push_back(J{{"key", x.key}, {"file_shape", shape_json(x.file_shape)}, {"model_shape", shape_json(x.model_shape)},
                       {"file_dtype", x.file_dtype}, {"model_dtype", x.model_dtype}});
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
  j["totals"] = J{{"tensors", r.tensors}, {"loaded", r.loaded}, {"meta", r.meta}, {"skipped", r.skipped},
                  {"bytes", r.bytes}, {"bytes_read", r.bytes_read}, {"zero_copy_bytes", r.zero_copy_bytes},
                  {"copied_bytes", r.copied_bytes}, {"device_bytes", r.device_bytes},
                  {"nan", r.checked_values() ? J(r.nan) : J(nullptr)}, {"inf", r.checked_values() ? J(r.inf) : J(nullptr)}};
  j["time"] = J{{"startup_seconds", r.startup_seconds}, {"read_seconds", r.read_seconds},
                {"check_seconds", r.check_seconds}, {"load_seconds", r.load_seconds}, {"seconds", r.seconds},
                {"gb_per_s", gbps(r.bytes_read, r.check_seconds + r.load_seconds)}};
  j["memory"] = J{{"peak_rss_bytes", r.peak_rss}, {"device_bytes", r.device_bytes}};
  j["complete"] = !r.incomplete();
  J rows = J::array();
  for (const LoadedTensor& t : r.rows) {
    J x;
    x["name"] = t.name;
    x["dtype"] = t.dtype;
    x["shape"] = shape_json(t.shape);
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

std::string render_load_text(const LoadReport& r, bool color, bool all_rows) {
  std::string out;
  auto line = [&](const char* k, const std::string& v) { out += fmt::format("{:<13}{}\n", k, v); };
  line("File", fmt::format("{} ({})", r.file, r.format));
  line("Device", fmt::format("{} (LibTorch {}){}{}", r.device, r.libtorch, r.empty_init ? ", empty init" : "",
                             r.dtype.empty() ? "" : ", as " + r.dtype));
  if (!r.model.empty() && r.match) {
    const KeyMatch& m = *r.match;
    line("Model", fmt::format("{}: {} keys matched, {} missing, {} unexpected, {} mismatched", r.model, m.matched,
                              m.missing.size(), m.unexpected.size(), m.mismatched.size()));
    if (!r.strip_prefix.empty() || !r.add_prefix.empty())
      line("Renamed", fmt::format("strip '{}', add '{}'", r.strip_prefix, r.add_prefix));
  }
  // the table: only tensors worth a look (skipped, meta, non-finite values), Lightning-style columns
  std::vector<const LoadedTensor*> shown;
  for (const LoadedTensor& t : r.rows)
    if (all_rows || t.state != LoadState::Loaded || t.stats.nan || t.stats.inf) shown.push_back(&t);
  if (!shown.empty()) {
    size_t wn = 4, wd = 5, ws = 5, wst = 5;
    for (const LoadedTensor* t : shown) {
      wn = std::max(wn, t->name.size());
      wd = std::max(wd, t->dtype.size());
      ws = std::max(ws, shape_text(t->shape).size());
      wst = std::max(wst, std::strlen(to_string(t->state)));
    }
    const std::string head = fmt::format("   | {:<{}} | {:<{}} | {:<{}} | {:<{}} | {:>6} | {:>6} | {}", "Name", wn, "Dtype", wd,
                                         "Shape", ws, "State", wst, "NaN", "Inf", "Note");
    out += "\n" + head + "\n" + std::string(head.size(), '-') + "\n";
    size_t k = 0;
    for (const LoadedTensor* t : shown) {
      const bool bad = t->state == LoadState::Skipped || t->stats.nan || t->stats.inf;
      const char* on = bad ? severity_color(Severity::Warning, color) : "";
      out += fmt::format("{:<3}| {:<{}} | {:<{}} | {:<{}} | {}{:<{}}{} | {:>6} | {:>6} | {}\n", k++, t->name, wn, t->dtype, wd,
                         shape_text(t->shape), ws, on, to_string(t->state), wst, bad ? color_reset(color) : "",
                         t->state == LoadState::Loaded && r.checked_values() ? std::to_string(t->stats.nan) : "-",
                         t->state == LoadState::Loaded && r.checked_values() ? std::to_string(t->stats.inf) : "-", t->reason);
    }
    out += std::string(head.size(), '-') + "\n";
  }
  if (r.match) {
    const KeyMatch& m = *r.match;
    auto list = [&](const char* what, const std::vector<std::string>& keys) {
      if (keys.empty()) return;
      out += fmt::format("{} ({}):", what, keys.size());
      for (size_t k = 0; k < keys.size() && k < 20; ++k) out += (k ? ", " : " ") + keys[k];
      out += keys.size() > 20 ? fmt::format(", ... ({} more)\n", keys.size() - 20) : "\n";
    };
    list("missing keys", m.missing);
    list("unexpected keys", m.unexpected);
    for (const KeyMismatch& x : m.mismatched)
      out += fmt::format("mismatched: {}: file {} {}, model {} {}\n", x.key, x.file_dtype, shape_text(x.file_shape),
                         x.model_dtype, shape_text(x.model_shape));
    if (m.suggested_strip_prefix)
      out += fmt::format("hint: keys match with --strip-prefix '{}'\n", *m.suggested_strip_prefix);
    if (m.suggested_add_prefix) out += fmt::format("hint: keys match with --add-prefix '{}'\n", *m.suggested_add_prefix);
  }
  out += "\n";
  out += fmt::format("{:<10} {} loaded, {} on meta, {} skipped (of {})\n", "tensors", r.loaded, r.meta, r.skipped, r.tensors);
  out += fmt::format("{:<10} {} ({} read from the file: {} zero-copy, {} copied)\n", "bytes", human_bytes(r.bytes),
                     human_bytes(r.bytes_read), human_bytes(r.zero_copy_bytes), human_bytes(r.copied_bytes));
  if (r.checked_values()) out += fmt::format("{:<10} {} NaN, {} Inf\n", "values", r.nan, r.inf);
  const std::string checked =
      r.check_seconds > 0 ? fmt::format("{:.3f} s reading and checking every byte while LibTorch started, ", r.check_seconds) : "";
  out += fmt::format("{:<10} {:.3f} s ({}{:.3f} s to the command, {:.3f} s reading the structure, {:.3f} s loading: {:.2f} GB/s)\n",
                     "time", r.seconds, checked, r.startup_seconds, r.read_seconds, r.load_seconds,
                     gbps(r.bytes_read, r.check_seconds + r.load_seconds));
  out += fmt::format("{:<10} peak RSS {}{}\n", "memory", human_bytes(r.peak_rss),
                     r.device_bytes ? fmt::format(", {} on {}", human_bytes(r.device_bytes), r.device) : std::string());
  if (!r.model.empty()) {
    if (r.empty_init)
      out += fmt::format("{:<10} {} of {}'s own weights not read, nothing initialized or written twice\n", "empty init",
                         human_bytes(r.arch_bytes_skipped), r.model);
    else
      out += fmt::format("{:<10} {} of {}'s own weights read in {:.3f} s, then {} overwritten (--empty-init avoids both)\n",
                         "plain init", human_bytes(r.arch_bytes_read), r.model, r.arch_seconds, human_bytes(r.bytes_written_twice));
  }
  for (const std::string& n : r.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace ckpt
