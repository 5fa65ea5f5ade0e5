// DLH — reading a folder of images per class (see image_folder.hpp).
//
// Two phases: first the folder tree is listed and checked (classes, files, no empty class),
// so a layout mistake fails at once rather than after minutes of decoding; then the images
// are decoded one at a time, converted, resized and appended to the split, which was sized
// for all of them up front (a growing vector would briefly hold the data set twice).
#include "launcher/data/image_folder.hpp"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

// clang-format off
#include <jpeglib.h>  // after <cstdio>: it uses FILE and size_t without including them
// clang-format on

#include "common/error.hpp"
#include "common/short_list.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

// Larger images are refused before their pixels are allocated: a corrupt or hostile header
// claiming 60000 x 60000 pixels would otherwise ask for gigabytes. 2^28 pixels is far beyond
// any photograph a classifier is trained on.
constexpr int64_t kMaxPixels = int64_t(1) << 28;

// An image as decoded: rows of interleaved channels (H x W x C), C = 1 (grey) or 3 (RGB).
struct Decoded {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
};

std::string Join(const std::string& folder, const std::string& name) {
  if (folder.empty()) return name;
  return folder.back() == '/' ? folder + name : folder + "/" + name;
}

void CheckDimensions(const std::string& path, uint64_t width, uint64_t height) {
  if (width == 0 || height == 0 || width * height > uint64_t(kMaxPixels))
    throw DataError(path + ": image of " + std::to_string(width) + "x" + std::to_string(height) +
                    " pixels is empty or too large (at most " + std::to_string(kMaxPixels) +
                    " pixels)");
}

// ---------------------------------------------------------------------------------------
// The folder tree

struct Entry {
  std::string name;
  fs::file_type type;  // after following symbolic links; not_found for a broken one
};

// The entries of `folder` that are not hidden (names starting with '.': .DS_Store, .git,
// editors' swap files), sorted by name in byte order, as torchvision's ImageFolder sorts.
std::vector<Entry> VisibleEntries(const std::string& folder) {
  std::error_code ec;
  fs::directory_iterator it(folder, ec);
  if (ec) throw DataError(folder + ": cannot read folder: " + ec.message());
  std::vector<Entry> entries;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw DataError(folder + ": cannot read folder: " + ec.message());
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code status_ec;  // a broken link is reported per file below, not here
    entries.push_back({std::move(name), it->status(status_ec).type()});
  }
  if (ec) throw DataError(folder + ": cannot read folder: " + ec.message());
  // std::string compares as unsigned bytes (char_traits<char>), i.e. byte order.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return entries;
}

std::string ListNames(const std::vector<std::string>& names) {
  // A message stays one readable line even with a thousand classes.
  constexpr size_t kShown = 10;
  std::string list;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > kShown) list += ", ... (" + std::to_string(names.size()) + " in all)";
  return list;
}

struct ImageFile {
  std::string path;    // as the user will recognize it: root joined with the origin
  std::string origin;  // relative to root: "cats/007.png"
  int64_t label = 0;
};

// Whether a file's name says it may be an image: no extension, or .png, .jpg, .jpeg, .jpe
// in any case. Others (notes.txt, labels.csv, Thumbs.db) are left out with a note, as
// torchvision's ImageFolder leaves them out; a file of an image's name that is not PNG or
// JPEG is still refused, naming it.
bool ImageName(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return true;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == "png" || ext == "jpg" || ext == "jpeg" || ext == "jpe";
}

// The images of one class folder, checked: only regular files, at least one.
void ListClass(const std::string& root, const std::string& class_name, int64_t label,
               std::vector<ImageFile>* files, std::vector<std::string>* skipped) {
  const std::string folder = Join(root, class_name);
  size_t found = 0;
  for (const Entry& e : VisibleEntries(folder)) {
    const std::string path = Join(folder, e.name);
    // Nested folders are refused rather than skipped or walked: their images would either
    // vanish silently or be counted in a class the user may not have meant.
    if (e.type == fs::file_type::directory)
      throw DataError(path + ": a folder inside a class folder (the layout is ROOT/CLASS/IMAGE)");
    if (e.type == fs::file_type::not_found) throw DataError(path + ": broken symbolic link");
    if (e.type != fs::file_type::regular) throw DataError(path + ": not a regular file");
    if (!ImageName(e.name)) {
      skipped->push_back(class_name + "/" + e.name);
      continue;
    }
    files->push_back({path, class_name + "/" + e.name, label});
    ++found;
  }
  if (found == 0) throw DataError(folder + ": class folder holds no image");
}

// ---------------------------------------------------------------------------------------
// Files and format detection

class File {
 public:
  explicit File(const std::string& path) : file_(std::fopen(path.c_str(), "rb")) {
    if (!file_) throw DataError(path + ": cannot open: " + std::strerror(errno));
  }
  ~File() { std::fclose(file_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  FILE* get() const { return file_; }

 private:
  FILE* file_;
};

enum class Format { kPng, kJpeg, kOther };

// By the magic bytes, not the name: a .jpg that is really a PNG (common in scraped data
// sets) is still read, and a text file named .png fails with a clear message.
Format Sniff(const File& file, const std::string& path) {
  unsigned char head[8] = {};
  const size_t got = std::fread(head, 1, sizeof head, file.get());
  if (std::ferror(file.get())) throw DataError(path + ": read error: " + std::strerror(errno));
  std::rewind(file.get());
  static const unsigned char kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (got == 8 && std::memcmp(head, kPng, 8) == 0) return Format::kPng;
  if (got >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff) return Format::kJpeg;
  return Format::kOther;
}

// ---------------------------------------------------------------------------------------
// PNG: libpng's simplified API, which reports errors in png_image::message (no setjmp here)

class PngImage {
 public:
  PngImage() {
    std::memset(&image_, 0, sizeof image_);
    image_.version = PNG_IMAGE_VERSION;
  }
  // libpng frees the control structure itself after an error or a finished read; a second
  // free is a no-op, so this is right on every path.
  ~PngImage() { png_image_free(&image_); }
  PngImage(const PngImage&) = delete;
  PngImage& operator=(const PngImage&) = delete;
  png_image* get() { return &image_; }

 private:
  png_image image_;
};

Decoded DecodePng(const File& file, const std::string& path) {
  PngImage png;
  png_image* image = png.get();
  auto fail = [&]() { return DataError(path + ": cannot decode PNG: " + image->message); };
  if (!png_image_begin_read_from_stdio(image, file.get())) throw fail();
  CheckDimensions(path, image->width, image->height);
  // 16-bit files without gamma information are sRGB-encoded in practice (PIL, OpenCV and
  // scanners write them so); libpng would otherwise take them as linear and brighten them.
  image->flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  // The file's own colour model, 8-bit, with its alpha if it has one: asking libpng for fewer
  // channels would make it composite alpha onto a background and do RGB -> grey in linear
  // light with sRGB weights, unlike JPEG's and PIL's BT.601 luma (ConvertChannels does it).
  const bool colour = image->format & PNG_FORMAT_FLAG_COLOR;
  const bool alpha = image->format & PNG_FORMAT_FLAG_ALPHA;
  image->format = (colour ? PNG_FORMAT_FLAG_COLOR : 0u) | (alpha ? PNG_FORMAT_FLAG_ALPHA : 0u);
  const int stored = int(PNG_IMAGE_PIXEL_CHANNELS(image->format));

  Decoded d;
  d.width = int(image->width);
  d.height = int(image->height);
  d.channels = colour ? 3 : 1;
  d.pixels.resize(size_t(d.width) * size_t(d.height) * size_t(stored));
  if (!png_image_finish_read(image, nullptr, d.pixels.data(), 0, nullptr)) throw fail();
  if (alpha) {  // dropped, not composited: the colour channels are kept as stored
    const size_t n = size_t(d.width) * size_t(d.height);
    for (size_t i = 0; i < n; ++i)
      for (int c = 0; c < d.channels; ++c) d.pixels[i * d.channels + c] = d.pixels[i * stored + c];
    d.pixels.resize(n * d.channels);
  }
  return d;
}

// ---------------------------------------------------------------------------------------
// JPEG: libjpeg(-turbo)'s own API
//
// libjpeg's error_exit must not return (libjpeg would carry on with a broken state), and a
// C++ exception thrown through libjpeg's C frames is undefined behaviour, so errors leave by
// longjmp to a setjmp in the two small functions below that call libjpeg. longjmp skips
// destructors, so those functions create no object that has one: the decompressor, its
// error state and the pixel buffer all belong to their caller, which throws once they return.

struct JpegErrors {
  jpeg_error_mgr manager;  // first member: libjpeg hands back its address as cinfo->err
  std::jmp_buf jump;
  bool warning = false;
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] void JumpOut(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

void OnJpegError(j_common_ptr cinfo) { JumpOut(cinfo); }

// Level -1 is a warning about corrupt data, which libjpeg decodes anyway: a truncated file
// ("Premature end of JPEG file") comes out grey below the cut. Such an image must not enter
// a data set unnoticed, so every warning fails the image. Levels >= 0 are trace messages.
void OnJpegMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  reinterpret_cast<JpegErrors*>(cinfo->err)->warning = true;
  JumpOut(cinfo);
}

class JpegDecompressor {
 public:
  JpegDecompressor() {
    // All zero, so that jpeg_destroy_decompress is harmless even if creation failed.
    std::memset(&cinfo_, 0, sizeof cinfo_);
    cinfo_.err = jpeg_std_error(&errors_.manager);
    errors_.manager.error_exit = OnJpegError;
    errors_.manager.emit_message = OnJpegMessage;
  }
  // Outside any setjmp: jpeg_destroy_decompress only frees and reports no error.
  ~JpegDecompressor() { jpeg_destroy_decompress(&cinfo_); }
  JpegDecompressor(const JpegDecompressor&) = delete;
  JpegDecompressor& operator=(const JpegDecompressor&) = delete;

  jpeg_decompress_struct* cinfo() { return &cinfo_; }
  JpegErrors* errors() { return &errors_; }

 private:
  jpeg_decompress_struct cinfo_;
  JpegErrors errors_;  // its address is in cinfo_.err, hence neither copied nor moved
};

// Creates the decompressor and reads the header. False: libjpeg failed, see errors().
bool ReadJpegHeader(JpegDecompressor* jpeg, FILE* file) {
  if (setjmp(jpeg->errors()->jump)) return false;
  jpeg_create_decompress(jpeg->cinfo());
  jpeg_stdio_src(jpeg->cinfo(), file);
  jpeg_read_header(jpeg->cinfo(), TRUE);
  return true;
}

// Decodes into `pixels` (height rows of width * components bytes) as `space`. False: libjpeg
// failed or warned, see errors().
bool ReadJpegPixels(JpegDecompressor* jpeg, J_COLOR_SPACE space, uint8_t* pixels) {
  if (setjmp(jpeg->errors()->jump)) return false;
  jpeg_decompress_struct* cinfo = jpeg->cinfo();
  cinfo->out_color_space = space;
  jpeg_start_decompress(cinfo);
  const size_t stride = size_t(cinfo->output_width) * size_t(cinfo->output_components);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = pixels + size_t(cinfo->output_scanline) * stride;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

[[noreturn]] void ThrowJpegFailure(const std::string& path, const JpegErrors& errors) {
  if (!errors.warning) throw DataError(path + ": cannot decode JPEG: " + errors.message);
  // Most warnings already begin "Corrupt JPEG data: "; say it once.
  std::string why = errors.message;
  const std::string kPrefix = "Corrupt JPEG data: ";
  if (why.compare(0, kPrefix.size(), kPrefix) == 0) why.erase(0, kPrefix.size());
  throw DataError(path + ": corrupt JPEG data: " + why);
}

// Unlike PNG, libjpeg is asked for the wanted channels directly: its grey output of a colour
// JPEG is the stored luma (Y of YCbCr, BT.601), the same conversion ConvertChannels does.
Decoded DecodeJpeg(const File& file, const std::string& path, int channels) {
  JpegDecompressor jpeg;
  if (!ReadJpegHeader(&jpeg, file.get())) ThrowJpegFailure(path, *jpeg.errors());
  const jpeg_decompress_struct* cinfo = jpeg.cinfo();
  CheckDimensions(path, cinfo->image_width, cinfo->image_height);
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK)
    throw DataError(path + ": CMYK JPEG images are not supported (convert them to RGB)");
  Decoded d;
  d.width = int(cinfo->image_width);
  d.height = int(cinfo->image_height);
  d.channels = channels;
  d.pixels.resize(size_t(d.width) * size_t(d.height) * size_t(channels));
  if (!ReadJpegPixels(&jpeg, channels == 1 ? JCS_GRAYSCALE : JCS_RGB, d.pixels.data()))
    ThrowJpegFailure(path, *jpeg.errors());
  return d;
}

// ---------------------------------------------------------------------------------------
// Channels and size

// Grey -> RGB repeats the grey value; RGB -> grey is BT.601 luma (0.299 R + 0.587 G +
// 0.114 B) in 16-bit fixed point, rounded, the weights PIL's convert("L") uses, so images a
// PyTorch user prepared with PIL match.
void ConvertChannels(Decoded* image, int channels) {
  if (image->channels == channels) return;
  const size_t n = size_t(image->width) * size_t(image->height);
  std::vector<uint8_t> out(n * size_t(channels));
  const uint8_t* in = image->pixels.data();
  for (size_t i = 0; i < n; ++i) {
    if (channels == 3) {
      out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = in[i];
    } else {
      const uint32_t luma = 19595u * in[3 * i] + 38470u * in[3 * i + 1] + 7471u * in[3 * i + 2];
      out[i] = uint8_t((luma + 32768u) >> 16);
    }
  }
  image->pixels = std::move(out);
  image->channels = channels;
}

// Output sample i of one axis = sum of weights[k] * input sample (first + k).
struct Taps {
  int first = 0;
  std::vector<float> weights;
};

// Shrinking: area averaging, output i covering input [i * s, (i + 1) * s), s = in / out, each
// input sample weighted by its overlap (no aliasing, unlike sampling). Enlarging: bilinear
// with pixel centres aligned ((i + 0.5) * s - 0.5, clamped at the edges), as OpenCV's
// INTER_LINEAR and PyTorch's interpolate(align_corners=False) do. Equal sizes give weight 1 on the
// same sample: an exact copy.
std::vector<Taps> AxisTaps(int in, int out) {
  std::vector<Taps> taps(static_cast<size_t>(out));
  const double scale = double(in) / out;
  for (int i = 0; i < out; ++i) {
    Taps& t = taps[size_t(i)];
    if (out < in) {
      const double lo = i * scale, hi = (i + 1) * scale;
      t.first = int(std::floor(lo));
      const int end = std::min(in, int(std::ceil(hi)));
      for (int j = t.first; j < end; ++j)
        t.weights.push_back(float((std::min(hi, j + 1.0) - std::max(lo, double(j))) / scale));
    } else {
      const double x = std::clamp((i + 0.5) * scale - 0.5, 0.0, double(in - 1));
      t.first = int(std::floor(x));
      const double frac = x - t.first;
      t.weights.push_back(float(1 - frac));
      if (frac > 0) t.weights.push_back(float(frac));
    }
  }
  return taps;
}

// Resizes `image` (H x W x C) to height x width and appends it planar (C x height x width),
// rounding to the nearest byte: rows first, then columns, in float.
void ResizeInto(const Decoded& image, int height, int width, std::vector<uint8_t>* out) {
  const int channels = image.channels;
  const std::vector<Taps> across = AxisTaps(image.width, width);
  const std::vector<Taps> down = AxisTaps(image.height, height);
  // rows[c][y][x]: the input's rows, already `width` wide.
  std::vector<float> rows(size_t(channels) * size_t(image.height) * size_t(width));
  for (int c = 0; c < channels; ++c)
    for (int y = 0; y < image.height; ++y) {
      const uint8_t* in = image.pixels.data() + size_t(y) * image.width * channels + c;
      float* row = rows.data() + (size_t(c) * image.height + y) * width;
      for (int x = 0; x < width; ++x) {
        const Taps& t = across[size_t(x)];
        float sum = 0;
        for (size_t k = 0; k < t.weights.size(); ++k)
          sum += t.weights[k] * in[size_t(t.first + int(k)) * channels];
        row[x] = sum;
      }
    }
  for (int c = 0; c < channels; ++c)
    for (int y = 0; y < height; ++y) {
      const Taps& t = down[size_t(y)];
      for (int x = 0; x < width; ++x) {
        float sum = 0;
        for (size_t k = 0; k < t.weights.size(); ++k)
          sum += t.weights[k] * rows[(size_t(c) * image.height + t.first + k) * width + x];
        out->push_back(uint8_t(std::clamp(std::floor(sum + 0.5f), 0.0f, 255.0f)));
      }
    }
}

void AppendImage(const ImageFile& file, const ImageFolderOptions& options, ImportedSplit* split) {
  const File handle(file.path);
  Decoded image;
  switch (Sniff(handle, file.path)) {
    case Format::kPng:
      image = DecodePng(handle, file.path);
      break;
    case Format::kJpeg:
      image = DecodeJpeg(handle, file.path, options.channels);
      break;
    case Format::kOther:
      throw DataError(file.path + ": not a PNG or JPEG image");
  }
  if (options.exact_size && (image.height != options.height || image.width != options.width))
    throw DataError(file.path + ": " + std::to_string(image.width) + "x" +
                    std::to_string(image.height) + " pixels (width x height), the network takes " +
                    std::to_string(options.width) + "x" + std::to_string(options.height) +
                    (options.size_hint.empty() ? "" : " (" + options.size_hint + ")"));
  ConvertChannels(&image, options.channels);
  ResizeInto(image, options.height, options.width, &split->bytes);
  split->labels.push_back(file.label);
  split->origins.push_back(file.origin);
}

}  // namespace

namespace {

void CheckOptions(const ImageFolderOptions& options) {
  if (options.channels != 1 && options.channels != 3)
    throw UsageError("image channels must be 1 or 3, not " + std::to_string(options.channels));
  if (options.height <= 0 || options.width <= 0)
    throw UsageError("image size must be positive, not " + std::to_string(options.height) + "x" +
                     std::to_string(options.width));
}

}  // namespace

ImportedSplit ReadImageFiles(const std::string& folder, const ImageFolderOptions& options) {
  CheckOptions(options);
  std::vector<ImageFile> files;
  for (const Entry& e : VisibleEntries(folder)) {
    const std::string path = Join(folder, e.name);
    if (e.type == fs::file_type::directory)
      throw DataError(path +
                      ": a folder among the images (give one folder of images, or "
                      "one folder per class)");
    if (e.type == fs::file_type::not_found) throw DataError(path + ": broken symbolic link");
    if (e.type != fs::file_type::regular) throw DataError(path + ": not a regular file");
    files.push_back({path, e.name, 0});
  }
  if (files.empty()) throw DataError(folder + ": holds no image");
  ImportedSplit split;
  split.shape = {options.channels, options.height, options.width};
  split.bytes.reserve(files.size() * size_t(split.shape.elements()));
  for (const ImageFile& file : files) AppendImage(file, options, &split);
  return split;
}

std::string SkippedFilesNote(const std::string& root, const ImportedSplit& split) {
  if (split.skipped.empty()) return "";
  return root + ": left out " + std::to_string(split.skipped.size()) +
         " file(s) whose names are no image's (not .png, .jpg or .jpeg): " +
         ShortList(split.skipped);
}

ImportedSplit ReadImageFolder(const std::string& root, const ImageFolderOptions& options,
                              const std::vector<std::string>& class_names_in,
                              std::vector<std::string>* class_names) {
  CheckOptions(options);

  std::vector<std::string> folders;
  for (const Entry& e : VisibleEntries(root))
    if (e.type == fs::file_type::directory) folders.push_back(e.name);  // files here: ignored
  if (folders.empty()) throw DataError(root + ": no class folder (the layout is ROOT/CLASS/IMAGE)");

  const std::vector<std::string>& numbering = class_names_in.empty() ? folders : class_names_in;
  std::map<std::string, int64_t> label_of;
  for (size_t i = 0; i < numbering.size(); ++i) label_of.emplace(numbering[i], int64_t(i));

  std::vector<ImageFile> files;
  std::vector<std::string> skipped;
  for (const std::string& folder : folders) {
    const auto it = label_of.find(folder);
    if (it == label_of.end())
      throw DataError(Join(root, folder) + ": class folder '" + folder +
                      "' is not among the training classes (" + ListNames(numbering) + ")");
    ListClass(root, folder, it->second, &files, &skipped);
  }

  ImportedSplit split;
  split.skipped = std::move(skipped);
  split.shape = {options.channels, options.height, options.width};
  split.bytes.reserve(files.size() * size_t(split.shape.elements()));
  split.labels.reserve(files.size());
  split.origins.reserve(files.size());
  for (const ImageFile& file : files) AppendImage(file, options, &split);
  if (class_names) *class_names = numbering;
  return split;
}

}  // namespace dlh
