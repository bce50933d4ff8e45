// Renderers: Lightning's number formatting and table look.
#include <doctest/doctest.h>

#include "core/reader.h"
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
