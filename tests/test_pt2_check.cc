// The security scan of torch.export archives (.pt2): the pickles nested in their members (sample
// inputs, torch 2.6's serialized_*.pt, use_pickle weights, pickled constants) are scanned with the
// outer and inner member named, nesting is bounded, and AOTInductor packages give native-code.
// Fixtures: testdata/pt2/ (gen_pt2.py, real torch.export files) and testdata/pt2/bad (gen_pt2_bad.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "core/findings.h"
#include "expected_findings.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;
using test::informational;
using test::where_has;

namespace {

std::vector<std::string> fixtures(const char* set) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(test::testdata() / "pt2" / set))
    if (e.path().extension() == ".pt2") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("pt2 check: every check case of pt2/bad gives exactly its findings") {
  const auto dir = test::testdata() / "pt2" / "bad";
  const json expected = test::read_json(dir / "expected.json");
  size_t cases = 0;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    if (it.value()["command"] != "check") continue;
    ++cases;
    const std::string name = it.key();
    CAPTURE(name);
    const auto t0 = std::chrono::steady_clock::now();
    const CheckResult r = run_checks(MappedFile::open((dir / name).string()), Limits{});
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
    test::expect_findings(r.findings, it.value());
  }
  CHECK(cases >= 8);
}

TEST_CASE("pt2 check: real torch.export files scan clean, with their nested pickles read") {
  for (const char* set : {"t26", "t214"}) {
    for (const std::string& name : fixtures(set)) {
      CAPTURE(set);
      CAPTURE(name);
      const auto file = MappedFile::open((test::testdata() / "pt2" / set / name).string());
      const PickleScan scan = scan_pickles(*file, Limits{});
      CHECK(scan.problems.empty());
      const bool aoti = name.rfind("aoti_", 0) == 0;
      CHECK(scan.native.empty() == !aoti);
      if (aoti) continue;
      // Every torch.save blob in the archive was looked into: its data.pkl is among the scanned pickles.
      std::vector<std::string> members;
      for (const ScannedPickle& p : scan.pickles) members.push_back(p.member);
      const auto has = [&](const std::string& outer) {
        return std::any_of(members.begin(), members.end(), [&](const std::string& m) {
          return m.rfind(outer, 0) == 0 && m.find(":") != std::string::npos && m.size() > 8 &&
                 m.substr(m.size() - 8) == "data.pkl";
        });
      };
      const std::string stem = name.substr(0, name.size() - 4);
      if (std::string(set) == "t26") {
        for (const char* m : {"serialized_state_dict.pt", "serialized_constants.pt", "serialized_example_inputs.pt"}) {
          CAPTURE(m);
          CHECK(has(m));
        }
      } else {
        CHECK(std::any_of(members.begin(), members.end(), [&](const std::string& m) {
          return m.rfind(stem + "/data/sample_inputs/", 0) == 0 && m.find(":") != std::string::npos;
        }));
      }
      // Raw weight files are not mistaken for pickles.
      for (const std::string& m : members) {
        CAPTURE(m);
        const bool raw_weight = m.find("/data/weights/weight_") != std::string::npos &&
                                !(name == "pickled_weights.pt2" && m.find("weight_0:") != std::string::npos);
        CHECK_FALSE(raw_weight);
      }
      const CheckResult r = run_checks(file, Limits{});
      for (const Finding& f : r.findings) {
        CAPTURE(f.message);
        if (name == "pickled_weights.pt2" && f.id == "dangerous-global") {
          // The use_pickle weight is a TwoTensor, a class outside the allowlist that
          // _rebuild_from_type_v2 instantiates: what torch.load(weights_only=True) refuses too.
          CHECK(f.message.find("TwoTensor") != std::string::npos);
          CHECK(where_has(f, stem + "/data/weights/weight_0:archive/data.pkl"));
          continue;
        }
        const bool global_finding = !informational(f.id) && f.id.find("global") != std::string::npos;
        CHECK_FALSE(global_finding);
        CHECK(f.id != "scan-incomplete");
        CHECK(f.id != "native-code");
      }
    }
  }
}

TEST_CASE("pt2 check: native-code is in the rule catalogue as an error") {
  const auto& cat = rule_catalogue();
  const auto it = std::find_if(cat.begin(), cat.end(), [](const RuleInfo& r) { return std::string(r.id) == "native-code"; });
  REQUIRE(it != cat.end());
  CHECK(it->severity == Severity::Error);
}

TEST_CASE("pt2 check: the scan of a truncated or corrupted .pt2 ends cleanly") {
  // Truncated at every length and each byte flipped: an InputError or a scan, never another
  // exception, a crash or a hang (run under CKPT_SANITIZE for memory errors).
  for (const char* rel : {"t214/convbn.pt2", "t26/convbn.pt2", "bad/malicious_sample_inputs.pt2", "bad/nested_deep.pt2"}) {
    CAPTURE(rel);
    const std::string bytes = test::read_file(test::testdata() / "pt2" / rel);
    const auto scan = [&](const std::string& b) {
      try {
        (void)scan_pickles(*MappedFile::from_memory(b, rel), Limits{});
      } catch (const InputError& e) {
        const std::string msg = e.render();
        CHECK(msg.find('\n') == std::string::npos);
      }
    };
    for (size_t len = 0; len < bytes.size(); len += 7) scan(bytes.substr(0, len));
    std::string b = bytes;
    for (size_t pos = 0; pos < b.size(); pos += 3) {
      b[pos] = static_cast<char>(b[pos] ^ 0xA5);
      scan(b);
      b[pos] = static_cast<char>(b[pos] ^ 0xA5);
    }
  }
}

TEST_CASE("pt2 check: native-code names exactly the native artifacts torch packaged") {
  size_t packages = 0;
  for (const char* set : {"t26", "t214"}) {
    for (const std::string& name : fixtures(set)) {
      if (name.rfind("aoti_", 0) != 0) continue;
      CAPTURE(name);
      ++packages;
      const auto dir = test::testdata() / "pt2" / set;
      const json truth = test::read_json(dir / (name.substr(0, name.size() - 4) + ".expected.json"));
      std::set<std::string> want;
      for (const auto& p : truth["native_code"]) want.insert(p.get<std::string>());
      std::set<std::string> got;
      for (const NativeCode& n : scan_pickles(*MappedFile::open((dir / name).string()), Limits{}).native) got.insert(n.member);
      CHECK(got == want);
    }
  }
  CHECK(packages >= 3);
}
