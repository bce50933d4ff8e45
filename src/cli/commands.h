// One file per subcommand: an options struct, setup_x(CLI::App&) that binds flags to it, and
// run_x(const XOptions&) returning the exit code. Tests construct the options structs directly.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace ckpt::cli {

struct SummaryOptions {
  std::string file;
  int depth = 1;
  std::string format = "text";  // text | json | markdown
  bool json = false;            // --json, same as --format json
};

void setup_summary(CLI::App& app, SummaryOptions& o);
int run_summary(const SummaryOptions& o);

// Colour on a TTY only, never with NO_COLOR set (https://no-color.org).
bool use_color(int fd);

}  // namespace ckpt::cli
