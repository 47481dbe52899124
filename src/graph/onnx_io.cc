#include "graph/onnx_io.h"

#include "graph/shape_inference_guard.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace inferd {
namespace {

namespace fs = std::filesystem;

// Opens a file for reading, with the errors a user should see for a wrong path.
StatusOr<std::ifstream> OpenFile(const fs::path& path, std::ios::openmode mode) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound("file not found: {}", path.string());
  if (fs::is_directory(path, ec)) return InvalidArgument("{} is a directory", path.string());
  // Checked before opening: opening a FIFO blocks until a writer appears, maybe forever.
  if (!fs::is_regular_file(path, ec)) {
    return InvalidArgument("{} is not a regular file (a FIFO, socket or device)", path.string());
  }
  std::ifstream in(path, std::ios::binary | mode);
  if (!in) return NotFound("cannot open {}: {}", path.string(), std::strerror(errno));
  return in;
}

StatusOr<std::string> ReadFile(const fs::path& path) {
  ASSIGN_OR_RETURN(std::ifstream in, OpenFile(path, std::ios::ate));
  // One buffer of the file's size (a stringstream would hold the file twice at its peak).
  std::string bytes(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (in.bad() || in.gcount() != static_cast<std::streamsize>(bytes.size())) {
    return Internal("error reading {}", path.string());
  }
  return bytes;
}

// Copies `count` elements of a repeated proto field into the tensor, converting each.
template <typename Dst, typename Field>
void CopyField(const Field& field, Tensor* t) {
  Dst* out = t->data<Dst>();
  for (int i = 0; i < field.size(); ++i) {
    if constexpr (std::is_same_v<Dst, Float16> || std::is_same_v<Dst, BFloat16>) {
      out[i] = Dst::FromBits(static_cast<uint16_t>(field.Get(i)));
    } else {
      out[i] = static_cast<Dst>(field.Get(i));
    }
  }
}

// The external data file must resolve (symlinks followed) strictly inside the model's folder and
// be a regular file, checked before it is opened: a symlink to /etc/passwd would hand the file's
// bytes out as a tensor, and a FIFO would block the load forever.
Status CheckExternalDataFile(const std::string& tensor, const std::string& location,
                             const fs::path& base_dir, const fs::path& full) {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(base_dir.empty() ? fs::path(".") : base_dir, ec);
  const fs::path resolved = fs::weakly_canonical(full, ec);
  if (ec) return NotFound("tensor '{}': external data file '{}' not found", tensor, location);
  auto [r, f] = std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end());
  const bool inside = (r == root.end() || (std::next(r) == root.end() && r->empty())) &&
                      f != resolved.end();
  if (!inside) {
    return InvalidArgument("tensor '{}': external data location '{}' leads outside the model "
                           "folder (a symlink pointing out is refused)",
                           tensor, location);
  }
  const fs::file_status st = fs::status(resolved, ec);
  if (st.type() == fs::file_type::not_found) {
    return NotFound("tensor '{}': external data file '{}' not found", tensor, location);
  }
  if (st.type() != fs::file_type::regular) {
    return InvalidArgument("tensor '{}': external data location '{}' is not a regular file",
                           tensor, location);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadExternalData(const onnx::TensorProto& proto, const fs::path& base_dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    try {
      if (kv.key() == "offset") offset = std::stoll(kv.value());
      if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      return InvalidArgument("tensor '{}': bad external data {} '{}'", proto.name(), kv.key(),
                             kv.value());
    }
  }
  if (location.empty()) {
    return InvalidArgument("tensor '{}' has external data without a location", proto.name());
  }
  fs::path rel(location);
  if (rel.is_absolute() || location.find("..") != std::string::npos) {
    return InvalidArgument("tensor '{}': external data location '{}' must be a relative path "
                           "inside the model folder", proto.name(), location);
  }
  fs::path full = base_dir / rel;
  RETURN_IF_ERROR(CheckExternalDataFile(proto.name(), location, base_dir, full));
  std::ifstream in(full, std::ios::binary);
  if (!in) return NotFound("tensor '{}': external data file not found: {}", proto.name(),
                           full.string());
  in.seekg(0, std::ios::end);
  int64_t size = in.tellg();
  if (offset < 0 || offset > size) {
    return InvalidArgument("tensor '{}': external data offset {} beyond end of {} ({} bytes)",
                           proto.name(), offset, full.string(), size);
  }
  if (length < 0) length = size - offset;
  if (offset + length > size) {
    return InvalidArgument("tensor '{}': external data [{}, {}) beyond end of {} ({} bytes)",
                           proto.name(), offset, offset + length, full.string(), size);
  }
  std::string data(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(data.data(), length);
  if (!in) return Internal("tensor '{}': failed reading {}", proto.name(), full.string());
  return data;
}

StatusOr<ValueInfo> ConvertValueInfo(const onnx::ValueInfoProto& p) {
  ValueInfo vi;
  vi.name = p.name();
  if (!p.has_type() || !p.type().has_tensor_type()) return vi;  // sequences, maps: type unknown
  const auto& tt = p.type().tensor_type();
  vi.dtype = static_cast<DataType>(tt.elem_type());
  if (tt.has_shape()) {
    std::vector<Dim> dims;
    for (const auto& d : tt.shape().dim()) {
      Dim dim;
      if (d.has_dim_value()) dim.value = d.dim_value();
      if (d.has_dim_param()) dim.param = d.dim_param();
      dims.push_back(dim);
    }
    vi.shape = std::move(dims);
  }
  return vi;
}

StatusOr<std::shared_ptr<Graph>> ConvertGraph(const onnx::GraphProto& gp, const fs::path& base_dir,
                                              bool is_subgraph,
                                              onnx::GraphProto* release_from = nullptr);

StatusOr<Attribute> ConvertAttribute(const onnx::AttributeProto& a, const fs::path& base_dir) {
  Attribute out;
  using AP = onnx::AttributeProto;
  switch (a.type()) {
    case AP::FLOAT: out.type = Attribute::Type::kFloat; out.f = a.f(); break;
    case AP::INT: out.type = Attribute::Type::kInt; out.i = a.i(); break;
    case AP::STRING: out.type = Attribute::Type::kString; out.s = a.s(); break;
    case AP::TENSOR: {
      out.type = Attribute::Type::kTensor;
      ASSIGN_OR_RETURN(out.t, TensorFromProto(a.t(), base_dir));
      break;
    }
    case AP::GRAPH: {
      out.type = Attribute::Type::kGraph;
      ASSIGN_OR_RETURN(out.g, ConvertGraph(a.g(), base_dir, true));
      break;
    }
    case AP::FLOATS:
      out.type = Attribute::Type::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case AP::INTS:
      out.type = Attribute::Type::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case AP::STRINGS:
      out.type = Attribute::Type::kStrings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case AP::TENSORS:
      out.type = Attribute::Type::kTensors;
      for (const auto& t : a.tensors()) {
        ASSIGN_OR_RETURN(Tensor tensor, TensorFromProto(t, base_dir));
        out.tensors.push_back(std::move(tensor));
      }
      break;
    case AP::GRAPHS:
      out.type = Attribute::Type::kGraphs;
      for (const auto& g : a.graphs()) {
        ASSIGN_OR_RETURN(auto sub, ConvertGraph(g, base_dir, true));
        out.graphs.push_back(std::move(sub));
      }
      break;
    default:
      return Unimplemented("attribute '{}' has unsupported type {}", a.name(),
                           static_cast<int>(a.type()));
  }
  return out;
}

// `release_from`: the same graph, mutable; each initializer's bytes are freed there once copied,
// so a large model is not held twice while it loads.
StatusOr<std::shared_ptr<Graph>> ConvertGraph(const onnx::GraphProto& gp, const fs::path& base_dir,
                                              bool is_subgraph,
                                              onnx::GraphProto* release_from) {
  auto g = std::make_shared<Graph>();
  g->name = gp.name();
  if (gp.sparse_initializer_size() > 0) {
    return Unimplemented("graph '{}' uses sparse initializers, which are not supported",
                         gp.name());
  }
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const onnx::TensorProto& init = gp.initializer(i);
    if (init.name().empty()) return InvalidArgument("graph '{}' has an unnamed initializer", g->name);
    StatusOr<Tensor> t = TensorFromProto(init, base_dir);
    if (!t.ok()) return t.status().WithContext(fmt::format("initializer '{}'", init.name()));
    g->initializers[init.name()] = std::move(t).value();
    if (release_from != nullptr) {
      std::string().swap(*release_from->mutable_initializer(i)->mutable_raw_data());
    }
  }
  for (const auto& in : gp.input()) {
    ASSIGN_OR_RETURN(ValueInfo vi, ConvertValueInfo(in));
    g->inputs.push_back(std::move(vi));
  }
  for (const auto& out : gp.output()) {
    ASSIGN_OR_RETURN(ValueInfo vi, ConvertValueInfo(out));
    g->outputs.push_back(std::move(vi));
  }
  for (const auto& v : gp.value_info()) {
    ASSIGN_OR_RETURN(ValueInfo vi, ConvertValueInfo(v));
    g->value_info[vi.name] = std::move(vi);
  }
  for (const auto& np : gp.node()) {
    Node* n = g->AddNode(np.op_type(), {np.input().begin(), np.input().end()},
                         {np.output().begin(), np.output().end()}, np.name());
    n->domain = np.domain() == "ai.onnx" ? "" : np.domain();
    for (const auto& a : np.attribute()) {
      if (!a.ref_attr_name().empty()) {
        return Unimplemented("{}: attribute references (functions) are not supported",
                             n->Describe());
      }
      StatusOr<Attribute> attr = ConvertAttribute(a, base_dir);
      if (!attr.ok()) return attr.status().WithContext(n->Describe());
      n->attributes[a.name()] = std::move(attr).value();
    }
  }
  if (!is_subgraph) RETURN_IF_ERROR(g->TopologicalSort());
  return g;
}

// Sorts subgraphs after the whole model is converted: a subgraph's outer-scope values are only
// known in the context of its parent.
Status SortSubgraphs(Graph& g) {
  for (auto& n : g.nodes) {
    for (auto& [key, attr] : n->attributes) {
      std::vector<std::shared_ptr<Graph>> subs = attr.graphs;
      if (attr.g) subs.push_back(attr.g);
      for (auto& sub : subs) {
        RETURN_IF_ERROR(sub->TopologicalSort(sub->OuterScopeValues()));
        RETURN_IF_ERROR(SortSubgraphs(*sub));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

namespace {

// The element count of a proto's dims, checked before anything is allocated: a corrupt proto can
// claim absurd or negative dims, and a product past int64 wraps (UBSan; found by the onnx fuzzer).
StatusOr<int64_t> CheckedElementCount(const onnx::TensorProto& proto, const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("tensor '{}' has a negative dimension", proto.name());
    if (d > 0 && n > (int64_t{1} << 40) / d) {
      return InvalidArgument("tensor '{}' is too large ({})", proto.name(), ShapeToString(shape));
    }
    n *= d;
  }
  return n;
}

// STRING tensors keep their elements in string_data (ONNX never stores them raw or external).
StatusOr<Tensor> StringTensorFromProto(const onnx::TensorProto& proto) {
  if (proto.has_raw_data() || proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return InvalidArgument("tensor '{}': string tensors must use string_data", proto.name());
  }
  Shape shape(proto.dims().begin(), proto.dims().end());
  RETURN_IF_ERROR(CheckedElementCount(proto, shape).status());
  StatusOr<Tensor> t = Tensor::FromStrings(
      std::vector<std::string>(proto.string_data().begin(), proto.string_data().end()), shape);
  if (!t.ok()) return t.status().WithContext(fmt::format("tensor '{}'", proto.name()));
  return t;
}

}  // namespace

StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const fs::path& base_dir) {
  DataType dtype = static_cast<DataType>(proto.data_type());
  if (dtype == DataType::kString) return StringTensorFromProto(proto);
  if (!IsSupportedDataType(dtype)) {
    return Unimplemented("tensor '{}': unsupported data type {}", proto.name(),
                         static_cast<int>(proto.data_type()));
  }
  Shape shape(proto.dims().begin(), proto.dims().end());
  ASSIGN_OR_RETURN(const int64_t n, CheckedElementCount(proto, shape));
  const size_t bytes = static_cast<size_t>(n) * SizeOf(dtype);

  std::string external;
  const std::string* raw = nullptr;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    ASSIGN_OR_RETURN(external, ReadExternalData(proto, base_dir));
    raw = &external;
  } else if (proto.has_raw_data()) {
    raw = &proto.raw_data();
  }
  if (raw != nullptr) {
    if (raw->size() != bytes) {
      return InvalidArgument("tensor '{}': raw data has {} bytes, expected {} for {}{}",
                             proto.name(), raw->size(), bytes, DataTypeName(dtype),
                             ShapeToString(shape));
    }
    Tensor t = Tensor::Allocate(dtype, shape);
    if (bytes > 0) std::memcpy(t.raw_data(), raw->data(), bytes);
    return t;
  }

  int count = 0;
  switch (dtype) {
    case DataType::kFloat32: count = proto.float_data_size(); break;
    case DataType::kFloat64: count = proto.double_data_size(); break;
    case DataType::kInt64: count = proto.int64_data_size(); break;
    case DataType::kUInt32: case DataType::kUInt64: count = proto.uint64_data_size(); break;
    default: count = proto.int32_data_size(); break;
  }
  if (count != n) {
    return InvalidArgument("tensor '{}': has {} values, expected {} for {}{}", proto.name(), count,
                           n, DataTypeName(dtype), ShapeToString(shape));
  }
  Tensor t = Tensor::Allocate(dtype, shape);
  switch (dtype) {
    case DataType::kFloat32:
      CopyField<float>(proto.float_data(), &t);
      break;
    case DataType::kFloat64:
      CopyField<double>(proto.double_data(), &t);
      break;
    case DataType::kInt64:
      CopyField<int64_t>(proto.int64_data(), &t);
      break;
    case DataType::kUInt32:
      CopyField<uint32_t>(proto.uint64_data(), &t);
      break;
    case DataType::kUInt64:
      CopyField<uint64_t>(proto.uint64_data(), &t);
      break;
    default:  // int32_data holds int8/16/32, uint8/16, bool, and float16/bfloat16 bit patterns
      DispatchAll(
          dtype, [&](auto tag) { CopyField<decltype(tag)>(proto.int32_data(), &t); }, [] {});
      break;
  }
  return t;
}

StatusOr<Tensor> LoadTensorProtoFile(const fs::path& path, std::string* name) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    return InvalidArgument("{} is not a valid TensorProto", path.string());
  }
  if (name) *name = proto.name();
  return TensorFromProto(proto, path.parent_path());
}

namespace {

constexpr const char* kParseFailed =
    "not a valid ONNX model: protobuf parse failed (corrupt or truncated)";

// Checks, infers shapes and converts a parsed model; frees the proto's initializer bytes as it
// copies them.
StatusOr<Model> ConvertModel(onnx::ModelProto& mp, const fs::path& base_dir,
                             const ImportOptions& options) {
  if (!mp.has_graph()) return InvalidArgument("not a valid ONNX model: it has no graph");
  if (mp.functions_size() > 0) {
    return Unimplemented("model-local functions are not supported ({} defined)",
                         mp.functions_size());
  }
  if (options.run_checker) {
    try {
      onnx::checker::CheckerContext ctx;
      std::unordered_map<std::string, int> opsets;
      for (const auto& op : mp.opset_import()) opsets[op.domain()] = static_cast<int>(op.version());
      ctx.set_ir_version(static_cast<int>(mp.ir_version()));
      ctx.set_opset_imports(opsets);
      ctx.set_model_dir(base_dir.string());
      onnx::checker::LexicalScopeContext lex;
      onnx::checker::check_graph(mp.graph(), ctx, lex);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      std::replace(msg.begin(), msg.end(), '\n', ' ');
      return InvalidArgument("ONNX checker rejected the model: {}", msg);
    }
  }
  if (options.run_shape_inference) {
    // libonnx's inference functions for Conv/pool and a few others crash on malformed nodes
    // (graph/shape_inference_guard.h); the guards reject those nodes before onnx sees them.
    InstallShapeInferenceGuards();
    try {
      onnx::ShapeInferenceOptions si(/*check_type=*/false, /*error_mode=*/0,
                                     /*enable_data_propagation=*/true);
      onnx::shape_inference::InferShapes(mp, onnx::OpSchemaRegistry::Instance(), si);
    } catch (const ShapeGuardError& e) {
      return InvalidArgument("not a valid ONNX model: {}", e.what());
    } catch (const std::exception& e) {
      // Shape inference only fills in information; kernels compute shapes themselves.
      spdlog::debug("shape inference failed, continuing without it: {}", e.what());
    }
  }

  Model model;
  model.ir_version = mp.ir_version();
  model.producer_name = mp.producer_name();
  model.producer_version = mp.producer_version();
  for (const auto& op : mp.opset_import()) {
    model.opsets[op.domain() == "ai.onnx" ? "" : op.domain()] = op.version();
  }
  for (const auto& kv : mp.metadata_props()) model.metadata[kv.key()] = kv.value();
  ASSIGN_OR_RETURN(std::shared_ptr<Graph> g,
                   ConvertGraph(mp.graph(), base_dir, false, mp.mutable_graph()));
  model.graph = std::move(*g);
  RETURN_IF_ERROR(SortSubgraphs(model.graph));
  return model;
}

}  // namespace

StatusOr<Model> ParseOnnxModel(const std::string& bytes, const fs::path& base_dir,
                               const ImportOptions& options) {
  onnx::ModelProto mp;
  if (bytes.empty()) return InvalidArgument("model is empty (0 bytes)");
  if (!mp.ParseFromString(bytes)) return InvalidArgument("{}", kParseFailed);
  return ConvertModel(mp, base_dir, options);
}

StatusOr<Model> LoadOnnxModel(const fs::path& path, const ImportOptions& options) {
  // Parsed straight from the file: no copy of the file's bytes next to the parsed proto.
  StatusOr<Model> model = [&]() -> StatusOr<Model> {
    ASSIGN_OR_RETURN(std::ifstream in, OpenFile(path, std::ios::in));
    std::error_code ec;
    if (fs::file_size(path, ec) == 0) return InvalidArgument("model is empty (0 bytes)");
    onnx::ModelProto mp;
    google::protobuf::io::IstreamInputStream stream(&in);
    if (!mp.ParseFromZeroCopyStream(&stream) || in.bad()) {
      return InvalidArgument("{}", kParseFailed);
    }
    return ConvertModel(mp, path.parent_path(), options);
  }();
  if (!model.ok()) return model.status().WithContext(path.string());
  return model;
}

// ---------------------------------------------------------------------------------------------
// Export

namespace {

void TensorToProto(const std::string& name, const Tensor& t, onnx::TensorProto* p) {
  p->set_name(name);
  p->set_data_type(static_cast<int>(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  if (t.is_string()) {
    for (const std::string& v : t.values<std::string>()) p->add_string_data(v);
    return;
  }
  p->set_raw_data(std::string(static_cast<const char*>(t.raw_data()), t.ByteSize()));
}

void ValueInfoToProto(const ValueInfo& vi, onnx::ValueInfoProto* p) {
  p->set_name(vi.name);
  if (vi.dtype == DataType::kUndefined) return;
  auto* tt = p->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int>(vi.dtype));
  if (!vi.shape) return;
  auto* shape = tt->mutable_shape();
  for (const Dim& d : *vi.shape) {
    auto* dim = shape->add_dim();
    if (d.known()) {
      dim->set_dim_value(d.value);
    } else if (!d.param.empty()) {
      dim->set_dim_param(d.param);
    }
  }
}

void GraphToProto(const Graph& g, onnx::GraphProto* gp);

void AttributeToProto(const std::string& name, const Attribute& a, onnx::AttributeProto* p) {
  using AP = onnx::AttributeProto;
  p->set_name(name);
  switch (a.type) {
    case Attribute::Type::kFloat: p->set_type(AP::FLOAT); p->set_f(a.f); break;
    case Attribute::Type::kInt: p->set_type(AP::INT); p->set_i(a.i); break;
    case Attribute::Type::kString: p->set_type(AP::STRING); p->set_s(a.s); break;
    case Attribute::Type::kTensor:
      p->set_type(AP::TENSOR);
      TensorToProto("", a.t, p->mutable_t());
      break;
    case Attribute::Type::kGraph:
      p->set_type(AP::GRAPH);
      GraphToProto(*a.g, p->mutable_g());
      break;
    case Attribute::Type::kFloats:
      p->set_type(AP::FLOATS);
      for (float f : a.floats) p->add_floats(f);
      break;
    case Attribute::Type::kInts:
      p->set_type(AP::INTS);
      for (int64_t i : a.ints) p->add_ints(i);
      break;
    case Attribute::Type::kStrings:
      p->set_type(AP::STRINGS);
      for (const auto& s : a.strings) p->add_strings(s);
      break;
    case Attribute::Type::kTensors:
      p->set_type(AP::TENSORS);
      for (const auto& t : a.tensors) TensorToProto("", t, p->add_tensors());
      break;
    case Attribute::Type::kGraphs:
      p->set_type(AP::GRAPHS);
      for (const auto& g : a.graphs) GraphToProto(*g, p->add_graphs());
      break;
    case Attribute::Type::kUndefined: break;
  }
}

void GraphToProto(const Graph& g, onnx::GraphProto* gp) {
  gp->set_name(g.name);
  for (const auto& vi : g.inputs) ValueInfoToProto(vi, gp->add_input());
  for (const auto& vi : g.outputs) ValueInfoToProto(vi, gp->add_output());
  for (const auto& [name, vi] : g.value_info) ValueInfoToProto(vi, gp->add_value_info());
  for (const auto& [name, t] : g.initializers) TensorToProto(name, t, gp->add_initializer());
  for (const auto& n : g.nodes) {
    auto* np = gp->add_node();
    np->set_name(n->name);
    np->set_op_type(n->op_type);
    np->set_domain(n->domain);
    for (const auto& in : n->inputs) np->add_input(in);
    for (const auto& out : n->outputs) np->add_output(out);
    for (const auto& [key, attr] : n->attributes) AttributeToProto(key, attr, np->add_attribute());
  }
}

}  // namespace

StatusOr<std::string> SerializeOnnxModel(const Model& model) {
  onnx::ModelProto mp;
  mp.set_ir_version(model.ir_version);
  mp.set_producer_name(model.producer_name.empty() ? "inferd" : model.producer_name);
  mp.set_producer_version(model.producer_version);
  for (const auto& [domain, version] : model.opsets) {
    auto* op = mp.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  for (const auto& [k, v] : model.metadata) {
    auto* kv = mp.add_metadata_props();
    kv->set_key(k);
    kv->set_value(v);
  }
  GraphToProto(model.graph, mp.mutable_graph());
  std::string bytes;
  if (!mp.SerializeToString(&bytes)) {
    return Internal("failed to serialize the model (is it larger than protobuf's 2 GiB limit?)");
  }
  return bytes;
}

Status SaveOnnxModel(const Model& model, const fs::path& path) {
  ASSIGN_OR_RETURN(std::string bytes, SerializeOnnxModel(model));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return NotFound("cannot write {}: {}", path.string(), std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return Internal("error writing {}", path.string());
  return Status::Ok();
}

}  // namespace inferd
