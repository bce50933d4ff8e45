// `ckpt check` rules against fixtures whose findings are known by construction (testdata/gen_check.py):
// every expected finding fires with the expected `where`, and nothing else does (false positives are bugs).
#include <doctest/doctest.h>

#include "core/findings.h"
#include "expected_findings.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

TEST_CASE("check: every rule fixture gives exactly its findings") {
  const auto dir = test::testdata() / "check";
  const json expected = test::read_json(dir / "expected.json");
  REQUIRE(expected.size() >= 25);
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string name = it.key();
    CAPTURE(name);
    const CheckResult r = run_checks(MappedFile::open((dir / name).string()), Limits{});
    test::expect_findings(r.findings, it.value());
  }
}

TEST_CASE("check: the summary fixtures call nothing outside the allowlist but their own classes") {
  // torch.save(model) of a class defined in the generator pickles __main__.<Class> + NEWOBJ: a class
  // the file makes Python instantiate, which the allowlist verdict calls dangerous by design. Nothing
  // else in these files (torch's own modules, tensors, dtypes, Lightning dicts) may be.
  // One known exception: t215/dcp/.metadata, pickled by the truth environment's Python 3.11.2, whose
  // Enum.__reduce_ex__ pickles a member by name as builtins.getattr(cls, name) (bpo-44342; Python 3.12, and
  // 3.11's later releases, pickle cls(value) again, as t26/t214's .metadata has it); DCP reads .metadata with
  // pickle.load. getattr is not on the allowlist, so check reports it; whether it should accept getattr of a
  // member name on an allowlisted class is open (issue 39). Counted, so that a change shows here.
  size_t user_classes = 0, enum_by_name = 0;
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    const CheckResult r = run_checks(f.file.string(), Limits{});
    CHECK(r.read_error.empty());
    for (const Finding& x : r.findings) {
      if (x.id != "dangerous-global") continue;
      CAPTURE(x.message);
      if (f.id == "t215/dcp" && x.message.rfind("pickle global builtins.getattr ", 0) == 0) {
        ++enum_by_name;
        continue;
      }
      CHECK(x.message.rfind("pickle global __main__.", 0) == 0);
      ++user_classes;
    }
  }
  CHECK(user_classes >= 1);
  CHECK(enum_by_name == 1);
}

TEST_CASE("check: classification of globals") {
  CHECK(classify_global("collections", "OrderedDict") == GlobalClass::Safe);
  CHECK(classify_global("torch._utils", "_rebuild_tensor_v2") == GlobalClass::Safe);
  CHECK(classify_global("torch", "BFloat16Storage") == GlobalClass::Safe);
  CHECK(classify_global("torch", "float8_e4m3fn") == GlobalClass::Safe);
  CHECK(classify_global("__torch__.torch.nn.modules.linear", "Linear") == GlobalClass::Safe);
  CHECK(classify_global("argparse", "Namespace") == GlobalClass::Safe);  // a vetted extra
  CHECK(classify_global("torch.nn.modules.linear", "Linear") == GlobalClass::Safe);
  CHECK(classify_global("torch.nn.modules.module", "register_module_forward_hook") == GlobalClass::Unknown);
  CHECK(classify_global("mypackage", "Config") == GlobalClass::Unknown);
  CHECK(classify_global("posix", "system") == GlobalClass::Dangerous);
  CHECK(classify_global("builtins", "eval") == GlobalClass::Dangerous);
  CHECK(classify_global("builtins", "getattr") == GlobalClass::Dangerous);
  CHECK(classify_global("torch", "serialization.os.system") == GlobalClass::Dangerous);  // dotted name
  CHECK(classify_global("torch.storage", "_load_from_bytes") == GlobalClass::Dangerous);
  CHECK(classify_global("subprocess", "Popen") == GlobalClass::Dangerous);
}

namespace {

GlobalRef ref(std::string module, std::string name, uint8_t use = 0, const char* op = "REDUCE") {
  GlobalRef g;
  g.module = std::move(module);
  g.name = std::move(name);
  g.offset = 0x10;
  g.use = use;
  if (use) g.use_opcode = op;
  return g;
}

}  // namespace

TEST_CASE("check: the verdict is the allowlist's, whatever the opcode") {
  // Called, not allowed: dangerous through every calling opcode, on a denylist or not.
  for (const char* op : {"REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "INST"}) {
    CAPTURE(op);
    CHECK(judge_global(ref("smtplib", "SMTP", kUseCalled, op)).cls == GlobalClass::Dangerous);
    CHECK(judge_global(ref("mypackage", "Thing", kUseCalled, op)).cls == GlobalClass::Dangerous);
  }
  CHECK(judge_global(ref("mypackage", "Thing", kUseBuilt, "BUILD")).cls == GlobalClass::Dangerous);
  // Only named: unknown, unless the denylist knows it: the loader hands os.system itself to its caller.
  CHECK(judge_global(ref("posix", "system")).cls == GlobalClass::Dangerous);
  CHECK(judge_global(ref("posix", "system")).named_only);
  CHECK(judge_global(ref("posix", "system")).how == "handed to the loading code uncalled");
  CHECK(judge_global(ref("builtins", "eval")).cls == GlobalClass::Dangerous);
  CHECK(judge_global(ref("mypackage", "Thing")).cls == GlobalClass::Unknown);
  CHECK_FALSE(judge_global(ref("mypackage", "Thing")).named_only);
  CHECK_FALSE(judge_global(ref("posix", "system", kUseCalled)).named_only);
  // Pure builtins and Python 2's names for builtins are allowed; posix.getpid is no file operation.
  for (const char* b : {"len", "abs", "min", "max", "sum", "round", "range", "slice"}) {
    CAPTURE(b);
    CHECK(judge_global(ref("builtins", b, kUseCalled)).cls == GlobalClass::Safe);
  }
  CHECK(std::string(judge_global(ref("posix", "getpid", kUseCalled)).category).find("deletes files") == std::string::npos);
  CHECK(std::string(judge_global(ref("posix", "getpid", kUseCalled)).category) ==
        "reaches the operating system (files, processes, the environment)");
  // Allowed and called: safe; allowed and changed in place: dangerous.
  CHECK(judge_global(ref("collections", "OrderedDict", kUseCalled)).cls == GlobalClass::Safe);
  CHECK(judge_global(ref("collections", "OrderedDict", kUseBuilt, "BUILD")).cls == GlobalClass::Safe);
  CHECK(judge_global(ref("collections", "OrderedDict", kUseMutated, "APPEND")).cls == GlobalClass::Dangerous);
  // Passed to an allowed callable that calls that argument: called.
  GlobalRef f = ref("posix", "system");
  f.passed_to.push_back({"torch._tensor._rebuild_from_type_v2", 0});
  CHECK(judge_global(f).cls == GlobalClass::Dangerous);
  CHECK(judge_global(f).how.find("_rebuild_from_type_v2") != std::string::npos);
  GlobalRef g = ref("mypackage", "Thing");
  g.passed_to.push_back({"torch._tensor._rebuild_from_type_v2", 2});  // the args tuple: not called
  CHECK(judge_global(g).cls == GlobalClass::Unknown);
  // The denylist only sharpens the message.
  CHECK(std::string(judge_global(ref("posix", "system", kUseCalled)).category) == "runs a shell command or another program");
  CHECK(judge_global(ref("mypackage", "Thing", kUseCalled)).category == nullptr);
  GlobalRef c = ref("<computed>", "<computed>", kUseCalled);
  c.computed = true;
  CHECK(judge_global(c).cls == GlobalClass::Dangerous);
}
