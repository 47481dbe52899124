#include "tools/quantize_command.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "graph/onnx_io.h"
#include "kernels/cpu/onednn/cpu_info.h"
#include "quantize/nbits_weights.h"
#include "quantize/quantizer.h"

namespace inferd::tools {

CLI::App* AddQuantizeSubcommand(CLI::App& app, QuantizeCommandOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Quantize a model to int8 (QDQ), bf16 or fp16 weights, or int4 weights");
  cmd->add_option("model", o->input,
                  "Model file (.onnx), or a decoder folder (config.json + model.onnx) for "
                  "weight-only int4/int8")
      ->required();
  cmd->add_option("--output,-o", o->output, "Where to write the quantized model")->required();
  cmd->add_option("--precision,-p", o->precision, "int8, bf16, fp16 or int4 (default int8)");
  cmd->add_option("--calibration,-c", o->calibration,
                  "Folder of .npy calibration samples (int8): DIR/*.npy with samples along axis 0 "
                  "for a single-input model, DIR/<input name>/*.npy (same file names) otherwise");
  cmd->add_flag("--dynamic", o->dynamic,
                "int8 only: quantize MatMul/Gemm activations at run time (transformers); no "
                "calibration needed");
  cmd->add_option("--method", o->method, "Calibration: minmax, percentile or entropy");
  cmd->add_option("--percentile", o->percentile, "Percentile for --method percentile")
      ->check(CLI::Range(50.0, 100.0));
  cmd->add_flag_callback(
      "--per-channel", [o]() { o->per_tensor = false; }, "Weights per output channel (default)");
  cmd->add_flag("--per-tensor", o->per_tensor, "One weight scale per tensor");
  cmd->add_option("--samples", o->samples, "Calibration samples to use (0 = all; default 500)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--exclude", o->exclude, "Comma-separated node names to keep in float");
  cmd->add_option(
      "--report", o->report,
      "Write a per-layer report (SQNR of activations and weights) to FILE ('-': stdout)");
  cmd->add_option("--accuracy-target", o->accuracy_target,
                  "Static int8: return the most damaged layers to FP32 until the outputs' SQNR "
                  "(dB) vs FP32 reaches this (or top-1 agreement %, with --accuracy-metric top1)")
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_option("--accuracy-metric", o->accuracy_metric, "sqnr (default) or top1");
  cmd->add_option("--validation", o->validation,
                  "Data for --report/--accuracy-target (calibration layout; default: calibration)");
  cmd->add_option("--weight-bits", o->weight_bits,
                  "int8: weight bits, 8 or 7 (0 = for this CPU: 7 without AVX-512 VNNI, where "
                  "only 7-bit weights take the fast int8 kernels exactly)")
      ->check(CLI::IsMember({0, 7, 8}));
  cmd->add_option("--block-size,--group-size", o->block_size,
                  "int4 (and int8 for decoder folders): values per scale group (32, 64, 128)");
  cmd->add_flag("--asymmetric", o->asymmetric,
                "Decoder folders: a zero point per group (default symmetric)");
  cmd->add_option("--threads,-t", o->threads, "Threads for calibration (0 = all cores)")
      ->check(CLI::Range(0, 4096));
  return cmd;
}

namespace {

// A decoder folder: weight-only int4/int8 into another folder.
Status QuantizeDecoderCommand(const QuantizeCommandOptions& options, std::ostream& out) {
  quantize::NBitsOptions o;
  if (options.precision == "int4") {
    o.bits = 4;
  } else if (options.precision == "int8") {
    o.bits = 8;
  } else {
    return InvalidArgument(
        "{} is a decoder folder: it takes --precision int4 or int8 (weight-only), not '{}'",
        options.input.string(), options.precision);
  }
  if (options.dynamic || !options.calibration.empty()) {
    return InvalidArgument("decoder folders take weight-only int4/int8: no --dynamic or "
                           "--calibration");
  }
  o.group_size = options.block_size;
  o.asymmetric = options.asymmetric;
  std::stringstream names(options.exclude);
  for (std::string n; std::getline(names, n, ',');) {
    if (!n.empty()) o.exclude.push_back(n);
  }
  quantize::QuantizeReport report;
  report.precision = o.bits == 4 ? quantize::Precision::kInt4 : quantize::Precision::kInt8;
  report.weight_bits = o.bits;
  RETURN_IF_ERROR(quantize::QuantizeDecoderFolder(options.input, options.output, o, &report));
  if (options.report == "-") {
    out << report.ToString();
  } else if (!options.report.empty()) {
    std::ofstream f(options.report);
    f << report.ToString();
    if (!f) return InvalidArgument("cannot write report {}", options.report.string());
  }
  out << fmt::format("wrote {} (int{} weights, group {}, {}, {} layers, weights {} MB -> {} MB)\n",
                     options.output.string(), o.bits, o.group_size,
                     o.asymmetric ? "asymmetric" : "symmetric", report.layers.size(),
                     report.bytes_before / 1e6, report.bytes_after / 1e6);
  return Status::Ok();
}

}  // namespace

std::string Bf16FallbackNote(const cpu::CpuInfo& cpu) {
  return fmt::format(
      "note: this CPU has no native BF16 (oneDNN ISA {}; no avx512_bf16): inferd computes the "
      "model's bf16 layers in FP32 here, from the bf16 weights widened once at load, so it runs "
      "at about FP32 speed (the file is half the size); bf16 compute needs a CPU with "
      "avx512_core_bf16 or AMX\n",
      cpu.dnnl_isa);
}

std::string Bf16MeasuredNote(const cpu::Bf16Choice& choice) {
  return fmt::format(
      "note: bf16 compute does not pay on this CPU for every layer kind: {}. The file keeps bf16 "
      "weights (half the size); those layers compute in FP32 from them, at about FP32 speed\n",
      choice.reason);
}

Status QuantizeModelCommand(const QuantizeCommandOptions& options, std::ostream& out) {
  if (options.output.empty()) return InvalidArgument("no output path given (-o OUT.onnx)");
  if (std::filesystem::is_directory(options.input)) return QuantizeDecoderCommand(options, out);
  if (options.asymmetric) {
    return InvalidArgument("--asymmetric is for decoder folders (weight-only int4/int8)");
  }
  quantize::QuantizeOptions q;
  ASSIGN_OR_RETURN(q.precision, quantize::ParsePrecision(options.precision));
  ASSIGN_OR_RETURN(q.method, quantize::ParseCalibrationMethod(options.method));
  if (options.output.empty()) return InvalidArgument("no output path given (-o OUT.onnx)");
  q.calibration_dir = options.calibration;
  q.percentile = options.percentile;
  q.per_channel = !options.per_tensor;
  q.dynamic = options.dynamic;
  q.int4_block_size = options.block_size;
  q.weight_bits = options.weight_bits;
  q.accuracy_target = options.accuracy_target;
  q.accuracy_metric = options.accuracy_metric;
  q.validation_dir = options.validation;
  q.samples = options.samples;
  q.num_threads = options.threads;
  q.report = !options.report.empty();
  std::stringstream names(options.exclude);
  for (std::string n; std::getline(names, n, ',');) {
    if (!n.empty()) q.exclude.push_back(n);
  }
  ASSIGN_OR_RETURN(Model model, LoadOnnxModel(options.input));
  quantize::QuantizeReport report;
  RETURN_IF_ERROR(quantize::QuantizeModel(model, q, &report));
  model.producer_name = "inferd quantize";
  RETURN_IF_ERROR(SaveOnnxModel(model, options.output));
  StatusOr<Model> reloaded = LoadOnnxModel(options.output);
  if (!reloaded.ok()) {
    return Internal("the quantized model {} does not load back: {}", options.output.string(),
                    reloaded.status().message());
  }
  if (!options.report.empty()) {
    if (options.report == "-") {
      out << report.ToString();
    } else {
      std::ofstream f(options.report);
      f << report.ToString();
      if (!f) return InvalidArgument("cannot write report {}", options.report.string());
    }
  }
  for (const std::string& note : report.skipped) {
    if (note.rfind("accuracy target", 0) == 0) out << "warning: " << note << "\n";
  }
  if (!report.kept_float.empty()) {
    out << "kept in FP32 for the accuracy target:";
    for (const auto& n : report.kept_float) out << " " << n;
    out << "\n";
  }
  if (report.weight_bits == 7 && options.weight_bits == 0) {
    out << "note: 7-bit int8 weights (-63..63): this CPU has no AVX-512 VNNI, where oneDNN's int8 "
           "kernels are exact only for 7-bit weights (full-range ones would run the slower exact "
           "kernels); --weight-bits 8 keeps the full range\n";
  }
  if (q.precision == quantize::Precision::kBf16) {
    if (!cpu::DetectCpu().native_bf16) {
      out << Bf16FallbackNote(cpu::DetectCpu());
    } else if (const cpu::Bf16Choice& c = cpu::Bf16ComputeChoice(); !c.conv || !c.matmul) {
      out << Bf16MeasuredNote(c);
    }
  }
  out << "wrote " << options.output.string() << " (" << quantize::PrecisionName(q.precision)
      << (report.weight_bits > 0 ? fmt::format(", {}-bit weights", report.weight_bits) : "")
      << ", " << report.layers.size() << " layers, weights " << report.bytes_before / 1e6 << " MB -> "
      << report.bytes_after / 1e6 << " MB)\n";
  return Status::Ok();
}

}  // namespace inferd::tools
