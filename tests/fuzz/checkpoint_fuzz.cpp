// DLH fuzz target — the checkpoint reader's validation (dlh::LoadCheckpoint) on files that
// HDF5 itself writes: a real checkpoint (SaveCheckpoint of a small training state), edited
// through HDF5's API as the input says, then loaded. Attributes and datasets are replaced by
// others of any type, size, shape, layout and content, deleted, hard-linked or turned into
// groups, and the order lists are rewritten. HDF5's parser never sees a corrupt file, so
// what turns up is DLH's (raw bytes, HDF5's parser included: checkpoint_bytes_fuzz).
// Refusals are CheckpointError.
//
// The input is read byte by byte (past its end every byte reads as 0). The first byte picks
// the base state; then up to kMaxEdits edits, each an op byte and its operands:
//   0 NAME VALUE   set root attribute       4 PATH PATH   hard link (the second is replaced)
//   1 NAME         delete root attribute    5 G TEXT      order list G (params, buffers,
//   2 PATH VALUE   replace dataset                        optimizer) := TEXT
//   3 PATH         delete link              6 PATH        a group in place of PATH
// VALUE is a type byte, a dataspace byte, a layout byte, then the data (Input::value).
#include <hdf5.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/storage/checkpoint.hpp"
#include "launcher/storage/h5.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

using dlh::h5::Handle;

constexpr int kMaxEdits = 16;
constexpr size_t kMaxWrittenBytes = 4096;  // data written by one edit
const char* const kAttributes[] = {"format_version",  "producer",  "step",       "epoch",
                                   "step_in_epoch",   "seed",      "world_size", "samples_seen",
                                   "elapsed_seconds", "optimizer", "checksum",   "created_unix"};
const char* const kGroups[] = {"params", "buffers", "optimizer"};

std::vector<float> Values(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.5f * float(i);
  return v;
}

// The bases: a batchnorm + dense net trained with adam (every group filled), and one with a
// scalar and an empty array and no optimizer state.
dlh::TrainState BaseState(int which) {
  dlh::TrainState s;
  s.spec_json = R"({"name": "tiny", "layers": [{"type": "batchnorm"}, {"type": "dense"}]})";
  s.step = 7;
  s.epoch = 1;
  s.step_in_epoch = 3;
  s.seed = 18446744073709551615u;
  s.world_size = 2;
  s.samples_seen = 28;
  s.elapsed_seconds = 0.25;
  if (which == 0) {
    s.optimizer = "adam";
    s.params = {{"00.batchnorm/gamma", {1}, {1}},
                {"00.batchnorm/beta", {1}, {0}},
                {"02.dense/weight", {2, 4}, Values(8, -1)},
                {"02.dense/bias", {2}, Values(2, 0.5f)}};
    s.buffers = {{"00.batchnorm/running_mean", {1}, {0.1f}},
                 {"00.batchnorm/running_var", {1}, {0.9f}}};
    for (const dlh::NamedArray& p : s.params)
      for (const char* slot : {"/m", "/v"})
        s.optimizer_state.push_back({p.name + slot, p.shape, Values(p.data.size(), 0.125f)});
  } else {
    s.optimizer = "sgd";
    s.params = {{"scale", {}, {2}}, {"empty", {0, 3}, {}}, {"w", {3}, Values(3, 1)}};
  }
  return s;
}

// Dataset paths of a base state, for PATH operands.
std::vector<std::string> BasePaths(const dlh::TrainState& s) {
  std::vector<std::string> paths{"spec",   "order/params", "order/buffers", "order/optimizer",
                                 "params", "buffers",      "optimizer",     "order"};
  const std::vector<dlh::NamedArray>* groups[] = {&s.params, &s.buffers, &s.optimizer_state};
  for (int g = 0; g < 3; ++g)
    for (const dlh::NamedArray& a : *groups[g]) paths.push_back(kGroups[g] + ("/" + a.name));
  return paths;
}

// A folder of this process's files in $TMPDIR (run.sh puts it on a RAM disk: SaveCheckpoint
// fsyncs), removed at exit.
const std::string& ScratchDir() {
  static const dlh::fuzz::ScratchFolder dir("dlh-fuzz-ckpt");
  return dir.path();
}

struct Base {
  std::string bytes;  // the checkpoint file
  std::vector<std::string> paths;
};

const Base& GetBase(int which) {
  static Base bases[2];
  Base& b = bases[which];
  if (b.bytes.empty()) {
    const std::string path = ScratchDir() + "/base" + std::to_string(which) + ".h5";
    const dlh::TrainState state = BaseState(which);
    dlh::SaveCheckpoint(path, state);
    std::ifstream in(path, std::ios::binary);
    b.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    b.paths = BasePaths(state);
  }
  return b;
}

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | byte();
    return v;
  }
  std::string text(size_t max) {
    std::string s(std::min<size_t>(byte(), max), '\0');
    for (char& c : s) c = char(byte());
    return s;
  }
  std::string name() {
    const uint8_t b = byte();
    return b < 240 ? kAttributes[b % std::size(kAttributes)] : text(16);
  }
  std::string path(const std::vector<std::string>& known) {
    const uint8_t b = byte();
    return b < 240 ? known[b % known.size()] : text(40);
  }

  // A value: type, dataspace, whether and how it is stored, and its data.
  struct Value {
    Handle type, space;
    bool write = false;
    int layout = 0;  // 0 contiguous, 1 compact, 2 chunked, 3 chunked + deflate
    std::vector<uint8_t> data;
    std::vector<std::string> strings;  // variable-length strings
    std::vector<const char*> pointers;
  };
  Value value(bool attribute) {
    static const hid_t kNumbers[] = {H5T_STD_I8LE,   H5T_STD_I16LE,  H5T_STD_I32LE, H5T_STD_I64LE,
                                     H5T_STD_U8LE,   H5T_STD_U64LE,  H5T_STD_I64BE, H5T_IEEE_F32LE,
                                     H5T_IEEE_F64LE, H5T_IEEE_F32BE, H5T_STD_B32LE};
    Value v;
    const uint8_t t = byte(), s = byte(), l = byte();
    bool claim = false;  // a size only claimed: never written
    bool vlen = false;
    switch (t % 7) {
      case 0:
      case 1:
        v.type = Handle(H5Tcopy(kNumbers[byte() % std::size(kNumbers)]));
        break;
      case 2:  // a number wider than any: 9 bytes to 2 GB (4 KiB for an attribute, whose
               // data HDF5 allocates when it creates it)
        v.type = Handle(H5Tcopy(byte() & 1 ? H5T_IEEE_F32LE : H5T_STD_I64LE));
        H5Tset_size(v.type.id(), 9 + u32() % (attribute ? 1u << 12 : 1u << 31));
        claim = true;
        break;
      case 3:  // fixed-length string
        v.type = Handle(H5Tcopy(H5T_C_S1));
        H5Tset_size(v.type.id(), 1 + byte());
        H5Tset_cset(v.type.id(), byte() & 1 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
        H5Tset_strpad(v.type.id(), H5T_str_t(byte() % 3));
        break;
      case 4:  // a long fixed-length string, never written
        v.type = Handle(H5Tcopy(H5T_C_S1));
        H5Tset_size(v.type.id(), 257 + u32() % (attribute ? 1u << 12 : 1u << 31));
        claim = true;
        break;
      case 5:  // variable-length string
        v.type = Handle(H5Tcopy(H5T_C_S1));
        H5Tset_size(v.type.id(), H5T_VARIABLE);
        vlen = true;
        break;
      default: {  // a compound {int32, float}
        v.type = Handle(H5Tcreate(H5T_COMPOUND, 8));
        H5Tinsert(v.type.id(), "a", 0, H5T_NATIVE_INT32);
        H5Tinsert(v.type.id(), "b", 4, H5T_NATIVE_FLOAT);
      }
    }
    std::vector<hsize_t> dims;
    switch (s % 6) {
      case 0:
        v.space = Handle(H5Screate(H5S_SCALAR));
        break;
      case 1:
        v.space = Handle(H5Screate(H5S_NULL));
        break;
      case 2:
        dims = {hsize_t(byte() % 9)};
        break;
      case 3:
        dims = {hsize_t(byte() % 5), hsize_t(byte() % 5)};
        break;
      case 4:  // many elements, never written
        dims = {hsize_t(1) + u32() % (attribute ? 1u << 8 : 1u << 31)};
        claim = true;
        break;
      default:
        dims = {hsize_t(byte() % 4), hsize_t(byte() % 4), hsize_t(byte() % 4)};
    }
    if (!v.space) v.space = Handle(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
    if (!v.type || !v.space) return v;
    const hssize_t points = H5Sget_simple_extent_npoints(v.space.id());
    const size_t size = vlen ? sizeof(char*) : H5Tget_size(v.type.id());
    v.write = !claim && points > 0 && size_t(points) * size <= kMaxWrittenBytes;
    bool all_positive = !dims.empty();
    for (hsize_t d : dims) all_positive = all_positive && d > 0;
    v.layout = claim ? 0 : l % 4;
    if (v.layout >= 2 && !all_positive) v.layout = 0;
    if (v.write && vlen) {
      for (hssize_t i = 0; i < points; ++i) v.strings.push_back(text(64));
      for (const std::string& str : v.strings) v.pointers.push_back(str.c_str());
    } else if (v.write) {
      v.data.resize(size_t(points) * size);
      for (uint8_t& b : v.data) b = byte();
    }
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

const void* DataOf(const Input::Value& v) {
  return v.pointers.empty() ? static_cast<const void*>(v.data.data())
                            : static_cast<const void*>(v.pointers.data());
}

Handle LinkCreation() {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.id(), 1);
  return lcpl;
}

// Applies one edit; HDF5 refusing it (a bad name, a type it cannot store) is no finding.
void Edit(hid_t file, Input& in, const std::vector<std::string>& paths) {
  switch (in.byte() % 7) {
    case 0: {
      const std::string name = in.name();
      Input::Value v = in.value(true);
      H5Adelete(file, name.c_str());
      Handle attr(
          H5Acreate2(file, name.c_str(), v.type.id(), v.space.id(), H5P_DEFAULT, H5P_DEFAULT));
      if (attr && v.write) H5Awrite(attr.id(), v.type.id(), DataOf(v));
      break;
    }
    case 1:
      H5Adelete(file, in.name().c_str());
      break;
    case 2: {
      const std::string path = in.path(paths);
      Input::Value v = in.value(false);
      H5Ldelete(file, path.c_str(), H5P_DEFAULT);
      Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
      if (v.layout == 1) H5Pset_layout(dcpl.id(), H5D_COMPACT);
      if (v.layout >= 2) {
        const int rank = H5Sget_simple_extent_ndims(v.space.id());
        std::vector<hsize_t> dims(size_t(std::max(rank, 0)));
        H5Sget_simple_extent_dims(v.space.id(), dims.data(), nullptr);
        H5Pset_chunk(dcpl.id(), rank, dims.data());
        if (v.layout == 3) H5Pset_deflate(dcpl.id(), 6);
      }
      Handle dset(H5Dcreate2(file, path.c_str(), v.type.id(), v.space.id(), LinkCreation().id(),
                             dcpl.id(), H5P_DEFAULT));
      if (dset && v.write)
        H5Dwrite(dset.id(), v.type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, DataOf(v));
      break;
    }
    case 3:
      H5Ldelete(file, in.path(paths).c_str(), H5P_DEFAULT);
      break;
    case 4: {
      const std::string from = in.path(paths), to = in.path(paths);
      H5Ldelete(file, to.c_str(), H5P_DEFAULT);
      H5Lcreate_hard(file, from.c_str(), file, to.c_str(), LinkCreation().id(), H5P_DEFAULT);
      break;
    }
    case 5: {
      const std::string path = std::string("order/") + kGroups[in.byte() % 3];
      const std::string text = in.text(255);
      H5Ldelete(file, path.c_str(), H5P_DEFAULT);
      try {
        dlh::h5::WriteString(file, path, text);
      } catch (const dlh::Error&) {
      }
      break;
    }
    default: {
      const std::string path = in.path(paths);
      H5Ldelete(file, path.c_str(), H5P_DEFAULT);
      Handle group(H5Gcreate2(file, path.c_str(), LinkCreation().id(), H5P_DEFAULT, H5P_DEFAULT));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Input in(data, size);
  const Base& base = GetBase(in.byte() % 2);
  const std::string path = ScratchDir() + "/edited.h5";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << base.bytes;
  {
    Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    if (!file) std::abort();  // the base itself must open
    for (int i = 0; i < kMaxEdits && !in.done(); ++i) Edit(file.id(), in, base.paths);
  }
  dlh::fuzz::RefusesOnlyWith<dlh::CheckpointError>("LoadCheckpoint",
                                                   [&] { dlh::LoadCheckpoint(path); });
  return 0;
}
