#include "core/render_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "core/hf_config.h"
#include "core/hf_weights.h"
#include "core/lightning_details.h"
#include "core/render_model.h"
#include "core/text.h"
#include "core/vfs.h"

namespace ckpt {

namespace {

// Python's str() of what Lightning's parse_batch_shape returns: [2, 3, 32, 32], [[4, 8], '?'], ?.
void sizes_text(const nlohmann::ordered_json& v, bool top, std::string& out) {
  if (v.is_string()) {
    out += top ? v.get<std::string>() : "'" + v.get<std::string>() + "'";
  } else if (v.is_array()) {
    out += '[';
    for (size_t k = 0; k < v.size(); ++k) {
      if (k) out += ", ";
      sizes_text(v[k], false, out);
    }
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      out += "'" + it.key() + "': ";
      sizes_text(*it, false, out);
    }
    out += '}';
  } else {
    out += v.dump();
  }
}

std::string forward_line(const ForwardReport& f) {
  std::vector<std::string> in;
  for (const ForwardInput& i : f.inputs) {
    std::string dims;
    for (size_t k = 0; k < i.shape.size(); ++k) dims += (k ? "x" : "") + std::to_string(i.shape[k]);
    std::string one = (i.name.empty() ? "" : i.name + "=") + (dims.empty() ? "scalar" : dims) + " " + i.dtype;
    if (i.range) one += fmt::format(" in [{}, {})", i.range->first, i.range->second);
    in.push_back(one);
  }
  std::string line = fmt::format("{}{} on {} (LibTorch {})", f.input_file.empty() ? "" : f.input_file + ": ", join(in, ", "),
                                 f.device, f.libtorch);
  if (!f.error.empty())
    return line +
           fmt::format(", failed in {}", f.error_module.empty() ? "the root module's own code" : "module " + f.error_module);
  std::string out;
  sizes_text(f.out_sizes, true, out);
  line += fmt::format(", eval, no grad: {:.1f} ms, out {}", f.seconds * 1e3, out);
  if (!f.per_module) line += " (no submodule calls left in the archive, e.g. frozen: sizes for the whole model only)";
  return line;
}

std::string model_line(const ModelReport& m) {
  std::string line = m.path;
  std::vector<std::string> bits;
  if (!m.strip_prefix.empty())
    bits.push_back(fmt::format("stripping '{}'{}", m.strip_prefix, m.prefix_guessed ? " (guessed)" : ""));
  if (!m.add_prefix.empty()) bits.push_back(fmt::format("adding '{}'{}", m.add_prefix, m.prefix_guessed ? " (guessed)" : ""));
  bits.push_back(
      fmt::format("{} keys matched, {} missing, {} unexpected, {} mismatched", m.matched, m.missing, m.unexpected, m.mismatched));
  if (!m.resolved.empty()) {
    std::vector<std::string> r;
    for (const auto& [name, shape] : m.resolved) r.push_back(name + " " + shape_text(shape));
    bits.push_back(fmt::format("{} lazy entries sized from it: {}", m.resolved.size(), join(r, ", ", 8, ", and {} more")));
  }
  return line + " (" + join(bits, "; ") + ")";
}

// "1 tensor", "2 tensors"
std::string counted(uint64_t n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

// The Devices line: entries saved on an accelerator, which torch.load puts back there (device-storages in
// check); "" when every entry is on the CPU or meta.
std::string devices_value(const Checkpoint& ck) {
  std::map<std::string, size_t> devices;
  bool accelerator = false;
  const std::string* run = nullptr;  // entries come in runs of one device: each run counted at once
  size_t in_run = 0;
  for (const Tensor& t : ck.tensors) {
    if (t.device.empty()) continue;
    if (run && t.device == *run) {
      ++in_run;
      continue;
    }
    if (run) devices[*run] += in_run;
    run = &t.device.str();
    in_run = 1;
    accelerator |= t.device != "cpu" && t.device != "meta";
  }
  if (run) devices[*run] += in_run;
  if (accelerator) {
    std::vector<std::string> d;
    for (const auto& [device, n] : devices) d.push_back(fmt::format("{} ({} {})", device, n, n == 1 ? "entry" : "entries"));
    return join(d, ", ") + "; torch.load needs map_location on a machine without them";
  }
  return "";
}

// A Lightning checkpoint's lines: Training (versions, epoch, step, optimizer and scheduler states,
// callbacks), Hparams (at most 200 bytes as shown) and the training state's own lines.
template <typename Line>
void training_header(const TrainingInfo& tr, const Line& line) {
  std::vector<std::string> m;
  for (const char* k : {"pytorch-lightning_version", "epoch", "global_step"})
    if (const TrainingInfo::Data* d = tr.entry(k)) {
      const nlohmann::ordered_json v = data_json(*d);
      m.push_back(fmt::format("{} {}", k, v.is_string() ? v.get<std::string>() : json_text(v, -1)));
    }
  for (const char* k : {"optimizer_states", "lr_schedulers", "optimizer", "scheduler"})
    if (const TrainingInfo::State* st = tr.state(k))
      m.push_back(fmt::format("{} {} ({} tensors, {})", k, st->count, st->held.tensors, human_bytes(st->held.bytes)));
  // A `callbacks` that is no dict is plain data: counted as its JSON value's size, as before.
  if (tr.callbacks) m.push_back(fmt::format("callbacks {}", tr.callbacks->size()));
  else if (const TrainingInfo::Data* d = tr.entry("callbacks")) m.push_back(fmt::format("callbacks {}", data_json(*d).size()));
  if (!m.empty()) line("Training", join(m, ", "));
  const TrainingInfo::Data* hparams = tr.entry("hyper_parameters");
  const nlohmann::ordered_json hv = hparams ? data_json(*hparams) : nlohmann::ordered_json();
  if (hv.is_object()) {
    std::vector<std::string> hp;
    for (auto it = hv.begin(); it != hv.end(); ++it)
      hp.push_back(it.key() + "=" + (it->is_string() ? it->get<std::string>() : json_text(*it, -1)));
    // At most 200 bytes as shown, cut between characters or escapes, never inside one.
    const std::string all = join(hp, ", ");
    bool cut = false;
    std::string h = visible_prefix(all, 200, &cut);
    if (cut) h = visible_prefix(all, 197) + "...";
    line("Hparams", h);
  }
  for (const auto& [key, value] : training_lines(tr)) line(key.c_str(), value);
}

std::string header_lines(const Summary& s, bool markdown, bool verbose, const std::string& tensors) {
  const Checkpoint& ck = *s.ck;
  std::string out;
  // Every value quotes the file (its path, prefix, records, names, metadata): shown through visible().
  auto line = [&](const char* key, const std::string& raw) {
    const std::string value = visible(raw);
    out += markdown ? fmt::format("- **{}:** {}\n", key, value) : fmt::format("{:<10}{}\n", std::string(key) + ":", value);
  };
  if (ck.format == Format::Sharded) {
    // The index names the set; the size is the index's and the shards' together.
    line("File", fmt::format("{} + {} ({} in all)", ck.path, counted(ck.sharded.shards.size(), "shard"),
                             human_bytes(ck.file_size)));
  } else {
    line("File", fmt::format("{} ({})", ck.path, human_bytes(ck.file_size)));
  }
  if (const auto& f = s.fetched)
    line("Fetched", fmt::format("{} request{}, {} ({} file{}){}", f->requests, f->requests == 1 ? "" : "s", human_bytes(f->bytes),
                                f->files, f->files == 1 ? "" : "s",
                                f->unverified ? fmt::format("; {} not checked for changes between requests (no ETag or Last-Modified)", f->unverified) : ""));
  std::string fmtline = format_title(ck);
  std::vector<std::string> bits;
  if (!ck.prefix.empty()) bits.push_back("prefix " + ck.prefix + "/");
  if (ck.pickle_protocol) bits.push_back(fmt::format("pickle protocol {}", ck.pickle_protocol));
  // The zip's own records (.format_version, .storage_alignment, .data/serialization_id, byteorder little)
  // say nothing a reader needs: --verbose and JSON show them, a big-endian byteorder always.
  for (const auto& [k, v] : ck.records)
    if (verbose || (k == "byteorder" && v != "little") || (k == "version" && v != "3") ||
        (!k.empty() && k[0] != '.' && k != "byteorder" && k != "version"))
      bits.push_back(k + " " + v);
  if (!bits.empty()) fmtline += " — " + join(bits, ", ");
  line("Format", fmtline);
  std::string content = ck.format == Format::Pt2 && ck.pt2.models.empty() && !ck.pt2.aoti.empty()
                            ? "AOTInductor package, no exported program"
                        : ck.format == Format::Pt2                                          ? "exported program"
                        : ck.content == Content::StateDict                                  ? "state dict"
                        : ck.content == Content::Module && ck.format == Format::TorchScript ? "scripted module"
                        : ck.content == Content::Module                                     ? "pickled nn.Module"
                                                                                            : to_string(ck.content);
  if (!ck.model_key.empty()) content += fmt::format(" (model under '{}')", ck.model_key);
  size_t storages = 0;
  for (const Storage& st : ck.storages) storages += st.in_model;
  if (ck.content == Content::Tensors) content = "plain tensors, not a model's (no module names)";
  content += fmt::format(", {} in {}", counted(s.totals.tensors, "tensor"), counted(storages, "storage"));
  // TorchScript constants (frozen weights, .ptl op contexts) are the archive's weights too
  if (const auto& cs = ck.torchscript.constants; ck.format == Format::TorchScript && cs && cs->tensors > 0)
    content += fmt::format(", {} constant tensors in {} storages", cs->tensors, ck.storages.size() - storages);
  line("Content", content);
  if (const std::string d = devices_value(ck); !d.empty()) line("Devices", d);
  if (ck.format == Format::Sharded) {
    std::vector<std::string> sh;
    for (const ShardInfo& x : ck.sharded.shards) sh.push_back(fmt::format("{} ({})", x.file, counted(x.tensors, "tensor")));
    line("Shards", join(sh, ", "));
  }
  if (!ck.side.files.empty()) {  // a model folder's other files that pickle would load: scanned
    std::vector<std::string> sf;
    for (const SideFile& f : ck.side.files) sf.push_back(fmt::format("{} ({}, {})", f.label, human_bytes(f.size), to_string(f.kind)));
    line("Beside", join(sf, ", ", 20, ", and {} more"));
  }
  if (ck.safetensors_metadata && !ck.safetensors_metadata->empty())
    line("Metadata", json_text(metadata_json(ck)["__metadata__"], -1));
  if (ck.format == Format::TorchScript) {
    const TorchScriptInfo& ts = ck.torchscript;
    std::vector<std::string> ms;
    for (const TsMethodInfo& m : ts.methods) {
      std::string n = m.name;
      if (m.entry_point) n += " (entry point)";
      else if (!m.reachable_from_forward) n += " (not reached from forward)";
      ms.push_back(n);
    }
    if (!ms.empty()) line("Methods", join(ms, ", "));
    std::vector<std::string> extra;
    if (ts.mobile) extra.push_back("mobile (lite interpreter) bytecode.pkl");
    if (ts.constants && ts.constants->count > 0)
      extra.push_back(fmt::format("constants.pkl {} ({} tensors, {})", ts.constants->count, ts.constants->tensors,
                                  human_bytes(ts.constants->bytes)));
    for (const TsExtraFile& f : ts.extra_files) extra.push_back(fmt::format("extra/{} ({})", f.name, human_bytes(f.bytes)));
    if (!extra.empty()) line("Archive", join(extra, ", "));
  }
  if (ck.format == Format::Pt2) {
    std::vector<std::string> ms;
    for (const Pt2Model& m : ck.pt2.models)
      ms.push_back(fmt::format("{} ({}, torch {}{})", m.name, m.member, m.torch_version.empty() ? "?" : m.torch_version,
                               m.name == ck.pt2.main_model ? ", summarized below" : ""));
    if (!ms.empty()) line("Models", join(ms, "; "));
  }
  if (!tensors.empty()) line("Tensors", tensors);
  // A Hugging Face config's facts; `Config` when --model ARCH has the `Model` line.
  if (ck.hf) {
    // What the weights show: an lm_head that is the input embedding's tensor (tied) or a tensor of its own.
    std::optional<bool> weights_tied;
    if (ck.hf->error.empty() && s.same_tensor.size() == ck.tensors.size()) {
      const HfWeights w = hf_weights(ck);
      if (w.embedding_index != SIZE_MAX && w.lm_head_index != SIZE_MAX)
        weights_tied = s.same_tensor[w.embedding_index] == s.same_tensor[w.lm_head_index];
    }
    line(s.model ? "Config" : "Model", hf_line(*ck.hf, weights_tied));
  }
  if (s.model) line("Model", model_line(*s.model));
  if (s.forward) line("Forward", forward_line(*s.forward));
  if (ck.content == Content::Lightning || ck.content == Content::Checkpoint) training_header(ck.training, line);
  return out;
}

// A module's forward record; modules the forward did not list (state-dict rows ARCH does not name) as
// modules that did not run.
const ModuleForward& forward_of(const ForwardReport& f, std::string_view name) {
  static const ModuleForward none;
  auto it = f.modules.find(name);
  return it == f.modules.end() ? none : it->second;
}

// The .pt2 sections after the totals: the summary's model's inputs / outputs with symbolic sizes, its
// symbols' ranges, FLOPs, operator census and constants; the other models in one line each; AOTInductor files.
std::string pt2_sections(const Checkpoint& ck, bool markdown) {
  std::string out;
  auto line = [&](const char* key, const std::string& raw) {
    const std::string value = visible(raw);
    out += markdown ? fmt::format("- **{}:** {}\n", key, value) : fmt::format("{:<11}{}\n", std::string(key) + ":", value);
  };
  auto spec_text = [](const Pt2Spec& p) {
    std::string t = p.name;
    if (!p.dtype.empty()) t += fmt::format(" {}[{}]", p.dtype, join(p.shape, ", "));
    else if (!p.value.empty()) t += " " + p.value;
    return t;
  };
  for (const Pt2Model& m : ck.pt2.models) {
    if (m.name != ck.pt2.main_model) continue;
    std::vector<std::string> ins, outs, ranges, ops, consts;
    for (const Pt2Spec& p : m.inputs)
      if (p.kind == "user_input") ins.push_back(spec_text(p));
    for (const Pt2Spec& p : m.outputs)
      outs.push_back(p.kind == "user_output" ? spec_text(p) : fmt::format("{} ({} {})", spec_text(p), p.kind, p.target));
    for (const Pt2Range& r : m.ranges)
      ranges.push_back(fmt::format("{} in [{}, {}]", r.symbol, r.min ? std::to_string(*r.min) : "-inf",
                                   r.max ? std::to_string(*r.max) : "inf"));
    for (const auto& [op, n] : m.ops) ops.push_back(fmt::format("{} {}", op.rfind("torch.ops.", 0) == 0 ? op.substr(10) : op, n));
    for (const Pt2Constant& c : m.constants)
      consts.push_back(c.dtype.empty() ? fmt::format("{} ({})", c.name, c.kind)
                                       : fmt::format("{} {}[{}] ({})", c.name, c.dtype, join(c.shape, ", "), c.kind));
    out += "\n";
    line("Inputs", ins.empty() ? "none" : join(ins, "; "));
    line("Outputs", outs.empty() ? "none" : join(outs, "; "));
    if (!ranges.empty()) line("Symbols", join(ranges, "; "));
    line("FLOPs", fmt::format("{}{}", human_count(m.flops),
                              m.flops_basis == "hints" ? " (symbolic sizes at the export's example sizes)" : ""));
    line("Operators", fmt::format("{} nodes: {}", m.nodes, join(ops, ", ", 20, ", and {} more")));
    if (!consts.empty()) line("Constants", join(consts, "; ", 20, "; and {} more"));
  }
  std::vector<std::string> others;
  for (const Pt2Model& m : ck.pt2.models)
    if (m.name != ck.pt2.main_model)
      others.push_back(fmt::format("{} ({} tensors, {} params, {} buffers, {} nodes, {} FLOPs)", m.name, m.tensors, m.parameters,
                                   m.buffers, m.nodes, m.flops));
  if (!others.empty()) line("Also", join(others, "; "));
  if (!ck.pt2.aoti.empty()) {
    std::vector<std::string> a;
    for (const Pt2Artifact& x : ck.pt2.aoti) a.push_back(fmt::format("{} ({}, {})", x.path, x.kind, human_bytes(x.bytes)));
    line("AOTI", join(a, ", "));
  }
  return out;
}

struct Table {
  std::vector<std::string> heads;
  std::vector<std::vector<std::string>> rows;
};

// A count as the table and the totals show it: Lightning's rounded one, or with --exact the exact one.
std::string count_text(uint64_t n, const RenderOptions& o) { return o.exact ? grouped_count(n) : human_count(n); }

Table module_table(const Summary& s, const RenderOptions& o) {
  const Checkpoint& ck = *s.ck;
  const bool has_mode = !ck.modules.empty() && ck.format != Format::Pt2;  // export graphs keep no `training`
  Table t;
  t.heads = {"Name", "Type", "Params", "Buffers", "dtype", "Size"};
  if (has_mode) t.heads.push_back("Mode");
  const ForwardReport* f = s.forward ? &*s.forward : nullptr;
  if (f) {
    // Lightning's order: FLOPs after Mode, then the sizes
    t.heads.push_back("FLOPs");
    t.heads.push_back("In sizes");
    t.heads.push_back("Out sizes");
  }
  for (const ModuleRow& r : s.modules) {
    if (r.depth == 0 || o.depth == 0 || (o.depth > 0 && r.depth > o.depth)) continue;
    std::string params = count_text(r.parameters, o);
    if (r.uninitialized) {
      while (params.back() == ' ') params.pop_back();
      params += fmt::format(" (+{} lazy)", r.uninitialized);
    }
    // Escaped here, before the text table measures its columns.
    const std::string type = r.type().empty() ? (r.inferred_type.empty() ? "?" : "~" + std::string(r.inferred_type)) : visible(r.type());
    std::vector<std::string> row{visible(r.name), type, params, count_text(r.buffers, o),
                                 visible(join(r.dtypes.names(), ", ")), human_bytes(r.bytes)};
    if (has_mode) row.push_back(!r.training() ? "?" : *r.training() ? "train" : "eval");
    if (f) {
      const ModuleForward& m = forward_of(*f, r.name);
      row.push_back(human_count(m.flops));
      std::string in, out;
      sizes_text(m.in_sizes, true, in);
      sizes_text(m.out_sizes, true, out);
      row.push_back(visible(in));
      row.push_back(visible(out));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

// Writes the whole text or Markdown summary; the tensor table hands `flush` full buffers.
void summary_text(const Summary& s, const RenderOptions& o, bool markdown, std::string& out, const Flush& flush) {
  const Checkpoint& ck = *s.ck;
  const TensorRows rows = tensor_rows(s, o);
  // --match: the totals of the listed entries only, said to be partial.
  const bool partial = !o.match.empty();
  const Totals T = partial ? totals_of(ck, [&](const Tensor& t) { return matches(o.match, t.name); }) : s.totals;
  const bool collection = ck.content == Content::Tensors;
  out += header_lines(s, markdown, o.verbose, tensors_note(s, o, rows)) + "\n";
  // No table without rows: an empty frame says nothing (a flat state dict has no module rows).
  Table t = module_table(s, o);
  if (markdown) {
    if (!t.rows.empty()) {
      markdown_head(out, t.heads, {"Params", "Buffers", "Size"});
      for (size_t k = 0; k < t.rows.size(); ++k) markdown_row(out, std::to_string(k), t.rows[k]);
      if (!rows.rows.empty()) out += "\n";
    }
    tensor_table(s, rows, true, out, flush);
    out += "\n| Total | |\n|---|--:|\n";
    auto count = [&](uint64_t n) {
      std::string c = count_text(n, o);
      while (c.back() == ' ') c.pop_back();
      return c;
    };
    if (partial) out += fmt::format("| Counted | the {} listed (--match) |\n", counted(T.tensors, "tensor"));
    if (collection) {
      out += fmt::format("| Elements (plain tensors) | {} |\n", count(T.attributes));
    } else {
      out += fmt::format("| Trainable params | {} |\n| Non-trainable params | {} |\n| Total params | {} |\n",
                         count(T.trainable), count(T.non_trainable), count(T.parameters));
      out += fmt::format("| Buffers{} | {} |\n", ck.split_inferred && !ck.tensors.empty() ? " (inferred from names)" : "",
                         count(T.buffers));
      if (T.attributes) out += fmt::format("| Tensor attributes | {} |\n", count(T.attributes));
      out += fmt::format("| Params size (MB) | {:.3f} |\n", static_cast<double>(T.parameter_bytes) / 1e6);
    }
    out += fmt::format("| Tensor size (MB) | {:.3f} |\n", static_cast<double>(T.bytes) / 1e6);
    if (s.forward && s.forward->error.empty()) out += fmt::format("| Total Flops | {} |\n", count(s.forward->flops));
    if (o.exact) {
      if (!collection && !partial)
        out += fmt::format("| Params without embeddings | {} |\n", count(T.parameters_without_embeddings));
      for (const Totals::ByDtype& d : T.by_dtype)
        out += collection ? fmt::format("| {} | {} elements, {} |\n", d.dtype, count(d.attributes), human_bytes(d.bytes))
                          : fmt::format("| {} | {} params, {} buffers, {} |\n", d.dtype, count(d.parameters),
                                        count(d.buffers), human_bytes(d.bytes));
    }
    if (ck.format == Format::Pt2) out += pt2_sections(ck, true);
    if (s.memory) out += "\n```text" + memory_text(*s.memory, o.exact) + "```\n";
    if (!s.findings.empty()) out += "\n";
    for (const Finding& f : s.findings)
      out += fmt::format("> **{}** `{}`: {}  \n> fix: {}\n\n", to_string(f.severity), f.id, markdown_cell(f.message),
                         visible(f.fix));
    return;
  }

  if (!t.rows.empty()) {
    std::vector<size_t> widths{std::max<size_t>(1, std::to_string(t.rows.size() - 1).size())};
    for (size_t c = 0; c < t.heads.size(); ++c) {
      size_t w = t.heads[c].size();
      for (const auto& r : t.rows) w = std::max(w, r[c].size());
      widths.push_back(w);
    }
    const std::string dashes(table_width(widths), '-');
    table_line(out, " ", t.heads, widths);
    out += dashes + "\n";
    for (size_t k = 0; k < t.rows.size(); ++k) table_line(out, std::to_string(k), t.rows[k], widths);
    out += dashes + "\n";
    if (!rows.rows.empty()) out += "\n";
  }
  tensor_table(s, rows, false, out, flush);
  auto foot = [&](const std::string& v, const std::string& label) { out += fmt::format("{:<10}{}\n", v, label); };
  auto count = [&](uint64_t n) { return count_text(n, o); };
  if (partial) out += fmt::format("Totals of the {} listed (--match), not of the file:\n", counted(T.tensors, "tensor"));
  if (collection) {
    foot(count(T.attributes), "Elements in plain tensors (not a model: no parameters or buffers)");
  } else {
    foot(count(T.trainable), "Trainable params");
    foot(count(T.non_trainable), "Non-trainable params");
    foot(count(T.parameters), "Total params");
    if (o.exact && !partial)
      foot(count(T.parameters_without_embeddings), "Params without embeddings (transformers' exclude_embeddings)");
    foot(count(T.buffers), ck.split_inferred && !ck.tensors.empty() ? "Buffers (split inferred from names)" : "Buffers");
    if (T.attributes) foot(count(T.attributes), "Tensor attributes (neither parameters nor buffers)");
  }
  if (o.exact)
    for (const Totals::ByDtype& d : T.by_dtype)
      foot(count(d.parameters + d.buffers + d.attributes),
           collection ? fmt::format("{} elements, {}", d.dtype, human_bytes(d.bytes))
                      : fmt::format("{} elements: {} params, {} buffers, {}", d.dtype, count(d.parameters),
                                    count(d.buffers), human_bytes(d.bytes)));
  if (!collection)
    foot(fmt::format("{:.3f}", static_cast<double>(T.parameter_bytes) / 1e6), "Total estimated model params size (MB)");
  foot(fmt::format("{:.3f}", static_cast<double>(T.bytes) / 1e6),
       collection ? "Total tensor size (MB)" : "Total tensor size (MB), buffers included");
  if (T.uninitialized) foot(std::to_string(T.uninitialized), "Uninitialized (lazy) entries, not counted");
  if (T.meta) foot(std::to_string(T.meta), "Meta-device entries (no data)");
  if (!ck.modules.empty() && ck.format != Format::Pt2) {
    uint64_t train = 0, eval = 0;
    for (const Module& m : ck.modules)
      if (m.training) (*m.training ? train : eval) += 1;
    foot(std::to_string(train), "Modules in train mode");
    foot(std::to_string(eval), "Modules in eval mode");
  }
  if (s.forward && s.forward->error.empty()) foot(human_count(s.forward->flops), "Total Flops");
  if (ck.format == Format::Pt2) out += pt2_sections(ck, false);
  if (s.memory) out += memory_text(*s.memory, o.exact);
  for (const Finding& f : s.findings) {
    out += fmt::format("\n{}{}[{}]{}: {}\n", severity_color(f.severity, o.color), to_string(f.severity), f.id,
                       color_reset(o.color), visible(f.message));
    out += fmt::format("  fix: {}\n", visible(f.fix));
  }
}

Flush file_flush(std::FILE* f) {
  return [f](std::string& buf) {
    write_output(f, buf);
    buf.clear();
  };
}

}  // namespace

std::string render_summary_text(const Summary& s, const RenderOptions& o) {
  std::string out;
  summary_text(s, o, false, out, nullptr);
  return out;
}

std::string render_summary_markdown(const Summary& s, const RenderOptions& o) {
  std::string out;
  summary_text(s, o, true, out, nullptr);
  return out;
}

void write_summary_text(const Summary& s, const RenderOptions& o, std::FILE* f) {
  std::string out;
  const Flush flush = file_flush(f);
  summary_text(s, o, false, out, flush);
  flush(out);
}

void write_summary_markdown(const Summary& s, const RenderOptions& o, std::FILE* f) {
  std::string out;
  const Flush flush = file_flush(f);
  summary_text(s, o, true, out, flush);
  flush(out);
}

namespace {

void put_ints(std::string& out, const std::vector<int64_t>& v) {
  out += '[';
  for (size_t k = 0; k < v.size(); ++k) fmt::format_to(std::back_inserter(out), "{}{}", k ? ", " : "", v[k]);
  out += ']';
}

// Writes one array member per line: `"name": [\n    {...},\n    {...}\n  ]`, handing full buffers to
// `flush` (when set) so that output memory stays bounded whatever the entry count.
template <typename Items, typename Each>
void put_array(std::string& out, const Flush& flush, const char* name, const Items& items, Each&& each) {
  fmt::format_to(std::back_inserter(out), ",\n  \"{}\": [", name);
  bool first = true;
  for (const auto& it : items) {
    out += first ? "\n    {" : ",\n    {";
    first = false;
    each(it);
    out += '}';
    if (flush && out.size() > (1u << 20)) flush(out);
  }
  out += first ? "]" : "\n  ]";
}

using J = nlohmann::ordered_json;

// The totals object: counts, by dtype, and the module tree's counts when the file has one.
J totals_json(const Summary& s) {
  const Checkpoint& ck = *s.ck;
  const Totals& T = s.totals;
  J totals = J{{"tensors", T.tensors},
               {"elements", T.elements},
               {"unique_elements", T.unique_elements},
               {"storage_bytes", T.storage_bytes},
               {"file_storage_bytes", T.file_storage_bytes},
               {"bytes", T.bytes},
               {"parameters", T.parameters},
               {"trainable", T.trainable},
               {"non_trainable", T.non_trainable},
               {"buffers", T.buffers},
               {"attributes", T.attributes},
               {"parameter_bytes", T.parameter_bytes},
               {"parameters_without_embeddings", T.parameters_without_embeddings},
               {"uninitialized", T.uninitialized},
               {"meta", T.meta},
               {"storages", ck.storages.size()}};
  J by_dtype = J::array();
  for (const Totals::ByDtype& d : T.by_dtype)
    by_dtype.push_back(
        J{{"dtype", d.dtype}, {"tensors", d.tensors}, {"parameters", d.parameters}, {"buffers", d.buffers}, {"bytes", d.bytes}});
  totals["by_dtype"] = std::move(by_dtype);
  if (!ck.modules.empty()) {
    uint64_t modules = 0, train = 0, eval = 0;
    // Every path counts, as named_modules() of a loaded ScriptModule lists it; entries count once.
    for (const Module& m : ck.modules) {
      ++modules;
      if (m.training) (*m.training ? train : eval) += 1;
    }
    totals["modules"] = modules;
    totals["modules_train"] = train;
    totals["modules_eval"] = eval;
  }
  return totals;
}

J model_json(const ModelReport& m) {
  J resolved = J::array();
  for (const auto& [name, shape] : m.resolved) resolved.push_back(J{{"name", name}, {"shape", shape}});
  return J{{"file", m.path},
           {"strip_prefix", m.strip_prefix},
           {"add_prefix", m.add_prefix},
           {"prefix_guessed", m.prefix_guessed},
           {"matched", m.matched},
           {"missing", m.missing},
           {"unexpected", m.unexpected},
           {"mismatched", m.mismatched},
           {"resolved", resolved}};
}

J forward_json(const ForwardReport& f) {
  J inputs = J::array();
  for (const ForwardInput& i : f.inputs) {
    J one{{"name", i.name.empty() ? J() : J(i.name)}, {"shape", i.shape}, {"dtype", i.dtype}};
    one["range"] = i.range ? J::array({i.range->first, i.range->second}) : J();
    inputs.push_back(one);
  }
  J fw{{"inputs", inputs},           {"input_file", f.input_file.empty() ? J() : J(f.input_file)},
       {"device", f.device},         {"libtorch", f.libtorch},
       {"per_module", f.per_module}, {"out_sizes", f.out_sizes},
       {"flops", f.flops},           {"seconds", f.seconds}};
  fw["error"] = f.error.empty() ? J() : J{{"module", f.error_module}, {"message", f.error}, {"completed", f.completed}};
  return fw;
}

// The document's small head, every member before the per-entry arrays, through nlohmann.
J summary_head(const Summary& s) {
  const Checkpoint& ck = *s.ck;
  J j;
  j["schema"] = kSummarySchema;
  j["file"] = s.operand.empty() ? ck.path : s.operand;
  if (const std::string read = vfs::display(ck.path); !s.operand.empty() && read != s.operand) j["resolved"] = read;
  j["file_size"] = ck.file_size;
  if (const auto& f = s.fetched) {
    j["remote"] = J{{"url", f->url}, {"requests", f->requests}, {"bytes", f->bytes}, {"files", f->files}};
    if (f->unverified) j["remote"]["unverified"] = f->unverified;
  }
  j["format"] = to_string(ck.format);
  j["container"] = container_text(ck);
  j["prefix"] = ck.prefix;
  j["content"] = to_string(ck.content);
  j["model_key"] = ck.model_key;
  j["pickle_protocol"] = ck.pickle_protocol;
  J rec = J::object();
  for (const auto& [k, v] : ck.records) rec[k] = v;
  j["records"] = rec;
  j["split_inferred"] = ck.split_inferred && !ck.tensors.empty();
  j["metadata"] = metadata_json(ck);
  if (ck.format == Format::TorchScript) j["methods"] = methods_json(ck.torchscript);
  j["totals"] = totals_json(s);
  if (s.model) j["model"] = model_json(*s.model);
  if (s.forward) j["forward"] = forward_json(*s.forward);
  if (s.memory) j["memory"] = memory_json(*s.memory);
  if (J t = training_json(ck.training); !t.is_null()) j["training"] = std::move(t);
  if (ck.side.folder) {
    J side = J::array();
    for (const SideFile& f : ck.side.files) side.push_back(J{{"path", f.label}, {"size", f.size}, {"kind", to_string(f.kind)}});
    j["side_files"] = std::move(side);
  }
  return j;
}

// A string member's value, null when empty.
void put_opt_string(std::string& out, std::string_view v) {
  if (v.empty()) out += "null";
  else put_string(out, v);
}

// One module row's members (streamed); `forward`: the example-input forward's record, when one ran.
void put_module_row(std::string& out, const ModuleRow& r, const ForwardReport* forward) {
  auto out_it = std::back_inserter(out);
  out += "\"name\": ";
  put_string(out, r.name);
  out += ", \"type\": ";
  put_opt_string(out, r.type());
  out += ", \"qualified_type\": ";
  put_opt_string(out, r.qualified_type());
  if (!r.inferred_type.empty()) {
    out += ", \"inferred_type\": ";
    put_string(out, r.inferred_type);
  }
  fmt::format_to(out_it,
                 ", \"depth\": {}, \"parameters\": {}, \"trainable\": {}, \"buffers\": {}, \"bytes\": {}, "
                 "\"tensors\": {}, \"uninitialized\": {}, \"dtypes\": [",
                 r.depth, r.parameters, r.trainable, r.buffers, r.bytes, r.tensors, r.uninitialized);
  for (size_t k = 0; k < r.dtypes.size(); ++k) {
    if (k) out += ", ";
    put_string(out, r.dtypes[k]);
  }
  fmt::format_to(out_it, "], \"mode\": {}", !r.training() ? "null" : *r.training() ? "\"train\"" : "\"eval\"");
  if (!r.shared_with().empty()) {
    out += ", \"shared_with\": ";
    put_string(out, r.shared_with());
  }
  if (r.attributes()) {
    out += ", \"attributes\": ";
    out += json_text(*r.attributes(), -1);
  }
  if (forward) {
    const ModuleForward& m = forward_of(*forward, r.name);
    fmt::format_to(out_it, ", \"in_sizes\": {}, \"out_sizes\": {}, \"flops\": {}, \"calls\": {}", json_text(m.in_sizes, -1),
                   json_text(m.out_sizes, -1), m.flops, m.calls);
  }
}

// One tensor entry's members (streamed).
void put_tensor(std::string& out, const Tensor& t, const Checkpoint& ck) {
  auto out_it = std::back_inserter(out);
  const bool lazy = t.state == TensorState::Uninitialized && !t.resolved;
  const bool strided = t.layout == Layout::Strided || t.layout == Layout::Quantized;
  out += "\"name\": ";
  put_string(out, t.name);
  out += ", \"dtype\": ";
  put_opt_string(out, t.dtype ? t.dtype->name : std::string_view());
  out += ", \"shape\": ";
  if (lazy) out += "null";
  else put_ints(out, t.shape);
  out += ", \"stride\": ";
  if (lazy || !strided) out += "null";
  else put_ints(out, t.stride);
  if (lazy) out += ", \"numel\": null, \"bytes\": null";
  else fmt::format_to(out_it, ", \"numel\": {}, \"bytes\": {}", t.numel, t.bytes);
  fmt::format_to(out_it,
                 ", \"kind\": \"{}\", \"kind_inferred\": {}, \"state\": \"{}\", \"requires_grad\": {}, \"trainable\": {}, "
                 "\"device\": ",
                 to_string(t.kind), t.kind_inferred, to_string(t.state), t.requires_grad,
                 t.kind != TensorKind::Parameter ? "null"
                 : trainable(t)                  ? "true"
                                                 : "false");
  put_opt_string(out, t.device.str());
  out += ", \"storage\": ";
  put_opt_string(out, t.storage.view());
  if (lazy || !strided) out += ", \"offset\": null";
  else fmt::format_to(out_it, ", \"offset\": {}", t.offset);
  out += ", \"layout\": ";
  put_string(out, t.layout_text());
  if (!t.x->qscheme.empty()) {
    out += ", \"qscheme\": ";
    put_string(out, t.x->qscheme);
    if (t.x->qscheme == "per_tensor_affine" && std::isfinite(t.x->q_scale))
      fmt::format_to(out_it, ", \"q_scale\": {}, \"q_zero_point\": {}", t.x->q_scale, t.x->q_zero_point);
  }
  if (!t.x->subclass.empty()) {
    out += ", \"subclass\": ";
    put_string(out, t.x->subclass);
  }
  if (t.shard) {
    out += ", \"shard\": ";
    put_string(out, ck.sharded.shards.at(t.shard - 1).file);
  }
  if (t.resolved) out += ", \"resolved\": true";
}

// One finding's members (streamed).
void put_finding(std::string& out, const Finding& f) {
  out += "\"id\": ";
  put_string(out, f.id);
  fmt::format_to(std::back_inserter(out), ", \"severity\": \"{}\", \"message\": ", to_string(f.severity));
  put_string(out, f.message);
  out += ", \"fix\": ";
  put_string(out, f.fix);
  out += ", \"where\": [";
  for (size_t k = 0; k < f.where.size(); ++k) {
    if (k) out += ", ";
    put_string(out, f.where[k]);
  }
  out += ']';
}

void summary_json(const Summary& s, std::string& out, const Flush& flush) {
  // The small head through nlohmann; the per-entry arrays streamed (100,000 entries must not build a DOM).
  out += json_text(summary_head(s));
  out.resize(out.rfind('}'));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  const ForwardReport* forward = s.forward ? &*s.forward : nullptr;
  put_array(out, flush, "modules", s.modules, [&](const ModuleRow& r) { put_module_row(out, r, forward); });
  put_array(out, flush, "tensors", s.ck->tensors, [&](const Tensor& t) { put_tensor(out, t, *s.ck); });
  put_array(out, flush, "warnings", s.findings, [&](const Finding& f) { put_finding(out, f); });
  out += "\n}\n";
}

}  // namespace

std::string summary_json_text(const Summary& s) {
  std::string out;
  summary_json(s, out, nullptr);
  return out;
}

void write_summary_json(const Summary& s, std::FILE* f) {
  std::string out;
  const Flush flush = file_flush(f);
  summary_json(s, out, flush);
  flush(out);
}

}  // namespace ckpt
