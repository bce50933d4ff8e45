// Renderers: Lightning's number formatting and table look, and untrusted text made visible (text.h).
#include <doctest/doctest.h>

#include <algorithm>

#include "core/findings.h"
#include "core/reader.h"
#include "core/render_report.h"
#include "core/render_summary.h"
#include "core/text.h"
#include "fixtures.h"

using namespace ckpt;

TEST_CASE("render: human_count matches Lightning's get_human_readable_count") {
  // Values from lightning.pytorch.utilities.model_summary.get_human_readable_count docstring / behaviour.
  CHECK(human_count(0) == "0  ");
  CHECK(human_count(123) == "123  ");
  CHECK(human_count(1234) == "1.2 K");
  CHECK(human_count(2e6) == "2.0 M");
  CHECK(human_count(3e9) == "3.0 B");
  CHECK(human_count(4e14) == "400 T");
  CHECK(human_count(5e15) == "5,000 T");
  CHECK(human_count(132000) == "132 K");
}

TEST_CASE("render: human_bytes") {
  CHECK(human_bytes(0) == "0 B");
  CHECK(human_bytes(999) == "999 B");
  CHECK(human_bytes(4900) == "4.9 kB");
  CHECK(human_bytes(3'100'000'000ull) == "3.1 GB");
}

TEST_CASE("render: one joiner for every name list") {
  const std::vector<std::string> v{"a", "b", "c", "d", "e"};
  CHECK(join({}) == "");
  CHECK(join(v) == "a, b, c, d, e");
  CHECK(join(v, " | ") == "a | b | c | d | e");
  CHECK(join(v, ", ", 5, ", and {} more") == "a, b, c, d, e");
  CHECK(join(v, ", ", 4, ", and {} more") == "a, b, c, d, and 1 more");
  CHECK(join(v, ", ", 3, " and {} more") == "a, b, c and 2 more");
  CHECK(join(v, ", ", 2, ", ... ({} more)") == "a, b, ... (3 more)");
}

TEST_CASE("render: text table has Lightning's shape") {
  Checkpoint ck = read_checkpoint((test::testdata() / "t113" / "whole_module.pt").string());
  Summary s = summarize(ck);
  RenderOptions o;
  const std::string text = render_summary_text(s, o);
  CHECK(text.find("  | Name     | Type       | Params | Buffers | dtype") != std::string::npos);
  CHECK(text.find("Trainable params\n") != std::string::npos);
  CHECK(text.find("Non-trainable params\n") != std::string::npos);
  CHECK(text.find("Total params\n") != std::string::npos);
  CHECK(text.find("Modules in eval mode\n") != std::string::npos);
  CHECK(text.find("\x1b[") == std::string::npos);  // no colour unless asked
  o.depth = 0;
  const std::string none = render_summary_text(s, o);
  CHECK(none.find("| backbone") == std::string::npos);
  const std::string md = render_summary_markdown(s, RenderOptions{});
  CHECK(md.find("|   | Name | Type | Params | Buffers | dtype | Size | Mode |") != std::string::npos);
}

// ---- untrusted text: visible() and where the renderers use it ----

namespace {

using namespace std::string_literals;

// Independent of visible(): no C0 control but LF, no DEL, valid UTF-8 (no overlong forms, surrogates
// or cut sequences), and no C1 or bidi control among the code points.
bool terminal_safe(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n') || c == 0x7f) return false;
      ++i;
      continue;
    }
    const size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (n == 0 || c > 0xf4 || i + n > s.size()) return false;
    uint32_t cp = c & (0xff >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
      const unsigned char x = static_cast<unsigned char>(s[i + k]);
      if ((x & 0xc0) != 0x80) return false;
      cp = cp << 6 | (x & 0x3f);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e ||
        cp == 0x200f || cp == 0x061c)
      return false;
    i += n;
  }
  return true;
}

}  // namespace

TEST_CASE("visible: ordinary names come back unchanged") {
  for (const std::string s : {""s, "features.0.weight"s, "a b~!@#$%^&*()_+{}|:\"<>?`-=[];',./"s, "back\\slash"s,
                              "\xe4\xb8\xad\xe6\x96\x87.\xe6\x9d\x83\xe9\x87\x8d"s /* 中文.权重 */, "caf\xc3\xa9"s,
                              "nbsp\xc2\xa0"s /* U+00A0, past C1 */, "\xf0\x9f\x98\x80"s /* U+1F600 */,
                              "\xed\x9f\xbf\xee\x80\x80"s /* U+D7FF U+E000 around the surrogates */,
                              "\xf4\x8f\xbf\xbf"s /* U+10FFFF */, "\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa"s}) {
    CAPTURE(s);
    CHECK(visible(s) == s);
    CHECK(is_visible(s));
  }
}

TEST_CASE("visible: C0 controls, TAB/CR/LF and DEL become \\xNN") {
  CHECK(visible("erase\x1b[2K\x1b[1A.weight") == "erase\\x1b[2K\\x1b[1A.weight");
  CHECK(visible("title\x1b]0;owned\x07") == "title\\x1b]0;owned\\x07");
  CHECK(visible("a\tb\rc\nd") == "a\\x09b\\x0dc\\x0ad");
  CHECK(visible("nul\0x"s) == "nul\\x00x");
  CHECK(visible("\x1f\x7f") == "\\x1f\\x7f");
  CHECK(!is_visible("\x1b"));
}

TEST_CASE("visible: C1 and bidi controls become \\uNNNN") {
  CHECK(visible("csi\xc2\x9b"
                "2J") == "csi\\u009b2J");
  CHECK(visible("\xc2\x80\xc2\x85\xc2\x9f") == "\\u0080\\u0085\\u009f");
  CHECK(visible("rlo\xe2\x80\xaegnp.exe") == "rlo\\u202egnp.exe");
  CHECK(visible("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad") == "\\u202a\\u202b\\u202c\\u202d");
  CHECK(visible("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9") == "\\u2066\\u2067\\u2068\\u2069");
  CHECK(visible("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c") == "\\u200e\\u200f\\u061c");
  // mixed with valid non-ASCII, which stays
  CHECK(visible("\xe4\xb8\xad\xe2\x80\xae\xe6\x96\x87 caf\xc3\xa9\xc2\x9b") ==
        "\xe4\xb8\xad\\u202e\xe6\x96\x87 caf\xc3\xa9\\u009b");
}

TEST_CASE("visible: bytes that are not UTF-8 become \\xNN, one by one") {
  CHECK(visible("ff\xff\xfe") == "ff\\xff\\xfe");
  CHECK(visible("cont\x80.") == "cont\\x80.");
  CHECK(visible("\xe9"
                "A") == "\\xe9A");  // Latin-1 é
  // overlong forms
  CHECK(visible("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(visible("\xc1\xbf") == "\\xc1\\xbf");
  CHECK(visible("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");
  CHECK(visible("\xf0\x80\x80\xaf") == "\\xf0\\x80\\x80\\xaf");
  // surrogates, and past U+10FFFF
  CHECK(visible("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(visible("\xed\xbf\xbf") == "\\xed\\xbf\\xbf");
  CHECK(visible("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
  CHECK(visible("\xf5\x80\x80\x80") == "\\xf5\\x80\\x80\\x80");
  // cut short: at the end, and before ASCII
  CHECK(visible("weight\xe4\xb8") == "weight\\xe4\\xb8");
  CHECK(visible("x\xf0\x9f\x98") == "x\\xf0\\x9f\\x98");
  CHECK(visible("\xc3") == "\\xc3");
  CHECK(visible("\xe4\xb8"
                "A\xe4\xb8\xad") == "\\xe4\\xb8A\xe4\xb8\xad");
}

TEST_CASE("visible: one line, safe, and a second pass changes nothing") {
  const std::string hostile = "a\x1b]52;c;cm0=\x07\n\xc2\x9b\xe2\x80\xae\xff\xed\xa0\x80\xe4\xb8\\x1b \xe4\xb8\xad";
  const std::string v = visible(hostile);
  CHECK(v.find('\n') == std::string::npos);
  CHECK(terminal_safe(v));
  CHECK(is_visible(v));
  CHECK(visible(v) == v);
  CHECK(!is_visible(hostile));
}

TEST_CASE("visible_prefix: cut between characters and escapes") {
  bool cut = false;
  CHECK(visible_prefix("abc", 3, &cut) == "abc");
  CHECK(!cut);
  CHECK(visible_prefix("ab\x1b"
                       "cd",
                       5, &cut) == "ab");  // \x1b does not fit whole
  CHECK(cut);
  CHECK(visible_prefix("ab\x1b"
                       "cd",
                       6, &cut) == "ab\\x1b");
  CHECK(visible_prefix("\xe4\xb8\xad\xe6\x96\x87", 5, &cut) == "\xe4\xb8\xad");
  CHECK(cut);
  CHECK(visible_prefix("\xe2\x80\xae", 5) == "");
}

TEST_CASE("markdown_cell: pipes and controls") {
  CHECK(markdown_cell("a|b") == "a\\|b");
  CHECK(markdown_cell("a|b\x1b[2K\xe2\x80\xae") == "a\\|b\\x1b[2K\\u202e");
  CHECK(markdown_cell("plain.name") == "plain.name");
}

TEST_CASE("json_text: valid UTF-8, controls as JSON escapes, code points kept") {
  const std::string name = "e\x1b[2K\x7f\xc2\x9b\xe2\x80\xae\xe2\x81\xa6\xe2\x80\x8f\xd8\x9c\xe4\xb8\xad\xc3\xa9";
  const std::string j = json_text(nlohmann::ordered_json(name), -1);
  CHECK(j == "\"e\\u001b[2K\\u007f\\u009b\\u202e\\u2066\\u200f\\u061c\xe4\xb8\xad\xc3\xa9\"");
  CHECK(terminal_safe(j));
  CHECK(nlohmann::json::parse(j).get<std::string>() == name);  // lossless for valid code points
  std::string streamed;
  put_string(streamed, name);
  CHECK(streamed == j);

  // bytes that are not UTF-8: U+FFFD, never an exception, never broken UTF-8
  for (const std::string bad : {"ff\xff\xfe"s, "\xc0\xaf"s, "\xed\xa0\x80"s, "w\xe4\xb8"s, "\x80"s,
                                "\xe9"
                                "A"s}) {
    CAPTURE(bad);
    std::string out;
    CHECK_NOTHROW(out = json_text(nlohmann::ordered_json{{"name", bad}}, -1));
    CHECK(terminal_safe(out));
    CHECK(out.find("\xef\xbf\xbd") != std::string::npos);
    CHECK(nlohmann::json::parse(out).is_object());
    std::string s;
    put_string(s, bad);
    CHECK(terminal_safe(s));
  }
  std::string del;
  put_string(del, "a\x7f");
  CHECK(del == "\"a\\u007f\"");
}

TEST_CASE("error messages: member names and quoted names escaped, one line") {
  const InputError e("x.pt", "pre\x1b]0;t\x07/data.pkl", 0x1a3, "tensor 'a\x1b[1A\xe2\x80\xae\xff' reaches past\nits storage");
  CHECK(e.render() == "x.pt: pre\\x1b]0;t\\x07/data.pkl+0x1a3: tensor 'a\\x1b[1A\\u202e\\xff' reaches past\\x0aits storage");
  CHECK(InputError("model.pt", "archive/data.pkl", 0x1a3, "BINUNICODE length 4096 exceeds 40 remaining bytes").render() ==
        "model.pt: archive/data.pkl+0x1a3: BINUNICODE length 4096 exceeds 40 remaining bytes");
}

TEST_CASE("check text: message, where and fix escaped; colour codes kept") {
  CheckReport r;
  r.file = "f\x1b[2K.pt";
  r.fail_on = "error";
  r.counts[2] = 1;
  r.findings.push_back({"dangerous-global",
                        Severity::Error,
                        "calls os.system\x1b[2K\x1b[1A",
                        "do not load \xe2\x80\xae",
                        {"data.pkl: os.system\x1b[2K\x1b[1A", "line\nbreak"}});
  const std::string plain = render_check_text(r, false);
  CHECK(terminal_safe(plain));
  CHECK(plain.find("error[dangerous-global]: calls os.system\\x1b[2K\\x1b[1A\n") != std::string::npos);
  CHECK(plain.find("  at: data.pkl: os.system\\x1b[2K\\x1b[1A\n  at: line\\x0abreak\n") != std::string::npos);
  CHECK(plain.find("  fix: do not load \\u202e\n") != std::string::npos);
  CHECK(plain.find("f\\x1b[2K.pt: 1 error(s)") != std::string::npos);
  const std::string colour = render_check_text(r, true);
  CHECK(colour.find("\x1b[1;31merror[dangerous-global]\x1b[0m: calls os.system\\x1b[2K") != std::string::npos);
}

TEST_CASE("summary text and Markdown of names with controls (testdata/untrusted/names.pt)") {
  Checkpoint ck = read_checkpoint((test::testdata() / "untrusted" / "names.pt").string());
  Summary s = summarize(ck);
  s.findings = findings(ck, s);
  RenderOptions o;
  o.depth = -1;
  for (const std::string& out : {render_summary_text(s, o), render_summary_markdown(s, o)}) {
    CHECK(terminal_safe(out));
    CHECK(out.find("erase\\x1b[2K\\x1b[1A") != std::string::npos);
    CHECK(out.find("clip\\x1b]52;c;cm0gLXJmIH4=\\x07") != std::string::npos);
    CHECK(out.find("rlo\\u202egnp") != std::string::npos);
    CHECK(out.find("csi\\u009b2J") != std::string::npos);
    CHECK(out.find("line\\x0abreak") != std::string::npos);
    CHECK(out.find("\xe4\xb8\xad\xe6\x96\x87") != std::string::npos);  // 中文 as it is
    CHECK(out.find("back\\slash") != std::string::npos);
    CHECK(out.find("cmp\\x1b[2K\\x1b[1A._orig_mod.weight") != std::string::npos);  // in the finding
  }
  // The text table measures escaped cells: every ASCII row has its " | " where the header has it (fmt
  // pads CJK by display width, the table measures bytes: an older matter, left alone here).
  const std::string text = render_summary_text(s, o);
  const size_t head = text.find("  | Name");
  REQUIRE(head != std::string::npos);
  const size_t line_start = text.rfind('\n', head) + 1;
  const size_t bar = text.find(" | Type", line_start) - line_start;
  size_t rows = 0;
  for (size_t at = text.find('\n', text.find('\n', head) + 1) + 1; at < text.size() && text[at] != '-'; ++rows) {
    const size_t end = text.find('\n', at);
    const std::string row = text.substr(at, end - at);
    if (std::all_of(row.begin(), row.end(), [](char c) { return c > 0; })) CHECK(row.compare(bar, 3, " | ") == 0);
    at = end + 1;
  }
  CHECK(rows >= 10);
}

TEST_CASE("check text of names and globals with controls (testdata/untrusted)") {
  for (const char* name : {"names.pt", "global.pkl", "prefix_overrun.pt"}) {
    CAPTURE(name);
    const CheckResult res = run_checks((test::testdata() / "untrusted" / name).string(), Limits{});
    CheckReport r;
    r.file = name;
    r.fail_on = "error";
    r.findings = res.findings;
    r.read_error = res.read_error;
    REQUIRE((!r.findings.empty() || !r.read_error.empty()));
    const std::string out = render_check_text(r, false);
    CHECK(terminal_safe(out));
    CHECK(terminal_safe(r.read_error));
    CHECK((out + r.read_error).find("\\x1b[2K\\x1b[1A") != std::string::npos);
  }
}
