// `ckpt check --format sarif`: the check report as a SARIF 2.1.0 log for code-scanning dashboards.
// The shape follows the OASIS schema committed in tests/schemas/external/ (a test validates real runs
// against it); the facts are ckpt.check/1's, nothing here decides what counts.
#include <fmt/format.h>

#include <cctype>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/findings.h"
#include "core/render_report.h"
#include "core/text.h"
#include "core/vfs.h"

namespace ckpt {

namespace {

using J = nlohmann::ordered_json;

const char* sarif_level(Severity s) { return s == Severity::Error ? "error" : s == Severity::Warning ? "warning" : "note"; }

// A path as given, as a URI reference: RFC 3986 unreserved characters and '/' stay, the rest is
// percent-encoded (a space or '#' in a file name would otherwise change the reference's meaning).
// A remote input's URL (https://, hf://, s3://) is a URI already: kept, only bytes no URI may hold encoded.
std::string uri_reference(const std::string& path) {
  const bool url = vfs::is_url(path);
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') out += static_cast<char>(c);
    else if (url && c > 0x20 && c < 0x7f && !std::strchr("\"<>\\^`{|}", c)) out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

J rules_json() {
  J rules = J::array();
  for (const RuleInfo& r : rule_catalogue())
    rules.push_back(J{{"id", r.id},
                      {"shortDescription", {{"text", r.detects}}},
                      {"defaultConfiguration", {{"level", sarif_level(r.severity)}}},
                      {"help", {{"text", r.fix}}}});
  return rules;
}

size_t rule_index(const std::string& id) {
  const auto& cat = rule_catalogue();
  for (size_t k = 0; k < cat.size(); ++k)
    if (id == cat[k].id) return k;
  return cat.size();
}

// One SARIF location per `where`: the file checked (or the shard it is in) as the artifact; a byte
// offset is a region only when it is an offset in that file (no member), an archive member is a
// logical location; every field also goes to properties as ckpt.check/1 names it.
J location_json(const CheckReport& r, const std::string& where, const Location& l) {
  J phys{{"artifactLocation", {{"uri", uri_reference(l.file.empty() ? r.file : l.file)}}}};
  if (l.offset && l.member.empty()) phys["region"] = J{{"byteOffset", *l.offset}};
  J loc{{"physicalLocation", std::move(phys)}};
  if (!l.member.empty()) loc["logicalLocations"] = J::array({J{{"fullyQualifiedName", l.member}, {"kind", "resource"}}});
  loc["message"] = J{{"text", where}};
  J props{{"where", where}};
  if (!l.file.empty()) props["file"] = l.file;
  if (!l.member.empty()) props["member"] = l.member;
  if (l.offset) props["offset"] = *l.offset;
  if (!l.opcode.empty()) props["opcode"] = l.opcode;
  if (!l.global.empty()) props["global"] = l.global;
  if (l.line) props["line"] = *l.line;
  if (!l.function.empty()) props["function"] = l.function;
  if (!l.function.empty())  // TorchScript code: the function holding the line
    loc["logicalLocations"].push_back(J{{"fullyQualifiedName", l.function}, {"kind", "function"}});
  loc["properties"] = std::move(props);
  return loc;
}

}  // namespace

namespace {

void add_results(const CheckReport& r, J& results) {
  // A file not (fully) read is a result too: code-scanning views show results, not notifications.
  if (!r.read_error.empty()) {
    J res{{"ruleId", "unreadable"}};
    if (const size_t k = rule_index("unreadable"); k < rule_catalogue().size()) res["ruleIndex"] = k;
    res["level"] = "error";
    res["message"] =
        J{{"text", fmt::format("{}: {}", r.scanned ? "not fully scanned" : "NOT SCANNED", r.read_error)}};
    res["locations"] = J::array({J{{"physicalLocation", {{"artifactLocation", {{"uri", uri_reference(r.file)}}}}}}});
    res["properties"] = J{{"fix", rule_catalogue()[rule_index("unreadable")].fix}};
    results.push_back(std::move(res));
  }
  for (const Finding& f : r.findings) {
    J res{{"ruleId", f.id}};
    if (const size_t k = rule_index(f.id); k < rule_catalogue().size()) res["ruleIndex"] = k;
    res["level"] = sarif_level(f.severity);
    res["message"] = J{{"text", f.message}};
    J locs = J::array();
    for (size_t k = 0; k < f.where.size(); ++k)
      locs.push_back(location_json(r, f.where[k], k < f.locations.size() ? f.locations[k] : Location{}));
    if (f.where.empty()) locs.push_back(J{{"physicalLocation", {{"artifactLocation", {{"uri", uri_reference(r.file)}}}}}});
    res["locations"] = std::move(locs);
    res["properties"] = J{{"fix", f.fix}};
    if (f.compile) res["properties"]["compile"] = compile_facts_json(*f.compile);
    results.push_back(std::move(res));
  }
}

// A file read only in part, or not at all, says so where SARIF keeps the tool's own trouble: a
// notification (and executionSuccessful false when nothing was checked).
void add_notification(const CheckReport& r, J& notes) {
  if (r.read_error.empty()) return;
  notes.push_back(
      J{{"level", "error"},
        {"message", {{"text", fmt::format("{}: {}", r.scanned ? "not fully scanned" : "NOT SCANNED", r.read_error)}}},
        {"locations", J::array({J{{"physicalLocation", {{"artifactLocation", {{"uri", uri_reference(r.file)}}}}}}})}});
}

J driver_json(const std::string& version, const std::string& information_uri) {
  J driver{{"name", "ckpt"}, {"version", version}};
  if (!information_uri.empty()) driver["informationUri"] = information_uri;
  driver["rules"] = rules_json();
  return driver;
}

std::string log_text(J run) {
  J log{{"$schema", "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"},
        {"version", "2.1.0"},
        {"runs", J::array({std::move(run)})}};
  return json_text(log) + "\n";
}

}  // namespace

std::string check_sarif_text(const CheckReport& r, const std::string& version, const std::string& information_uri) {
  J results = J::array();
  add_results(r, results);
  J invocation{{"executionSuccessful", r.scanned}};
  J notes = J::array();
  add_notification(r, notes);
  if (!notes.empty()) invocation["toolExecutionNotifications"] = std::move(notes);
  invocation["properties"] = J{{"status", to_string(r.status())}, {"fail_on", r.fail_on}, {"failed", r.failed}};

  J run{{"tool", {{"driver", driver_json(version, information_uri)}}},
        {"invocations", J::array({std::move(invocation)})},
        {"results", std::move(results)}};
  if (!r.format.empty()) run["properties"] = J{{"format", r.format}};
  return log_text(std::move(run));
}

std::string check_sarif_text(const std::vector<CheckReport>& reports, const std::string& version,
                             const std::string& information_uri) {
  J results = J::array(), notes = J::array(), artifacts = J::array();
  bool all_scanned = true, failed = false;
  for (const CheckReport& r : reports) {
    add_results(r, results);
    add_notification(r, notes);
    all_scanned &= r.scanned;
    failed |= r.failed;
    J props{{"status", to_string(r.status())}, {"failed", r.failed}};
    props["format"] = r.format.empty() ? J(nullptr) : J(r.format);
    artifacts.push_back(J{{"location", {{"uri", uri_reference(r.file)}}}, {"properties", std::move(props)}});
  }
  // Successful when every file was at least partly checked; each file's own status is its artifact's.
  J invocation{{"executionSuccessful", all_scanned}};
  if (!notes.empty()) invocation["toolExecutionNotifications"] = std::move(notes);
  invocation["properties"] = J{{"fail_on", reports.empty() ? "" : reports.front().fail_on}, {"failed", failed}};
  J run{{"tool", {{"driver", driver_json(version, information_uri)}}},
        {"invocations", J::array({std::move(invocation)})},
        {"artifacts", std::move(artifacts)},
        {"results", std::move(results)}};
  return log_text(std::move(run));
}

}  // namespace ckpt
