// DLH — `dlh-launch predict` (see predict_command.hpp).
#include "launcher/predict/predict_command.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/spec.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/data/dataset_write.hpp"
#include "launcher/data/image_folder.hpp"
#include "launcher/nn/network.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "launcher/predict/results.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/storage/h5.hpp"

namespace dlh {
namespace {

namespace po = boost::program_options;

// The trainer evaluates in chunks of this many samples (trainer_impl.hpp's kEvalChunk): the
// same chunks give the same logits, so predict's accuracy is the run's to the last sample.
constexpr int kChunk = 256;

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The loaded images, put on the scale the model was trained with when the data set
// normalises differently from the checkpoint (a model applied to another file of the same
// kind); values as loaded when the checkpoint recorded no normalisation (older files).
void Renormalise(const Dataset& data, const TrainState& state, DataSplit* split) {
  if (!(state.input_scale > 0)) return;
  if (std::fabs(state.input_scale - data.input_scale) > 1e-12 * std::fabs(state.input_scale))
    throw DataError("the checkpoint's inputs were stored values x " +
                    std::to_string(state.input_scale) + ", the data set's are x " +
                    std::to_string(data.input_scale) + " (uint8 against float images)");
  if (state.input_mean == data.input_mean && state.input_std == data.input_std) return;
  // Per value j of a sample (one mean and std, one per channel or per element, each side).
  const Shape3& shape = split->shape;
  const std::vector<double> dm = StatsPerValue(data.input_mean, shape, "the data set's mean"),
                            ds = StatsPerValue(data.input_std, shape, "the data set's std"),
                            sm = StatsPerValue(state.input_mean, shape, "the checkpoint's mean"),
                            ss = StatsPerValue(state.input_std, shape, "the checkpoint's std");
  const size_t e = dm.size();
  for (size_t i = 0; i < split->images.size(); ++i) {
    const size_t j = i % e;
    split->images[i] = float(double(split->images[i]) * (ds[j] / ss[j]) + (dm[j] - sm[j]) / ss[j]);
  }
}

// What the model is applied to: a data set's split, or a folder of images.
struct Input {
  DataSplit split;  // images on the model's scale
  bool labelled = true;
  std::vector<std::string> origins;  // images: each sample's file, relative to the folder
  std::vector<std::string> class_names;
  std::string source;  // "data.h5 /test", "photos/"
};

Input ReadSplit(const std::string& data_path, const std::string& split_name,
                const TrainState& state, const TrainSpec& spec, const std::string& checkpoint) {
  Dataset data = LoadDataset(data_path);
  Input in;
  in.split = std::move(split_name == "test" ? data.test : data.train);
  in.source = data_path + " /" + split_name;
  DataSplit& split = in.split;
  if (!(split.shape == spec.input))
    throw DataError(
        data_path + ": /" + split_name + "/images are " + std::to_string(split.shape.channels) +
        "x" + std::to_string(split.shape.height) + "x" + std::to_string(split.shape.width) +
        " but " + checkpoint + "'s network takes " + std::to_string(spec.input.channels) + "x" +
        std::to_string(spec.input.height) + "x" + std::to_string(spec.input.width));
  if (data.classes != spec.classes)
    throw DataError(data_path + ": has " + std::to_string(data.classes) + " classes but " +
                    checkpoint + "'s network has " + std::to_string(spec.classes));
  if (split.count == 0) throw DataError(data_path + ": /" + split_name + " has no samples");
  try {
    Renormalise(data, state, &split);
  } catch (const DataError& e) {
    throw DataError(data_path + " and " + checkpoint + ": " + e.what());
  }
  in.class_names = ReadClassNames(data_path, spec.classes);
  return in;
}

// PNG or JPEG files of the network's size, converted to its channels and put on the scale
// its inputs had: x / 255, then (x - mean) / std as the checkpoint recorded (the loader's
// float multiply-add). Only a model trained on uint8 images has that scale.
Input ReadImages(const std::string& dir, const TrainState& state, const TrainSpec& spec,
                 const std::string& checkpoint, bool resize) {
  if (std::fabs(state.input_scale - 1.0 / 255.0) > 1e-12)
    throw DataError(checkpoint + ": trained on " +
                    (state.input_scale > 0
                         ? "float inputs (input_scale " + std::to_string(state.input_scale) + ")"
                         : std::string("inputs of unrecorded scale")) +
                    ", not 8-bit images: import the images with dlh-data import-images and use "
                    "--data");
  if (spec.input.channels != 1 && spec.input.channels != 3)
    throw DataError(checkpoint + ": the network takes " + std::to_string(spec.input.channels) +
                    " channels; images give 1 (grey) or 3 (RGB)");
  ImageFolderOptions o;
  o.channels = spec.input.channels;
  o.height = spec.input.height;
  o.width = spec.input.width;
  // Refused unless asked: a picture of another shape stretched to the network's is not the
  // picture the user meant, and should not be classified without their knowing.
  o.exact_size = !resize;
  o.size_hint = "--resize resizes each to " + std::to_string(o.height) + "x" +
                std::to_string(o.width) + " (height x width), as dlh-data import-images --size " +
                std::to_string(o.height) + "x" + std::to_string(o.width) + " does";
  if (!IsDirectory(dir))
    throw DataError(dir + ": not a folder (--images takes a folder of images)");
  bool class_folders = false;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    class_folders = class_folders || (e.path().filename().string()[0] != '.' && e.is_directory());
  if (ec) throw DataError(dir + ": cannot read folder: " + ec.message());
  Input in;
  in.source = dir;
  ImportedSplit images;
  if (class_folders) {
    images = ReadImageFolder(dir, o, {}, &in.class_names);
    if (int(in.class_names.size()) != spec.classes)
      throw DataError(dir + ": " + std::to_string(in.class_names.size()) +
                      " class folders, the network has " + std::to_string(spec.classes) +
                      " classes (the folders, in sorted order, number them)");
    in.origins = images.origins;
    if (const std::string note = SkippedFilesNote(dir, images); !note.empty())
      std::fprintf(stderr, "dlh-launch: note: %s\n", note.c_str());
  } else {
    images = ReadImageFiles(dir, o);
    in.labelled = false;
    in.origins = images.origins;
  }
  DataSplit& split = in.split;
  split.count = images.count();
  split.shape = spec.input;
  split.labels.assign(images.labels.begin(), images.labels.end());
  const LoadTransform t = MakeLoadTransform(state.input_mean, state.input_std, state.input_scale,
                                            spec.input, "the checkpoint's input statistics");
  const size_t e = t.a.size();
  split.images.resize(images.bytes.size());
  for (size_t i = 0; i < images.bytes.size(); ++i)
    split.images[i] = float(images.bytes[i]) * t.a[i % e] + t.b[i % e];
  return in;
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

TrainState LoadTrainedModel(const std::string& where, std::string* path, const char* command) {
  if (!IsDirectory(where)) {
    *path = where;
    return LoadCheckpoint(where);
  }
  const std::string dir = IsDirectory(where + "/checkpoints") ? where + "/checkpoints" : where;
  TrainState state;
  auto warn = [command](const std::string& m) {
    std::fprintf(stderr, "dlh-launch: %s: %s\n", command, m.c_str());
  };
  if (!CheckpointDir(dir).load_newest_valid(&state, path, warn))
    throw CheckpointError(dir + ": no valid checkpoint (ckpt-<step>.h5)");
  return state;
}

int RunPredictCommand(const std::vector<std::string>& args) {
  std::string data_path, images_dir, split_name = "test", out, results;
  int threads = 0, misclassified = 24;
  po::options_description d("dlh-launch predict CHECKPOINT --data FILE: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("data", po::value(&data_path), "DLH data set (HDF5, dlh-data) to apply the model to")
    ("images", po::value(&images_dir), "or a folder of PNG or JPEG images of the network's size "
        "(one folder per class, named in the order of the classes' numbers, gives labels)")
    ("resize", "with --images: resize images of another size to the network's, as dlh-data "
        "import-images --size does (area average when shrinking, bilinear when enlarging); "
        "without it such an image is refused")
    ("split", po::value(&split_name)->default_value(split_name), "test or train")
    ("out", po::value(&out), "write each sample's class probabilities here: CSV (index, label, "
        "predicted, predicted_class where the classes have names, confidence, p_0 ... p_K-1), "
        "or HDF5 when it ends in .h5 or .hdf5 "
        "(/probabilities N x K, /predicted, /labels, /confidence, /class_names)")
    ("results", po::value(&results), "write results.json here: accuracy, confusion matrix, "
        "per-class precision/recall/F1, the pairs most confused, the surest mistakes")
    ("misclassified", po::value(&misclassified)->default_value(misclassified),
        "misclassified samples kept in results.json, with their images (0 to 1000)")
    ("threads", po::value(&threads)->default_value(threads),
        "CPU threads (0: OPENBLAS_NUM_THREADS or all cores)");
  // clang-format on
  SubcommandSyntax syntax;
  syntax.prefix = "predict: ";
  syntax.suffix = " (see dlh-launch predict --help)";
  syntax.positional = {{"checkpoint", "missing CHECKPOINT (a checkpoint file or a run folder)"}};
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  const std::string where = vm["checkpoint"].as<std::string>();
  if (data_path.empty() == images_dir.empty())
    throw UsageError("predict: give --data FILE or --images DIR" +
                     std::string(data_path.empty() ? "" : ", not both"));
  if (split_name != "test" && split_name != "train")
    throw UsageError("predict: --split: must be test or train, got '" + split_name + "'");
  if (out.empty() && results.empty()) throw UsageError("predict: give --out, --results or both");
  if (misclassified < 0 || misclassified > 1000)
    throw UsageError("predict: --misclassified: must be 0 to 1000");
  if (threads < 0) throw UsageError("predict: --threads: must not be negative");
  if (threads > 0) SetCpuThreads(threads);

  std::string checkpoint;
  const TrainState state = LoadTrainedModel(where, &checkpoint, "predict");
  const TrainSpec spec = ParseSpec(state.spec_json, checkpoint + ": its spec", "");
  if (vm.count("resize") && images_dir.empty())
    throw UsageError("predict: --resize goes with --images");
  Input input = data_path.empty()
                    ? ReadImages(images_dir, state, spec, checkpoint, vm.count("resize") > 0)
                    : ReadSplit(data_path, split_name, state, spec, checkpoint);
  DataSplit& split = input.split;
  // Loose images (or a data set that names no classes): the names the training data gave.
  if (input.class_names.empty() && !state.class_names.empty()) {
    if (int(state.class_names.size()) != spec.classes)
      throw CheckpointError(checkpoint +
                            ": dataset /class_names: " + std::to_string(state.class_names.size()) +
                            " names for " + std::to_string(spec.classes) + " classes");
    input.class_names = state.class_names;
  }
  if (!results.empty() && !input.labelled)
    throw UsageError(
        "predict: --results needs labels: give --data, or --images with one folder "
        "per class");

  Network net(spec);
  try {
    net.import_params(state.params);
    net.import_buffers(state.buffers);
  } catch (const std::exception& e) {
    throw CheckpointError(checkpoint + ": does not fit its own spec: " + e.what());
  }
  const int k = spec.classes;
  const int64_t per = split.shape.elements();
  Predictions p;
  p.classes = k;
  p.labels = split.labels;
  p.predicted.resize(size_t(split.count));
  p.confidence.resize(size_t(split.count));
  std::vector<float> probabilities(out.empty() ? 0 : size_t(split.count) * size_t(k));
  Tensor x;
  std::vector<double> e(size_t(k), 0.0);  // a sample's exp(logit - max), its softmax's terms
  for (int64_t i = 0; i < split.count; i += kChunk) {
    const int n = int(std::min<int64_t>(kChunk, split.count - i));
    x.resize({n, spec.input.channels, spec.input.height, spec.input.width});
    std::copy(split.images.data() + i * per, split.images.data() + (i + n) * per, x.data());
    ForwardContext ctx;
    ctx.training = false;
    ctx.seed = spec.seed;
    const Tensor& logits = net.forward(x, ctx);
    for (int b = 0; b < n; ++b) {
      const float* z = logits.data() + size_t(b) * size_t(k);
      int best = 0;  // the first maximum, as the trainer's accuracy counts it
      for (int c = 1; c < k; ++c)
        if (z[c] > z[best]) best = c;
      double sum = 0;
      for (int c = 0; c < k; ++c) sum += (e[size_t(c)] = std::exp(double(z[c]) - double(z[best])));
      const size_t s = size_t(i + b);
      p.predicted[s] = best;
      p.confidence[s] = float(1 / sum);
      if (!probabilities.empty())
        for (int c = 0; c < k; ++c)
          probabilities[s * size_t(k) + size_t(c)] = float(e[size_t(c)] / sum);
    }
  }

  const std::vector<std::string>& names = input.class_names;
  const bool hdf5 = EndsWith(out, ".h5") || EndsWith(out, ".hdf5");
  if (hdf5) {
    // The same as the CSV, for a reader of arrays (h5py): N x K probabilities and N classes.
    WriteDatasetAtomically(out, [&](hid_t f) {
      h5::WriteFloats(f, "/probabilities", {hsize_t(split.count), hsize_t(k)},
                      probabilities.data());
      h5::WriteInts(f, "/predicted", {hsize_t(split.count)}, p.predicted.data());
      if (input.labelled) h5::WriteInts(f, "/labels", {hsize_t(split.count)}, p.labels.data());
      h5::WriteFloats(f, "/confidence", {hsize_t(split.count)}, p.confidence.data());
      if (!names.empty()) h5::WriteString(f, "/class_names", nlohmann::json(names).dump());
    });
  } else if (!out.empty()) {
    // Images: each row names its file (quoted as RFC 4180 asks); unlabelled: no label.
    std::string csv = std::string("index") + (input.origins.empty() ? "" : ",file") +
                      (input.labelled ? ",label" : "") + ",predicted" +
                      (names.empty() ? "" : ",predicted_class") + ",confidence";
    for (int c = 0; c < k; ++c) csv += ",p_" + std::to_string(c);
    csv += "\n";
    char num[32];
    for (int64_t s = 0; s < split.count; ++s) {
      csv += std::to_string(s);
      if (!input.origins.empty()) csv += "," + CsvField(input.origins[size_t(s)]);
      if (input.labelled) csv += "," + std::to_string(p.labels[size_t(s)]);
      csv += "," + std::to_string(p.predicted[size_t(s)]);
      if (!names.empty()) csv += "," + CsvField(names[size_t(p.predicted[size_t(s)])]);
      std::snprintf(num, sizeof num, ",%.7g", double(p.confidence[size_t(s)]));
      csv += num;
      for (int c = 0; c < k; ++c) {
        std::snprintf(num, sizeof num, ",%.7g", double(probabilities[size_t(s * k + c)]));
        csv += num;
      }
      csv += "\n";
    }
    WriteFileAtomically(out, csv);
  }
  if (!input.labelled) {
    std::printf("predict: %s (step %lld) on %s: %lld images%s\n", checkpoint.c_str(),
                (long long)state.step, input.source.c_str(), (long long)split.count,
                out.empty() ? "" : ("; probabilities in " + out).c_str());
    return kExitOk;
  }
  ResultsOptions ro;
  ro.class_names = names;
  ro.misclassified = misclassified;
  nlohmann::json r = AnalyseResults(p, ro);
  if (!results.empty()) {
    for (nlohmann::json& m : r["misclassified"]) {
      const int64_t s = m["index"].get<int64_t>();
      m["image_bmp_base64"] = GreyBmpBase64(split.images.data() + s * per, split.shape);
    }
    r["checkpoint"] = checkpoint;
    r["step"] = state.step;
    r["data"] = input.source;
    if (!data_path.empty()) r["split"] = split_name;
    WriteFileAtomically(results, r.dump(1) + "\n");
  }
  std::printf(
      "predict: %s (step %lld) on %s: %lld samples, accuracy %.2f%% (%lld correct), "
      "macro F1 %.4f%s%s\n",
      checkpoint.c_str(), (long long)state.step, input.source.c_str(), (long long)split.count,
      100 * r["accuracy"].get<double>(), (long long)r["correct"].get<int64_t>(),
      r["macro_f1"].is_number() ? r["macro_f1"].get<double>() : 0.0,
      out.empty() ? "" : ("; probabilities in " + out).c_str(),
      results.empty() ? "" : ("; results in " + results).c_str());
  return kExitOk;
}

}  // namespace dlh
