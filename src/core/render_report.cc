#include "core/render_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/text.h"

namespace ckpt {

// ---- check ----

std::string render_check_text(const CheckReport& r, bool color) {
  std::string out;
  for (const Finding& f : r.findings) {
    out += fmt::format("{}{}[{}]{}: {}\n", severity_color(f.severity, color), to_string(f.severity), f.id, color_reset(color),
                       f.message);
    for (size_t k = 0; k < f.where.size() && k < 8; ++k) out += fmt::format("  at: {}\n", f.where[k]);
    if (f.where.size() > 8) out += fmt::format("  ... and {} more\n", f.where.size() - 8);
    out += fmt::format("  fix: {}\n", f.fix);
  }
  out += fmt::format("{}: {} error(s), {} warning(s), {} info; --fail-on {}: {}\n", r.file, r.counts[2], r.counts[1], r.counts[0],
                     r.fail_on, r.failed ? "FAIL" : "pass");
  return out;
}

void write_check_json(const CheckReport& r, std::FILE* f) {
  using J = nlohmann::ordered_json;
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
    fs.push_back(J{{"id", x.id}, {"severity", to_string(x.severity)}, {"message", x.message}, {"fix", x.fix}, {"where", x.where}});
  j["findings"] = std::move(fs);
  const std::string out = json_text(j) + "\n";
  std::fwrite(out.data(), 1, out.size(), f);
}

// ---- diff ----

std::string render_diff_text(const std::string& a_path, const std::string& b_path, const Checkpoint& a, const Checkpoint& b,
                             const DiffResult& r, const DiffOptions& o) {
  std::string out;
  out += fmt::format("A: {} ({}, {} tensors)\n", a_path, format_title(a), a.tensors.size());
  out += fmt::format("B: {} ({}, {} tensors)\n", b_path, format_title(b), b.tensors.size());
  if (!r.prefix_op.empty())
    out += fmt::format("renamed: B is A {} the '{}' prefix ({} keys paired through it)\n",
                       r.prefix_op == "b_adds" ? "with" : "without", r.prefix, r.paired);
  for (const auto& k : r.only_in_a) out += fmt::format("only in A: {}\n", k);
  for (const auto& k : r.only_in_b) out += fmt::format("only in B: {}\n", k);
  for (const TensorDiff& d : r.changed) {
    const std::string name = d.a == d.b ? d.a : d.a + " -> " + d.b;
    if (d.dtype_a != d.dtype_b) out += fmt::format("dtype: {}: {} -> {}\n", name, d.dtype_a, d.dtype_b);
    if (d.shape_a != d.shape_b) out += fmt::format("shape: {}: {} -> {}\n", name, shape_text(d.shape_a), shape_text(d.shape_b));
    if (d.state_changed) out += fmt::format("state: {}: materialized / meta / uninitialized differ\n", name);
    if (d.compared && !d.values_equal) {
      if (d.comparable)
        out += fmt::format("values: {}: max abs diff {:.6g}, max rel diff {:.6g}{}\n", name, d.max_abs, d.max_rel,
                           d.within ? " (within tolerance)" : "");
      else
        out += fmt::format("values: {}: bytes differ ({} has no float64 view)\n", name, d.dtype_a);
    }
  }
  out += fmt::format("{}: {} paired, {} only in A, {} only in B, {} changed{}\n", r.same(o) ? "same" : "different", r.paired,
                     r.only_in_a.size(), r.only_in_b.size(), r.changed.size(),
                     o.values ? fmt::format("; values compared for {} (atol {}, rtol {})", r.compared, o.atol, o.rtol)
                              : std::string("; values not compared (--values)"));
  return out;
}

std::string diff_json_text(const std::string& a_path, const std::string& b_path, const Checkpoint& a, const Checkpoint& b,
                           const DiffResult& r, const DiffOptions& o) {
  using J = nlohmann::ordered_json;
  J j;
  j["schema"] = kDiffSchema;
  j["a"] = {{"file", a_path}, {"format", a.format}, {"tensors", a.tensors.size()}};
  j["b"] = {{"file", b_path}, {"format", b.format}, {"tensors", b.tensors.size()}};
  j["values_compared"] = o.values;
  j["atol"] = o.atol;
  j["rtol"] = o.rtol;
  j["keys_equal"] = r.keys_equal;
  j["prefix"] = r.prefix_op.empty() ? J(nullptr) : J{{r.prefix_op, r.prefix}};
  j["paired"] = r.paired;
  j["only_in_a"] = r.only_in_a;
  j["only_in_b"] = r.only_in_b;
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
    changed.push_back(std::move(c));
  }
  j["changed"] = std::move(changed);
  j["max_abs_diff"] = r.max_abs;
  j["equal"] = r.equal;
  j["within_tolerance"] = o.values ? J(r.within_tolerance) : J(nullptr);
  return json_text(j) + "\n";
}

}  // namespace ckpt
