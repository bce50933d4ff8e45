// `ckpt check FILE...`: compile, load and security findings with an exit code for CI (the worst file's), as
// text, ckpt.check/1 JSON (JSON Lines with several inputs) or one SARIF 2.1.0 log for them all. A file
// that could not be checked is reported as such, never as "pass".
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/inputs.h"
#include "core/findings.h"
#include "core/integrity.h"
#include "core/mapped_file.h"
#include "core/reader.h"
#include "core/render_report.h"
#include "core/summary.h"
#include "core/text.h"
#include "core/vfs.h"

#ifndef CKPT_VERSION
#define CKPT_VERSION "0.0.0"
#endif
#ifndef CKPT_HOMEPAGE_URL
#define CKPT_HOMEPAGE_URL ""
#endif

namespace ckpt::cli {

namespace {

std::vector<std::string> split_ids(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::stringstream ss(a);
    std::string id;
    while (std::getline(ss, id, ','))
      if (!id.empty()) out.push_back(id);
  }
  return out;
}

int rank(Severity s) { return s == Severity::Info ? 0 : s == Severity::Warning ? 1 : 2; }

}  // namespace

// --fail-on LEVEL (CLI11 checked the name): the lowest severity that fails; nullopt for never.
std::optional<Severity> fail_on_severity(const std::string& level) {
  for (const Severity s : {Severity::Info, Severity::Warning, Severity::Error})
    if (level == to_string(s)) return s;
  return std::nullopt;
}

std::string fail_on_name(std::optional<Severity> fail_at) { return fail_at ? to_string(*fail_at) : "never"; }

void setup_check(CLI::App& app, CheckOptions& o) {
  auto* sub = app.add_subcommand("check", "Compile, load and security findings, with an exit code for CI");
  add_input_options(sub, o.inputs, "Checkpoint to check", true);
  one_of(sub->add_option("-f,--format", o.format,
                         "Output: text, json (one document, schema ckpt.check/1: for one FILE that is one "
                         "checkpoint), jsonl (JSON Lines, one document per input, whatever the operands) or sarif "
                         "(SARIF 2.1.0, one log for all inputs)")
             ->type_name("FORMAT"),
         {"text", "json", "jsonl", "sarif"});
  sub->add_flag("--json", o.json, "Same as --format json");
  sub->add_flag("--jsonl", o.jsonl, "Same as --format jsonl");
  one_of(sub->add_option_function<std::string>(
                "--fail-on", [&o](const std::string& level) { o.fail_at = fail_on_severity(level); },
                "Exit 1 when a finding reaches this severity; a file that was not (fully) scanned exits 3 "
                "unless this is never")
             ->default_str(fail_on_name(o.fail_at))
             ->type_name("LEVEL"),
         {"info", "warning", "error", "never"});
  std::string ids;
  for (const RuleInfo& r : rule_catalogue()) ids += std::string(ids.empty() ? "" : ", ") + r.id;
  std::vector<std::string> id_list;
  for (const RuleInfo& r : rule_catalogue()) id_list.push_back(r.id);
  auto* only = sub->add_option("--only", o.only, "Report only these rule ids (comma-separated or repeated): " + ids)
      ->type_name("IDS")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)  // repeatable, as the help says
      ->allow_extra_args(false);
  auto* skip = sub->add_option("--skip", o.skip, "Do not report these rule ids (comma-separated or repeated)")
      ->type_name("IDS")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  sub->add_flag("--verify", o.verify,
                "Read every zip member and compare it with the CRC-32 the archive records (as python -m zipfile -t; "
                "torch.load does not): finding zip-crc-mismatch. Reads the whole file");
  sub->add_flag("--values", o.values,
                "Read every tensor and count NaN / Inf in each: finding nonfinite-values with the counts per tensor. "
                "Reads the whole file");
  suggest(only, id_list);
  suggest(skip, id_list);
  add_color_option(sub);
  add_limit_option(sub, o);
}

int run_check(const CheckOptions& o) {
  refuse_format_conflicts(o.format, !o.format.empty(), o.json, o.jsonl);
  const OutputFormat format = output_format(o.format, o.json, o.jsonl);
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

  const Limits lim = o.resolve();
  const Expanded in = expand_inputs(o.inputs);
  (void)json_shape(format, in.several);  // --json with several results: a usage error naming --jsonl
  const std::optional<Severity> fail_at = o.fail_at;
  const int threshold = fail_at ? rank(*fail_at) : 99;
  const bool never = !fail_at;
  std::vector<CheckReport> reports(in.items.size());  // SARIF: one log of them all, written at the end
  RunPlan plan;
  plan.jobs = resolve_jobs(o.inputs.jobs, in.items.size());
  plan.task_sees_walk_errors = true;  // reported as an unscanned file, like any read error
  const int rc = run_inputs(in.items, plan, [&](size_t index, const InputItem& item, std::FILE* out, std::FILE* err) {
    CheckResult result;
    std::vector<std::string> verified;
    bool environment = false;
    try {
      item.raise();
      if (vfs::kind(item.name) == vfs::Kind::Missing) (void)vfs::open(item.name);  // "cannot open"
      result = run_checks(item.name, lim);
      if ((o.verify || o.values) && result.read_error.empty() && result.checkpoint) {
        // The checks that read every byte: on the checkpoint the checks above read, one pass each.
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency() / plan.jobs);
        const Checkpoint& ck = *result.checkpoint;
        if (o.verify) {
          ZipVerify v = verify_zip(ck, lim, threads);
          for (Finding& f : v.findings) result.findings.push_back(std::move(f));
          if (v.members == 0)
            verified.push_back(fmt::format("no checksum to compare: a {} file records no CRC-32 (zip archives do)",
                                           to_string(ck.format)));
          else if (v.findings.empty())
            verified.push_back(fmt::format("CRC-32 of {} zip members ({}) match{}", v.members, human_bytes(v.bytes),
                                           v.unrecorded ? fmt::format("; {} record none (saved with compute_crc32=False)",
                                                                      v.unrecorded)
                                                        : ""));
        }
        if (o.values) {
          std::vector<Finding> nf = nonfinite_findings(ck, threads);
          if (nf.empty()) verified.push_back(fmt::format("{} tensors read, no NaN or Inf", ck.tensors.size()));
          for (Finding& f : nf) result.findings.push_back(std::move(f));
        }
      }
    } catch (const InputError& e) {  // nothing could be read: reported as unscanned below, exit 3
      result = CheckResult{};
      result.read_error = e.render();
    } catch (const EnvironmentError& e) {  // stdin could not be spooled: unscanned too, exit 4
      result = CheckResult{};
      result.read_error = e.what();
      environment = true;
    }
    CheckReport& rep = reports[index];
    rep.file = vfs::display(item.name);
    rep.format = result.format;
    rep.fail_on = fail_on_name(fail_at);
    rep.never = never;
    rep.read_error = result.read_error;
    rep.scanned = result.scanned;
    rep.verified = std::move(verified);
    for (Finding& f : result.findings) {
      if (!only.empty() && std::find(only.begin(), only.end(), f.id) == only.end()) continue;
      if (std::find(skip.begin(), skip.end(), f.id) != skip.end()) continue;
      rep.findings.push_back(std::move(f));
    }
    std::stable_sort(rep.findings.begin(), rep.findings.end(),
                     [](const Finding& a, const Finding& b) { return rank(a.severity) > rank(b.severity); });
    for (const Finding& f : rep.findings) {
      ++rep.counts[rank(f.severity)];
      rep.failed |= rank(f.severity) >= threshold;
    }

    if (format == OutputFormat::Json || format == OutputFormat::JsonLines) {
      const std::string doc = check_json_text(rep);
      const std::string text = format == OutputFormat::JsonLines ? json_line(doc) : doc;
      write_output(out, text);
    } else if (format == OutputFormat::Text) {
      const std::string text = render_check_text(rep, use_color(STDOUT_FILENO));
      write_output(out, text);
    }
    if (!rep.read_error.empty()) {
      flush_output(out);
      fmt::print(err, "ckpt: error: {}\n", visible(rep.read_error));  // rendered escaped already; visible twice is a no-op
    }
    // Findings that reach --fail-on outrank a partial read (what was read is already bad); a file not
    // (fully) scanned is exit 3 at every level but never, which reports and exits 0.
    if (environment && !never) return static_cast<int>(kExitEnvironment);
    if (rep.failed) return static_cast<int>(kExitFindings);
    return rep.read_error.empty() || never ? static_cast<int>(kExitOk) : static_cast<int>(kExitBadInput);
  });
  if (format == OutputFormat::Sarif) {
    const std::string out = in.several ? check_sarif_text(reports, CKPT_VERSION, CKPT_HOMEPAGE_URL)
                                       : check_sarif_text(reports.front(), CKPT_VERSION, CKPT_HOMEPAGE_URL);
    write_output(stdout, out);
  } else if (format == OutputFormat::Text && in.several) {
    size_t by[4] = {0, 0, 0, 0};  // pass, fail, incomplete, unscanned: CheckStatus's order
    for (const CheckReport& r : reports) ++by[static_cast<size_t>(r.status())];
    fmt::print("{} file(s): {} ok, {} failed, {} incomplete, {} not scanned; --fail-on {}: exit {}\n", reports.size(), by[0],
               by[1], by[2], by[3], fail_on_name(fail_at), rc);
  }
  return rc;
}

}  // namespace ckpt::cli
