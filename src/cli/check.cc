#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "core/mapped_file.h"
#include "core/reader.h"
#include "core/render.h"
#include "core/findings.h"
#include "core/summary.h"

namespace ckpt::cli {

namespace {

std::vector<std::string> split_ids(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::stringstream ss(a);
    std::string id;
    while (std::getline(ss, id, ',')) if (!id.empty()) out.push_back(id);
  }
  return out;
}

int rank(Severity s) { return s == Severity::Info ? 0 : s == Severity::Warning ? 1 : 2; }

}  // namespace

void setup_check(CLI::App& app, CheckOptions& o) {
  auto* sub = app.add_subcommand("check", "Compile, load and security findings, with an exit code for CI");
  sub->add_option("file", o.file, "Checkpoint to check")->required()->type_name("FILE");
  sub->add_flag("--json", o.json, "JSON output (schema ckpt.check/1)");
  sub->add_option("--fail-on", o.fail_on, "Exit 1 when a finding reaches this severity")
      ->check(CLI::IsMember({"info", "warning", "error", "never"}))
      ->default_val("error");
  std::string ids;
  for (const RuleInfo& r : rule_catalogue()) ids += std::string(ids.empty() ? "" : ", ") + r.id;
  sub->add_option("--only", o.only, "Report only these rule ids (comma-separated or repeated): " + ids)->type_name("IDS")->expected(1)->allow_extra_args(false);
  sub->add_option("--skip", o.skip, "Do not report these rule ids")->type_name("IDS")->expected(1)->allow_extra_args(false);
  add_limit_option(sub, o);
}

int run_check(const CheckOptions& o) {
  const auto only = split_ids(o.only), skip = split_ids(o.skip);
  for (const auto& id : only) {
    const auto& cat = rule_catalogue();
    if (std::none_of(cat.begin(), cat.end(), [&](const RuleInfo& r) { return id == r.id; }))
      throw UsageError(fmt::format("--only: unknown rule id '{}'", id));
  }
  for (const auto& id : skip) {
    const auto& cat = rule_catalogue();
    if (std::none_of(cat.begin(), cat.end(), [&](const RuleInfo& r) { return id == r.id; }))
      throw UsageError(fmt::format("--skip: unknown rule id '{}'", id));
  }

  std::error_code ec;
  if (!std::filesystem::exists(o.file, ec)) (void)MappedFile::open(o.file);  // the plain "cannot open" error, exit 3
  CheckResult result = run_checks(o.file, o.resolve());
  std::vector<Finding>& all = result.findings;
  const std::string& read_error = result.read_error;
  std::vector<Finding> findings;
  for (Finding& f : all) {
    if (!only.empty() && std::find(only.begin(), only.end(), f.id) == only.end()) continue;
    if (std::find(skip.begin(), skip.end(), f.id) != skip.end()) continue;
    findings.push_back(std::move(f));
  }
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) { return rank(a.severity) > rank(b.severity); });

  const int threshold = o.fail_on == "never" ? 99 : o.fail_on == "info" ? 0 : o.fail_on == "warning" ? 1 : 2;
  size_t counts[3] = {0, 0, 0};
  bool failed = false;
  for (const Finding& f : findings) {
    ++counts[rank(f.severity)];
    failed |= rank(f.severity) >= threshold;
  }

  if (o.json) {
    write_check_json(o.file, result.format, findings, counts, o.fail_on, failed, read_error, stdout);
  } else {
    const bool color = use_color(STDOUT_FILENO);
    std::string out;
    for (const Finding& f : findings) {
      out += fmt::format("{}{}[{}]{}: {}\n", severity_color(f.severity, color), to_string(f.severity), f.id, color_reset(color),
                         f.message);
      for (size_t k = 0; k < f.where.size() && k < 8; ++k) out += fmt::format("  at: {}\n", f.where[k]);
      if (f.where.size() > 8) out += fmt::format("  ... and {} more\n", f.where.size() - 8);
      out += fmt::format("  fix: {}\n", f.fix);
    }
    out += fmt::format("{}: {} error(s), {} warning(s), {} info; --fail-on {}: {}\n", o.file, counts[2], counts[1], counts[0],
                       o.fail_on, failed ? "FAIL" : "pass");
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  if (!read_error.empty()) {
    std::fflush(stdout);
    fmt::print(stderr, "ckpt: error: {}\n", read_error);
  }
  if (failed) return kExitFindings;
  return read_error.empty() ? kExitOk : kExitBadInput;
}

}  // namespace ckpt::cli
