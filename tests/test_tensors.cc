// `summary --tensors` (render_tensors.h): every row of every fixture against what PyTorch wrote in its
// .expected.json, the table's look, when the table replaces the module table, and --match.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/reader.h"
#include "core/render_summary.h"
#include "core/summary.h"
#include "core/text.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string trim(std::string v) {
  while (!v.empty() && v.back() == ' ') v.pop_back();
  size_t a = 0;
  while (a < v.size() && v[a] == ' ') ++a;
  return v.substr(a);
}

// One parsed row: the index cell, then Name .. Tied to (cells left out at the end are "").
struct Row {
  std::string index;
  std::vector<std::string> cells;
};

// The rows of the text tensor table in `text` (the table whose head starts with "Name | dtype | Shape").
std::vector<Row> tensor_rows_of(const std::string& text) {
  const std::vector<std::string> ls = lines_of(text);
  size_t head = 0;
  while (head < ls.size() && (ls[head].find(" | Name ") == std::string::npos || ls[head].find(" | Shape ") == std::string::npos))
    ++head;
  if (head == ls.size()) return {};  // no table: no entry to list
  REQUIRE(head + 1 < ls.size());
  REQUIRE(ls[head + 1].find_first_not_of('-') == std::string::npos);
  std::vector<Row> rows;
  for (size_t k = head + 2; k < ls.size() && ls[k].find_first_not_of('-') != std::string::npos; ++k) {
    std::vector<std::string> parts;
    size_t from = 0;
    for (size_t at; (at = ls[k].find(" | ", from)) != std::string::npos; from = at + 3)
      parts.push_back(ls[k].substr(from, at - from));
    parts.push_back(ls[k].substr(from));
    Row r;
    r.index = trim(parts[0]);
    for (size_t c = 1; c < parts.size(); ++c) r.cells.push_back(trim(parts[c]));
    r.cells.resize(8);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string shape_of(const json& e) {
  std::vector<int64_t> v = e.get<std::vector<int64_t>>();
  return shape_text(v);
}

const json& expected_tensors(const json& e) { return e.contains("tensors_all") ? e["tensors_all"] : e["tensors"]; }

std::string render(const Checkpoint& ck, RenderOptions o, bool markdown = false) {
  Summary s = summarize(ck);
  return markdown ? render_summary_markdown(s, o) : render_summary_text(s, o);
}

RenderOptions tensors_only() {
  RenderOptions o;
  o.depth = 0;
  o.tensors = true;
  return o;
}

}  // namespace

TEST_CASE("tensors: every row's dtype, shape, kind, state and size equal PyTorch's") {
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    const json e = test::read_json(f.expected);
    if (!e.contains("tensors")) continue;
    Checkpoint ck = read_checkpoint(f.file.string());
    const std::vector<Row> rows = tensor_rows_of(render(ck, tensors_only()));
    const json& want = expected_tensors(e);
    CHECK(rows.size() == want.size());
    std::map<std::string, const Row*> by_name;
    for (const Row& r : rows) by_name[r.cells[0]] = &r;
    for (const json& et : want) {
      const std::string name = et["name"];
      CAPTURE(name);
      REQUIRE(by_name.count(visible(name)) == 1);
      const Row& r = *by_name[visible(name)];
      // The index is the entry's place in JSON's tensors[], which holds the same name.
      const size_t index = std::stoul(r.index);
      REQUIRE(index < ck.tensors.size());
      CHECK(ck.tensors[index].name == name);
      const bool lazy = et.contains("state") && et["state"] == "uninitialized";
      if (et.contains("dtype")) {
        const std::string dtype = et["dtype"].is_null() ? "?" : et["dtype"].get<std::string>();
        // A sparse or nested entry shows its layout after the dtype.
        CHECK(r.cells[1].substr(0, r.cells[1].find(' ')) == dtype);
      }
      if (et.contains("shape")) CHECK(r.cells[2] == (et["shape"].is_null() ? "?" : shape_of(et["shape"])));
      if (et.contains("kind")) CHECK(r.cells[3] == et["kind"]);
      if (et.contains("state")) CHECK(r.cells[4] == et["state"]);
      if (et.contains("bytes")) CHECK(r.cells[5] == (et["bytes"].is_null() ? "?" : human_bytes(et["bytes"].get<uint64_t>())));
      if (lazy) CHECK(r.cells[5] == "?");
    }
  }
}

TEST_CASE("tensors: trainable rows add up to PyTorch's trainable and non-trainable counts") {
  // A row tied to an earlier row is the same tensor: counted once, as PyTorch's parameters() gives it.
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    const json e = test::read_json(f.expected);
    if (!e.contains("tensors") || !e.contains("totals") || !e["totals"].contains("trainable")) continue;
    Checkpoint ck = read_checkpoint(f.file.string());
    std::map<std::string, uint64_t> numel;
    for (const json& et : expected_tensors(e))
      if (et.contains("numel") && !et["numel"].is_null()) numel[visible(et["name"].get<std::string>())] = et["numel"];
    uint64_t yes = 0, no = 0;
    std::set<std::string> listed;
    for (const Row& r : tensor_rows_of(render(ck, tensors_only()))) {
      CAPTURE(r.cells[0]);
      bool again = false;
      for (const std::string& n : listed) again |= !r.cells[7].empty() && r.cells[7].find(n) != std::string::npos;
      listed.insert(r.cells[0]);
      if (r.cells[3] != "parameter") {
        CHECK(r.cells[6] == "-");
        continue;
      }
      REQUIRE((r.cells[6] == "yes" || r.cells[6] == "no"));
      if (again || r.cells[4] == "uninitialized" || !numel.count(r.cells[0])) continue;
      (r.cells[6] == "yes" ? yes : no) += numel[r.cells[0]];
    }
    CHECK(yes == e["totals"]["trainable"].get<uint64_t>());
    if (e["totals"].contains("non_trainable")) CHECK(no == e["totals"]["non_trainable"].get<uint64_t>());
  }
}

TEST_CASE("tensors: a pickled module's trainable column is each parameter's requires_grad") {
  Checkpoint ck = read_checkpoint((test::testdata() / "t113" / "whole_module.pt").string());
  const json e = test::read_json(test::testdata() / "t113" / "whole_module.expected.json");
  const std::vector<Row> rows = tensor_rows_of(render(ck, tensors_only()));
  REQUIRE(rows.size() == e["tensors"].size());
  for (const json& et : e["tensors"]) {
    CAPTURE(et["name"]);
    auto r = std::find_if(rows.begin(), rows.end(), [&](const Row& x) { return x.cells[0] == et["name"]; });
    REQUIRE(r != rows.end());
    CHECK(r->cells[6] == (et["kind"] != "parameter" ? "-" : et["requires_grad"].get<bool>() ? "yes" : "no"));
  }
}

TEST_CASE("tensors: tied-to names the entries that are one tensor, and only those") {
  // The pairs each fixture's generator notes as one tensor (same object, or same storage view).
  const std::vector<std::tuple<const char*, const char*, const char*>> tied{
      {"t113/tied_weights.pt", "embed.weight", "lm_head.weight"},
      {"t113/views.pt", "x", "x_again"},
      {"t214/views.pt", "base", "same_as_base"},
      {"t215/views.pt", "base", "same_as_base"},
  };
  for (const auto& [file, a, b] : tied) {
    CAPTURE(file);
    const json e = test::read_json(test::testdata() /
                                   (std::string(file).substr(0, std::string(file).size() - 3) + ".expected.json"));
    CHECK(std::string(e["notes"]).find(b) != std::string::npos);
    Checkpoint ck = read_checkpoint((test::testdata() / file).string());
    for (const Row& r : tensor_rows_of(render(ck, tensors_only()))) {
      CAPTURE(r.cells[0]);
      CHECK(r.cells[7] == (r.cells[0] == a ? b : r.cells[0] == b ? a : ""));
    }
  }
}

TEST_CASE("tensors: a flat state dict shows the tensor table at --depth -1, and never an empty frame") {
  Checkpoint flat = read_checkpoint((test::testdata() / "t113" / "dtypes.pt").string());
  const json e = test::read_json(test::testdata() / "t113" / "dtypes.expected.json");
  RenderOptions all;
  all.depth = -1;
  const std::string text = render(flat, all);
  CHECK(text.find("| Type |") == std::string::npos);  // no module table
  CHECK(tensor_rows_of(text).size() == e["tensors"].size());
  const std::string md = render(flat, all, true);
  CHECK(md.find("|   | Name | dtype | Shape | Kind | State | Size | Trainable | Tied to |") != std::string::npos);
  CHECK(md.find("| Type |") == std::string::npos);

  // At the default depth: no table at all, and a header line that says how to list them.
  const std::string dflt = render(flat, RenderOptions{});
  CHECK(dflt.find("\n---") == std::string::npos);
  CHECK(dflt.find(fmt::format("Tensors:  {} at the root, no module rows: --tensors or --depth -1 lists them\n",
                              e["tensors"].size())) != std::string::npos);
  RenderOptions none;
  none.depth = 0;
  const std::string zero = render(flat, none);
  CHECK(zero.find("\n---") == std::string::npos);
  CHECK(zero.find("Tensors:") == std::string::npos);

  // A module tree at --depth 0: no frame either; at -1 the module table, and the tensors only when asked.
  Checkpoint tree = read_checkpoint((test::testdata() / "t113" / "whole_module.pt").string());
  CHECK(render(tree, none).find("\n---") == std::string::npos);
  CHECK(render(tree, none, true).find("|   | Name") == std::string::npos);
  all.depth = -1;
  CHECK(render(tree, all).find("| Name | dtype | Shape") == std::string::npos);
  all.tensors = true;
  const std::string both = render(tree, all);
  CHECK(both.find(" | Type ") < both.find(" | Shape "));
  CHECK(both.find("Trainable params") > both.find(" | Shape "));
}

TEST_CASE("tensors: the text table has the module table's look") {
  Checkpoint ck = read_checkpoint((test::testdata() / "t113" / "tied_weights.pt").string());
  const std::vector<std::string> ls = lines_of(render(ck, tensors_only()));
  auto head = std::find_if(ls.begin(), ls.end(), [](const std::string& l) { return l.find("| Name") != std::string::npos; });
  REQUIRE(head != ls.end());
  // 11 rows: indices 0..10, a two-wide index column
  CHECK(head->rfind("   | Name                   | dtype   | Shape   | Kind      | State        | Size  | Trainable | Tied to",
                    0) == 0);
  const size_t width = head[1].size();
  CHECK(head[1] == std::string(width, '-'));
  CHECK(head[2] ==
        "0  | embed.weight           | float32 | [11, 6] | parameter | materialized | 264 B | yes       | lm_head.weight");
  CHECK(head[3] == "1  | norm.weight            | float32 | [6]     | parameter | materialized | 24 B  | yes");
  CHECK(head[11] == "9  | bn.num_batches_tracked | int64   | []      | buffer    | materialized | 8 B   | -");
  CHECK(head[12].rfind("10 | lm_head.weight", 0) == 0);
  CHECK(head[13] == std::string(width, '-'));
}

TEST_CASE("tensors: --match keeps the matching rows with their entry index") {
  Checkpoint ck = read_checkpoint((test::testdata() / "t113" / "tied_weights.pt").string());
  const json e = test::read_json(test::testdata() / "t113" / "tied_weights.expected.json");
  RenderOptions o;
  o.depth = 0;
  o.match = {"bn.*", "*.bias"};
  const std::string text = render(ck, o);
  std::vector<std::string> want;
  std::vector<size_t> index;
  for (size_t k = 0; k < e["tensors"].size(); ++k) {
    const std::string n = e["tensors"][k]["name"];
    if (fnmatch("bn.*", n.c_str(), 0) == 0 || fnmatch("*.bias", n.c_str(), 0) == 0) {
      want.push_back(n);
      index.push_back(k);  // the generator lists them in file order (fixtures: tensors come in the file's order)
    }
  }
  const std::vector<Row> rows = tensor_rows_of(text);
  REQUIRE(rows.size() == want.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    CHECK(rows[k].cells[0] == want[k]);
    CHECK(rows[k].index == std::to_string(index[k]));
  }
  CHECK(text.find(fmt::format("Tensors:  {} of {} listed, names matching 'bn.*' or '*.bias'\n", want.size(),
                              e["tensors"].size())) != std::string::npos);
  o.match = {"nothing.*"};
  const std::string none = render(ck, o);
  CHECK(none.find("Tensors:  0 of 11 listed, names matching 'nothing.*'\n") != std::string::npos);
  CHECK(none.find("\n---") == std::string::npos);
  CHECK(render(ck, o, true).find("|   | Name") == std::string::npos);
}

TEST_CASE("tensors: hostile names are escaped before the columns are measured") {
  Checkpoint ck = read_checkpoint((test::testdata() / "untrusted" / "names.pt").string());
  for (bool md : {false, true}) {
    const std::string out = render(ck, tensors_only(), md);
    CHECK(out.find('\x1b') == std::string::npos);
    for (const Tensor& t : ck.tensors) CHECK(out.find(md ? markdown_cell(t.name) : visible(t.name)) != std::string::npos);
  }
}

TEST_CASE("tensors: the JSON's per-entry trainable agrees with the table") {
  Checkpoint ck = read_checkpoint((test::testdata() / "t113" / "whole_module.pt").string());
  Summary s = summarize(ck);
  const json j = json::parse(summary_json_text(s));
  const std::vector<Row> rows = tensor_rows_of(render(ck, tensors_only()));
  REQUIRE(rows.size() == j["tensors"].size());
  for (size_t k = 0; k < rows.size(); ++k) {
    const json& t = j["tensors"][std::stoul(rows[k].index)];
    CHECK(t["name"] == rows[k].cells[0]);
    CHECK(rows[k].cells[6] == (t["trainable"].is_null() ? "-" : t["trainable"].get<bool>() ? "yes" : "no"));
  }
}
