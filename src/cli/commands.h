// One file per subcommand: an options struct, setup_x(CLI::App&) that binds flags to it, and
// run_x(const XOptions&) returning the exit code. Tests construct the options structs directly.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/summary.h"

namespace ckpt::cli {

// A command line that parses but makes no sense (unknown rule id): exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --limit NAME=VALUE, shared by the commands that read files.
struct LimitOptions {
  std::vector<std::string> limits;
  Limits resolve() const;  // throws UsageError
};
void add_limit_option(CLI::App* sub, LimitOptions& o);

struct SummaryOptions : LimitOptions {
  std::string file;
  int depth = 1;
  std::string format = "text";  // text | json | markdown
  bool json = false;            // --json, same as --format json
  std::string model;            // TorchScript architecture: sizes lazy entries, gives rows their types
  std::string strip_prefix, add_prefix;
  std::vector<std::string> example_inputs;  // SPECs: one forward with LibTorch (ckpt-torch)
  std::string example_input_file;           // torch.save'd tensor / tuple / dict of inputs
  std::string device = "cpu";
  bool wants_forward() const { return !example_inputs.empty() || !example_input_file.empty(); }
};

void setup_summary(CLI::App& app, SummaryOptions& o);
// Without a forward: ckpt. With --example-input: ckpt execs ckpt-torch, which runs it (cli/forward.cc).
int run_summary(const SummaryOptions& o);

// ckpt-torch only: the forward of FILE (a TorchScript archive), or of ARCH holding FILE's tensors.
ForwardReport run_summary_forward(const SummaryOptions& o, const Checkpoint& file, const Checkpoint* arch, const ModelReport* model);

struct CheckOptions : LimitOptions {
  std::string file;
  bool json = false;
  std::string fail_on = "error";  // info | warning | error | never
  std::vector<std::string> only;  // rule ids (comma-separated or repeated)
  std::vector<std::string> skip;
};

void setup_check(CLI::App& app, CheckOptions& o);
int run_check(const CheckOptions& o);



struct DiffCliOptions : LimitOptions {
  std::string a, b;
  bool values = false;
  double atol = 0.0, rtol = 0.0;
  bool json = false;
};

void setup_diff(CLI::App& app, DiffCliOptions& o);
int run_diff(const DiffCliOptions& o);

// `ckpt load` (src/cli/load_setup.cc: options, in both binaries; src/cli/load.cc: run, in ckpt-torch only).
struct LoadOptions : LimitOptions {
  std::string file;
  std::string device = "cpu";
  bool empty_init = false;
  std::string model;              // TorchScript architecture to load FILE into
  std::string strip_prefix, add_prefix;
  std::string dtype;              // convert floating tensors ("float16", "bfloat16", ...)
  bool json = false;
  bool checksum = false;          // CRC-32 per tensor in the report
  bool tensors = false;           // text: list every tensor, not only the ones worth a look
};

void setup_load(CLI::App& app, LoadOptions& o);
// ckpt-torch: does the load. ckpt: execs its sibling ckpt-torch with the same arguments.
int run_load(const LoadOptions& o);
[[noreturn]] void exec_torch_backend(int argc, char** argv, const char* what);

// Colour on a TTY only, never with NO_COLOR set (https://no-color.org).
bool use_color(int fd);

}  // namespace ckpt::cli
