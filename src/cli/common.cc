// What the subcommands share (see common.h): --limit, colour, usage errors and suggestions, ckpt-torch.
#include "cli/common.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/text.h"
#include "core/vfs.h"
#ifdef CKPT_REMOTE
#include "remote/remote.h"
#endif

namespace ckpt::cli {

DeviceSpec parse_device_option(const std::string& text) {
  try {
    return parse_device_spec(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--device '{}': {}", text, e.what()));
  }
}

Limits LimitOptions::resolve() const {
  Limits lim;
  for (const std::string& kv : limits) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw UsageError(fmt::format("--limit {}: expected NAME=VALUE", kv));
    const std::string err = set_limit(lim, kv.substr(0, eq), kv.substr(eq + 1));
    if (!err.empty()) throw UsageError("--limit: " + err);
  }
  return lim;
}

void install_inputs(const LimitOptions& o) {
  const Limits limits = o.resolve();
#ifdef CKPT_REMOTE
  remote::install(limits);  // URLs read with these time-outs and retries
#endif
  vfs::install_stdin([limits] { return stdin_file(limits); });  // `-`: spooled once, up to stdin-bytes
}

void add_limit_option(CLI::App* sub, LimitOptions& o) {
  std::vector<std::string> names;  // offered by the completions: "pickle-depth=", ...
  const std::string all = describe_limits();
  for (size_t at = 0; at < all.size();) {
    const size_t end = std::min(all.find(", ", at), all.size());
    names.push_back(all.substr(at, all.find('=', at) + 1 - at));
    at = end + 2;
  }
  auto* opt = sub->add_option("--limit", o.limits,
                  "Raise or lower a resource limit, NAME=VALUE (k/M/G suffixes); defaults: " + describe_limits())
      ->type_name("NAME=VALUE")
      ->type_size(1)
      ->expected(1)  // one value per --limit, repeatable: a following FILE is never taken for one
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  suggest(opt, names, true);
}

void add_text_or_json_options(CLI::App* sub, TextOrJsonOptions& o, const std::string& schema, bool lines) {
  std::vector<std::string> formats = {"text", "json"};
  if (lines) formats.push_back("jsonl");
  one_of(sub->add_option("-f,--format", o.format,
                         lines ? "Output: text (default), json (one document, schema " + schema +
                                     ") or jsonl (JSON Lines: one document per line, one per input)"
                               : "Output: text (default) or json (schema " + schema + ")")
             ->type_name("FORMAT"),
         formats);
  sub->add_flag("--json", o.json,
                lines ? "Same as --format json: one JSON document, for one FILE that is one checkpoint"
                      : "Same as --format json");
  if (lines) sub->add_flag("--jsonl", o.jsonl, "Same as --format jsonl: JSON Lines, whatever the operands");
}

OutputFormat format_named(const std::string& format) {
  static const std::pair<const char*, OutputFormat> kNames[] = {{"json", OutputFormat::Json},
                                                                {"jsonl", OutputFormat::JsonLines},
                                                                {"markdown", OutputFormat::Markdown},
                                                                {"sarif", OutputFormat::Sarif}};
  for (const auto& [name, f] : kNames)
    if (format == name) return f;
  return OutputFormat::Text;  // "text", or not given
}

OutputFormat output_format(const std::string& format, bool json, bool jsonl) {
  return jsonl ? OutputFormat::JsonLines : json ? OutputFormat::Json : format_named(format);
}

void refuse_format_conflicts(const std::string& format, bool format_given, bool json, bool jsonl) {
  if (json && jsonl) throw UsageError("--json conflicts with --jsonl (one document, or one line per result)");
  const OutputFormat f = format_named(format);
  if (json && format_given && f != OutputFormat::Json)
    throw UsageError(fmt::format("--json conflicts with --format {} (--json is --format json)", format));
  if (jsonl && format_given && f != OutputFormat::JsonLines)
    throw UsageError(fmt::format("--jsonl conflicts with --format {} (--jsonl is --format jsonl)", format));
}

void validate_text_or_json(const TextOrJsonOptions& o) {
  refuse_format_conflicts(o.format, !o.format.empty(), o.json, o.jsonl);
}

JsonShape json_shape(OutputFormat f, bool several) {
  if (f == OutputFormat::JsonLines) return JsonShape::Lines;
  if (f != OutputFormat::Json) return JsonShape::None;
  if (several)
    throw UsageError(
        "--json prints one JSON document, and these operands give several results (several FILEs, or a directory "
        "walked): use --jsonl for JSON Lines, one document per line");
  return JsonShape::Document;
}

void add_input_options(CLI::App* sub, InputOptions& o, const std::string& what, bool jobs) {
  sub->add_option("FILE", o.files,
                  what +
                      "; several may be given, a directory is walked (recursively, sorted; DCP and sharded directories are "
                      "read as one checkpoint), - reads stdin, and a URL is read with range requests: https://..., "
                      "hf://ORG/REPO[@REVISION][/PATH], s3://BUCKET/KEY or s3://BUCKET/PREFIX/")
      ->required()
      ->type_name("FILE...");
  sub->get_option("FILE")->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  std::string exts;
  for (const char* const* e = kCheckpointExtensions; *e; ++e) exts += std::string(exts.empty() ? "" : " ") + *e;
  sub->add_option("--include", o.include,
                  "In directories, read only files whose path relative to the directory matches this glob (fnmatch; a "
                  "glob without / also matches the file name); repeatable; default: " +
                      exts + " and DCP / sharded directories")
      ->type_name("GLOB")
      ->type_size(1)
      ->expected(1)  // one GLOB per occurrence, repeatable: a following FILE is never taken for one
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  sub->add_option("--exclude", o.exclude,
                  "In directories, skip files and subdirectories matching this glob (as --include); repeatable. FILEs "
                  "named on the command line are read whatever the globs say")
      ->type_name("GLOB")
      ->type_size(1)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  if (jobs)
    complete_none(integer_in(
        sub->add_option("-j,--jobs", o.jobs, "Read this many files at once (default: one per core); results stay in input order")
            ->type_name("N"),
        1, 1024));
}

namespace {
std::string color_when = "auto";  // --color: one command per process

bool env_set(const char* name, bool zero_is_off) {
  const char* v = std::getenv(name);
  return v && *v && !(zero_is_off && std::strcmp(v, "0") == 0);
}
}  // namespace

void add_color_option(CLI::App* sub) {
  one_of(sub->add_option("--color", color_when,
                         "Colour the output: auto (on a terminal, unless NO_COLOR is set; FORCE_COLOR or "
                         "CLICOLOR_FORCE force it), always or never; --color alone is always")
             ->type_name("WHEN"),
         {"auto", "always", "never"});
}

bool use_color(int fd) {
  if (color_when == "always") return true;
  if (color_when == "never") return false;
  if (env_set("NO_COLOR", false)) return false;
  if (env_set("FORCE_COLOR", true) || env_set("CLICOLOR_FORCE", true)) return true;
  return isatty(fd);
}

void print_usage_error(const std::string& message, const std::string& help_for) {
  std::string m = message;
  while (!m.empty() && m.back() == '\n') m.pop_back();
  fmt::print(stderr, "ckpt: error: {}\n", visible(m));
  if (!help_for.empty()) fmt::print(stderr, "Try '{} --help' for more information.\n", help_for);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows suffice for adjacent transpositions.
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  // Dashes do not count towards the length: `--jsn` is a 3-letter word.
  const size_t letters = word.size() - std::min(word.find_first_not_of('-'), word.size());
  const size_t limit = letters >= 6 ? 2 : 1;
  std::optional<std::string> best;
  size_t best_d = limit + 1;
  bool tie = false;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best = c;
      best_d = d;
      tie = false;
    } else if (d == best_d) {
      tie = true;
    }
  }
  if (best && !tie) return best;
  // `--val` for `--values`: a prefix of exactly one candidate, at least 3 letters long.
  std::optional<std::string> prefixed;
  if (letters >= 3)
    for (const std::string& c : candidates)
      if (c.size() > word.size() && c.compare(0, word.size(), word) == 0) {
        if (prefixed) return std::nullopt;
        prefixed = c;
      }
  return prefixed;
}

namespace {

bool is_help(const std::string& a) { return a == "-h" || a == "--help"; }
bool is_version(const std::string& a) { return a == "-V" || a == "--version"; }

// `--name` of `--name=value`, or `-x` of `-xVALUE`; "" for what is not an option (`-`, `-1`, `--`).
std::string option_name(const std::string& a) {
  if (a.size() > 2 && a[0] == '-' && a[1] == '-') return a.substr(0, a.find('='));
  if (a.size() > 1 && a[0] == '-' && std::isalpha(static_cast<unsigned char>(a[1]))) return a.substr(0, 2);
  return "";
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) out.push_back("--" + n);
    for (const std::string& n : o->get_snames()) out.push_back("-" + n);
  }
  out.push_back("--version");
  out.push_back("-V");
  return out;
}

}  // namespace

std::optional<int> preparse(CLI::App& app, int argc, char** argv, const std::string& version, std::string& command) {
  // --color alone is --color=always (GNU's optional argument: a following word is never its WHEN).
  static char always[] = "--color=always";
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i)
    if (std::strcmp(argv[i], "--color") == 0) argv[i] = always;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--cli-spec") {  // hidden: completions/generate.py reads it
    fmt::print("{}", cli_spec(app));
    return 0;
  }
  // --version / -V anywhere before `--` (and before any --help, which answers first) prints the version.
  for (const std::string& a : args) {
    if (a == "--" || is_help(a)) break;
    if (is_version(a)) {
      fmt::print("{}\n", version);
      return 0;
    }
  }
  const CLI::App* sub = nullptr;
  for (const std::string& a : args) {
    if (a == "--") break;
    if (is_help(a)) return std::nullopt;  // CLI11 prints the help of what came before it
    const std::string name = option_name(a);
    const CLI::App& scope = sub ? *sub : app;
    if (!name.empty()) {
      if (scope.get_option_no_throw(name) != nullptr) continue;
      const std::string where = sub ? "ckpt " + sub->get_name() : "ckpt";
      const auto hint = closest_match(name, option_names(scope));
      std::string msg = fmt::format("unknown option '{}'{}", name, sub ? " for 'ckpt " + sub->get_name() + "'" : "");
      if (hint) msg += fmt::format("; did you mean '{}'?", *hint);
      print_usage_error(msg, where);
      return kExitUsage;
    }
    if (sub || a.empty() || a[0] == '-') continue;  // a value, a file, or `-` (stdin)
    std::vector<std::string> names;
    for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) {
      names.push_back(s->get_name());
      if (s->get_name() == a) sub = s;
    }
    if (sub) {
      command = "ckpt " + sub->get_name();
      continue;
    }
    const auto hint = closest_match(a, names);
    std::string msg = fmt::format("unknown command '{}'", a);
    if (hint) {
      msg += fmt::format("; did you mean '{}'?", *hint);
    } else {
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      msg += " (commands: " + all + ")";
    }
    print_usage_error(msg, "ckpt");
    return kExitUsage;
  }
  return std::nullopt;
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
  throw EnvironmentError(
      fmt::format("{} needs ckpt-torch, the sibling binary built with LibTorch: cannot run {}: {} "
                  "(build it with LibTorch installed, or set CKPT_TORCH)",
                  what, path, std::strerror(errno)));
}

}  // namespace ckpt::cli
