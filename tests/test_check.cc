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
  // t215/dcp/.metadata, pickled by the truth environment's Python 3.11.2, pickles an Enum member by name
  // as builtins.getattr(cls, name) (Enum.__reduce_ex__): allowed in exactly that shape (allowlist.cc's
  // member lookups; the test below), so it is no finding.
  size_t user_classes = 0;
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    const CheckResult r = run_checks(f.file.string(), Limits{});
    CHECK(r.read_error.empty());
    for (const Finding& x : r.findings) {
      if (x.id != "dangerous-global") continue;
      CAPTURE(x.message);
      CHECK(x.message.rfind("pickle global __main__.", 0) == 0);
      ++user_classes;
    }
  }
  CHECK(user_classes >= 1);
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

namespace {

std::string sbu(std::string_view s) { return std::string("\x8c") + static_cast<char>(s.size()) + std::string(s); }
std::string stack_global(std::string_view m, std::string_view n) { return sbu(m) + sbu(n) + "\x93"; }

std::vector<Finding> scan_bytes(const std::string& bytes) {
  return scan_findings(scan_pickles(*MappedFile::from_memory(bytes, "mem.pkl"), Limits{}));
}

std::vector<std::string> ids(const std::vector<Finding>& fs) {
  std::vector<std::string> out;
  for (const Finding& f : fs) out.push_back(f.id);
  return out;
}

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  for (const Finding& f : fs)
    if (f.id == id) return &f;
  return nullptr;
}

}  // namespace

// Python 3.11+ pickles an Enum member as REDUCE(builtins.getattr, (EnumClass, 'MEMBER')); a torch 2.15
// DCP .metadata holds one per tensor (TensorProperties.memory_format). Allowed in that shape only.
TEST_CASE("check: getattr of an allowed Enum member, and nothing else") {
  const std::string getattr = stack_global("builtins", "getattr");
  const std::string fmt = stack_global("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING");
  const auto lookup = [&](const std::string& cls, const std::string& args) {
    return scan_bytes("\x80\x04" + getattr + cls + args + "R.");
  };
  for (const char* m : {"TORCH_CONTIGUOUS_FORMAT", "TORCH_CHANNELS_LAST", "TORCH_PRESERVE_FORMAT"}) {
    CAPTURE(m);
    CHECK(lookup(fmt, sbu(m) + "\x86").empty());
  }
  // The real file: no finding.
  const CheckResult dcp = run_checks((test::testdata() / "t215" / "dcp" / ".metadata").string(), Limits{});
  CHECK(ids(dcp.findings).empty());
  // Another member name, another class (of the same allowed module), another module, three arguments.
  for (const auto& fs : {lookup(fmt, sbu("__class__") + "\x86"), lookup(fmt, sbu("TORCH_CONTIGUOUS_FORMAT.x") + "\x86"),
                         lookup(stack_global("torch.distributed.checkpoint.metadata", "Metadata"),
                                sbu("TORCH_CONTIGUOUS_FORMAT") + "\x86"),
                         lookup(stack_global("os", "path"), sbu("TORCH_CONTIGUOUS_FORMAT") + "\x86"),
                         lookup("(" + fmt, sbu("TORCH_CONTIGUOUS_FORMAT") + "Nt")}) {
    const Finding* f = find(fs, "dangerous-global");
    REQUIRE(f != nullptr);
    CHECK(f->message.find("builtins.getattr") != std::string::npos);
  }
  // One allowed lookup, then the same (memoized) getattr called on something else.
  {
    const std::string p = "\x80\x04" + getattr + "\x94" + fmt + sbu("TORCH_CHANNELS_LAST") + "\x86R0" + std::string("h\0", 2) + fmt +
                          sbu("__init__") + "\x86R.";
    const std::vector<Finding> fs = scan_bytes(p);
    const Finding* f = find(fs, "dangerous-global");
    REQUIRE(f != nullptr);
    CHECK(f->message.find("builtins.getattr is called by REDUCE at +0xb8") != std::string::npos);  // the call, not the lookup
  }
  // Instantiated rather than called by REDUCE: not the pickled-Enum shape.
  CHECK(find(scan_bytes("\x80\x04" + getattr + fmt + sbu("TORCH_CHANNELS_LAST") + "\x86\x81."), "dangerous-global") != nullptr);
}

// fickling's test_frame_boundary_divergence (testdata/security/recreated/fickling): from bytes one long
// bytestring, read as a file (torch.load) a GLOBAL os.system / REDUCE buried in it.
TEST_CASE("check: a pickle whose bytes and file parses name other globals: pickle-parse-divergence") {
  const auto sec = test::testdata() / "security" / "recreated" / "fickling";
  {
    const CheckResult r = run_checks((sec / "frame_boundary_divergence.pkl").string(), Limits{});
    const Finding* d = find(r.findings, "pickle-parse-divergence");
    REQUIRE(d != nullptr);
    CHECK(d->severity == Severity::Error);
    CHECK(d->message.find("globals only read as a file: os.system; only parsed from bytes: none") != std::string::npos);
    CHECK(test::where_has(*d, "pickle+0x1fff6 (FRAME, whose end the read at +0x20000 crosses)"));
    CHECK(test::where_has(*d, "os.system at pickle+0x20006 (GLOBAL, called by REDUCE at +0x2001e; read as a file only)"));
    REQUIRE(d->locations.size() == d->where.size());
    CHECK(d->locations[0].offset == 0x1fff6u);
    CHECK(d->locations[0].opcode == "FRAME");
    CHECK(d->locations[1].global == "os.system");
    const Finding* g = find(r.findings, "dangerous-global");
    REQUIRE(g != nullptr);
    CHECK(test::where_has(*g, "os.system"));
  }
  {
    // GLOBAL 'macos\nsystem\n' in a FRAME of 4: from bytes macos.system, read as a file os.system. The
    // file parse's denylisted name counts as the bytes parse's would: the more dangerous verdict.
    const CheckResult r = run_checks((sec / "frame_straddle_global_module.pkl").string(), Limits{});
    const Finding* d = find(r.findings, "pickle-parse-divergence");
    REQUIRE(d != nullptr);
    CHECK(d->message.find("only read as a file: os.system; only parsed from bytes: macos.system") != std::string::npos);
    const Finding* g = find(r.findings, "dangerous-global");
    REQUIRE(g != nullptr);
    CHECK(test::where_has(*g, "os.system"));
  }
  // Parses that part inside a string or an integer but name no global: nothing to report.
  for (const char* name : {"frame_straddle_binint.pkl", "frame_straddle_short_binunicode.pkl", "frame_straddle_binbytes.pkl"}) {
    CAPTURE(name);
    const CheckResult r = run_checks((sec / name).string(), Limits{});
    CHECK(find(r.findings, "pickle-parse-divergence") == nullptr);
  }
  // Well-formed framed pickles from real Python and torch: the two parses agree.
  for (const auto& p : {test::testdata() / "pickles" / "p4.pkl", test::testdata() / "pickles" / "p5.pkl",
                        test::testdata() / "pickles" / "frames_p4.pkl", test::testdata() / "t215" / "protocol4.pt",
                        test::testdata() / "t215" / "protocol5.pt", test::testdata() / "t113" / "protocol_4.pt"}) {
    CAPTURE(p.string());
    const CheckResult r = run_checks(p.string(), Limits{});
    CHECK(r.read_error.empty());
    CHECK(find(r.findings, "pickle-parse-divergence") == nullptr);
  }
  {
    const PickleScan s = scan_pickles(*MappedFile::open((test::testdata() / "pickles" / "frames_p4.pkl").string()), Limits{});
    CHECK(s.divergences.empty());
    CHECK(s.pickles.size() == 2);  // parsed from bytes and as a file
  }
}
