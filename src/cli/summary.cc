// `ckpt summary FILE...`: what each checkpoint holds (layer table, tensors, totals, warnings) as text,
// Markdown or ckpt.summary/1 JSON (JSON Lines with several inputs).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/inputs.h"
#include "core/findings.h"
#include "core/model.h"
#include "core/reader.h"
#include "core/render_summary.h"
#include "core/summary.h"
#include "core/text.h"
#include "core/vfs.h"

namespace ckpt::cli {

void setup_summary(CLI::App& app, SummaryOptions& o) {
  auto* sub = app.add_subcommand("summary", "Show what a checkpoint holds: layer table, totals, warnings");
  add_input_options(sub, o.inputs,
                    "Checkpoint: torch.save zip or legacy file, Lightning .ckpt, TorchScript archive (.pt, .ptl), torch.export "
                    "archive (.pt2), safetensors, bare pickle, a sharded checkpoint (directory or *.index.json), a Hugging Face "
                    "model folder (config.json beside the weights) or a DCP directory",
                    true);
  suggest(integer_in(sub->add_option("-d,--depth", o.depth,
                                     "Module rows up to this depth (-1: all, 0: none), like Lightning's max_depth; text "
                                     "and markdown only (JSON lists every module)")
                         ->default_val(1)
                         ->type_name("N"),
                     -1, 1 << 20),
          {"-1", "0", "1", "2", "3"});
  one_of(sub->add_option("-f,--format", o.format,
                         "Output: text, json (one document, schema ckpt.summary/1: for one FILE that is one "
                         "checkpoint), jsonl (JSON Lines, one document per input, whatever the operands) or markdown")
             ->default_val("text")
             ->type_name("FORMAT"),
         {"text", "json", "jsonl", "markdown"});
  sub->add_flag("--json", o.json, "Same as --format json");
  sub->add_flag("--jsonl", o.jsonl, "Same as --format jsonl");
  sub->add_flag("--tensors", o.tensors,
                "Text / Markdown: a table of every tensor entry (name, dtype, shape, kind, state, size, trainable, tied to); "
                "JSON always lists them");
  sub->add_flag("-v,--verbose", o.verbose,
                "Text / Markdown: the container's internals too (a torch.save zip's records: .format_version, "
                ".storage_alignment, .data/serialization_id, byteorder); JSON always has them");
  sub->add_flag("--exact", o.exact,
                "Text / Markdown: exact counts (3,002) instead of Lightning's rounded ones (3.0 K), then the counts per dtype "
                "and the parameters without embeddings; JSON always has them");
  complete_none(sub->add_option("--match", o.match,
                  "List only the tensors whose name matches this glob (fnmatch: * ? [..], * also matches '.'); repeatable, "
                  "implies --tensors; not with JSON")
      ->type_name("GLOB")
      ->type_size(1)
      ->expected(1)  // one GLOB per occurrence, repeatable: a following FILE is never taken for one
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false));  // tensor names, not files: nothing to complete
  sub->add_flag("--memory", o.memory,
                "Memory as accelerate estimate-memory computes it (per dtype: largest layer, total, Adam training peak), and "
                "for a decoder with a config.json its KV cache");
  auto* dtype = sub->add_option("--dtype", o.memory_options.dtypes,
                  "With --memory: only these dtypes (float32, float16, bfloat16, int8, int4; repeatable; default: the file's "
                  "own and all five); the first floating one sets the KV cache's")
      ->type_name("D")
      ->type_size(1)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  one_of(dtype, memory_dtypes());
  complete_none(integer_in(
      sub->add_option("--batch", o.memory_options.batch, "With --memory: sequences in the KV cache")->default_val(1)->type_name("B"),
      1, int64_t{1} << 40));
  complete_none(integer_in(sub->add_option("--seq-len", o.memory_options.seq_len,
                                           "With --memory: tokens per sequence in the KV cache (default: the config's "
                                           "max_position_embeddings)")
                               ->type_name("L"),
                           1, int64_t{1} << 40));
  sub->add_option(
         "--model", o.model,
         "TorchScript archive of FILE's architecture: sizes FILE's lazy (uninitialized) entries, names row types, and runs "
         "the --example-input forward with FILE's tensors")
      ->type_name("ARCH");
  complete_none(sub->add_option("--strip-prefix", o.strip_prefix,
                                "With --model: remove this prefix from FILE's keys (default: guessed when keys do not "
                                "match)")
                    ->type_name("P"));
  complete_none(
      sub->add_option("--add-prefix", o.add_prefix, "With --model: add this prefix to FILE's keys (after --strip-prefix)")
          ->type_name("P"));
  auto* ex = sub->add_option(
                    "--example-input", o.example_inputs,
                    "Run one forward (eval, no grad; LibTorch via ckpt-torch) on a seeded input of this shape, one per "
                    "positional argument: DIMS[:DTYPE[:LOW..HIGH]], e.g. 2x3x224x224, 1x128:int64:0..50257. Fills FLOPs, "
                    "In sizes, Out sizes")
                 ->type_name("SPEC")
                 ->type_size(1)
                 ->expected(1, 1 << 20)  // SPEC...: greedy as before (FILEs go before it, or repeat the flag per SPEC)
                 ->allow_extra_args(false);
  complete_none(ex);
  sub->add_option(
         "--example-input-file", o.example_input_file,
         "Like --example-input, with the inputs a torch.save'd tensor, tuple/list (positional) or dict (keywords) of tensors")
      ->type_name("F")
      ->excludes(ex);
  suggest(sub->add_option("--device", o.device, "With an example input: cpu, cuda, cuda:N or meta (shapes only, no weight read)")
              ->default_val("cpu")
              ->type_name("DEVICE"),
          {"cpu", "cuda", "cuda:0", "meta"});
  add_color_option(sub);
  add_limit_option(sub, o);
}

void validate_summary(const CLI::App& sub, const SummaryOptions& o) {
  // --json is --format json: with another --format it would silently win, so the pair is refused.
  refuse_format_conflicts(o.format, sub.count("--format") > 0, o.json, o.jsonl);
  if (!o.memory && (sub.count("--dtype") || sub.count("--batch") || sub.count("--seq-len")))
    throw UsageError("--dtype / --batch / --seq-len need --memory");
  if (o.memory_options.batch < 1 || o.memory_options.batch > (int64_t{1} << 40))
    throw UsageError(fmt::format("--batch {}: must be 1 to 2^40", o.memory_options.batch));
  if (o.memory_options.seq_len && (*o.memory_options.seq_len < 1 || *o.memory_options.seq_len > (int64_t{1} << 40)))
    throw UsageError(fmt::format("--seq-len {}: must be 1 to 2^40", *o.memory_options.seq_len));
  if (o.model.empty() && (!o.strip_prefix.empty() || !o.add_prefix.empty()))
    throw UsageError("--strip-prefix / --add-prefix need --model");
  // JSON lists every tensor whatever --tensors says; a filter it would ignore is refused.
  const OutputFormat f = output_format(o.format, o.json, o.jsonl);
  if (!o.match.empty() && (f == OutputFormat::Json || f == OutputFormat::JsonLines))
    throw UsageError("--match filters the text and Markdown tensor table; --json always lists every tensor (filter with jq)");
}

namespace {

// The security findings of a file that could not be read, on `err`, one line each.
void warn_security(const std::string& name, const Limits& lim, std::FILE* err) {
  try {
    for (const Finding& f : security_findings(name, nullptr, lim, ScanScope::Pickles))
      if (f.id == "dangerous-global" || f.id == "unknown-global")  // a malformed pickle is the error itself
        fmt::print(err, "ckpt: {}[{}]: {}\n", to_string(f.severity), f.id, visible(f.message));
  } catch (const InputError&) {}  // the container itself is broken: the read error says so
}

// ARCH of --model: a TorchScript archive (UsageError otherwise).
std::unique_ptr<Checkpoint> read_arch(const SummaryOptions& o, const Limits& lim) {
  auto arch = std::make_unique<Checkpoint>(read_checkpoint(o.model, lim));
  if (arch->format != Format::TorchScript)
    throw UsageError(
        fmt::format("--model {}: expected a TorchScript archive (torch.jit.save), got {}", o.model, to_string(arch->format)));
  return arch;
}

// One input's summary. With several inputs `arch` was read once before them, JSON is one line and each
// checkpoint is freed once printed; with one, it is kept until exit (keep_until_exit).
int summarize_one(const SummaryOptions& o, OutputFormat format, const Limits& lim, const std::string& name,
                  const Checkpoint* shared_arch, bool several, std::FILE* out, std::FILE* err) {
  std::unique_ptr<Checkpoint> owned;
  const vfs::TransferScope transfer;  // what a remote input costs, counted apart from the other inputs'
  try {
    owned = std::make_unique<Checkpoint>(read_checkpoint(name, lim));
  } catch (const InputError&) {
    // A file summary cannot read may still hold pickles Python would run: name them before the error.
    warn_security(name, lim, err);
    throw;
  }
  Checkpoint& ck = several ? *owned : *keep_until_exit(owned);
  const Checkpoint* arch = shared_arch;
  std::unique_ptr<Checkpoint> own_arch;
  std::optional<ModelReport> model;
  if (!o.model.empty()) {
    if (!arch) {
      own_arch = read_arch(o, lim);
      arch = several ? own_arch.get() : keep_until_exit(own_arch);
    }
    model = apply_model(ck, *arch, o.strip_prefix, o.add_prefix);
  }
  if (o.wants_forward() && !arch && ck.format != Format::TorchScript)
    throw UsageError(
        fmt::format("{} is a {} without code: give --model ARCH (a TorchScript archive of its architecture) to run a forward",
                    name, to_string(ck.format)));
  Summary s = summarize(ck);
  s.operand = vfs::display(name);
  s.model = model;
  if (o.memory) s.memory = estimate_memory(ck, s.same_tensor, o.memory_options);
#ifdef CKPT_WITH_TORCH
  if (o.wants_forward()) s.forward = run_summary_forward(o, ck, arch, model ? &*model : nullptr);
#endif
  // The same findings `ckpt check` reports: the rules, then the security scan of the file's pickles.
  s.findings = findings(ck, s);
  for (Finding& x : security_findings(name, &ck, lim, ScanScope::Pickles)) s.findings.push_back(std::move(x));
  if (vfs::is_url(name) || transfer.stats().requests) {
    // One input: what the process fetched before its scope (the listing that told a folder from a file) is its too.
    const vfs::Transfer& t = transfer.stats();
    const vfs::Transfer* before = several ? nullptr : &vfs::process_transfer();
    s.fetched = Summary::Fetched{vfs::display(name), t.requests + (before ? before->requests.load() : 0), t.bytes + (before ? before->bytes.load() : 0),
                                 t.files + (before ? before->files.load() : 0), t.unverified + (before ? before->unverified.load() : 0)};
  }
  if (format == OutputFormat::JsonLines) {
    const std::string line = json_line(summary_json_text(s));
    write_output(out, line);
  } else if (format == OutputFormat::Json) {
    write_summary_json(s, out);
  } else {
    RenderOptions r;
    r.depth = o.depth;
    r.color = use_color(STDOUT_FILENO);
    r.tensors = o.tensors;
    r.exact = o.exact;
    r.match = o.match;
    r.verbose = o.verbose;
    (format == OutputFormat::Markdown ? write_summary_markdown : write_summary_text)(s, r, out);
  }
  if (s.forward && !s.forward->error.empty()) {
    flush_output(out);
    const ForwardReport& f = *s.forward;
    throw InputError(name, fmt::format("forward failed in {} after {} module call(s) returned (sizes so far on stdout): {}",
                                       f.error_module.empty() ? "the root module" : "module '" + f.error_module + "'",
                                       f.completed.size(), f.error));
  }
  return kExitOk;
}

}  // namespace

int run_summary(const SummaryOptions& o) {
  const OutputFormat format = output_format(o.format, o.json, o.jsonl);
  if (o.device != "cpu" && !o.wants_forward()) throw UsageError("--device needs --example-input or --example-input-file");
  const Limits lim = o.resolve();
  const Expanded in = expand_inputs(o.inputs);
  const JsonShape shape = json_shape(format, in.several);
  // With several inputs ARCH is read once, first (a wrong ARCH is a usage error before any output).
  std::unique_ptr<Checkpoint> own_arch = in.several && !o.model.empty() ? read_arch(o, lim) : nullptr;
  const Checkpoint* arch = keep_until_exit(own_arch);
  RunPlan plan;
  // A forward runs LibTorch, one at a time.
  plan.jobs = o.wants_forward() ? 1 : resolve_jobs(o.inputs.jobs, in.items.size());
  if (shape == JsonShape::Lines) plan.error_records_for = "summary";
  if (in.several && shape == JsonShape::None)
    plan.header = [&](size_t index, const InputItem& item, std::FILE* out) {
      // head(1)'s separator; a Markdown heading in Markdown.
      if (format == OutputFormat::Markdown) fmt::print(out, "{}## {}\n\n", index ? "\n" : "", visible(vfs::display(item.name)));
      else fmt::print(out, "{}==> {} <==\n", index ? "\n" : "", visible(vfs::display(item.name)));
    };
  const int rc = run_inputs(in.items, plan, [&](size_t, const InputItem& item, std::FILE* out, std::FILE* err) {
    return summarize_one(o, format, lim, item.name, arch, in.several, out, err);
  });
  return rc;
}

}  // namespace ckpt::cli
