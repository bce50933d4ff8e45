// Layer types inferred from tensors alone, against the classes TorchScript archives declare: every
// scripted / traced fixture's module tree names each module's class, so inferring from its tensors
// (as if it were a state dict) must give that class or nothing. The hit rate is printed.
#include <doctest/doctest.h>

#include <filesystem>

#include "core/layer_types.h"
#include "core/reader.h"
#include "fixtures.h"

using namespace ckpt;

TEST_CASE("layer types: inferred from TorchScript fixtures' tensors equal their declared classes or stay unknown") {
  size_t modules = 0, inferred = 0, checked_files = 0;
  for (const char* dir : {"ts113", "t26", "t214", "t215", "forward", "check", "tshidden", "tshidden/t26", "compile/t26"}) {
    const std::filesystem::path folder = test::testdata() / dir;
    if (!std::filesystem::is_directory(folder)) continue;
    for (const auto& e : std::filesystem::directory_iterator(folder)) {
      if (e.path().extension() != ".pt") continue;
      Checkpoint ck;
      try {
        ck = read_checkpoint(e.path().string());
      } catch (const std::exception&) {
        continue;  // not readable here (hostile fixtures): other tests cover them
      }
      if (ck.ts_classes.empty() || ck.modules.empty()) continue;
      ++checked_files;
      const auto types = infer_layer_types(ck.tensors);
      for (const Module& m : ck.modules) {
        if (m.type.empty() || m.name.empty()) continue;
        ++modules;
        const std::string_view* type = types.find(m.name);
        if (!type) continue;
        ++inferred;
        CAPTURE(e.path().string());
        CAPTURE(m.name);
        CHECK_MESSAGE(layer_type_matches(*type, m.type), "inferred " << *type << ", declared " << m.type);
      }
    }
  }
  MESSAGE("layer types: " << inferred << " of " << modules << " TorchScript modules inferred (" << checked_files
                          << " archives), every one equal to its declared class");
  CHECK(checked_files > 20);
  CHECK(inferred * 4 > modules);  // a floor: most leaf layers (conv with a bias, linear, norms, embeddings) are named
}

TEST_CASE("layer types: what the tensors say, and what they leave open") {
  auto t = [](std::string name, std::vector<int64_t> shape) {
    Tensor x;
    x.name = std::move(name);
    x.shape = std::move(shape);
    return x;
  };
  const std::vector<Tensor> sd{
      t("conv.weight", {16, 3, 3, 3}),     t("conv.bias", {16}),  // Conv2d: the bias is out channels = w[0]
      t("up.weight", {16, 8, 2, 2}),       t("up.bias", {8}),  // ConvTranspose2d: out = w[1]
      t("sq.weight", {8, 8, 3, 3}),  // square, no bias, no norm after it: open
      t("bn.weight", {8}),                 t("bn.bias", {8}),     t("bn.running_mean", {8}), t("bn.running_var", {8}),
      t("fc.weight", {10, 16}),            t("fc.bias", {10}),
      t("c_attn.weight", {16, 48}),        t("c_attn.bias", {48}),  // GPT-2's Conv1D: [in, out]
      t("emb.weight", {100, 16}),          t("lm_head.weight", {100, 16}),
      t("ln_f.weight", {16}),              t("ln_f.bias", {16}),  t("rms_norm.weight", {16}), t("scale.weight", {16}),
      t("lstm.weight_ih_l0", {64, 8}),     t("lstm.weight_hh_l0", {64, 16}),
      t("gru.weight_ih_l0", {48, 8}),      t("gru.weight_hh_l0", {48, 16}),
      t("mha.in_proj_weight", {48, 16}),   t("mha.in_proj_bias", {48}),
      t("odd.weight", {7, 5}),             t("odd.bias", {3}),  // a bias that fits neither way: open
  };
  const auto types = infer_layer_types(sd);
  auto type = [&](const char* m) { return types.find(m) ? std::string(*types.find(m)) : std::string("?"); };
  CHECK(type("conv") == "Conv2d");
  CHECK(type("up") == "ConvTranspose2d");
  CHECK(type("sq") == "?");
  CHECK(type("bn") == "?");  // the layer before it (sq) is open, so its dimension is too
  CHECK(type("fc") == "Linear");
  CHECK(type("c_attn") == "Conv1D");
  CHECK(type("emb") == "Embedding");
  CHECK(type("lm_head") == "Linear");
  CHECK(type("ln_f") == "LayerNorm");
  CHECK(type("rms_norm") == "RMSNorm");
  CHECK(type("scale") == "?");
  CHECK(type("lstm") == "LSTM");
  CHECK(type("gru") == "GRU");
  CHECK(type("mha") == "MultiheadAttention");
  CHECK(type("odd") == "?");
  CHECK(layer_type_matches("RMSNorm", "LlamaRMSNorm"));
  CHECK_FALSE(layer_type_matches("Linear", "Conv1D"));
}
