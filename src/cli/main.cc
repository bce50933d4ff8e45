// ckpt: inspect PyTorch checkpoints without Python and without running anything they contain.
// Thin main: parse, dispatch through the command table, map errors to exit codes (the only exit).
#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <span>
#include <system_error>


#include "cli/commands.h"
#include "cli/precheck.h"
#include "core/device.h"
#include "core/error.h"
#include "core/text.h"
#include "core/vfs.h"

#ifndef CKPT_VERSION
#define CKPT_VERSION "0.0.0"
#endif

namespace ckpt::cli {
#ifdef CKPT_WITH_TORCH
extern const bool kLinksLibTorch = true;
#else
extern const bool kLinksLibTorch = false;
#endif
}  // namespace ckpt::cli

namespace {

// A command that needs LibTorch runs in ckpt-torch; ckpt hands its command line over (to_torch), after
// refusing what it can without LibTorch and without changing which error comes first (load's --device).
struct Command {
  const char* name;
  const ckpt::cli::LimitOptions* limits;  // the command's --limit
  // Refuses conflicting flags, and flags that would do nothing, before any file is read (UsageError).
  std::function<void(const CLI::App&)> validate;
  std::function<bool()> needs_torch;  // null: never (ckpt-torch then exits normally, not with _Exit)
  std::function<int()> run;  // in ckpt, only when !needs_torch()
  std::function<int()> to_torch;  // ckpt: exec ckpt-torch, or fork and exec it (load, precheck.h)
};

// Everything for stdout has gone through stdio: a write that failed on the way (a full disk, a closed
// pipe, a file over its size limit) is exit 4 with one line on stderr, never a silent truncated report.
int checked(int rc) {
  ckpt::cli::flush_output(stdout);
  // Remote files whose server gives no validator: a change between their requests went unseen.
  for (const std::string& name : ckpt::vfs::unverified())
    fmt::print(stderr, "ckpt: warning: {}: the server sends neither a strong ETag nor Last-Modified: a change to the file "
               "between its requests could not be detected\n", ckpt::visible(name));
  if (!std::ferror(stdout)) return rc;
  const int err = ckpt::output_errno() ? ckpt::output_errno() : EIO;
  std::fprintf(stderr, "ckpt: error: cannot write to standard output: %s\n", std::strerror(err));
  return ckpt::kExitEnvironment;
}

// The options of every command, bound to their flags.
struct AllOptions {
  ckpt::cli::SummaryOptions summary;
  ckpt::cli::CheckOptions check;
  ckpt::cli::DiffCliOptions diff;
  ckpt::cli::LoadOptions load;
};

void setup_app(CLI::App& app, AllOptions& o, const std::string& version) {
  using namespace ckpt::cli;
  app.set_version_flag("-V,--version", version, "Print the version and exit");
  app.require_subcommand(1);
  // GNU's convention: an option given twice takes its last value (repeatable ones say so and accumulate).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.footer(
      "Run 'ckpt COMMAND --help' for a command's options, 'man ckpt' for the manual.\n"
      "Exit status: 0 ok, 1 findings or differences, 2 usage error, 3 unreadable or "
      "unsupported input, 4 the environment cannot do it.");
  setup_summary(app, o.summary);
  setup_check(app, o.check);
  setup_diff(app, o.diff);
  setup_load(app, o.load);
  static const std::pair<const char*, const char*> kFooters[] = {
      {"summary", "Exit status: 0 ok, 2 usage error, 3 unreadable or unsupported input, 4 the environment cannot do "
                  "it; with several inputs the worst of them.\nSee ckpt-summary(1)."},
      {"check", "Exit status: 0 no finding at --fail-on, 1 a finding at or above it, 2 usage error, 3 a file not "
                "(fully) scanned, 4 the environment cannot do it; with several inputs the worst of them.\n"
                "See ckpt-check(1)."},
      {"diff", "Exit status: 0 same (or within tolerance), 1 different, 2 usage error, 3 unreadable or unsupported "
               "input, 4 the environment cannot do it.\nSee ckpt-diff(1)."},
      {"load", "Exit status: 0 loaded, 1 incomplete (tensors skipped, keys not fitting --model, nothing to load, "
               "NaN/Inf with --fail-on nonfinite), 2 usage error, 3 unreadable or unsupported input, 4 the "
               "environment cannot do it; with several inputs the worst of them.\nSee ckpt-load(1)."},
  };
  for (const auto& [name, text] : kFooters) app.get_subcommand(name)->footer(text);
  use_help(app);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    sub->set_version_flag("-V,--version", version, "Print the version and exit");  // preparse answers it first
}

// Runs the command the line names; each of ckpt's errors is its exit code and one line on stderr.
int run_command(const CLI::App& app, std::span<const Command> commands, const AllOptions& o) {
  try {
    for (const Command& c : commands) {
      if (!app.got_subcommand(c.name)) continue;
      c.validate(*app.get_subcommand(c.name));
      ckpt::cli::install_inputs(*c.limits);
#ifdef CKPT_WITH_TORCH
      if (c.needs_torch) {
        // LibTorch's static destructors and unmapping cost ~0.1 s at exit and do nothing a user needs.
        const int rc = checked(c.run());
        std::fflush(stderr);
        std::_Exit(rc);
      }
#else
      if (c.needs_torch && c.needs_torch()) return c.to_torch();
#endif
      return checked(c.run());
    }
  } catch (const std::system_error& e) {  // fmt::print found stdout unwritable mid-report (or the OS refused)
    std::fprintf(stderr, "ckpt: error: %s: %s\n", std::ferror(stdout) ? "cannot write to standard output" : e.what(),
                 e.code().message().c_str());
    return ckpt::kExitEnvironment;
  } catch (const ckpt::UsageError& e) {  // every message through visible(): it may quote a name or a server's text
    fmt::print(stderr, "ckpt: error: {}\n", ckpt::visible(e.what()));
    return ckpt::kExitUsage;
  } catch (const ckpt::InputError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "ckpt: error: {}\n", e.render());
    return ckpt::kExitBadInput;
  } catch (const ckpt::EnvironmentError& e) {  // a URL's Link header or an error body may be in it
    fmt::print(stderr, "ckpt: error: {}\n", ckpt::visible(e.what()));
    return ckpt::kExitEnvironment;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "ckpt: error: out of memory\n");
    return ckpt::kExitBadInput;
  }
#ifdef CKPT_WITH_TORCH
  // After the ckpt errors above, which are std::exceptions too.
  catch (const std::exception& e) {  // LibTorch refused something (c10::Error): its first line
    std::string what = e.what();
    fmt::print(stderr, "ckpt: error: {}: LibTorch: {}\n",
               ckpt::visible((app.got_subcommand("summary") ? o.summary.inputs : o.load.inputs).files.front()),
               ckpt::visible(what.substr(0, what.find('\n'))));  // it may quote the archive's code or names
    return ckpt::kExitBadInput;
  }
#else
  catch (const std::exception& e) {  // a defect (std::logic_error, ...): an error line and exit 3, never an abort
    const std::string what = e.what();
    fmt::print(stderr, "ckpt: error: {}\n", ckpt::visible(what.substr(0, what.find('\n'))));
    (void)o;
    return ckpt::kExitBadInput;
  }
#endif
  return ckpt::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe is a write error (EPIPE) that ckpt reports, not a silent death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  using namespace ckpt::cli;
  CLI::App app{
      "ckpt: inspect PyTorch checkpoints (torch.save, Lightning .ckpt, TorchScript, torch.export .pt2, safetensors,\n"
      "sharded, DCP) without Python and without executing anything the file contains.",
      "ckpt"};
  const std::string version = "ckpt " CKPT_VERSION;
  AllOptions o;
  setup_app(app, o, version);
  SummaryOptions& summary = o.summary;
  LoadOptions& load = o.load;
  const Command commands[] = {
    {"summary", &summary, [&](const CLI::App& sub) { validate_summary(sub, summary); }, [&] { return summary.wants_forward(); },
     [&] { return run_summary(summary); },
     // No --device check here: ckpt-torch reports a file it cannot read, or one without code, first.
     [&]() -> int { exec_torch_backend(argc, argv, "ckpt summary --example-input"); }},
    {"check", &o.check, [](const CLI::App&) {}, nullptr, [&] { return run_check(o.check); }, nullptr},
    {"diff", &o.diff, [&](const CLI::App& sub) { validate_diff(sub, o.diff); }, nullptr, [&] { return run_diff(o.diff); }, nullptr},
#ifdef CKPT_WITH_TORCH
    {"load", &load, [&](const CLI::App& sub) { validate_load(sub, load); }, [] { return true; }, [&] { return run_load(load); },
#else
    {"load", &load, [&](const CLI::App& sub) { validate_load(sub, load); }, [] { return true; }, nullptr,
#endif
     [&] { return run_load_overlapped(argc, argv, load); }},  // --device refused by validate_load, before any fork
  };
  std::string command = "ckpt";  // the one named, for the --help hint
  // --version, and --help below: their text is output like any report's (a write that fails is exit 4).
  if (const auto rc = preparse(app, argc, argv, version, command)) return checked(*rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help: on stdout (std::cout writes through stdio's stdout)
      errno = 0;
      const int rc = app.exit(e);
      if (std::ferror(stdout)) ckpt::note_output_errno(errno);  // a write of a long help failed: its errno
      return checked(rc);
    }
    print_usage_error(usage_message(e), command);
    return ckpt::kExitUsage;
  }
  return run_command(app, commands, o);
}
