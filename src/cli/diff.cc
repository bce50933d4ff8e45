#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "core/diff.h"
#include "core/reader.h"
#include "core/render_report.h"

namespace ckpt::cli {

void setup_diff(CLI::App& app, DiffCliOptions& o) {
  auto* sub = app.add_subcommand("diff", "Compare two checkpoints: keys, dtypes, shapes, renames, and values");
  sub->add_option("a", o.a, "First checkpoint (any format summary reads)")->required()->type_name("A");
  sub->add_option("b", o.b, "Second checkpoint")->required()->type_name("B");
  sub->add_flag("--values", o.values, "Compare tensor values too (max absolute / relative difference per tensor)");
  sub->add_option("--atol", o.atol, "Absolute tolerance for --values: |a - b| <= atol + rtol * |b|")->default_val(0.0);
  sub->add_option("--rtol", o.rtol, "Relative tolerance for --values")->default_val(0.0);
  sub->add_flag("--json", o.json, "JSON output (schema ckpt.diff/1)");
  add_limit_option(sub, o);
}

int run_diff(const DiffCliOptions& o) {
  if (o.atol < 0 || o.rtol < 0) throw UsageError("--atol and --rtol must not be negative");
  const Limits lim = o.resolve();
  // Both stay mapped while values are compared; the process exits right after (see summary.cc).
  auto* a = new Checkpoint(read_checkpoint(o.a, lim));
  auto* b = new Checkpoint(read_checkpoint(o.b, lim));
  DiffOptions d;
  d.values = o.values;
  d.atol = o.atol;
  d.rtol = o.rtol;
  const DiffResult r = diff_checkpoints(*a, *b, d);
  const std::string out = o.json ? diff_json_text(o.a, o.b, *a, *b, r, d) : render_diff_text(o.a, o.b, *a, *b, r, d);
  std::fwrite(out.data(), 1, out.size(), stdout);
#if defined(__SANITIZE_ADDRESS__) || defined(CKPT_ASAN)
  delete a;
  delete b;
#endif
  return r.same(d) ? kExitOk : kExitFindings;  // like diff(1): 0 same, 1 different
}

}  // namespace ckpt::cli
