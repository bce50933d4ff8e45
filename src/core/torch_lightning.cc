// TorchInterpreter's reading of a PyTorch Lightning checkpoint's top level (torch_pickle.h): the
// state_dict, the hyper-parameters, the loops, callbacks, optimizers and schedulers it records.
#include "core/torch_pickle.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <array>

namespace ckpt {

namespace {

using J = nlohmann::ordered_json;

// A list's items, or the one state.
std::vector<const Value*> each(const Value* v) {
  std::vector<const Value*> out;
  if (v && (v->kind == PKind::List || v->kind == PKind::Tuple)) out.assign(v->kids().begin(), v->kids().end());
  else if (v) out.push_back(v);
  return out;
}

}  // namespace

// Tensors held by optimizer / scheduler states, counted apart from the model.
// Each container is opened once: a state that holds itself (or one container twice) is the one object
// torch.load gives back, and its tensors count once.
TensorCount TorchInterpreter::held_tensors(const Value* v) {
  TensorCount c;
  std::unordered_set<const Value*> opened;
  std::vector<std::pair<const Value*, int>> todo{{v, 0}};
  while (!todo.empty()) {
    auto [x, d] = todo.back();
    todo.pop_back();
    budget();
    if (!x || d > 64) continue;
    if (!is_tensor(x) &&
        (x->kind == PKind::Dict || x->kind == PKind::Object || x->kind == PKind::List || x->kind == PKind::Tuple) &&
        !opened.insert(x).second)
      continue;
    if (is_tensor(x)) {
      Tensor t = tensor(x, "");
      ++c.tensors;
      c.bytes += t.bytes;
      continue;
    }
    if (x->kind == PKind::Dict || x->kind == PKind::Object)
      for (const Value* e : x->pairs()) todo.push_back({e, d + 1});
    if (x->kind == PKind::List || x->kind == PKind::Tuple)
      for (const Value* e : x->kids()) todo.push_back({e, d + 1});
  }
  return c;
}

// lightning_details.h: the states users look for, as plain JSON; 1-element tensors kept to be read.
J TorchInterpreter::state_details(const Value* v) {
  TrainingInfo& tr = ck_.training;
  return plain_json(v, [&](const Value* x) -> std::optional<J> {
    budget();
    // collections.Counter (MultiStepLR's milestones) and defaultdict: the dict they are made from
    if (x->kind == PKind::Object && (x->qualified() == "collections.Counter" || x->qualified() == "collections.defaultdict") &&
        x->args() && !x->args()->kids().empty() && x->args()->kids()[x->args()->kids().size() - 1]->kind == PKind::Dict)
      return state_details(x->args()->kids()[x->args()->kids().size() - 1]);
    if (x->kind == PKind::Float && !std::isfinite(x->f))  // JSON has no inf / nan: as Python prints them
      return J(std::isnan(x->f) ? "nan" : x->f > 0 ? "inf" : "-inf");
    if (!is_tensor(x)) return std::nullopt;
    J j = tensor_summary(x);
    Tensor t = tensor(x, "");
    if (t.numel == 1 && t.state == TensorState::Materialized && t.dtype && t.layout == Layout::Strided &&
        !t.storage.empty() && tr.scalars.size() < 4096) {
      j["__scalar__"] = tr.scalars.size();
      tr.scalars.push_back(std::move(t));
    }
    return j;
  });
}

// One optimizer state's details: its param groups' settings and the keys of its per-parameter state.
void TorchInterpreter::optimizer_details(const std::string& key, size_t index, const Value* o) {
  J groups = J::array();
  for (const Value* g : each(dict_value(o, "param_groups"))) {
    J gj = J::object();
    const auto& gp = g->pairs();
    for (size_t j = 0; j + 1 < gp.size(); j += 2) {
      if (!gp[j]->is_str()) continue;
      const Value* gv = gp[j + 1];
      gj[std::string(gp[j]->str())] = gp[j]->str() == "params" ? J(gv->kind == PKind::List || gv->kind == PKind::Tuple ? gv->kids().size() : 0)
                                                        : state_details(gv);
    }
    groups.push_back(std::move(gj));
  }
  J keys = J::array();
  uint64_t params = 0;
  if (const Value* st = dict_value(o, "state"); dict_like(st)) {
    const auto& sp = st->pairs();
    for (size_t j = 0; j + 1 < sp.size(); j += 2, ++params) {
      budget();
      const auto& ep = sp[j + 1]->pairs();
      for (size_t e = 0; e + 1 < ep.size() && keys.size() < 64; e += 2)
        if (ep[e]->is_str() && std::find(keys.begin(), keys.end(), J(std::string(ep[e]->str()))) == keys.end())
          keys.push_back(std::string(ep[e]->str()));
    }
  }
  ck_.training.details["optimizers"].push_back(
      J{{"key", key}, {"index", index}, {"param_groups", std::move(groups)}, {"state", {{"params", params}, {"keys", std::move(keys)}}}});
}

// The details of a top-level key lightning_details.h reads: optimizers, schedulers, callbacks, loops,
// precision.
void TorchInterpreter::key_details(const std::string& key, const Value* val) {
  TrainingInfo& tr = ck_.training;
  if (key == "optimizer_states" || key == "optimizer" || key == "optimizers") {
    const auto list = each(val);
    for (size_t j = 0; j < list.size(); ++j)
      if (dict_like(list[j]) && dict_value(list[j], "param_groups")) optimizer_details(key, j, list[j]);
  } else if (key == "lr_schedulers" || key == "scheduler" || key == "schedulers") {
    const auto list = each(val);
    for (size_t j = 0; j < list.size(); ++j)
      if (dict_like(list[j])) tr.details["lr_schedulers"].push_back(J{{"key", key}, {"index", j}, {"state", state_details(list[j])}});
  } else if (key == "callbacks" && dict_like(val)) {
    const auto& cb = val->pairs();
    for (size_t j = 0; j + 1 < cb.size(); j += 2)
      if (cb[j]->is_str()) tr.details["callbacks"].push_back(J{{"key", std::string(cb[j]->str())}, {"state", state_details(cb[j + 1])}});
  } else if (key == "loops" && dict_like(val)) {
    tr.details["loops"] = state_details(val);
  } else if ((key == "native_amp_scaling_state" || key == "amp_scaling_state" ||
              (key.size() > 9 && key.compare(key.size() - 9, 9, "Precision") == 0)) &&
             dict_like(val)) {
    tr.details["precision"] = J{{"key", key}, {"state", state_details(val)}};
  }
}

// A top-level key claimed: the callbacks' and loops' names, an optimizer / scheduler state counted,
// anything else kept as data (its tensors counted, or its value).
void TorchInterpreter::claim_key(const std::string& key, const Value* val) {
  TrainingInfo& tr = ck_.training;
  if (key == "callbacks" && dict_like(val)) {
    std::vector<std::string> names;
    const auto& cb = val->pairs();
    for (size_t j = 0; j + 1 < cb.size(); j += 2) names.push_back(cb[j]->is_str() ? std::string(cb[j]->str()) : std::string("?"));
    tr.claim(key);
    tr.callbacks = std::move(names);
    const TensorCount held = held_tensors(val);  // e.g. ModelCheckpoint's best_model_score
    if (held.tensors > 0) {
      tr.claim("callback_tensors");
      tr.callback_tensors = held;
    }
  } else if (key == "optimizer_states" || key == "optimizer" || key == "optimizers" || key == "lr_schedulers" ||
             key == "scheduler" || key == "schedulers") {
    const TensorCount held = held_tensors(val);
    const uint64_t count = val->kind == PKind::List || val->kind == PKind::Tuple ? val->kids().size() : 1;
    tr.claim(key);
    tr.states.emplace_back(key, TrainingInfo::State{count, held});
  } else if (key == "loops" && dict_like(val)) {
    std::vector<std::string> names;
    const auto& lp = val->pairs();
    for (size_t j = 0; j + 1 < lp.size(); j += 2)
      if (lp[j]->is_str()) names.push_back(std::string(lp[j]->str()));
    tr.claim(key);
    tr.loops = std::move(names);
  } else {
    TrainingInfo::Data d;
    const TensorCount held = held_tensors(val);
    if (held.tensors > 0) d.held = held;
    else d.value = plain(val, 0);
    tr.claim(key);
    tr.data.emplace_back(key, std::move(d));
  }
}

// Every top-level key but the model's, in two passes: the details of each, then each claimed (the
// storages met are recorded in that order).
void TorchInterpreter::lightning(const Value* root) {
  in_model_ = false;
  const auto& p = root->pairs();
  for (const bool claim : {false, true}) {
    for (size_t k = 0; k + 1 < p.size(); k += 2) {
      if (!p[k]->is_str()) continue;
      const std::string key(p[k]->str());
      const Value* val = p[k + 1];
      if (key == ck_.model_key) continue;
      if (claim) claim_key(key, val);
      else key_details(key, val);
    }
  }
}

}  // namespace ckpt
