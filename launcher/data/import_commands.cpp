// DLH — dlh-data import-numpy, import-hdf5, import-images, import-csv (see import_commands.hpp).
#include "launcher/data/import_commands.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <climits>
#include <cstdio>
#include <map>
#include <string>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "launcher/data/csv_file.hpp"
#include "launcher/data/data_cli.hpp"
#include "launcher/data/image_folder.hpp"
#include "launcher/data/import.hpp"
#include "launcher/data/import_hdf5.hpp"
#include "launcher/data/numpy_file.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

// The options every import shares: where to write, the held-out split, the classes.
struct CommonOptions {
  std::string out;
  std::string test_fraction = "0.1", seed = "1", classes;
  void add(po::options_description& d) {
    d.add_options()  //
        ("out,o", po::value(&out)->required()->value_name("FILE"),
         "data set file to write (written beside it, then renamed into place)")  //
        ("test-fraction", po::value(&test_fraction)->default_value("0.1")->value_name("F"),
         "when the source has no test split: the share of training samples held out, "
         "drawn by a fixed shuffle class by class (every class of two samples or more at "
         "least one)")  //
        ("seed", po::value(&seed)->default_value("1")->value_name("S"),
         "which samples are held out; the same seed gives the same split")  //
        ("classes", po::value(&classes)->value_name("K"),
         "number of classes (default: the largest label + 1, or the class names)");
  }
  ImportOptions options() const {
    ImportOptions o;
    size_t used = 0;
    try {
      o.test_fraction = std::stod(test_fraction, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != test_fraction.size() || !(o.test_fraction > 0) ||
        !(o.test_fraction < 1))
      throw UsageError("--test-fraction: expected a number between 0 and 1 (exclusive), got '" +
                       test_fraction + "'");
    o.seed = ParseSeed(seed);
    return o;
  }
  void apply_classes(ImportedData* d) const {
    if (classes.empty()) return;
    d->classes = int(ParseInt(classes, "--classes", 2, 1 << 20));
    if (!d->class_names.empty() && size_t(d->classes) != d->class_names.size())
      throw UsageError("--classes: " + classes + " but the source names " +
                       std::to_string(d->class_names.size()) + " classes");
  }
};

ImageLayout ParseLayout(const std::string& text) {
  if (text == "auto") return ImageLayout::kAuto;
  if (text == "nchw") return ImageLayout::kNCHW;
  if (text == "nhwc") return ImageLayout::kNHWC;
  throw UsageError("--layout: expected auto, nchw or nhwc, got '" + text + "'");
}

const char* const kLayoutHelp =
    "how rank-4 image arrays are laid out: nchw (PyTorch), nhwc (NumPy, Keras, PIL) or auto "
    "(nhwc when the last axis has 1, 3 or 4 entries and the second does not)";

void Finish(ImportedData d, const CommonOptions& common) {
  common.apply_classes(&d);
  for (const std::string& note : WriteImportedDataset(std::move(d), common.options(), common.out))
    std::fprintf(stderr, "dlh-data: note: %s\n", note.c_str());
  PrintSummary(common.out);
}

// ---------------------------------------------------------------------------------------
// NumPy

void SetSplitFromNumpy(const NumpyArray& images, const NumpyArray& labels,
                       const std::string& images_where, const std::string& labels_where,
                       ImageLayout layout, ImportedSplit* split) {
  if (!(labels.shape.size() == 1 || (labels.shape.size() == 2 && labels.shape[1] == 1)))
    throw DataError(labels_where + ": labels must be a vector of N (or N x 1), not of rank " +
                    std::to_string(labels.shape.size()));
  if (images.shape.empty() || images.shape[0] != labels.shape[0])
    throw DataError(images_where + ": " +
                    (images.shape.empty() ? std::string("a scalar")
                                          : std::to_string(images.shape[0]) + " samples") +
                    " for " + std::to_string(labels.shape[0]) + " labels in " + labels_where);
  if (images.kind == 'u' && images.item_bytes == 1)
    SetImages(split, images.shape, layout, images.data, images_where);
  else
    SetImages(split, images.shape, layout, ToFloats(images), images_where);
  // The shared check of the values (WriteImportedDataset) names it, not source_file.
  split->images_file = images_where;
  split->labels = ToWholeNumbers(labels, labels_where);
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out(1);
  for (char c : text) {
    if (c == ',')
      out.emplace_back();
    else
      out.back().push_back(c);
  }
  return out;
}

}  // namespace

int ImportNumpyCommand(const std::vector<std::string>& args) {
  po::options_description options("options");
  CommonOptions common;
  std::string npz, keys = "x_train,y_train,x_test,y_test", layout_text = "auto";
  std::string train_images, train_labels, test_images, test_labels;
  common.add(options);
  options.add_options()  //
      ("npz", po::value(&npz)->value_name("FILE"),
       "a .npz archive (np.savez or np.savez_compressed) holding the arrays named by --keys")  //
      ("keys", po::value(&keys)->default_value(keys)->value_name("XTR,YTR[,XTE,YTE]"),
       "the archive's training images and labels, then optionally test images and labels "
       "(a missing test pair is held out of training instead)")                                  //
      ("train-images", po::value(&train_images)->value_name("X.npy"), "training images (.npy)")  //
      ("train-labels", po::value(&train_labels)->value_name("Y.npy"), "training labels (.npy)")  //
      ("test-images", po::value(&test_images)->value_name("X.npy"), "test images (.npy)")        //
      ("test-labels", po::value(&test_labels)->value_name("Y.npy"), "test labels (.npy)")        //
      ("layout", po::value(&layout_text)->default_value(layout_text), kLayoutHelp);
  po::variables_map vm;
  const char* synopsis =
      "--out FILE (--npz F [--keys XTR,YTR[,XTE,YTE]] | --train-images X.npy --train-labels "
      "Y.npy [--test-images X.npy --test-labels Y.npy]) [--layout auto|nchw|nhwc] "
      "[--test-fraction F] [--seed S] [--classes K]";
  if (!ParseArgs("import-numpy", synopsis, args, options, {}, vm)) return kExitOk;
  std::vector<ImportInput> inputs;
  for (const auto& [option, path] : {std::pair{"--npz", &npz},
                                     {"--train-images", &train_images},
                                     {"--train-labels", &train_labels},
                                     {"--test-images", &test_images},
                                     {"--test-labels", &test_labels}})
    if (!path->empty()) inputs.push_back({*path, option});
  CheckImportOutput("import-numpy", common.out, inputs);
  const ImageLayout layout = ParseLayout(layout_text);
  const ImportOptions checked = common.options();  // option errors before any reading
  (void)checked;

  ImportedData d;
  if (!npz.empty()) {
    if (!train_images.empty() || !train_labels.empty() || !test_images.empty() ||
        !test_labels.empty())
      throw UsageError("--npz: give either an archive or .npy files, not both");
    const std::vector<std::string> k = SplitCommas(keys);
    if (k.size() != 2 && k.size() != 4)
      throw UsageError("--keys: expected 2 or 4 names separated by commas, got '" + keys + "'");
    std::map<std::string, NumpyArray> arrays = ReadNpz(npz);
    auto get = [&](const std::string& key) -> const NumpyArray& {
      auto it = arrays.find(key);
      if (it != arrays.end()) return it->second;
      std::string have;
      for (const auto& [name, a] : arrays) have += (have.empty() ? "" : ", ") + name;
      throw DataError(npz + ": no array '" + key + "' (it holds: " + have + "; see --keys)");
    };
    SetSplitFromNumpy(get(k[0]), get(k[1]), npz + ": " + k[0], npz + ": " + k[1], layout, &d.train);
    // The default keys name a test pair that many archives lack: then it is held out.
    const bool test_named = k.size() == 4 && (arrays.count(k[2]) || arrays.count(k[3]) ||
                                              vm["keys"].defaulted() == false);
    if (test_named) {
      SetSplitFromNumpy(get(k[2]), get(k[3]), npz + ": " + k[2], npz + ": " + k[3], layout,
                        &d.test);
      d.has_test = true;
    }
    d.source = "numpy (" + npz + ")";
    d.source_file = npz;
  } else {
    if (train_images.empty() || train_labels.empty())
      throw UsageError("give --npz FILE, or --train-images and --train-labels");
    if (test_images.empty() != test_labels.empty())
      throw UsageError("--test-images and --test-labels go together");
    SetSplitFromNumpy(ReadNpy(train_images), ReadNpy(train_labels), train_images, train_labels,
                      layout, &d.train);
    if (!test_images.empty()) {
      SetSplitFromNumpy(ReadNpy(test_images), ReadNpy(test_labels), test_images, test_labels,
                        layout, &d.test);
      d.test.labels_file = test_labels;
      d.has_test = true;
    }
    d.source = "numpy (" + train_images + ")";
    d.source_file = train_labels;
  }
  Finish(std::move(d), common);
  return kExitOk;
}

int ImportHdf5Command(const std::vector<std::string>& args) {
  po::options_description options("options");
  CommonOptions common;
  std::string file, images, labels, test_images, test_labels, layout_text = "auto";
  common.add(options);
  options.add_options()  //
      ("file", po::value(&file)->value_name("FILE"),
       "the HDF5 file to read (also accepted as the only positional argument)")  //
      ("images", po::value(&images)->required()->value_name("PATH"),
       "dataset of training images, e.g. /x_train")  //
      ("labels", po::value(&labels)->required()->value_name("PATH"),
       "dataset of training labels (whole numbers), e.g. /y_train")                           //
      ("test-images", po::value(&test_images)->value_name("PATH"), "dataset of test images")  //
      ("test-labels", po::value(&test_labels)->value_name("PATH"), "dataset of test labels")  //
      ("layout", po::value(&layout_text)->default_value(layout_text), kLayoutHelp);
  SubcommandSyntax syntax;
  syntax.positional = {{"file", ""}};
  syntax.precheck = [](const po::variables_map& vm) {
    if (!vm.count("file")) throw UsageError("missing FILE, the HDF5 file to import");
  };
  po::variables_map vm;
  if (!ParseArgs("import-hdf5",
                 "FILE --out OUT --images PATH --labels PATH [--test-images PATH --test-labels "
                 "PATH] [--layout auto|nchw|nhwc] [--test-fraction F] [--seed S] [--classes K]",
                 args, options, syntax, vm))
    return kExitOk;
  CheckImportOutput("import-hdf5", common.out, {{file, ""}});
  const ImageLayout layout = ParseLayout(layout_text);
  if (test_images.empty() != test_labels.empty())
    throw UsageError("--test-images and --test-labels go together");
  (void)common.options();
  ImportedData d;
  ReadHdf5Split(file, images, labels, layout, &d.train);
  if (!test_images.empty()) {
    ReadHdf5Split(file, test_images, test_labels, layout, &d.test);
    d.has_test = true;
  }
  d.source = "hdf5 (" + file + ": " + images + ")";
  d.source_file = file;
  Finish(std::move(d), common);
  return kExitOk;
}

int ImportImagesCommand(const std::vector<std::string>& args) {
  po::options_description options("options");
  CommonOptions common;
  std::string root, test_root, size_text, channels_text, spec_path;
  common.add(options);
  options.add_options()  //
      ("root", po::value(&root)->value_name("DIR"),
       "folder of one sub-folder per class holding PNG or JPEG images (the ImageFolder "
       "layout; also accepted as the only positional argument)")  //
      ("size", po::value(&size_text)->value_name("HxW"),
       "every image is resized to this (area-averaged when shrinking, bilinear when "
       "enlarging); default: the --spec's input")  //
      ("channels", po::value(&channels_text)->value_name("1|3"),
       "1: grey, 3: RGB (default: the --spec's input channels, else 3)")  //
      ("spec", po::value(&spec_path)->value_name("SPEC"),
       "a training spec whose input (channels x height x width) gives --size and --channels")  //
      ("test", po::value(&test_root)->value_name("DIR"),
       "a test folder of the same layout (default: hold out --test-fraction of DIR)");
  SubcommandSyntax syntax;
  syntax.positional = {{"root", ""}};
  syntax.precheck = [](const po::variables_map& vm) {
    if (!vm.count("root")) throw UsageError("missing DIR, the folder of class folders");
  };
  po::variables_map vm;
  if (!ParseArgs("import-images",
                 "DIR --out FILE (--size HxW [--channels 1|3] | --spec SPEC) [--test DIR] "
                 "[--test-fraction F] [--seed S]",
                 args, options, syntax, vm))
    return kExitOk;
  std::vector<ImportInput> inputs = {{root, "", 2}};
  if (!test_root.empty()) inputs.push_back({test_root, "--test", 2});
  if (!spec_path.empty()) inputs.push_back({spec_path, "--spec"});
  CheckImportOutput("import-images", common.out, inputs);
  ImageFolderOptions o;
  if (!spec_path.empty()) {
    const TrainSpec spec = LoadSpec(spec_path);
    o.channels = spec.input.channels;
    o.height = spec.input.height;
    o.width = spec.input.width;
    if (o.channels != 1 && o.channels != 3)
      throw UsageError("--spec: " + spec_path + " input has " + std::to_string(o.channels) +
                       " channels; images import as 1 (grey) or 3 (RGB)");
  } else if (size_text.empty()) {
    throw UsageError("give --size HxW, or --spec SPEC to take the size from its input");
  }
  if (!size_text.empty()) ParseSize(size_text, "--size", &o.height, &o.width);
  if (!channels_text.empty()) o.channels = int(ParseInt(channels_text, "--channels", 1, 3));
  if (o.channels == 2) throw UsageError("--channels: expected 1 or 3, got 2");
  if (size_text.empty()) size_text = std::to_string(o.height) + "x" + std::to_string(o.width);
  if (channels_text.empty()) channels_text = std::to_string(o.channels);
  (void)common.options();
  ImportedData d;
  d.train = ReadImageFolder(root, o, {}, &d.class_names);
  if (!test_root.empty()) {
    std::vector<std::string> used;
    d.test = ReadImageFolder(test_root, o, d.class_names, &used);
    d.has_test = true;
  }
  for (const ImportedSplit* s : {&d.train, &d.test})
    if (const std::string note = SkippedFilesNote(s == &d.train ? root : test_root, *s);
        !note.empty())
      std::fprintf(stderr, "dlh-data: note: %s\n", note.c_str());
  d.source = "images (" + root + ", " + size_text + ", " + channels_text + " channels)";
  d.source_file = root;
  Finish(std::move(d), common);
  return kExitOk;
}

int ImportCsvCommand(const std::vector<std::string>& args) {
  po::options_description options("options");
  CommonOptions common;
  std::string file, test_file, label, header = "auto", delimiter = ",", shape_text;
  common.add(options);
  options.add_options()  //
      ("file", po::value(&file)->value_name("FILE"),
       "the CSV file, one sample per row (also accepted as the only positional argument)")  //
      ("label", po::value(&label)->value_name("COLUMN"),
       "the label column: its header name or 0-based index (default: the last column); "
       "whole numbers are class indices, anything else class names (numbered in sorted "
       "order)")  //
      ("header", po::value(&header)->default_value(header)->value_name("auto|yes|no"),
       "whether the first row names the columns (auto: it does when it holds a non-number "
       "where the second row holds a number)")  //
      ("delimiter", po::value(&delimiter)->default_value(delimiter)->value_name("C"),
       "field separator, one character (\\t for tab)")  //
      ("shape", po::value(&shape_text)->value_name("CxHxW"),
       "per-sample shape of the feature columns (default 1x1xF)")  //
      ("test", po::value(&test_file)->value_name("FILE"),
       "a test CSV of the same columns (default: hold out --test-fraction of FILE)");
  SubcommandSyntax syntax;
  syntax.positional = {{"file", ""}};
  syntax.precheck = [](const po::variables_map& vm) {
    if (!vm.count("file")) throw UsageError("missing FILE, the CSV file to import");
  };
  po::variables_map vm;
  if (!ParseArgs("import-csv",
                 "FILE --out OUT [--label COLUMN] [--header auto|yes|no] [--delimiter C] "
                 "[--shape CxHxW] [--test FILE] [--test-fraction F] [--seed S] [--classes K]",
                 args, options, syntax, vm))
    return kExitOk;
  std::vector<ImportInput> inputs = {{file, ""}};
  if (!test_file.empty()) inputs.push_back({test_file, "--test"});
  CheckImportOutput("import-csv", common.out, inputs);
  CsvOptions o;
  o.label_column = label;
  if (header == "auto")
    o.header = CsvOptions::Header::kAuto;
  else if (header == "yes")
    o.header = CsvOptions::Header::kYes;
  else if (header == "no")
    o.header = CsvOptions::Header::kNo;
  else
    throw UsageError("--header: expected auto, yes or no, got '" + header + "'");
  if (delimiter == "\\t") delimiter = "\t";
  if (delimiter.size() != 1 || delimiter == "\"" || delimiter == "\n" || delimiter == "\r")
    throw UsageError("--delimiter: expected one character other than a quote or a line end");
  o.delimiter = delimiter[0];
  Shape3 shape;
  if (!shape_text.empty()) shape = ParseShape(shape_text);
  (void)common.options();

  ImportedData d;
  d.train = ReadCsv(file, o, &d.class_names);
  if (!test_file.empty()) {
    std::vector<std::string> test_names;
    d.test = ReadCsv(test_file, o, &test_names);
    d.test.labels_file = test_file;
    // Class names are numbered per file; renumber the test file's by the training file's.
    if (!test_names.empty() || !d.class_names.empty()) {
      for (int64_t& l : d.test.labels) {
        const std::string& name = test_names.at(size_t(l));
        auto it = std::find(d.class_names.begin(), d.class_names.end(), name);
        if (it == d.class_names.end())
          throw DataError(test_file + ": class '" + name + "' does not occur in " + file);
        l = int64_t(it - d.class_names.begin());
      }
    }
    d.has_test = true;
  }
  for (ImportedSplit* s : {&d.train, &d.test}) {
    if (shape_text.empty() || s->count() == 0) continue;
    if (shape.elements() != s->shape.elements())
      throw DataError(file + ": rows hold " + std::to_string(s->shape.elements()) +
                      " features, --shape " + shape_text + " needs " +
                      std::to_string(shape.elements()));
    s->shape = shape;
  }
  d.source = "csv (" + file + ")";
  d.source_file = file;
  Finish(std::move(d), common);
  return kExitOk;
}

}  // namespace dlh
