#include "core/hf_weights.h"

#include <algorithm>
#include <map>

namespace ckpt {

HfWeights hf_weights(const Checkpoint& ck) {
  HfWeights w;
  static const char* const kEmbeddings[] = {"embed_tokens.weight", "wte.weight",      "word_embeddings.weight",
                                            "tok_embeddings.weight", "embed_in.weight", "shared.weight"};
  std::map<std::string, int64_t> lists;  // "model.layers." -> highest index + 1
  for (size_t index = 0; index < ck.tensors.size(); ++index) {
    const Tensor& t = ck.tensors[index];
    const std::string& n = t.name;
    auto ends = [&](std::string_view s) {
      return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0 &&
             (n.size() == s.size() || n[n.size() - s.size() - 1] == '.');
    };
    if (w.embedding.empty() && t.shape.size() == 2)
      for (const char* e : kEmbeddings)
        if (ends(e)) {
          w.embedding = n;
          w.embedding_rows = t.shape[0];
          w.embedding_index = index;
        }
    if (w.lm_head.empty() && t.shape.size() == 2 && ends("lm_head.weight")) {
      w.lm_head = n;
      w.lm_head_rows = t.shape[0];
      w.lm_head_index = index;
    }
    // numbered blocks: "<prefix>(layers|h|layer|blocks|block).<k>."
    for (size_t p = n.find('.'); p != std::string::npos; p = n.find('.', p + 1)) {
      size_t q = p + 1;
      while (q < n.size() && n[q] >= '0' && n[q] <= '9') ++q;
      if (q == p + 1 || q >= n.size() || n[q] != '.' || q - p > 7) continue;
      const std::string list = n.substr(0, p + 1);
      const size_t b = list.rfind('.', list.size() - 2);
      const std::string last = list.substr(b == std::string::npos ? 0 : b + 1, list.size() - (b == std::string::npos ? 0 : b + 1) - 1);
      if (!is_block_list(last)) continue;
      const int64_t k = std::stoll(n.substr(p + 1, q - p - 1));
      lists[list] = std::max(lists[list], k + 1);
      break;
    }
  }
  if (lists.size() == 1) {
    w.layers_prefix = lists.begin()->first;
    w.layers = lists.begin()->second;
    // The first layer's attention projections, by the names each layout gives them.
    const std::string& L = w.layers_prefix;
    const std::pair<std::string, std::string> separate[] = {{L + "0.self_attn.q_proj.weight", L + "0.self_attn.k_proj.weight"},
                                                            {L + "0.attention.self.query.weight", L + "0.attention.self.key.weight"}};
    const std::pair<std::string, bool> fused[] = {{L + "0.self_attn.qkv_proj.weight", false},
                                                  {L + "0.attention.query_key_value.weight", false},
                                                  {L + "0.attn.c_attn.weight", true}};  // (Conv1D: [in, out])
    const Tensor* tq = nullptr;
    const Tensor* tk = nullptr;
    for (const Tensor& t : ck.tensors) {
      if (t.shape.size() != 2) continue;
      for (const auto& [q, k] : separate) {
        if (t.name == q) tq = &t;
        if (t.name == k) tk = &t;
      }
      for (const auto& [name, conv1d] : fused)
        if (t.name == name) {
          w.qkv = name;
          w.qkv_out = t.shape[conv1d ? 1 : 0];
          w.qkv_in = t.shape[conv1d ? 0 : 1];
        }
    }
    if (tq && tk) {
      w.q_proj = tq->name;
      w.k_proj = tk->name;
      w.q_rows = tq->shape[0];
      w.q_cols = tq->shape[1];
      w.k_rows = tk->shape[0];
    }
  }
  w.dtype = most_bytes_float_dtype(ck.tensors, [](size_t) { return true; });
  return w;
}

bool is_block_list(std::string_view seg) { return seg == "layers" || seg == "h" || seg == "layer" || seg == "blocks" || seg == "block"; }

std::string most_bytes_float_dtype(const std::vector<Tensor>& tensors, const std::function<bool(size_t)>& keep) {
  std::map<std::string_view, uint64_t> bytes;  // by name: ties go to the first name
  for (size_t k = 0; k < tensors.size(); ++k)
    if (const Tensor& t = tensors[k]; t.dtype && t.dtype->cls == DTypeClass::Float && keep(k)) bytes[t.dtype->name] += t.bytes;
  uint64_t most = 0;
  std::string out;
  for (const auto& [d, b] : bytes)
    if (b > most) most = b, out = std::string(d);
  return out;
}

}  // namespace ckpt
