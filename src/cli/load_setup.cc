// `ckpt load` options. Both binaries parse them (so `ckpt load --help` and usage errors need no LibTorch);
// ckpt then execs ckpt-torch, the sibling built with LibTorch, with the same arguments.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cli/commands.h"

namespace ckpt::cli {

void setup_load(CLI::App& app, LoadOptions& o) {
  auto* sub = app.add_subcommand(
      "load", "Materialize a checkpoint on meta, CPU or CUDA (LibTorch, via ckpt-torch): time, bandwidth, memory, NaN/Inf, key matching");
  sub->add_option("file", o.file, "Checkpoint (any format summary reads)")->required()->type_name("FILE");
  sub->add_option("--device", o.device, "meta (no tensor byte read), cpu (zero-copy where aligned, every byte checked), cuda or cuda:N")
      ->default_val("cpu");
  sub->add_flag("--empty-init", o.empty_init,
                "With --model: build the architecture on meta without reading its own weights; only FILE's bytes fill it");
  sub->add_option("--model", o.model, "TorchScript archive whose state_dict FILE must fit (strict key matching)")->type_name("ARCH");
  sub->add_option("--strip-prefix", o.strip_prefix, "Remove this prefix from FILE's keys that start with it (e.g. _orig_mod.)")
      ->type_name("P");
  sub->add_option("--add-prefix", o.add_prefix, "Add this prefix to every FILE key (after --strip-prefix)")->type_name("P");
  sub->add_option("--dtype", o.dtype, "Convert floating tensors to this dtype (float32, float16, bfloat16, float64)")->type_name("D");
  sub->add_flag("--json", o.json, "JSON output (schema ckpt.load/1)");
  sub->add_flag("--checksum", o.checksum, "CRC-32 of every tensor's values (zlib.crc32 of t.contiguous() bytes) in the report");
  sub->add_flag("--tensors", o.tensors, "Text output: list every tensor, not only skipped ones and ones holding NaN/Inf");
  add_limit_option(sub, o);
}

void exec_torch_backend(int argc, char** argv, const char* what) {
  std::string path;
  if (const char* env = std::getenv("CKPT_TORCH"); env && *env) {
    path = env;
  } else {
    char self[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
      self[n] = '\0';
      path = self;
      path = path.substr(0, path.rfind('/') + 1) + "ckpt-torch";
    } else {
      path = "ckpt-torch";
    }
  }
  std::string arg0 = path;
  argv[0] = arg0.data();
  (void)argc;
  ::execv(path.c_str(), argv);
  throw EnvironmentError(fmt::format("{} needs ckpt-torch, the sibling binary built with LibTorch: cannot run {}: {} "
                                     "(build it with LibTorch installed, or set CKPT_TORCH)",
                                     what, path, std::strerror(errno)));
}

}  // namespace ckpt::cli
