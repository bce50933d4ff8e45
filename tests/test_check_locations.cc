// check's structured locations (member, offset, opcode, global beside each `where` text), its statuses
// for files it could not read, and its SARIF log. Offsets are the ones Python's pickletools.dis prints
// for the fixtures (testdata/check, made by testdata/gen_check.py); SARIF's schema is checked by the
// ctest check_sarif_schema against the official OASIS schema.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include "core/findings.h"
#include "core/render_report.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

namespace {

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  for (const Finding& f : fs)
    if (f.id == id) return &f;
  return nullptr;
}

CheckReport report_of(const std::string& path) {
  const CheckResult r = run_checks(path, Limits{});
  CheckReport rep;
  rep.file = path;
  rep.format = r.format;
  rep.fail_on = "error";
  rep.read_error = r.read_error;
  rep.scanned = r.scanned;
  rep.findings = r.findings;
  for (const Finding& f : rep.findings) rep.failed |= f.severity == Severity::Error;
  return rep;
}

}  // namespace

TEST_CASE("check locations: the fields say what the where text says, for every rule fixture") {
  const auto dir = test::testdata() / "check";
  const json expected = test::read_json(dir / "expected.json");
  size_t globals = 0;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    CAPTURE(it.key());
    const CheckResult r = run_checks(MappedFile::open((dir / it.key()).string()), Limits{});
    for (const Finding& f : r.findings) {
      CAPTURE(f.id);
      REQUIRE(f.locations.size() <= f.where.size());
      if (f.id != "dangerous-global" && f.id != "unknown-global") continue;
      REQUIRE(f.locations.size() == f.where.size());
      for (size_t k = 0; k < f.where.size(); ++k) {
        const Location& l = f.locations[k];
        CAPTURE(f.where[k]);
        if (l.global.empty()) continue;  // a zip member renamed between headers: the member only
        REQUIRE(l.offset.has_value());
        CHECK(!l.opcode.empty());
        // The text is written from the same scan: "<global> at <member or pickle>+0x<offset> (<opcode>".
        CHECK(f.where[k].rfind(
                  fmt::format("{} at {}+0x{:x} ({}", l.global, l.member.empty() ? "pickle" : l.member, *l.offset, l.opcode), 0) ==
              0);
        ++globals;
      }
    }
  }
  CHECK(globals >= 12);  // the dangerous/unknown-global fixtures of testdata/check (14 locations)
}

TEST_CASE("check locations: offsets and opcodes as pickletools reads them") {
  const auto dir = test::testdata() / "check";
  {  // pickletools.dis: "2: c GLOBAL 'posix system'"
    const CheckResult r = run_checks(MappedFile::open((dir / "evil_os_system.pkl").string()), Limits{});
    const Finding* f = find(r.findings, "dangerous-global");
    REQUIRE(f);
    REQUIRE(f->locations.size() == 1);
    CHECK(f->locations[0].global == "posix.system");
    CHECK(f->locations[0].opcode == "GLOBAL");
    CHECK(f->locations[0].offset == 2);
    CHECK(f->locations[0].member.empty());
    CHECK(f->locations[0].file.empty());
  }
  {  // zipfile + pickletools.genops on evil_exec/data.pkl: "184 GLOBAL '__builtin__ exec' (builtins.exec)"
    const CheckResult r = run_checks(MappedFile::open((dir / "evil_exec.pt").string()), Limits{});
    const Finding* f = find(r.findings, "dangerous-global");
    REQUIRE(f);
    REQUIRE(!f->locations.empty());
    CHECK(f->locations[0].member == "evil_exec/data.pkl");
    CHECK(f->locations[0].offset == 184);
    CHECK(f->locations[0].opcode == "GLOBAL");
    CHECK(f->locations[0].global == "builtins.exec");  // Python 3 reads __builtin__ as builtins
  }
  {  // key rules have no fields to give
    const CheckResult r = run_checks(MappedFile::open((dir / "ddp_prefix.pt").string()), Limits{});
    const Finding* f = find(r.findings, "ddp-prefix");
    REQUIRE(f);
    CHECK(f->locations.empty());
  }
}

TEST_CASE("check status: a file not read is never pass") {
  const auto dir = test::testdata() / "check";
  {  // a directory that is no checkpoint: nothing scanned
    const CheckReport rep = report_of(dir.string());
    CHECK_FALSE(rep.scanned);
    CHECK(std::string(to_string(rep.status())) == "unscanned");
    const std::string text = render_check_text(rep, false);
    CHECK(text.find("NOT SCANNED") != std::string::npos);
    CHECK(text.find("pass") == std::string::npos);
    CHECK(text.find("0 error(s)") == std::string::npos);
    const json sarif = json::parse(check_sarif_text(rep, "9.9.9", ""));
    CHECK(sarif["runs"][0]["invocations"][0]["executionSuccessful"] == false);
    // Code-scanning views show results, not notifications: the unread file is one result of its own.
    REQUIRE(sarif["runs"][0]["results"].size() == 1);
    CHECK(sarif["runs"][0]["results"][0]["ruleId"] == "unreadable");
    CHECK(sarif["runs"][0]["results"][0]["level"] == "error");
  }
  {
    CheckReport rep = report_of((dir / "clean.pt").string());
    CHECK(std::string(to_string(rep.status())) == "pass");
    rep.read_error = "clean.pt: made up";
    CHECK(std::string(to_string(rep.status())) == "incomplete");
    CHECK(render_check_text(rep, false).find("pass") == std::string::npos);
  }
}

TEST_CASE("check SARIF: the whole catalogue as rules, a result per finding") {
  const auto path = (test::testdata() / "check" / "lightning_compiled.ckpt").string();
  const CheckReport rep = report_of(path);
  const json log = json::parse(check_sarif_text(rep, "9.9.9", "https://example.org/ckpt"));
  const json& run = log["runs"][0];
  CHECK(log["version"] == "2.1.0");
  CHECK(run["tool"]["driver"]["version"] == "9.9.9");
  CHECK(run["tool"]["driver"]["informationUri"] == "https://example.org/ckpt");
  REQUIRE(run["tool"]["driver"]["rules"].size() == rule_catalogue().size());
  for (size_t k = 0; k < rule_catalogue().size(); ++k) {
    const json& rule = run["tool"]["driver"]["rules"][k];
    CHECK(rule["id"] == rule_catalogue()[k].id);
    CHECK(!rule["help"]["text"].get<std::string>().empty());
  }
  REQUIRE(run["results"].size() == rep.findings.size());
  REQUIRE(rep.findings.size() >= 3);
  for (size_t k = 0; k < rep.findings.size(); ++k) {
    CHECK(run["results"][k]["ruleId"] == rep.findings[k].id);
    CHECK(run["results"][k]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == path);
  }
  const json none = json::parse(check_sarif_text(rep, "9.9.9", ""));
  CHECK_FALSE(none["runs"][0]["tool"]["driver"].contains("informationUri"));
}
