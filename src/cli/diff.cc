// `ckpt diff A B`: options, and the run that compares (core/diff.h) and renders (core/render_report.h).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/precheck.h"
#include "cli/inputs.h"
#include "core/diff.h"
#include "core/reader.h"
#include "core/render_report.h"
#include "core/vfs.h"

namespace ckpt::cli {

void setup_diff(CLI::App& app, DiffCliOptions& o) {
  auto* sub = app.add_subcommand("diff", "Compare two checkpoints: keys, dtypes, shapes, renames, and values");
  sub->add_option("A", o.a, "First checkpoint (any format summary reads; - reads stdin; a URL: https://, hf://, s3://)")->required()->type_name("A");
  sub->add_option("B", o.b, "Second checkpoint (- reads stdin; not both)")->required()->type_name("B");
  sub->add_flag(
      "--values", o.diff.values,
      "Compare tensor values too (max absolute / relative difference per tensor; every core, with a progress bar on a terminal)");
  complete_none(non_negative_number(
      sub->add_option("--atol", o.diff.atol, "With --values: absolute tolerance, |a - b| <= atol + rtol * |b|")
          ->default_val(0.0)
          ->type_name("X")));
  complete_none(non_negative_number(
      sub->add_option("--rtol", o.diff.rtol, "With --values: relative tolerance")->default_val(0.0)->type_name("X")));
  add_text_or_json_options(sub, o, "ckpt.diff/1", false);
  sub->add_option("--strip-prefix", o.diff.strip_prefix,
                  "Remove this prefix from the keys of both files that start with it before pairing (e.g. _orig_mod., module.)")
      ->type_name("P");
  sub->add_option("--add-prefix", o.diff.add_prefix, "Add this prefix to every key of A (after --strip-prefix) before pairing")
      ->type_name("P");
  sub->add_flag("--ignore-dtype", o.diff.ignore_dtype,
                "A dtype change alone is no difference; values are compared after casting both to the promoted dtype "
                "(torch.testing.assert_close(check_dtype=False))");
  sub->add_flag("--ignore-metadata", o.diff.ignore_metadata,
                "Compare the tensors alone: leave out training state, hyper-parameters, optimizer, schedulers and config.json");
  sub->add_flag("-v,--verbose", o.diff.verbose,
                "Also list the tensors within tolerance and every metadata change (text; JSON always lists them)");
  add_color_option(sub);
  add_limit_option(sub, o);
}

void validate_diff(const CLI::App& sub, const DiffCliOptions& o) {
  validate_text_or_json(o);
  if (!o.diff.values && (sub.count("--atol") > 0 || sub.count("--rtol") > 0))
    throw UsageError("--atol / --rtol need --values (without it no value is compared)");
  if (vfs::is_stdin(o.a) && vfs::is_stdin(o.b)) throw UsageError("A and B are both - (stdin): stdin is read once");
  if (o.diff.atol < 0 || o.diff.rtol < 0) throw UsageError("--atol and --rtol must not be negative");
  if (sub.count("--strip-prefix") > 0 && o.diff.strip_prefix.empty()) throw UsageError("--strip-prefix: the prefix is empty");
  if (sub.count("--add-prefix") > 0 && o.diff.add_prefix.empty()) throw UsageError("--add-prefix: the prefix is empty");
}

int run_diff(const DiffCliOptions& o) {
  const Limits lim = o.resolve();
  // Both stay mapped while values are compared; the process exits right after (see summary.cc).
  auto own_a = std::make_unique<Checkpoint>(read_checkpoint(o.a, lim));
  auto own_b = std::make_unique<Checkpoint>(read_checkpoint(o.b, lim));
  const Checkpoint* a = keep_until_exit(own_a);
  const Checkpoint* b = keep_until_exit(own_b);
  DiffOptions d = o.diff;
  d.color = !o.wants_json() && use_color(STDOUT_FILENO);
  Progress progress;  // as load's: stderr, TTY only, work over a second
  progress.enabled = o.diff.values && !o.wants_json() && isatty(STDERR_FILENO);
  d.progress = [&](uint64_t done, uint64_t total) { progress(done, total); };
  const DiffResult r = diff_checkpoints(*a, *b, d);
  progress.clear();
  for (const std::string& w : r.warnings) fmt::print(stderr, "ckpt: warning: {}\n", w);
  // As every output names a URL: without its userinfo and its query's secrets (vfs::display).
  const std::string an = vfs::display(o.a), bn = vfs::display(o.b);
  const std::string out = o.wants_json() ? diff_json_text(an, bn, *a, *b, r, d) : render_diff_text(an, bn, *a, *b, r, d);
  write_output(stdout, out);
  return r.same(d) ? kExitOk : kExitFindings;  // like diff(1): 0 same, 1 different
}

}  // namespace ckpt::cli
