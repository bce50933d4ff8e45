// `ckpt load` options. Both binaries parse them (so `ckpt load --help` and usage errors need no LibTorch);
// ckpt then hands the command line to ckpt-torch, the sibling built with LibTorch (precheck.h).
#include <fmt/format.h>

#include "cli/commands.h"
#include "core/device.h"
#include "core/stream.h"

namespace ckpt::cli {

void setup_load(CLI::App& app, LoadOptions& o) {
  auto* sub = app.add_subcommand(
      "load",
      "Materialize a checkpoint on meta, CPU or CUDA (LibTorch, via ckpt-torch): time, bandwidth, memory, NaN/Inf, key matching");
  add_input_options(sub, o.inputs,
                    "Checkpoint (any format summary reads); several are loaded one after another, not at once (each is "
                    "materialized on the device)",
                    false);
  suggest(sub->add_option("--device", o.device,
                          "meta (no tensor byte read), cpu (zero-copy where aligned, every byte checked), cuda or cuda:N")
              ->default_val("cpu")
              ->type_name("DEVICE"),
          {"cpu", "cuda", "cuda:0", "meta"});
  sub->add_flag("--empty-init", o.empty_init,
                "With --model: build the architecture on meta without reading its own weights; only FILE's bytes fill it");
  sub->add_option("--model", o.model, "TorchScript archive whose state_dict FILE must fit (strict key matching)")
      ->type_name("ARCH");
  sub->add_option("--strip-prefix", o.strip_prefix, "Remove this prefix from FILE's keys that start with it (e.g. _orig_mod.)")
      ->type_name("P");
  sub->add_option("--add-prefix", o.add_prefix, "Add this prefix to every FILE key (after --strip-prefix)")->type_name("P");
  suggest(sub->add_option("--dtype", o.dtype, "Convert floating tensors to this dtype (float32, float16, bfloat16, float64)")
              ->type_name("D"),
          {"float32", "float16", "bfloat16", "float64"});
  add_text_or_json_options(sub, o, "ckpt.load/1", true);
  sub->add_flag("--checksum", o.checksum,
                "With --json: CRC-32 of every tensor's values (zlib.crc32 of t.contiguous() bytes) in the report");
  sub->add_flag("--tensors", o.tensors,
                "Text output: list every tensor, not only skipped ones and ones holding NaN/Inf (JSON lists all)");
  sub->add_flag("--stream", o.stream,
                "cpu: load through the streaming ring into fresh allocations, as cuda always does (the CUDA "
                "load's CPU twin; NaN/Inf counted by LibTorch)");
  byte_size(sub->add_option("--ring", o.ring_bytes,
                            "cuda, cpu --stream: the staging ring in all, two chunks per reader thread by default "
                            "(k, M, G: x1024)")
                ->type_name("SIZE"));
  byte_size(sub->add_option("--chunk", o.chunk_bytes,
                            "cuda, cpu --stream: one staging buffer (one read, one copy), 4M by default, at least 64k")
                ->type_name("SIZE"));
  one_of(sub->add_option_function<std::string>(
                "--fail-on", [&o](const std::string&) { o.fail_on_nonfinite = true; },  // its one value, checked
                "nonfinite: exit 1 when a loaded tensor holds NaN or Inf (the table lists each with its "
                "counts); cpu and cuda, which read every value")
             ->type_name("WHAT"),
         {"nonfinite"});
  add_color_option(sub);
  add_limit_option(sub, o);
}

void validate_load(const CLI::App& sub, LoadOptions& o) {
  validate_text_or_json(o);
  // Each of these would be accepted and do nothing, which reads as if it had worked.
  if (o.empty_init && o.model.empty())
    throw UsageError("--empty-init needs --model (it skips the architecture's own weights; without --model there are none)");
  if (o.model.empty() && (!o.strip_prefix.empty() || !o.add_prefix.empty()))
    throw UsageError("--strip-prefix / --add-prefix need --model");
  if (o.checksum && !o.wants_json()) throw UsageError("--checksum needs --json (the CRC-32s are in the JSON report only)");
  if (o.tensors && o.wants_json()) throw UsageError("--tensors is for the text output; the JSON report lists every tensor");
  // Accepted and ignored elsewhere would read as if they had worked.
  o.device_spec = parse_device_option(o.device);
  const DeviceSpec::Kind kind = o.device_spec.kind;
  if (o.stream && kind != DeviceSpec::Kind::Cpu)
    throw UsageError("--stream is for --device cpu (cuda always streams; meta reads no byte)");
  if (kind != DeviceSpec::Kind::Cuda && !o.stream)
    for (const char* opt : {"--ring", "--chunk"})
      if (sub.count(opt)) throw UsageError(fmt::format("{} is for --device cuda or --stream (the streaming load)", opt));
  if (sub.count("--chunk") && o.chunk_bytes < (64u << 10)) throw UsageError("--chunk: at least 64k");
  if (o.fail_on_nonfinite && kind == DeviceSpec::Kind::Meta)
    throw UsageError("--fail-on nonfinite needs --device cpu or cuda (meta reads no value)");
  if (sub.count("--ring") && o.ring_bytes < ring_shape(RingOptions{o.chunk_bytes, 0, 0}).chunk)
    throw UsageError("--ring: at least one --chunk (4M by default)");
}

}  // namespace ckpt::cli
