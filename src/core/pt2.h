// torch.export archives (.pt2), read without LibTorch and without reading a weight byte for summary.
// Two layouts (see FORMATS.md, "torch.export .pt2 archives"):
//
//   torch 2.6 torch.export.save: a zip with no folder
//     serialized_exported_program.json   the ExportedProgram (graph, signature, range constraints)
//     serialized_state_dict.pt           torch.save zip of ep.state_dict (read as a sub-view)
//     serialized_constants.pt            torch.save zip of ep.constants
//     serialized_example_inputs.pt       torch.save zip of (args, kwargs)
//     version                            "8.2"-like schema version
//
//   torch >= 2.7 pt2 archive (package_pt2 / torch.export.save / aoti_compile_and_package): <root>/...
//     archive_format ("pt2"), archive_version, byteorder, .data/version, .data/serialization_id
//     models/<model>.json                                 one ExportedProgram per model
//     data/weights/<model>_weights_config.json            {"config": {fqn: PayloadMeta}}; the raw bytes in
//     data/weights/weight_N                               weight_N (shared by the views of one storage), or a
//                                                         torch.save blob when use_pickle
//     data/constants/<model>_constants_config.json        the same for constants (tensor_N, custom_obj_N)
//     data/sample_inputs/<model>.pt                       torch.save zip of (args, kwargs)
//     data/aotinductor/<model>/...                        AOTInductor: .so / .cpp / kernels / weights
//
// Several models in one package: ck.tensors holds the state dict of the model named "model" (else the
// first by name), with its module tree; every model is listed in ck.pt2.models with its own counts.
// Errors in JSON name the member and a JSON pointer (the parser's byte offset for syntax errors).
#pragma once

#include "core/checkpoint.h"
#include "core/zip.h"

namespace ckpt {

struct Pt2Layout {
  bool export_zip = false;  // torch 2.6's serialized_exported_program.json layout
  std::string prefix;  // the archive's root folder ("" when members sit at the top)
};
// Whether the zip is a .pt2 archive (either layout, with or without a root folder).
bool is_pt2_archive(const ZipReader& zip, Pt2Layout* layout);
// Reads it into `ck` (format pt2, container zip).
void read_pt2(Checkpoint& ck, const ZipReader& zip, const Pt2Layout& layout, const Limits& limits);

namespace pt2 {

// One JSON member, parsed with bounded depth and no key twice in an object; errors name file, member and
// JSON pointer. Json: nlohmann::json (fast lookups: graphs) or ordered_json (file order: payload configs).
template <typename Json>
struct Doc {
  std::string file, member;
  Json j;
  [[noreturn]] void fail(const std::string& pointer, const std::string& msg) const {
    throw InputError(file, member, "JSON " + (pointer.empty() ? std::string("/") : pointer) + ": " + msg);
  }
};
template <typename Json>
Doc<Json> parse_doc(const ZipReader& zip, const ZipEntry& e, const std::string& file, const Limits& limits);

// Graph facts of one serialized ExportedProgram (pt2_graph.cc): specs, ranges, operator census, FLOPs,
// and the module tree from nn_module_stack (appended to `modules` for the summary's model).
void read_graph(const Doc<nlohmann::json>& d, Pt2Model& m, std::vector<Module>* modules, const Limits& limits);
// The torch dtype a serializer ScalarType number names (torch/_export/serde/schema.py), or nullptr.
const DType* dtype_of(int64_t scalar_type);
// A serialized SymInt ({"as_int": n} or {"as_expr": {"expr_str", "hint"}}) as text, and its concrete size
// (the int, else the hint; nullopt when neither).
std::string symint_text(const nlohmann::json& v);
std::optional<int64_t> symint_value(const nlohmann::json& v);

}  // namespace pt2
}  // namespace ckpt
