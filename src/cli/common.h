// What the subcommands share: --limit, colour, usage errors (one prefix, suggestions for typos) and
// handing a command over to ckpt-torch (in both binaries).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/inputs.h"
#include "core/error.h"

namespace ckpt::cli {

// --limit NAME=VALUE, shared by the commands that read files.
struct LimitOptions {
  std::vector<std::string> limits;
  Limits resolve() const;  // throws UsageError
};
void add_limit_option(CLI::App* sub, LimitOptions& o);

// What --format (checked by CLI11 against the command's list) and --json ask for, decided once.
enum class OutputFormat : uint8_t { Text, Json, Markdown, Sarif };
// A --format value by name ("" = not given: text).
OutputFormat format_named(const std::string& format);
// What is asked for: JSON with --json (a conflicting --format was refused before), else --format.
OutputFormat output_format(const std::string& format, bool json);

// --format text|json and its alias --json, for the commands whose outputs are text or one JSON schema
// (diff, load). --json with --format text is refused: the two ask for different outputs.
struct TextOrJsonOptions {
  bool json = false;
  std::string format;  // "", text or json
  bool wants_json() const { return output_format(format, json) == OutputFormat::Json; }
};
void add_text_or_json_options(CLI::App* sub, TextOrJsonOptions& o, const std::string& schema);
void validate_text_or_json(const TextOrJsonOptions& o);  // throws UsageError
// FILE... operands, --include / --exclude and (with `jobs`) -j/--jobs: the many-inputs options (inputs.h).
// `what` describes one FILE in the help.
void add_input_options(CLI::App* sub, InputOptions& o, const std::string& what, bool jobs);

// Colour on a TTY only, never with NO_COLOR set (https://no-color.org).
bool use_color(int fd);

// Usage errors: every one starts `ckpt: error:`, like ckpt's other errors, so that scripts and users
// find one shape. `help_for` ("ckpt summary") adds a second line pointing at its --help.
void print_usage_error(const std::string& message, const std::string& help_for);

// Optimal string alignment distance (Levenshtein plus adjacent transpositions: `sumary`, `--jsno`).
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate a mistyped `word` most likely meant: within edit distance 1 (2 for words of 6+
// characters), or the only candidate `word` is a prefix of; nullopt when nothing is that close.
std::optional<std::string> closest_match(const std::string& word, const std::vector<std::string>& candidates);

// What CLI11 would get wrong or say unhelpfully, checked on argv before it parses: an unknown command or
// long/short option (with a suggestion), and --version / -V after a command. Returns the exit code when
// the command line is already answered; `command` is set to the subcommand named (for hints).
std::optional<int> preparse(CLI::App& app, int argc, char** argv, const std::string& version, std::string& command);

// ckpt: execs its sibling ckpt-torch (or $CKPT_TORCH) with the same arguments; `what` names the
// command in the EnvironmentError thrown when it cannot.
[[noreturn]] void exec_torch_backend(int argc, char** argv, const char* what);

}  // namespace ckpt::cli
