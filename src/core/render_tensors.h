// `summary --tensors`: one row per tensor entry (name, dtype, shape, kind, state, size, trainable, tied
// to) in the look of the module table, which this file's table primitives draw as well. The rows are
// written in two passes (widths, then text) and handed to a flush callback, so 100,000 entries cost
// linear time and bounded memory.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/summary.h"

namespace ckpt {

struct RenderOptions {
  int depth = 1;  // module rows up to this depth (Lightning's max_depth): -1 all, 0 none
  bool color = false;  // ANSI colour for severities
  bool tensors = false;  // the tensor table (--tensors)
  bool exact = false;  // exact counts, per-dtype counts, parameters without embeddings (--exact)
  std::vector<std::string> match;  // fnmatch globs: list only entries whose name matches one (--match)
  bool verbose = false;  // the container's internals on the Format: line (--verbose)
};

// Whether an entry's name matches one of `globs` (fnmatch, no flags: * also matches '.').
bool matches(const std::vector<std::string>& globs, const std::string& name);

// Called with the output so far whenever it grows large; it writes and clears it. Empty: keep it all.
using Flush = std::function<void(std::string&)>;

// Which entries the tensor table lists. It is shown with --tensors (or --match), and without it when
// the module tree is flat (no module below the root) at --depth -1, where the module table would be
// an empty frame.
struct TensorRows {
  bool shown = false;
  bool filtered = false;  // --match left some out
  std::vector<size_t> rows;  // indices into ck->tensors, in entry (and JSON tensors[]) order
};
TensorRows tensor_rows(const Summary& s, const RenderOptions& o);

// The header's "Tensors:" value ("" for none): how many --match kept, or, for a flat module tree whose
// tensors no table lists, how to list them.
std::string tensors_note(const Summary& s, const RenderOptions& o, const TensorRows& rows);

// Lightning's _format_summary_table: an index column, " | " separators, trailing blanks trimmed, and
// lines of dashes sum(widths) + 3 * (columns + 1) long under the head and after the last row.
// `widths` include the index column first.
size_t table_width(const std::vector<size_t>& widths);
void table_line(std::string& out, const std::string& index, const std::vector<std::string>& cells,
                const std::vector<size_t>& widths);
// A Markdown table's head: `|   | A | B |` and `|--:|---|--:|`, right-aligning the columns named in `right`.
void markdown_head(std::string& out, const std::vector<std::string>& heads, const std::vector<std::string>& right);
// One Markdown row: `| k | a | b |`, each cell through markdown_cell with trailing blanks trimmed.
void markdown_row(std::string& out, const std::string& index, const std::vector<std::string>& cells);

// The tensor table, appended to `out` (text or Markdown); nothing when rows.rows is empty.
void tensor_table(const Summary& s, const TensorRows& rows, bool markdown, std::string& out, const Flush& flush);

}  // namespace ckpt
