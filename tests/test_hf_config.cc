// hf_config.cc against the configs transformers 5.23 wrote (testdata/hf523, truth.json from gen_hf.py): the
// facts read under transformers' names and aliases, which layers keep a sliding-window KV cache (as the real
// past_key_values' layer classes say), the weights' facts, and the helpers memory.cc shares.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/hf_config.h"
#include "core/hf_weights.h"
#include "core/reader.h"
#include "fixtures.h"

using namespace ckpt;

TEST_CASE("hf_config: config.json's facts as transformers names them, GPT-2's aliases included") {
  const Limits lim;
  const auto gpt2 = read_hf_config((test::testdata() / "hf523" / "gpt2_tied").string(), lim);
  REQUIRE(gpt2);
  const nlohmann::json truth = test::read_json(test::testdata() / "hf523" / "truth.json")["gpt2_tied"]["config"];
  CHECK(gpt2->model_type == "gpt2");
  CHECK(gpt2->architectures == std::vector<std::string>{truth["architectures"][0].get<std::string>()});
  CHECK(gpt2->hidden_size == truth["n_embd"].get<int64_t>());
  CHECK(gpt2->num_attention_heads == truth["n_head"].get<int64_t>());
  CHECK(gpt2->num_hidden_layers == truth["n_layer"].get<int64_t>());
  CHECK(gpt2->head_size() == truth["n_embd"].get<int64_t>() / truth["n_head"].get<int64_t>());
  CHECK(gpt2->transformers_major == 5);
  CHECK(gpt2->transformers_minor == 23);
  CHECK(gpt2->is_causal_lm());
  const auto bert = read_hf_config((test::testdata() / "hf523" / "bert_enc").string(), lim);
  REQUIRE(bert);
  CHECK_FALSE(bert->is_causal_lm());
  CHECK_FALSE(read_hf_config((test::testdata() / "t113").string(), lim));  // no config.json
}

TEST_CASE("hf_config: sliding-window layers as transformers' DynamicCache made them (its layer classes)") {
  const nlohmann::json truth = test::read_json(test::testdata() / "hf523" / "truth.json");
  const Limits lim;
  int checked = 0;
  for (const auto& [name, t] : truth.items()) {
    if (!t.is_object() || !t.contains("kv_cache")) continue;
    const auto c = read_hf_config((test::testdata() / "hf523" / name).string(), lim);
    REQUIRE(c);
    for (const auto& kv : t["kv_cache"]) {
      int64_t sliding = 0;
      for (const auto& cls : kv["layer_classes"]) sliding += cls == "DynamicSlidingWindowLayer";
      INFO(name);
      CHECK(c->sliding_layers() == sliding);
      ++checked;
    }
  }
  CHECK(checked >= 10);
}

TEST_CASE("hf_config: the weights' facts (embedding, layers, attention projections, dtype)") {
  const Checkpoint llama = read_checkpoint((test::testdata() / "hf523" / "llama_gqa_bf16").string());
  const HfWeights w = hf_weights(llama);
  CHECK(w.embedding == "model.embed_tokens.weight");
  CHECK(w.lm_head == "lm_head.weight");
  CHECK(w.layers_prefix == "model.layers.");
  CHECK(w.layers == 3);
  CHECK(w.dtype == "bfloat16");
  const nlohmann::json cfg = test::read_json(test::testdata() / "hf523" / "truth.json")["llama_gqa_bf16"]["config"];
  CHECK(w.q_rows == cfg["num_attention_heads"].get<int64_t>() * cfg["head_dim"].get<int64_t>());
  CHECK(w.k_rows == cfg["num_key_value_heads"].get<int64_t>() * cfg["head_dim"].get<int64_t>());
  CHECK(w.q_cols == cfg["hidden_size"].get<int64_t>());
  const HfWeights g = hf_weights(read_checkpoint((test::testdata() / "hf523" / "gpt2_tied").string()));
  CHECK(g.qkv == "transformer.h.0.attn.c_attn.weight");
  CHECK(g.qkv_in == 64);
  CHECK(g.qkv_out == 3 * 64);
}

TEST_CASE("hf_config: the block lists and the dtype holding most bytes") {
  for (const char* s : {"layers", "h", "layer", "blocks", "block"}) CHECK(is_block_list(s));
  for (const char* s : {"layers_0", "heads", "", "encoder"}) CHECK_FALSE(is_block_list(s));
  std::vector<Tensor> t(3);
  t[0].dtype = dtype_by_name("float16");
  t[0].bytes = 10;
  t[1].dtype = dtype_by_name("float32");
  t[1].bytes = 8;
  t[2].dtype = dtype_by_name("int64");
  t[2].bytes = 100;  // not floating
  CHECK(most_bytes_float_dtype(t, [](size_t) { return true; }) == "float16");
  CHECK(most_bytes_float_dtype(t, [](size_t k) { return k != 0; }) == "float32");
  CHECK(most_bytes_float_dtype(t, [](size_t) { return false; }).empty());
}
