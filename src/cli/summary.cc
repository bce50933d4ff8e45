#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "core/reader.h"
#include "core/render.h"
#include "core/rules.h"
#include "core/security.h"
#include "core/summary.h"

namespace ckpt::cli {

bool use_color(int fd) {
  const char* nc = std::getenv("NO_COLOR");
  return isatty(fd) && (nc == nullptr || nc[0] == '\0');
}

Limits LimitOptions::resolve() const {
  Limits lim;
  for (const std::string& kv : limits) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw UsageError(fmt::format("--limit {}: expected NAME=VALUE", kv));
    const std::string err = set_limit(lim, kv.substr(0, eq), kv.substr(eq + 1));
    if (!err.empty()) throw UsageError("--limit: " + err);
  }
  return lim;
}

void add_limit_option(CLI::App* sub, LimitOptions& o) {
  sub->add_option("--limit", o.limits, "Raise or lower a resource limit, NAME=VALUE (k/M/G suffixes); defaults: " + describe_limits())
      ->type_name("NAME=VALUE")
      ->expected(1)  // one value per --limit, so a following FILE is not swallowed
      ->allow_extra_args(false);
}

void setup_summary(CLI::App& app, SummaryOptions& o) {
  auto* sub = app.add_subcommand("summary", "Show what a checkpoint holds: layer table, totals, warnings");
  sub->add_option("file", o.file, "Checkpoint: torch.save zip or legacy file, Lightning .ckpt, TorchScript archive, safetensors, bare pickle, or a sharded checkpoint (directory or *.index.json)")
      ->required()
      ->type_name("FILE");
  sub->add_option("-d,--depth", o.depth, "Module rows up to this depth (-1: all, 0: none), like Lightning's max_depth")
      ->default_val(1)
      ->type_name("N");
  sub->add_option("-f,--format", o.format, "Output format")
      ->check(CLI::IsMember({"text", "json", "markdown"}))
      ->default_val("text");
  sub->add_flag("--json", o.json, "Same as --format json (schema ckpt.summary/1)");
  add_limit_option(sub, o);
}

int run_summary(const SummaryOptions& o) {
  // The process exits right after this command: freeing a million small objects one by one would
  // cost more than the whole read, so the checkpoint is deliberately not destroyed (clang -disable-free).
  auto* owned = new Checkpoint(read_checkpoint(o.file, o.resolve()));
  const Checkpoint& ck = *owned;
  Summary s = summarize(ck);
  // The same findings `ckpt check` reports, but for the pickle globals already read (no second pass).
  for (std::vector<Finding> more : {model_findings(ck), global_findings(ck.globals, ck.container == "zip" ? ck.prefix + "/data.pkl" : "pickle")})
    s.findings.insert(s.findings.end(), more.begin(), more.end());
  const std::string format = o.json ? "json" : o.format;
  std::string out;
  if (format == "json") {
    write_summary_json(s, stdout);
  } else {
    RenderOptions r;
    r.depth = o.depth;
    r.color = use_color(STDOUT_FILENO);
    out = format == "markdown" ? render_summary_markdown(s, r) : render_summary_text(s, r);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
#if defined(__SANITIZE_ADDRESS__)
  delete owned;  // sanitizer builds free everything, so that LeakSanitizer reports real leaks only
#endif
  return kExitOk;  // `owned` intentionally leaked otherwise, see above
}

}  // namespace ckpt::cli
