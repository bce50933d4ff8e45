#include "core/lightning_details.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/storage.h"
#include "core/text.h"
#include "core/values.h"

namespace ckpt {

namespace {

using J = nlohmann::ordered_json;

bool has(const J& o, std::initializer_list<const char*> keys) {
  return std::all_of(keys.begin(), keys.end(), [&](const char* k) { return o.contains(k); });
}

// {"__tensor__": ..., "__scalar__": k} replaced by the value read (ints stay ints), recursively.
J with_values(const J& v, const TrainingInfo& tr) {
  if (v.is_object()) {
    if (auto it = v.find("__scalar__"); it != v.end() && it->is_number_unsigned() && v.contains("__tensor__")) {
      const size_t k = it->get<size_t>();
      if (k < tr.scalar_values.size() && tr.scalar_values[k] && k < tr.scalars.size()) {
        const double x = *tr.scalar_values[k];
        const DType* d = tr.scalars[k].dtype;
        if (d && d->name == "bool") return J(x != 0);
        if (d && d->cls != DTypeClass::Float && std::isfinite(x)) return J(static_cast<int64_t>(x));
        if (!std::isfinite(x)) return J(std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
        return J(x);
      }
      J out = v;
      out.erase("__scalar__");
      return out;
    }
    J out = J::object();
    for (auto it = v.begin(); it != v.end(); ++it) out[it.key()] = with_values(*it, tr);
    return out;
  }
  if (v.is_array()) {
    J out = J::array();
    for (const J& x : v) out.push_back(with_values(x, tr));
    return out;
  }
  return v;
}

const J* at(const J& o, std::initializer_list<const char*> path) {
  const J* cur = &o;
  for (const char* k : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::optional<int64_t> int_at(const J& o, std::initializer_list<const char*> path) {
  const J* v = at(o, path);
  return v && v->is_number_integer() ? std::optional<int64_t>(v->get<int64_t>()) : std::nullopt;
}

// Lightning's loops progress (fit_loop): epochs, batches, optimizer and scheduler steps.
J progress_json(const J& loops) {
  const J* fit = at(loops, {"fit_loop"});
  if (!fit) return J();
  J p = J::object();
  auto put = [&](const char* name, std::optional<int64_t> v) {
    if (v) p[name] = *v;
  };
  put("epochs_started", int_at(*fit, {"epoch_progress", "total", "started"}));
  put("epochs_completed", int_at(*fit, {"epoch_progress", "total", "completed"}));
  put("batches_completed", int_at(*fit, {"epoch_loop.batch_progress", "total", "completed"}));
  put("batches_this_epoch", int_at(*fit, {"epoch_loop.batch_progress", "current", "completed"}));
  put("batches_that_stepped", int_at(*fit, {"epoch_loop.state_dict", "_batches_that_stepped"}));
  put("optimizer_steps",
      int_at(*fit, {"epoch_loop.automatic_optimization.optim_progress", "optimizer", "step", "total", "completed"}));
  put("manual_optimizer_steps", int_at(*fit, {"epoch_loop.manual_optimization.optim_step_progress", "total", "completed"}));
  put("scheduler_steps", int_at(*fit, {"epoch_loop.scheduler_progress", "total", "completed"}));
  put("validation_batches", int_at(*fit, {"epoch_loop.val_loop.batch_progress", "total", "completed"}));
  return p.empty() ? J() : p;
}

std::string callback_class(const std::string& key) {
  const size_t brace = key.find('{');
  return brace == std::string::npos ? key : key.substr(0, brace);
}

// A value as Python would print it in a repr-like line: strings bare, lists as [a, b].
std::string value_text(const J& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:g}", v.get<double>());
  if (v.is_array()) {
    std::vector<std::string> items;
    for (const J& x : v) items.push_back(value_text(x));
    return "[" + join(items, ", ") + "]";
  }
  return json_text(v, -1);  // invalid UTF-8 from the pickle replaced, never thrown on
}

std::string fields_text(const J& state, std::initializer_list<const char*> keys) {
  std::vector<std::string> bits;
  for (const char* k : keys)
    if (auto it = state.find(k); it != state.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      bits.push_back(fmt::format("{} {}", k, value_text(*it)));
  return join(bits, ", ");
}

}  // namespace

void read_training_scalars(Checkpoint& ck, const Limits& limits) {
  TrainingInfo& tr = ck.training;
  tr.scalar_values.assign(tr.scalars.size(), std::nullopt);
  if (tr.scalars.empty()) return;
  StorageIndex index(ck, limits);
  for (size_t k = 0; k < tr.scalars.size(); ++k) {
    const Tensor& t = tr.scalars[k];
    try {
      const Storage* s = index.find(t.storage);
      if (!s || !s->present || !t.dtype || !numeric(t.dtype)) continue;
      const ByteView b = index.bytes(*s);
      const uint64_t at = static_cast<uint64_t>(t.offset) * t.dtype->itemsize;
      if (t.offset < 0 || at + t.dtype->itemsize > b.size()) continue;
      tr.scalar_values[k] = element_value(*t.dtype, b.data() + at);
    } catch (const InputError&) {  // the bytes are not where the pickle says: the value stays unknown
    }
  }
}

std::string optimizer_class(const J& g, const std::vector<std::string>& state_keys) {
  if (!g.is_object()) return "";
  auto state_has = [&](const char* k) { return std::find(state_keys.begin(), state_keys.end(), k) != state_keys.end(); };
  if (has(g, {"betas", "amsgrad"})) {
    if (auto d = g.find("decoupled_weight_decay"); d != g.end() && d->is_boolean()) return d->get<bool>() ? "AdamW" : "Adam";
    return "";  // torch < 2.7: Adam and AdamW save the same keys
  }
  if (has(g, {"betas", "momentum_decay"})) return "NAdam";
  if (has(g, {"betas"})) {  // Adamax or RAdam: their states differ (exp_inf / exp_avg_sq)
    if (state_has("exp_inf")) return "Adamax";
    if (g.contains("decoupled_weight_decay") || state_has("exp_avg_sq")) return "RAdam";
    return "";
  }
  if (has(g, {"momentum", "dampening", "nesterov"})) return "SGD";
  if (has(g, {"alpha", "centered", "momentum"})) return "RMSprop";
  if (has(g, {"lr_decay", "initial_accumulator_value"})) return "Adagrad";
  if (has(g, {"rho"})) return "Adadelta";
  if (has(g, {"lambd", "alpha", "t0"})) return "ASGD";
  if (has(g, {"etas", "step_sizes"})) return "Rprop";
  if (has(g, {"max_iter", "history_size"})) return "LBFGS";
  return "";
}

std::string scheduler_class(const J& s) {
  if (!s.is_object()) return "";
  if (has(s, {"_schedulers", "_milestones"})) return "SequentialLR";
  if (has(s, {"_schedulers"})) return "ChainedScheduler";
  if (has(s, {"patience", "cooldown", "num_bad_epochs"})) return "ReduceLROnPlateau";
  if (has(s, {"total_steps", "cycle_momentum"})) return "OneCycleLR";
  if (has(s, {"T_0", "T_mult"})) return "CosineAnnealingWarmRestarts";
  if (has(s, {"T_max", "eta_min"})) return "CosineAnnealingLR";
  if (has(s, {"total_size", "step_ratio"})) return "CyclicLR";
  if (has(s, {"lr_lambdas"})) return s.contains("_last_lr") && s.contains("lr_lambdas") ? "LambdaLR or MultiplicativeLR" : "";
  if (has(s, {"step_size", "gamma"})) return "StepLR";
  if (has(s, {"milestones", "gamma"})) return "MultiStepLR";
  if (has(s, {"start_factor", "end_factor", "total_iters"})) return "LinearLR";
  if (has(s, {"factor", "total_iters"})) return "ConstantLR";
  if (has(s, {"total_iters", "power"})) return "PolynomialLR";
  if (has(s, {"gamma"})) return "ExponentialLR";
  return "";
}

J training_json(const TrainingInfo& tr) {
  const J& d = tr.details;
  if (d.empty()) return J();
  J out = J::object();
  J opts = J::array();
  for (const J& o : d.value("optimizers", J::array())) {
    std::vector<std::string> keys;
    for (const J& k : o["state"]["keys"]) keys.push_back(k.get<std::string>());
    const std::string cls = o["param_groups"].empty() ? "" : optimizer_class(o["param_groups"][0], keys);
    opts.push_back(J{{"key", o["key"]},
                     {"index", o["index"]},
                     {"class", cls.empty() ? J() : J(cls)},
                     {"param_groups", with_values(o["param_groups"], tr)},
                     {"state", o["state"]}});
  }
  out["optimizers"] = std::move(opts);
  J scheds = J::array();
  for (const J& s : d.value("lr_schedulers", J::array())) {
    const std::string cls = scheduler_class(s["state"]);
    scheds.push_back(
        J{{"key", s["key"]}, {"index", s["index"]}, {"class", cls.empty() ? J() : J(cls)}, {"state", with_values(s["state"], tr)}});
  }
  out["lr_schedulers"] = std::move(scheds);
  J cbs = J::array();
  for (const J& c : d.value("callbacks", J::array()))
    cbs.push_back(J{{"key", c["key"]}, {"class", callback_class(c["key"].get<std::string>())}, {"state", with_values(c["state"], tr)}});
  out["callbacks"] = std::move(cbs);
  out["precision"] = d.contains("precision") ? with_values(d["precision"], tr) : J();
  out["progress"] = d.contains("loops") ? progress_json(d["loops"]) : J();
  out["loops"] = d.contains("loops") ? d["loops"] : J();
  return out;
}

std::vector<std::pair<std::string, std::string>> training_lines(const TrainingInfo& tr) {
  std::vector<std::pair<std::string, std::string>> lines;
  const J j = training_json(tr);
  if (j.is_null()) return lines;
  for (const J& o : j["optimizers"]) {
    std::vector<std::string> groups;
    for (const J& g : o["param_groups"])
      groups.push_back(fmt::format("{} params: {}", json_text(g.value("params", J(0)), -1),
                                   fields_text(g, {"lr", "initial_lr", "betas", "eps", "weight_decay", "momentum", "nesterov",
                                                   "alpha"})));
    std::string line = o["class"].is_null() ? std::string("?") : "~" + o["class"].get<std::string>();
    line += fmt::format(" ({}[{}]): ", o["key"].get<std::string>(), o["index"].get<size_t>());
    line += join(groups, "; ");
    const J& st = o["state"];
    if (st["params"].get<uint64_t>() > 0) {
      std::vector<std::string> keys;
      for (const J& k : st["keys"]) keys.push_back(k.get<std::string>());
      line += fmt::format("; state of {} params ({})", st["params"].get<uint64_t>(), join(keys, ", "));
    }
    lines.emplace_back("Optim", line);
  }
  for (const J& s : j["lr_schedulers"]) {
    const std::string cls = s["class"].is_null() ? "?" : "~" + s["class"].get<std::string>();
    std::vector<std::string> bits;
    for (auto it = s["state"].begin(); it != s["state"].end(); ++it)
      if (!it.key().empty() && it.key()[0] != '_' && it.key() != "base_lrs") bits.push_back(it.key() + " " + value_text(*it));
    if (s["state"].contains("_last_lr")) bits.push_back("last lr " + value_text(s["state"]["_last_lr"]));
    lines.emplace_back("Sched", cls + ": " + join(bits, ", ", 8, ", and {} more"));
  }
  for (const J& c : j["callbacks"]) {
    const std::string cls = c["class"].get<std::string>();
    const J& st = c["state"];
    std::string fields = cls == "ModelCheckpoint" ? fields_text(st, {"monitor", "best_model_score", "best_model_path", "last_model_path"})
                         : cls == "EarlyStopping" ? fields_text(st, {"best_score", "wait_count", "stopped_epoch", "patience"})
                                                  : "";
    if (fields.empty() && st.is_object()) {
      std::vector<std::string> keys;
      for (auto it = st.begin(); it != st.end(); ++it) keys.push_back(it.key());
      fields = "state " + join(keys, ", ", 8, ", and {} more");
    }
    lines.emplace_back("Callback", cls + (fields.empty() ? "" : ": " + fields));
  }
  if (j["precision"].is_object()) {
    const J& st = j["precision"]["state"];
    std::string f = fields_text(st, {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"});
    lines.emplace_back("Scaler", j["precision"]["key"].get<std::string>() + (f.empty() ? "" : " (grad scaler: " + f + ")"));
  }
  if (j["progress"].is_object()) {
    const J& p = j["progress"];
    std::vector<std::string> bits;
    for (auto [k, label] : {std::pair{"epochs_completed", "epochs completed"}, std::pair{"batches_completed", "batches"},
                            std::pair{"optimizer_steps", "optimizer steps"}, std::pair{"scheduler_steps", "scheduler steps"},
                            std::pair{"validation_batches", "validation batches"}})
      if (p.contains(k)) bits.push_back(fmt::format("{} {}", p[k].get<int64_t>(), label));
    lines.emplace_back("Progress", join(bits, ", "));
  }
  return lines;
}

}  // namespace ckpt
