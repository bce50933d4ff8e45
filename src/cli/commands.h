// The subcommands, one file each: an options struct, setup_x(CLI::App&) that binds flags to it, and
// run_x(const XOptions&) returning the exit code; main.cc dispatches through its table of them. load
// and summary's forward run in ckpt-torch only (load.cc, forward.cc); load's options are in both
// binaries (load_setup.cc). Tests run the binaries (tests/cli), not these functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "core/device.h"
#include "core/diff.h"
#include "core/error.h"
#include "core/severity.h"
#include "core/summary.h"

namespace ckpt::cli {

struct SummaryOptions : LimitOptions {
  InputOptions inputs;
  int depth = 1;
  std::string format = "text";  // text | json | jsonl | markdown
  bool json = false, jsonl = false;  // --json, --jsonl: same as --format json / jsonl
  std::string model;  // TorchScript architecture: sizes lazy entries, gives rows their types
  std::string strip_prefix, add_prefix;
  std::vector<std::string> example_inputs;  // SPECs: one forward with LibTorch (ckpt-torch)
  std::string example_input_file;  // torch.save'd tensor / tuple / dict of inputs
  std::string device = "cpu";
  bool tensors = false;  // --tensors: the tensor table in text / Markdown
  bool exact = false;  // --exact: exact counts, per-dtype counts, the count without embeddings
  bool verbose = false;  // --verbose: the container's internals on the Format: line
  std::vector<std::string> match;  // --match GLOB: only these tensors in it (implies --tensors)
  bool memory = false;  // --memory: accelerate's totals, Adam's peak, the KV cache (core/memory.h)
  MemoryOptions memory_options;  // --batch, --seq-len, --dtype
  bool wants_forward() const { return !example_inputs.empty() || !example_input_file.empty(); }
};

void setup_summary(CLI::App& app, SummaryOptions& o);
// Conflicting flags, and flags that would do nothing, refused (UsageError) before any file is read; `sub`
// tells which flags were given. The same for validate_diff and validate_load.
void validate_summary(const CLI::App& sub, const SummaryOptions& o);
// Without a forward: ckpt. With --example-input: ckpt execs ckpt-torch, which runs it (cli/forward.cc).
int run_summary(const SummaryOptions& o);

// ckpt-torch only: the forward of FILE (a TorchScript archive), or of ARCH holding FILE's tensors.
ForwardReport run_summary_forward(const SummaryOptions& o, const Checkpoint& file, const Checkpoint* arch,
                                  const ModelReport* model);

struct CheckOptions : LimitOptions {
  InputOptions inputs;
  bool json = false, jsonl = false;  // the aliases of --format json / jsonl
  std::string format;  // text | json | jsonl | sarif; "" = text
  std::optional<Severity> fail_at = Severity::Error;  // --fail-on: the lowest severity that fails; nullopt: never
  bool verify = false;  // --verify: every zip member's CRC-32 (core/integrity.h)
  bool values = false;  // --values: NaN / Inf per tensor
  std::vector<std::string> only;  // rule ids (comma-separated or repeated)
  std::vector<std::string> skip;
};

void setup_check(CLI::App& app, CheckOptions& o);
int run_check(const CheckOptions& o);

struct DiffCliOptions : LimitOptions, TextOrJsonOptions {
  std::string a, b;
  DiffOptions diff;  // what the flags set of core/diff.h's options; run_diff adds colour and progress
};

void setup_diff(CLI::App& app, DiffCliOptions& o);
void validate_diff(const CLI::App& sub, const DiffCliOptions& o);
int run_diff(const DiffCliOptions& o);

// `ckpt load` (src/cli/load_setup.cc: options, in both binaries; src/cli/load.cc: run, in ckpt-torch only).
struct LoadOptions : LimitOptions, TextOrJsonOptions {
  InputOptions inputs;  // read one after another (each is materialized on the device)
  std::string device = "cpu";  // --device as given (the messages name it)
  DeviceSpec device_spec;  // --device parsed, once, by validate_load
  bool empty_init = false;
  std::string model;  // TorchScript architecture to load FILE into
  std::string strip_prefix, add_prefix;
  std::string dtype;  // convert floating tensors ("float16", "bfloat16", ...)
  bool checksum = false;  // CRC-32 per tensor in the report
  bool tensors = false;  // text: list every tensor, not only the ones worth a look
  bool fail_on_nonfinite = false;  // --fail-on nonfinite: exit 1 when a loaded tensor holds NaN / Inf
  // The streaming load (cuda; cpu with --stream): the ring and chunk sizes, 0 = the defaults (core/stream.h)
  bool stream = false;
  uint64_t ring_bytes = 0, chunk_bytes = 0;
};

void setup_load(CLI::App& app, LoadOptions& o);
void validate_load(const CLI::App& sub, LoadOptions& o);  // also parses --device into o.device_spec
// ckpt-torch only: does the load. ckpt hands the command line over with run_load_overlapped (precheck.h).
int run_load(const LoadOptions& o);

}  // namespace ckpt::cli
