// The code/ declaration parser, on class files exactly as torch.jit.save wrote them.
#include <doctest/doctest.h>

#include "core/mapped_file.h"
#include "core/torchscript.h"
#include "core/zip.h"
#include "fixtures.h"

using namespace ckpt;

namespace {
std::string code_of(const std::string& fixture, const std::string& member) {
  auto f = MappedFile::open((test::testdata() / fixture).string());
  ZipReader z(f->view(), Limits{});
  const ZipEntry* e = z.find(member);
  REQUIRE(e != nullptr);
  std::string storage;
  ByteView v = z.content(*e, &storage, 1 << 20);  // deflated by torch
  return std::string(v.str(0, v.size()));
}
}  // namespace

TEST_CASE("torchscript: BatchNorm2d declares its parameters and buffers") {
  const std::string src = code_of("t26/scripted.ts.pt", "scripted.ts/code/__torch__/torch/nn/modules/batchnorm.py");
  auto classes = parse_torchscript_code("__torch__.torch.nn.modules.batchnorm", src);
  REQUIRE(classes.size() == 1);
  const TsClass& bn = classes[0];
  CHECK(bn.qualified == "__torch__.torch.nn.modules.batchnorm.BatchNorm2d");
  CHECK(bn.is_module());
  CHECK(bn.parameters == std::vector<std::string>{"weight", "bias"});
  CHECK(bn.buffers == std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
  std::vector<std::string> methods;
  for (const auto& m : bn.methods) methods.push_back(m.name);
  CHECK(methods == std::vector<std::string>{"forward", "_check_input_dim"});
  CHECK(bn.methods[0].self_calls == std::vector<std::string>{"_check_input_dim"});
}

TEST_CASE("torchscript: several classes in one file, and container children by annotation") {
  const std::string src = code_of("ts113/methods.pt", "methods/code/__torch__.py");
  auto classes = parse_torchscript_code("__torch__", src);
  REQUIRE(!classes.empty());
  const TsClass& root = classes[0];
  CHECK(root.qualified == "__torch__.WithMethods");
  bool calls_impl = false;
  for (const auto& m : root.methods)
    if (m.name == "forward")
      calls_impl = std::find(m.self_calls.begin(), m.self_calls.end(), "_forward_impl") != m.self_calls.end();
  CHECK(calls_impl);
}

TEST_CASE("torchscript: hostile source text never crashes the parser") {
  for (const char* src : {"", "class", "class (", "class X(Module):\n  __parameters__ = [\"a", "  def ", "class X:\n  def (",
                          "class X(Module):\n  a : \n  __annotations__[\"", "\n\n\r\n  (self).(\n"}) {
    CAPTURE(src);
    auto classes = parse_torchscript_code("__torch__", src);
    CHECK(classes.size() <= 1);
  }
}
