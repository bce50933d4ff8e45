// ckpt: inspect PyTorch checkpoints without Python and without running anything they contain.
// Thin main: parse, dispatch to one run_x per subcommand, map errors to exit codes (the only exit).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <new>

#include "cli/commands.h"
#include "cli/precheck.h"
#include "core/error.h"

#ifndef CKPT_VERSION
#define CKPT_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
  CLI::App app{"ckpt: inspect PyTorch checkpoints (torch.save, Lightning .ckpt, TorchScript, safetensors) without Python\n"
               "and without executing anything the file contains.",
               "ckpt"};
  app.set_version_flag("-V,--version", "ckpt " CKPT_VERSION);
  app.require_subcommand(1);
  app.footer("Exit codes: 0 ok, 1 findings at or above --fail-on (load: incomplete, or keys do not fit --model), 2 usage error, 3 unreadable or unsupported input,\n"
             "4 the environment cannot do it. See man ckpt.");
  ckpt::cli::SummaryOptions summary;
  ckpt::cli::setup_summary(app, summary);
  ckpt::cli::CheckOptions check;
  ckpt::cli::setup_check(app, check);
  ckpt::cli::DiffCliOptions diff;
  ckpt::cli::setup_diff(app, diff);
  ckpt::cli::LoadOptions load;
  ckpt::cli::setup_load(app, load);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? ckpt::kExitOk : ckpt::kExitUsage;
  }
  try {
#ifdef CKPT_WITH_TORCH
    if (app.got_subcommand("summary")) {
      const int rc = ckpt::cli::run_summary(summary);
      std::fflush(stdout);
      std::_Exit(rc);
    }
#else
    if (app.got_subcommand("summary") && summary.wants_forward()) ckpt::cli::exec_torch_backend(argc, argv, "ckpt summary --example-input");
    if (app.got_subcommand("summary")) return ckpt::cli::run_summary(summary);
#endif
    if (app.got_subcommand("check")) return ckpt::cli::run_check(check);
    if (app.got_subcommand("diff")) return ckpt::cli::run_diff(diff);
#ifdef CKPT_WITH_TORCH
    if (app.got_subcommand("load")) {
      // LibTorch's static destructors and unmapping cost ~0.1 s at exit and do nothing a user needs.
      const int rc = ckpt::cli::run_load(load);
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(rc);
    }
#else
    if (app.got_subcommand("load")) return ckpt::cli::run_load_overlapped(argc, argv, load);  // LibTorch: ckpt-torch
#endif
  } catch (const ckpt::cli::UsageError& e) {
    fmt::print(stderr, "ckpt: error: {}\n", e.what());
    return ckpt::kExitUsage;
  } catch (const ckpt::InputError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "ckpt: error: {}\n", e.render());
    return ckpt::kExitBadInput;
  } catch (const ckpt::EnvironmentError& e) {
    fmt::print(stderr, "ckpt: error: {}\n", e.what());
    return ckpt::kExitEnvironment;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "ckpt: error: out of memory\n");
    return ckpt::kExitBadInput;
  }
#ifdef CKPT_WITH_TORCH
  catch (const std::exception& e) {  // LibTorch refused something (c10::Error): its first line
    std::string what = e.what();
    fmt::print(stderr, "ckpt: error: {}: LibTorch: {}\n", app.got_subcommand("summary") ? summary.file : load.file, what.substr(0, what.find('\n')));
    return ckpt::kExitBadInput;
  }
#endif
  return ckpt::kExitUsage;
}
