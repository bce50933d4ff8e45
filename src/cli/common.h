// What the subcommands share: --limit, colour, usage errors (one prefix, suggestions for typos) and
// handing a command over to ckpt-torch (in both binaries).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/inputs.h"
#include "core/device.h"
#include "core/error.h"

namespace ckpt::cli {

// A checkpoint (or anything as large) the process exits right after using: let go, never destroyed, since
// freeing a million small objects one by one costs more than the whole read (clang's -disable-free). In a
// sanitizer build `p` keeps it and frees it at the end of its scope, so that LeakSanitizer reports real
// leaks only. Returns the object; `p` is empty afterwards but in sanitizer builds.
template <typename T>
T* keep_until_exit(std::unique_ptr<T>& p) {
  T* kept = p.get();
#if !defined(__SANITIZE_ADDRESS__) && !defined(CKPT_ASAN)
  (void)p.release();
#endif
  return kept;
}

// --device parsed once at the edge: a UsageError naming the option for a bad one.
DeviceSpec parse_device_option(const std::string& text);

// --limit NAME=VALUE, shared by the commands that read files.
struct LimitOptions {
  std::vector<std::string> limits;
  Limits resolve() const;  // throws UsageError
};
// The input sources installed once, before the command reads anything, with the --limit values that
// concern them: the remote schemes (http(s)://, hf://, s3://) and stdin (`-`, inputs.h's stdin_file); a bad
// --limit is a UsageError here.
void install_inputs(const LimitOptions& o);
void add_limit_option(CLI::App* sub, LimitOptions& o);

// Option values in ckpt's words (help.cc): a value from a list (also offered by the completions), values
// offered but not enforced, no completion at all, whole numbers in a range, numbers >= 0, byte sizes
// with k/M/G/T (x1024, rewritten to bytes). Each returns `opt`.
CLI::Option* one_of(CLI::Option* opt, const std::vector<std::string>& values);
CLI::Option* suggest(CLI::Option* opt, const std::vector<std::string>& values, bool nospace = false);
CLI::Option* complete_none(CLI::Option* opt);
CLI::Option* integer_in(CLI::Option* opt, long long lo, long long hi);
CLI::Option* non_negative_number(CLI::Option* opt);
CLI::Option* byte_size(CLI::Option* opt);
// --help in GNU's layout (usage, operands, options wrapped at 80 columns, defaults) for `app` and its commands.
void use_help(CLI::App& app);
// A CLI11 parse error in ckpt's words ("missing operand FILE", "--depth needs a value (N)").
std::string usage_message(const CLI::ParseError& e);
// `ckpt --cli-spec`: every command's operands and options, their value kinds and choices, as JSON
// (schema ckpt.cli/1): what completions/generate.py writes the shell completions from.
std::string cli_spec(const CLI::App& app);

// --color=WHEN (auto, always, never) on every command; one setting per process.
void add_color_option(CLI::App* sub);

// What --format and --json / --jsonl ask for, decided once.
enum class OutputFormat : uint8_t { Text, Json, JsonLines, Markdown, Sarif };
// A --format value by name ("" = not given: text).
OutputFormat format_named(const std::string& format);
// What is asked for: JSON with --json, JSON Lines with --jsonl (a conflicting --format was refused
// before), else --format.
OutputFormat output_format(const std::string& format, bool json, bool jsonl = false);
// --json, --jsonl and --format together: a UsageError where they ask for different outputs.
void refuse_format_conflicts(const std::string& format, bool format_given, bool json, bool jsonl);
// How a JSON result is printed: one document (--json: only where the operands give one result: a
// UsageError otherwise, naming --jsonl), one line per result (--jsonl), or not JSON.
enum class JsonShape : uint8_t { None, Document, Lines };
JsonShape json_shape(OutputFormat f, bool several);

// --format text|json and its alias --json, for the commands whose outputs are text or one JSON schema
// (diff, load). --json with --format text is refused: the two ask for different outputs.
struct TextOrJsonOptions {
  bool json = false, jsonl = false;
  std::string format;  // "", text, json or jsonl
  bool wants_json() const {
    const OutputFormat f = output_format(format, json, jsonl);
    return f == OutputFormat::Json || f == OutputFormat::JsonLines;
  }
};
// `lines`: the command may have several results, and takes --jsonl / --format jsonl.
void add_text_or_json_options(CLI::App* sub, TextOrJsonOptions& o, const std::string& schema, bool lines);
void validate_text_or_json(const TextOrJsonOptions& o);  // throws UsageError
// FILE... operands, --include / --exclude and (with `jobs`) -j/--jobs: the many-inputs options (inputs.h).
// `what` describes one FILE in the help.
void add_input_options(CLI::App* sub, InputOptions& o, const std::string& what, bool jobs);

// Colour: --color=always / never when given; else never with NO_COLOR set (https://no-color.org), always
// with FORCE_COLOR or CLICOLOR_FORCE set (and not 0), else on a terminal only.
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
