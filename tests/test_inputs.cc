// Many inputs (src/cli/inputs.h): the directory walk and its globs, `-`, JSON Lines, the exit code rank,
// and the runner's input order with several threads. The walks run on trees made here in a temporary
// directory, so that every expected path is written down by hand.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/inputs.h"
#include "fixtures.h"

using namespace ckpt;
using namespace ckpt::cli;
namespace fs = std::filesystem;

namespace {

// A fresh directory under $TMPDIR, removed at the end of the test case.
struct TempTree {
  fs::path root;
  TempTree() {
    std::string t = (fs::temp_directory_path() / "ckpt-inputs-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    root = t;
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void file(const std::string& rel) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << "x";
  }
};

std::vector<std::string> names(const Expanded& e, const std::string& strip) {
  std::vector<std::string> out;
  for (const InputItem& i : e.items)
    out.push_back(i.name.substr(0, strip.size()) == strip ? i.name.substr(strip.size()) : i.name);
  return out;
}

std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  return s;
}

}  // namespace

TEST_CASE("inputs: globs match the relative path, and the name alone when they have no '/'") {
  const std::vector<std::string> none;
  CHECK(selected("a.pt", false, none, none));
  CHECK(selected("sub/deep/b.SAFETENSORS", false, none, none));  // extensions case-insensitive
  CHECK(selected("x.pt2", false, none, none));
  CHECK_FALSE(selected("notes.txt", false, none, none));
  CHECK_FALSE(selected("model.index.json", false, none, none));  // an index is read through its directory
  CHECK_FALSE(selected("pt", false, none, none));  // the extension alone is no file of that kind
  CHECK(selected("dcp_dir", true, none, none));  // checkpoint directories, by default
  CHECK(selected("sub/a.pt", false, {"*.pt"}, none));  // '*' crosses '/'
  CHECK(selected("sub/a.pt", false, {"a.pt"}, none));  // no '/': the file name
  CHECK_FALSE(selected("sub/a.pt", false, {"other/a.pt"}, none));  // with '/': the whole relative path
  CHECK(selected("sub/a.pt", false, {"sub/*"}, none));
  CHECK_FALSE(selected("notes.txt", false, {"*.pt"}, none));
  CHECK(selected("notes.txt", false, {"*.txt"}, none));  // --include replaces the default
  CHECK_FALSE(selected("dcp_dir", true, {"*.pt"}, none));
  CHECK_FALSE(selected("sub/a.pt", false, none, {"sub/*"}));
  CHECK_FALSE(selected("sub/a.pt", false, {"*.pt"}, {"a.pt"}));  // exclude wins
  CHECK(selected("sub/b.pt", false, {"*.pt"}, {"a.pt"}));
}

TEST_CASE("inputs: a directory is walked in sorted order, checkpoint directories are one input, loops end") {
  TempTree t;
  t.file("b.pt");
  t.file("a.safetensors");
  t.file("notes.txt");
  t.file("sub/z.ckpt");
  t.file("sub/deeper/y.bin");
  t.file("sub/deeper/skip.json");
  t.file("dcp/.metadata");  // a DCP directory: read whole, never walked
  t.file("dcp/__0_0.distcp");
  t.file("shards/model.safetensors.index.json");  // a sharded one
  t.file("shards/model-00001-of-00002.safetensors");
  t.file("old/x.pt");
  fs::create_directory_symlink(t.root, t.root / "sub" / "loop");  // back to the top: walked once
  fs::create_symlink(t.root / "b.pt", t.root / "linked.pth");  // a symlinked file is read
  fs::create_symlink(t.root / "missing.pt", t.root / "dangling.pt");  // nothing to read: left out
  const std::string dir = t.root.string();

  InputOptions o;
  o.files = {dir};
  Expanded e = expand_inputs(o);
  CHECK(e.several);
  CHECK(names(e, dir + "/") == std::vector<std::string>{"a.safetensors", "b.pt", "dcp", "linked.pth", "old/x.pt", "shards",
                                                        "sub/deeper/y.bin", "sub/z.ckpt"});
  for (const InputItem& i : e.items) CHECK(i.error.empty());

  // A trailing slash does not double; excluding a directory prunes it.
  o.files = {dir + "/"};
  o.exclude = {"old", "*.pth"};
  e = expand_inputs(o);
  CHECK(names(e, dir + "/") ==
        std::vector<std::string>{"a.safetensors", "b.pt", "dcp", "shards", "sub/deeper/y.bin", "sub/z.ckpt"});

  o.exclude = {};
  o.include = {"sub/*"};  // replaces the default extensions: skip.json is taken too
  e = expand_inputs(o);
  CHECK(names(e, dir + "/") == std::vector<std::string>{"sub/deeper/skip.json", "sub/deeper/y.bin", "sub/z.ckpt"});

  // Operands: a file is kept whatever the globs say, a checkpoint directory is one input, a missing path
  // stays (its read reports it), `-` stays; order is the command line's.
  o.files = {(t.root / "notes.txt").string(), (t.root / "dcp").string(), "-", (t.root / "nope.pt").string()};
  o.include = {"*.bin"};
  e = expand_inputs(o);
  CHECK(e.several);
  CHECK(names(e, dir + "/") == std::vector<std::string>{"notes.txt", "dcp", "-", "nope.pt"});

  o.files = {(t.root / "b.pt").string()};
  CHECK_FALSE(expand_inputs(o).several);  // one file: today's output
  o.files = {(t.root / "shards").string()};
  CHECK_FALSE(expand_inputs(o).several);
}

TEST_CASE("inputs: a directory with nothing to read is an error item; '-' twice is a usage error") {
  TempTree t;
  t.file("readme.md");
  InputOptions o;
  o.files = {t.root.string()};
  const Expanded e = expand_inputs(o);
  REQUIRE(e.items.size() == 1);
  CHECK(e.items[0].name == t.root.string());
  CHECK(e.items[0].error.find("no checkpoint file") != std::string::npos);
  o.include = {"*.safetensors"};
  CHECK(expand_inputs(o).items[0].error.find("no file matching --include") != std::string::npos);
  o.files = {"-", "a.pt", "-"};
  CHECK_THROWS_AS(expand_inputs(o), UsageError);
  o.files = {};
  CHECK_THROWS_AS(expand_inputs(o), UsageError);
}

TEST_CASE("inputs: JSON Lines, error records and the exit code rank") {
  const std::string doc = "{\n  \"schema\": \"ckpt.check/1\",\n  \"where\": [\n    \"a\\nb\",\n    \"c  d\"\n  ]\n}\n";
  const std::string line = json_line(doc);
  CHECK(line.find('\n') == line.size() - 1);
  CHECK(nlohmann::json::parse(line) == nlohmann::json::parse(doc));  // the same document, escapes and inner spaces kept
  const auto rec = nlohmann::json::parse(error_record("summary", "m.pt", "m.pt: cannot open: No such file or directory", 3));
  CHECK(rec["schema"] == "ckpt.error/1");
  CHECK(rec["file"] == "m.pt");
  CHECK(rec["command"] == "summary");
  CHECK(rec["exit"] == 3);
  CHECK(worse_exit(0, 1) == 1);
  CHECK(worse_exit(1, 3) == 3);
  CHECK(worse_exit(3, 1) == 3);
  CHECK(worse_exit(3, 4) == 4);
  CHECK(worse_exit(4, 0) == 4);
  CHECK(resolve_jobs(8, 3) == 3);
  CHECK(resolve_jobs(0, 1) == 1);
  CHECK(resolve_jobs(2, 100) == 2);
}

TEST_CASE("inputs: the runner prints in input order whatever order the threads finish in") {
  std::vector<InputItem> items;
  for (int k = 0; k < 40; ++k) items.push_back({"f" + std::to_string(k), k == 7 ? "cannot list directory f7: gone" : ""});
  for (unsigned jobs : {1u, 4u}) {
    CAPTURE(jobs);
    RunPlan plan;
    plan.jobs = jobs;
    plan.error_records_for = "summary";
    plan.out = std::tmpfile();
    plan.err = std::tmpfile();
    REQUIRE(plan.out);
    REQUIRE(plan.err);
    std::mt19937 rng(jobs);
    std::vector<int> delay_us;
    for (size_t k = 0; k < items.size(); ++k) delay_us.push_back(static_cast<int>(rng() % 3000));
    const int rc = run_inputs(items, plan, [&](size_t i, const InputItem& item, std::FILE* out, std::FILE* err) {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us[i]));
      if (i == 11) throw InputError(item.name, "broken");
      std::fprintf(out, "%s\n", item.name.c_str());
      if (i == 20) std::fprintf(err, "note %s\n", item.name.c_str());
      return i == 30 ? 1 : 0;
    });
    CHECK(rc == 3);  // the worst: two unreadable inputs (3) beat findings (1)
    const std::string out = read_all(plan.out), err = read_all(plan.err);
    std::string want;
    for (size_t k = 0; k < items.size(); ++k) {
      if (k == 7) want += error_record("summary", "f7", "f7: cannot list directory f7: gone", 3);
      else if (k == 11) want += error_record("summary", "f11", "f11: broken", 3);
      else want += "f" + std::to_string(k) + "\n";
    }
    CHECK(out == want);
    CHECK(err == "ckpt: error: f7: cannot list directory f7: gone\nckpt: error: f11: broken\nnote f20\n");
    std::fclose(plan.out);
    std::fclose(plan.err);
  }
  // A usage error stops the run and reaches the caller.
  RunPlan plan;
  plan.jobs = 3;
  plan.out = std::tmpfile();
  CHECK_THROWS_AS(run_inputs(items, plan,
                             [](size_t i, const InputItem&, std::FILE*, std::FILE*) -> int {
                               if (i == 5) throw UsageError("no");
                               return 0;
                             }),
                  UsageError);
  std::fclose(plan.out);
}
