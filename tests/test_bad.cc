// The adversarial corpus (testdata/gen_bad.py): each file gives exactly its documented one-line error,
// and the ones that hide calls are reported as dangerous by the security scan.
#include <doctest/doctest.h>

#include "core/findings.h"
#include "core/reader.h"
#include "fixtures.h"

using namespace ckpt;

TEST_CASE("bad corpus: exact errors and findings") {
  const auto dir = test::testdata() / "bad";
  const auto expected = test::read_json(dir / "expected.json");
  REQUIRE(expected.size() >= 15);
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string name = it.key();
    CAPTURE(name);
    auto file = MappedFile::from_memory(test::read_file(dir / name), name);
    std::string error;
    try {
      (void)read_checkpoint(file);
    } catch (const InputError& e) { error = e.render(); }
    CHECK(error == it.value().value("error", ""));
    if (it.value().contains("check")) {
      const CheckResult r = run_checks(file, Limits{});
      bool found = false;
      for (const Finding& f : r.findings) found |= f.id == it.value()["check"];
      CHECK(found);
    }
  }
}
