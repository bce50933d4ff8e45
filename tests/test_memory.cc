// memory.cc against accelerate 1.15 (testdata/hf523/truth.json, gen_hf.py and add_training_truth.py): Adam's
// training usage per precision from the float32 size, and the estimate of a real folder, the command's
// AutoModel (the base model without lm_head) apart.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/memory.h"
#include "core/reader.h"
#include "core/summary.h"
#include "fixtures.h"

using namespace ckpt;

TEST_CASE("memory: estimate_training_usage as accelerate's for every precision") {
  int checked = 0;
  const nlohmann::json truth = test::read_json(test::testdata() / "hf523" / "truth.json");
  for (const auto& [name, t] : truth.items()) {
    if (!t.is_object() || !t.contains("accelerate_estimate_training_usage_float32")) continue;
    const auto bytes = t["accelerate_float32_total_size"].get<uint64_t>();
    for (const auto& [precision, want] : t["accelerate_estimate_training_usage_float32"].items()) {
      const TrainingUsage u = estimate_training_usage(bytes, precision);
      INFO(name << " " << precision);
      CHECK(u.model == want["model"].get<int64_t>());
      CHECK(u.gradients == want["gradients"].get<int64_t>());
      CHECK(u.optimizer == want["optimizer"].get<int64_t>());
      CHECK(u.step == want["step"].get<int64_t>());
      ++checked;
    }
  }
  CHECK(checked >= 15);
  CHECK(estimate_training_usage(1000, "int8").step == -1);
}

TEST_CASE("memory: a folder's estimate and accelerate's command's AutoModel") {
  const nlohmann::json t = test::read_json(test::testdata() / "hf523" / "truth.json")["phi3_partial_fp16"];
  const Checkpoint ck = read_checkpoint((test::testdata() / "hf523" / "phi3_partial_fp16").string());
  const Summary s = summarize(ck);
  const MemoryReport m = estimate_memory(ck, s.same_tensor, MemoryOptions{});
  CHECK(m.own_dtype == "float16");
  CHECK(m.float32_total == t["accelerate_float32_total_size"].get<uint64_t>());
  CHECK(m.extra_buffers.size() == 2);  // rotary inv_freq and original_inv_freq (transformers 5.x)
  REQUIRE(m.command);
  const nlohmann::json cmd = t["accelerate_estimate_memory"];
  CHECK(m.command->model_class == cmd["model_class"].get<std::string>());
  CHECK(m.command->float32_total == cmd["total_size"].get<uint64_t>());
  CHECK(m.command->largest == cmd["largest_layer"][0].get<uint64_t>());
  CHECK(m.command->largest_layers == cmd["largest_layer"][1].get<std::vector<std::string>>());
  CHECK(m.command->left_out == std::vector<std::string>{"lm_head"});
  CHECK_THROWS_AS(estimate_memory(ck, s.same_tensor, MemoryOptions{{"float64"}, 1, std::nullopt}), std::invalid_argument);
}
