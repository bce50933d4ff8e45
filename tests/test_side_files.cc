// A model folder's other pickles (issue 44 point 1): `check` of a folder that is one model (a Hugging Face
// folder, a Trainer checkpoint folder, a sharded set, a DCP directory) scans every other file in it that
// pickle would load, found by name or by its first bytes, and names the file in each finding. The layouts
// are copies of real fixtures (testdata/trainer by transformers' Trainer, t211/hf_bert_bf16, formats/)
// made here in a temporary directory, with hand-written malicious pickles put beside or in place of files.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/findings.h"
#include "core/reader.h"
#include "core/render_summary.h"
#include "core/summary.h"
#include "fixtures.h"

using namespace ckpt;
namespace fs = std::filesystem;

namespace {

// Protocol 0: GLOBAL os.system, the argument tuple, REDUCE.
const std::string kEvilP0 = "cos\nsystem\n(S'echo pwned'\ntR.";
// Protocol 2: PROTO 2, GLOBAL posix.system, BINUNICODE 'echo pwned', TUPLE1, REDUCE, STOP.
const char kP2[] = "\x80\x02" "cposix\nsystem\n" "X\x0a\x00\x00\x00" "echo pwned" "\x85R.";
const std::string kEvilP2(kP2, sizeof(kP2) - 1);

// A copy of a fixture folder under $TMPDIR, removed at the end of the test case.
struct Folder {
  fs::path root;
  explicit Folder(const fs::path& from) {
    std::string t = (fs::temp_directory_path() / "ckpt-side-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    root = fs::path(t) / from.filename();
    fs::copy(from, root, fs::copy_options::recursive);
    for (const auto& e : fs::directory_iterator(root))
      fs::permissions(e.path(), fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(root.parent_path(), ec);
  }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(root / name, std::ios::binary | std::ios::trunc) << bytes;
  }
  std::string path() const { return root.string(); }
};

fs::path trainer() { return test::testdata() / "trainer" / "checkpoint-2"; }

// The dangerous-global finding on `global` whose places are all in `file`, or null.
const Finding* dangerous_in(const CheckResult& r, const std::string& global, const std::string& file) {
  for (const Finding& f : r.findings) {
    if (f.id != "dangerous-global" || f.severity != Severity::Error || f.locations.empty()) continue;
    bool all = true;
    for (const Location& l : f.locations) all = all && l.global == global && l.file == file;
    if (all) return &f;
  }
  return nullptr;
}

const SideFile* side(const Checkpoint& ck, const std::string& label) {
  for (const SideFile& f : ck.side.files)
    if (f.label == label) return &f;
  return nullptr;
}

}  // namespace

TEST_CASE("side files: an HF folder read through model.safetensors still has its pytorch_model.bin scanned") {
  Folder d(test::testdata() / "t211" / "hf_bert_bf16");
  d.write("pytorch_model.bin", kEvilP2);
  const CheckResult r = run_checks(d.path(), Limits{});
  CHECK(r.read_error.empty());
  CHECK(r.format == "safetensors");  // the weights transformers loads
  const Finding* f = dangerous_in(r, "posix.system", "pytorch_model.bin");
  REQUIRE(f);
  CHECK(f->where[0].rfind("pytorch_model.bin:posix.system at pickle+0x2", 0) == 0);
  CHECK(f->message.rfind("pytorch_model.bin: pickle global posix.system is called by REDUCE", 0) == 0);
}

TEST_CASE("side files: each pickle a Trainer checkpoint folder holds is scanned, named by its file") {
  for (const char* name : {"training_args.bin", "rng_state.pth", "rng_state_3.pth", "optimizer.pt", "scheduler.pt"}) {
    CAPTURE(name);
    for (const std::string& evil : {kEvilP0, kEvilP2}) {
      Folder d(trainer());
      d.write(name, evil);
      const CheckResult r = run_checks(d.path(), Limits{});
      CHECK(r.read_error.empty());
      CHECK((dangerous_in(r, "os.system", name) || dangerous_in(r, "posix.system", name)));
    }
  }
}

TEST_CASE("side files: an extra pickle in a sharded folder and in a DCP folder is scanned") {
  for (const char* fixture : {"sharded_st", "sharded_bin", "dcp"}) {
    CAPTURE(fixture);
    Folder d(test::testdata() / "formats" / fixture);
    const CheckResult clean = run_checks(d.path(), Limits{});
    REQUIRE(clean.read_error.empty());
    Checkpoint ck = read_checkpoint(d.path());
    CHECK(ck.side.folder);
    CHECK(ck.side.files.empty());  // the shards, the index, .metadata and the .distcp files are the model
    d.write("extra_weights.pt", kEvilP0);
    const CheckResult r = run_checks(d.path(), Limits{});
    CHECK(r.findings.size() == clean.findings.size() + 1);
    CHECK(dangerous_in(r, "os.system", "extra_weights.pt"));
  }
}

TEST_CASE("side files: the clean Trainer folder gives each file's own verdict, labelled, and lists them") {
  const CheckResult r = run_checks(trainer().string(), Limits{});
  REQUIRE(r.read_error.empty());
  // optimizer.pt, scheduler.pt and rng_state.pth call nothing outside the allowlist; training_args.bin
  // pickles TrainingArguments (instantiated: dangerous-global, as `ckpt check training_args.bin` says).
  const CheckResult args = run_checks(MappedFile::open((trainer() / "training_args.bin").string()), Limits{});
  REQUIRE(!args.findings.empty());
  size_t in_args = 0;
  for (const Finding& f : r.findings) {
    if (f.locations.empty()) continue;  // model rules
    CHECK(f.locations[0].file == "training_args.bin");
    ++in_args;
  }
  CHECK(in_args == args.findings.size());
  CHECK(dangerous_in(r, "transformers.training_args.TrainingArguments", "training_args.bin"));

  const Checkpoint ck = read_checkpoint(trainer().string());
  REQUIRE(ck.side.files.size() == 4);  // config.json, trainer_state.json and model.safetensors are not
  for (const char* name : {"optimizer.pt", "rng_state.pth", "scheduler.pt", "training_args.bin"}) {
    const SideFile* f = side(ck, name);
    REQUIRE(f);
    CHECK(f->kind == SideKind::Zip);
    CHECK(f->size == fs::file_size(trainer() / name));
  }
  const nlohmann::json j = nlohmann::json::parse(summary_json_text(summarize(ck)));
  REQUIRE(j["side_files"].size() == 4);
  CHECK(j["side_files"][0] == nlohmann::json{{"path", "optimizer.pt"}, {"size", 54052}, {"kind", "zip"}});
  const std::string text = render_summary_text(summarize(ck), RenderOptions{});
  CHECK(text.find("\nBeside:   optimizer.pt (54.1 kB, zip), rng_state.pth (14.3 kB, zip), scheduler.pt (1.5 kB, zip), "
                  "training_args.bin (5.3 kB, zip)\n") != std::string::npos);
}

TEST_CASE("side files: found by their first bytes, not only by name") {
  Folder d(test::testdata() / "t211" / "hf_bert_bf16");
  d.write("blob", kEvilP2);  // protocol 2: its signature
  d.write("state", kEvilP0);  // protocol 0: Python reads it to its STOP
  d.write("NOTICE", "NOTICE: test weights\n");  // NONE, then OBJ with no MARK: Python stops
  d.write("vocab.txt", "(not a pickle\n");  // '(' is MARK, but no pickle follows
  fs::copy_file(d.root / "model.safetensors", d.root / "adapter.bin");  // a .bin that is safetensors
  d.write("empty.pt", "");
  const Checkpoint ck = read_checkpoint(d.path());
  CHECK(ck.side.files.size() == 3);
  REQUIRE(side(ck, "blob"));
  CHECK(side(ck, "blob")->kind == SideKind::Pickle);
  REQUIRE(side(ck, "state"));
  CHECK(side(ck, "state")->kind == SideKind::Pickle);
  REQUIRE(side(ck, "adapter.bin"));
  CHECK(side(ck, "adapter.bin")->kind == SideKind::Other);  // named so, but safetensors: nothing to scan
  const CheckResult r = run_checks(d.path(), Limits{});
  CHECK(dangerous_in(r, "posix.system", "blob"));
  CHECK(dangerous_in(r, "os.system", "state"));
  for (const Finding& f : r.findings)
    for (const Location& l : f.locations) CHECK(l.file != "adapter.bin");
}

TEST_CASE("side files: a named file whose container is broken is scan-incomplete, naming it") {
  Folder d(test::testdata() / "t211" / "hf_bert_bf16");
  d.write("optimizer.pt", "PK\x03\x04 but no central directory");
  const CheckResult r = run_checks(d.path(), Limits{});
  CHECK(r.read_error.empty());
  bool named = false;
  for (const Finding& f : r.findings)
    named = named || (f.id == "scan-incomplete" && f.message.rfind("optimizer.pt was not scanned: ", 0) == 0 &&
                      f.locations.size() == 1 && f.locations[0].file == "optimizer.pt");
  CHECK(named);
}

TEST_CASE("side files: a folder whose weights do not read still has its pickles scanned") {
  Folder d(trainer());
  d.write("model.safetensors", "\xff\xff not safetensors");
  d.write("optimizer.pt", kEvilP2);
  const CheckResult r = run_checks(d.path(), Limits{});
  CHECK(!r.read_error.empty());
  CHECK(r.scanned);  // status incomplete, and the finding fails it
  CHECK(dangerous_in(r, "posix.system", "optimizer.pt"));
}

TEST_CASE("side files: at most 10,000 files of a folder are looked at; the rest is scan-incomplete") {
  Folder d(test::testdata() / "t211" / "hf_bert_bf16");
  for (int k = 0; k < 10'000; ++k) d.write("f" + std::to_string(100000 + k), "x");
  d.write("zz_evil.pt", kEvilP0);  // after config.json and these: the 10,002nd in name order
  const CheckResult r = run_checks(d.path(), Limits{});
  CHECK(r.read_error.empty());
  CHECK_FALSE(dangerous_in(r, "os.system", "zz_evil.pt"));
  bool incomplete = false;
  for (const Finding& f : r.findings)
    incomplete = incomplete || (f.id == "scan-incomplete" && f.message.find("2 more file(s) than the 10000") != std::string::npos);
  CHECK(incomplete);
}
