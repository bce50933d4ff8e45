// The command line's own words (see common.h): --help laid out as GNU tools lay it out, CLI11's parse
// errors reworded, values checked with ckpt's messages, and `--cli-spec` (what completions are made from).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/text.h"

namespace ckpt::cli {

namespace {

struct Choices {
  std::vector<std::string> values;
  bool strict = false;  // only these are accepted (one_of), else offered (suggest)
  bool nospace = false;
  std::string complete;  // "choices", "file", "none"; "" = decided from the option
};

std::map<const CLI::Option*, Choices>& registry() {
  static std::map<const CLI::Option*, Choices> r;
  return r;
}

// "a, b or c"
std::string listed(const std::vector<std::string>& v, const char* last = " or ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? last : ", ") + v[i];
  return out;
}

// Words of `text` laid out from column `indent` to `width`, the first line already at `indent`.
std::string wrap(const std::string& text, size_t indent, size_t width) {
  std::string out;
  size_t col = indent;
  std::istringstream words(text);
  std::string w;
  bool first = true;
  while (words >> w) {
    if (!first && col + 1 + w.size() > width) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
    } else if (!first) {
      out += ' ';
      ++col;
    }
    out += w;
    col += w.size();
    first = false;
  }
  return out;
}

constexpr size_t kWidth = 80, kColumn = 26;

bool is_flag(const CLI::Option* o) { return o->get_items_expected_max() == 0; }

std::string option_head(const CLI::Option* o) {
  std::string head;
  const auto& s = o->get_snames();
  const auto& l = o->get_lnames();
  head = s.empty() ? "    " : "-" + s.front() + (l.empty() ? "" : ", ");
  if (!l.empty()) head += "--" + l.front();
  if (!is_flag(o)) head += " " + o->get_type_name();
  return head;
}

std::string option_line(const std::string& head, const std::string& desc) {
  std::string line = "  " + head;
  if (line.size() + 2 > kColumn) {
    line += "\n" + std::string(kColumn, ' ');
  } else {
    line += std::string(kColumn - line.size(), ' ');
  }
  return line + wrap(desc, kColumn, kWidth) + "\n";
}

std::string option_desc(const CLI::Option* o) {
  std::string d = o->get_description();
  const std::string def = o->get_default_str();
  if (!def.empty() && d.find("default") == std::string::npos) d += fmt::format(" (default: {})", def);
  return d;
}

// GNU-style help: usage, description, operands, options, footer; no parser internals.
class Help : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    std::string out;
    const bool top = app->get_parent() == nullptr;
    const std::string name = top ? app->get_name() : "ckpt " + app->get_name();
    std::vector<const CLI::Option*> operands =
        app->get_options([](const CLI::Option* o) { return o->get_positional() && !o->nonpositional(); });
    std::string usage = "Usage: " + name + (top ? " [--version] [--help] COMMAND [ARGS]" : " [OPTIONS]");
    for (const CLI::Option* p : operands) usage += " " + p->get_type_name();
    out += usage + "\n";
    std::string desc = app->get_description();
    if (!desc.empty()) out += "\n" + wrap(desc, 0, kWidth) + "\n";
    if (top) {
      out += "\nCommands:\n";
      for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; }))
        out += option_line(sub->get_name(), sub->get_description());
    }
    if (!operands.empty()) {
      out += "\nArguments:\n";
      for (const CLI::Option* p : operands) out += option_line(p->get_type_name(), p->get_description());
    }
    out += "\nOptions:\n";
    for (const CLI::Option* o : app->get_options([](const CLI::Option* o) { return o->nonpositional(); })) {
      if (o->get_group().empty()) continue;  // hidden
      out += option_line(option_head(o), option_desc(o));
    }
    // The footer's lines are paragraphs, each wrapped.
    std::istringstream footer(app->get_footer());
    std::string para;
    bool first = true;
    while (std::getline(footer, para)) {
      out += (first ? "\n" : "") + wrap(para, 0, kWidth) + "\n";
      first = false;
    }
    return out;
  }
};

CLI::Option* registered(CLI::Option* opt, Choices c) {
  registry()[opt] = std::move(c);
  return opt;
}

bool parse_i64(const std::string& s, long long& v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  v = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end && *end == '\0';
}

}  // namespace

CLI::Option* one_of(CLI::Option* opt, const std::vector<std::string>& values) {
  opt->check(CLI::Validator(
      [values](std::string& v) -> std::string {
        if (std::find(values.begin(), values.end(), v) != values.end()) return "";
        return fmt::format("'{}' is not one of {}", visible(v), listed(values));
      },
      ""));
  return registered(opt, {values, true, false, "choices"});
}

CLI::Option* suggest(CLI::Option* opt, const std::vector<std::string>& values, bool nospace) {
  return registered(opt, {values, false, nospace, "choices"});
}

CLI::Option* complete_none(CLI::Option* opt) { return registered(opt, {{}, false, false, "none"}); }

CLI::Option* integer_in(CLI::Option* opt, long long lo, long long hi) {
  opt->check(CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        long long x = 0;
        if (!parse_i64(v, x)) return fmt::format("'{}' is not a whole number", visible(v));
        if (x < lo || x > hi) return fmt::format("{} is out of range ({} to {})", x, lo, hi);
        return "";
      },
      ""));
  return opt;
}

CLI::Option* non_negative_number(CLI::Option* opt) {
  opt->check(CLI::Validator(
      [](std::string& v) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double x = v.empty() ? NAN : std::strtod(v.c_str(), &end);
        if (v.empty() || errno != 0 || !end || *end != '\0' || !std::isfinite(x))
          return fmt::format("'{}' is not a number", visible(v));
        if (x < 0) return fmt::format("{} is negative", visible(v));
        return "";
      },
      ""));
  return opt;
}

CLI::Option* byte_size(CLI::Option* opt) {
  opt->transform(CLI::Validator(
      [](std::string& v) -> std::string {
        std::string digits = v, unit;
        while (!digits.empty() && std::isalpha(static_cast<unsigned char>(digits.back()))) {
          unit.insert(unit.begin(), static_cast<char>(std::tolower(static_cast<unsigned char>(digits.back()))));
          digits.pop_back();
        }
        long long n = 0;
        static const std::pair<const char*, int> kUnits[] = {{"", 0},   {"b", 0},   {"k", 10},  {"kb", 10}, {"kib", 10},
                                                              {"m", 20},  {"mb", 20}, {"mib", 20}, {"g", 30}, {"gb", 30},
                                                              {"gib", 30}, {"t", 40}, {"tb", 40}, {"tib", 40}};
        int shift = -1;
        for (const auto& [u, s] : kUnits)
          if (unit == u) shift = s;
        if (!parse_i64(digits, n) || n < 0 || shift < 0 || (shift && n > (LLONG_MAX >> shift)))
          return fmt::format("'{}' is not a size (a number of bytes with k, M, G or T: 64k, 256M, 1G)", visible(v));
        v = std::to_string(static_cast<unsigned long long>(n) << shift);
        return "";
      },
      ""));
  return opt;
}

void use_help(CLI::App& app) {
  auto help = std::make_shared<Help>();
  app.formatter(help);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) sub->formatter(help);
}

std::string usage_message(const CLI::ParseError& e) {
  const std::string what = e.what();
  auto is = [&](auto* type) { return dynamic_cast<decltype(type)>(&e) != nullptr; };  // get_name() may be the app's
  std::smatch m;
  if (is(static_cast<const CLI::RequiredError*>(nullptr))) {
    if (what.find("subcommand") != std::string::npos) return "no command given (commands: summary, check, diff, load)";
    if (std::regex_match(what, m, std::regex(R"((\S+) is required)"))) return "missing operand " + m[1].str();
  }
  if (is(static_cast<const CLI::ExtrasError*>(nullptr)) &&
      std::regex_match(what, m, std::regex(R"(The following arguments? (?:was|were) not expected: (.*))")))
    return "unexpected operand(s): " + m[1].str();
  if (is(static_cast<const CLI::ArgumentMismatch*>(nullptr)) && std::regex_match(what, m, std::regex(R"((\S+): \d+ required (\S+) missing)")))
    return fmt::format("{} needs a value ({})", m[1].str(), m[2].str());
  if (is(static_cast<const CLI::ConversionError*>(nullptr)) && std::regex_match(what, m, std::regex(R"(Could not convert: (\S+) = (.*))")))
    return fmt::format("{}: '{}' is not a valid value", m[1].str(), m[2].str());
  if (is(static_cast<const CLI::ExcludesError*>(nullptr)) && std::regex_match(what, m, std::regex(R"((\S+) excludes (\S+))")))
    return fmt::format("{} and {} cannot be used together", m[1].str(), m[2].str());
  return what;
}

std::string cli_spec(const CLI::App& app) {
  using nlohmann::ordered_json;
  ordered_json commands = ordered_json::array();
  auto describe = [](const CLI::App& a, const std::string& name) {
    ordered_json cmd;
    cmd["name"] = name;
    std::string d = a.get_description();
    std::replace(d.begin(), d.end(), '\n', ' ');
    cmd["description"] = d;
    ordered_json operands = ordered_json::array(), options = ordered_json::array();
    for (const CLI::Option* o : a.get_options()) {
      if (o->get_positional() && !o->nonpositional()) {
        operands.push_back({{"name", o->get_type_name()}, {"complete", "file"}});
        continue;
      }
      if (o->get_group().empty()) continue;
      const auto it = registry().find(o);
      const Choices c = it == registry().end() ? Choices{} : it->second;
      ordered_json opt;
      opt["long"] = o->get_lnames();
      opt["short"] = o->get_snames();
      opt["value"] = is_flag(o) ? ordered_json(nullptr) : ordered_json(o->get_type_name());
      opt["choices"] = c.values;
      opt["nospace"] = c.nospace;
      // Unmarked values: file names for the options that take files (ARCH, F) or globs, nothing for the rest.
      const std::string t = o->get_type_name();
      const bool files = t == "ARCH" || t == "F" || t == "FILE" || t == "GLOB";
      opt["complete"] = is_flag(o) ? "none" : !c.complete.empty() ? c.complete : files ? "file" : "none";
      opt["repeatable"] = o->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll || is_flag(o);
      opt["description"] = o->get_description();
      options.push_back(std::move(opt));
    }
    cmd["operands"] = std::move(operands);
    cmd["options"] = std::move(options);
    return cmd;
  };
  commands.push_back(describe(app, ""));
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    commands.push_back(describe(*sub, sub->get_name()));
  ordered_json doc;
  doc["schema"] = "ckpt.cli/1";
  doc["commands"] = std::move(commands);
  return doc.dump(1) + "\n";
}

}  // namespace ckpt::cli
