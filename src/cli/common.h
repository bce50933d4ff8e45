// What the subcommands share: --limit, colour, and handing a command over to ckpt-torch (in both binaries).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/error.h"

namespace ckpt::cli {

// --limit NAME=VALUE, shared by the commands that read files.
struct LimitOptions {
  std::vector<std::string> limits;
  Limits resolve() const;  // throws UsageError
};
void add_limit_option(CLI::App* sub, LimitOptions& o);

// Colour on a TTY only, never with NO_COLOR set (https://no-color.org).
bool use_color(int fd);

// ckpt: execs its sibling ckpt-torch (or $CKPT_TORCH) with the same arguments; `what` names the
// command in the EnvironmentError thrown when it cannot.
[[noreturn]] void exec_torch_backend(int argc, char** argv, const char* what);

}  // namespace ckpt::cli
