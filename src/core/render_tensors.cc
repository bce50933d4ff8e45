// `summary --tensors` and the table look it shares with the module table (see render_tensors.h).
#include "core/render_tensors.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/text.h"

namespace ckpt {

namespace {

constexpr size_t kColumns = 8;
using Cells = std::array<std::string, kColumns>;
const std::vector<std::string> kHeads{"Name", "dtype", "Shape", "Kind", "State", "Size", "Trainable", "Tied to"};
// A tied group of thousands of names would make every one of its rows thousands of names long.
constexpr size_t kTiedNames = 3;

// The entries that are one tensor (Summary::same_tensor), each group in entry order, and each entry's
// group (-1: none).
struct Tied {
  std::vector<std::vector<size_t>> groups;
  std::vector<int64_t> of;
};

Tied tied_groups(const Summary& s) {
  Tied t;
  const std::vector<size_t>& first = s.same_tensor;
  t.of.assign(first.size(), -1);
  for (size_t k = 0; k < first.size(); ++k) {
    // Lazy entries have no view to share and are never counted: never tied.
    const Tensor& x = s.ck->tensors[k];
    if (first[k] == k || (x.state == TensorState::Uninitialized && !x.resolved)) continue;
    if (t.of[first[k]] < 0) {
      t.of[first[k]] = static_cast<int64_t>(t.groups.size());
      t.groups.push_back({first[k]});
    }
    t.of[k] = t.of[first[k]];
    t.groups[static_cast<size_t>(t.of[k])].push_back(k);
  }
  return t;
}

Cells cells(const Summary& s, size_t k, const Tied& tied) {
  const Tensor& t = s.ck->tensors[k];
  const bool lazy = t.state == TensorState::Uninitialized && !t.resolved;
  Cells c;
  // Everything quoted from the file is escaped here, before the text table measures its columns.
  c[0] = visible(t.name);
  c[1] = t.dtype ? t.dtype->name : "?";
  if (t.layout != Layout::Strided && t.layout != Layout::Quantized) c[1] += " " + visible(t.layout_text());
  c[2] = lazy ? "?" : shape_text(t.shape);
  c[3] = to_string(t.kind);
  c[4] = to_string(t.state);
  if (t.resolved) c[4] += " (sized by --model)";
  c[5] = lazy ? "?" : human_bytes(t.bytes);
  c[6] = t.kind != TensorKind::Parameter ? "-" : trainable(t) ? "yes" : "no";
  if (tied.of[k] >= 0) {
    const std::vector<size_t>& g = tied.groups[static_cast<size_t>(tied.of[k])];
    std::vector<std::string> others;
    for (size_t j : g) {
      if (j == k) continue;
      if (others.size() == kTiedNames) break;
      others.push_back(visible(s.ck->tensors[j].name));
    }
    const size_t left = g.size() - 1 - others.size();
    c[7] = join(others, ", ") + (left ? fmt::format(", and {} more", left) : "");
  }
  return c;
}

}  // namespace

bool matches(const std::vector<std::string>& globs, const std::string& name) {
  for (const std::string& g : globs)
    if (fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

TensorRows tensor_rows(const Summary& s, const RenderOptions& o) {
  TensorRows r;
  const bool flat = s.modules.size() <= 1;
  r.shown = o.tensors || !o.match.empty() || (flat && o.depth < 0);
  if (!r.shown) return r;
  const std::vector<Tensor>& ts = s.ck->tensors;
  r.rows.reserve(ts.size());
  for (size_t k = 0; k < ts.size(); ++k)
    if (o.match.empty() || matches(o.match, ts[k].name)) r.rows.push_back(k);
  r.filtered = r.rows.size() < ts.size();
  return r;
}

std::string tensors_note(const Summary& s, const RenderOptions& o, const TensorRows& rows) {
  const size_t n = s.ck->tensors.size();
  if (!o.match.empty()) {
    std::vector<std::string> globs;
    for (const std::string& g : o.match) globs.push_back("'" + g + "'");
    return fmt::format("{} of {} listed, names matching {}", rows.rows.size(), n, join(globs, " or "));
  }
  if (!rows.shown && n > 0 && s.modules.size() <= 1 && o.depth != 0)
    return fmt::format("{} at the root, no module rows: --tensors or --depth -1 lists them", n);
  return "";
}

size_t table_width(const std::vector<size_t>& widths) {
  size_t w = 3 * (widths.size() + 1);
  for (size_t x : widths) w += x;
  return w;
}

void table_line(std::string& out, const std::string& index, const std::vector<std::string>& cells,
                const std::vector<size_t>& widths) {
  const size_t start = out.size();
  // Empty cells at the end leave no dangling separator.
  size_t n = cells.size();
  while (n > 0 && cells[n - 1].empty()) --n;
  fmt::format_to(std::back_inserter(out), "{:<{}}", index, widths[0]);
  for (size_t c = 0; c < n; ++c) fmt::format_to(std::back_inserter(out), " | {:<{}}", cells[c], widths[c + 1]);
  while (out.size() > start && out.back() == ' ') out.pop_back();
  out += '\n';
}

void markdown_head(std::string& out, const std::vector<std::string>& heads, const std::vector<std::string>& right) {
  out += "|   | " + join(heads, " | ") + " |\n|--:|";
  for (const std::string& h : heads) out += std::find(right.begin(), right.end(), h) != right.end() ? "--:|" : "---|";
  out += '\n';
}

void markdown_row(std::string& out, const std::string& index, const std::vector<std::string>& cells) {
  out += "| " + index + " |";
  for (std::string cell : cells) {
    while (!cell.empty() && cell.back() == ' ') cell.pop_back();
    out += " " + markdown_cell(cell) + " |";
  }
  out += '\n';
}

void tensor_table(const Summary& s, const TensorRows& rows, bool markdown, std::string& out, const Flush& flush) {
  if (rows.rows.empty()) return;
  const Tied tied = tied_groups(s);
  std::vector<std::string> row(kColumns);
  auto take = [&](size_t k) {
    Cells c = cells(s, k, tied);
    std::move(c.begin(), c.end(), row.begin());
  };
  auto spill = [&] {
    if (flush && out.size() > (1u << 20)) flush(out);
  };
  // The index is the entry's position in the file, as in JSON's tensors[], so that it survives --match.
  if (markdown) {
    markdown_head(out, kHeads, {"Size"});
    for (size_t k : rows.rows) {
      take(k);
      markdown_row(out, std::to_string(k), row);
      spill();
    }
    return;
  }
  // Two passes, the cells made twice, rather than every cell of 100,000 rows held at once.
  std::vector<size_t> widths(kColumns + 1);
  widths[0] = std::max<size_t>(1, std::to_string(rows.rows.back()).size());
  for (size_t c = 0; c < kColumns; ++c) widths[c + 1] = kHeads[c].size();
  for (size_t k : rows.rows) {
    take(k);
    for (size_t c = 0; c < kColumns; ++c) widths[c + 1] = std::max(widths[c + 1], row[c].size());
  }
  const std::string dashes(table_width(widths), '-');
  table_line(out, " ", kHeads, widths);
  out += dashes + '\n';
  for (size_t k : rows.rows) {
    take(k);
    table_line(out, std::to_string(k), row, widths);
    spill();
  }
  out += dashes + '\n';
}

}  // namespace ckpt
