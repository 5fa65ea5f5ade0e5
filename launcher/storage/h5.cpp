// DLH — HDF5 RAII wrappers (see h5.hpp).
#include "launcher/storage/h5.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dlh {
namespace h5 {
namespace {

// HDF5 prints its error stack to stderr by default; we turn it into exception text
// instead. Done once per process before the first call.
struct SilenceOnce {
  SilenceOnce() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};
void Silence() { static SilenceOnce once; }

herr_t KeepInnermost(unsigned n, const H5E_error2_t* err, void* out) {
  if (n == 0 && err->desc) *static_cast<std::string*>(out) = err->desc;
  return 0;
}

std::string StackMessage() {
  std::string msg;
  // Walking upward starts at the innermost (most specific) error.
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, KeepInnermost, &msg);
  H5Eclear2(H5E_DEFAULT);
  // One line: the sec2 driver's write errors hold ctime()'s text, newline and all
  // ("time = Mon Dec  7 13:33:35 2026\n, filename = ..."), which broke an error in two.
  for (char& c : msg)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return msg;
}

Handle OpenDataset(hid_t loc, const std::string& path) {
  Silence();
  hid_t id = H5Dopen2(loc, path.c_str(), H5P_DEFAULT);
  if (id < 0) throw H5Error("no dataset '" + path + "' (" + StackMessage() + ")");
  return Handle(id);
}

Handle LinkCreationWithIntermediates() {
  Handle lcpl(H5_CHECK(H5Pcreate(H5P_LINK_CREATE)));
  H5_CHECK(H5Pset_create_intermediate_group(lcpl.id(), 1));
  return lcpl;
}

// Large arrays go to the file in pieces of about this size, each copied into one small
// buffer first. Measured here (128 MiB, 1 MiB write(2) calls, then fsync): the kernel copies
// into the page cache in 0.17-0.19 s from 128 MiB of distinct memory, in 0.034 s (the copy
// in user space included) from one reused 1 MiB buffer, which is what dd does; the
// fsync after takes 0.12 s either way. H5Dwrite of a whole array hands the kernel the
// large buffer in one call.
constexpr size_t kPieceBytes = size_t(1) << 20;

// Writes `data` (row-major `dims`, elements of `element_bytes` in memory) into `dset` a block
// of whole rows (first dimension) at a time through one reused buffer; a row larger than
// kPieceBytes is one piece. The file gets the same bytes as one H5Dwrite of everything.
void WriteInPieces(hid_t dset, hid_t file_space, hid_t mem_type, const std::vector<hsize_t>& dims,
                   const void* data, size_t element_bytes) {
  size_t row_bytes = element_bytes;
  for (size_t i = 1; i < dims.size(); ++i) row_bytes *= size_t(dims[i]);
  const hsize_t rows_per_piece = std::max<hsize_t>(1, kPieceBytes / row_bytes);
  std::vector<unsigned char> piece(size_t(std::min(rows_per_piece, dims[0])) * row_bytes);
  std::vector<hsize_t> start(dims.size(), 0), count(dims);
  const auto* from = static_cast<const unsigned char*>(data);
  for (hsize_t row = 0; row < dims[0]; row += rows_per_piece) {
    const hsize_t rows = std::min(rows_per_piece, dims[0] - row);
    const size_t bytes = size_t(rows) * row_bytes;
    std::memcpy(piece.data(), from + size_t(row) * row_bytes, bytes);
    start[0] = row;
    count[0] = rows;
    H5_CHECK(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(),
                                 nullptr));
    const hsize_t elements = bytes / element_bytes;
    Handle mem_space(H5_CHECK(H5Screate_simple(1, &elements, nullptr)));
    H5_CHECK(H5Dwrite(dset, mem_type, mem_space.id(), file_space, H5P_DEFAULT, piece.data()));
  }
}

void WriteTyped(hid_t loc, const std::string& path, const std::vector<hsize_t>& dims,
                hid_t file_type, hid_t mem_type, const void* data) {
  Silence();
  Handle space(H5_CHECK(dims.empty() ? H5Screate(H5S_SCALAR)
                                     : H5Screate_simple(int(dims.size()), dims.data(), nullptr)));
  Handle lcpl = LinkCreationWithIntermediates();
  // No modification times: the same content gives the same bytes.
  Handle dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  H5_CHECK(H5Pset_obj_track_times(dcpl.id(), 0));
  Handle dset(H5_CHECK(
      H5Dcreate2(loc, path.c_str(), file_type, space.id(), lcpl.id(), dcpl.id(), H5P_DEFAULT)));
  size_t count = 1;
  for (hsize_t d : dims) count *= d;
  if (count == 0) return;
  const size_t element_bytes = H5Tget_size(mem_type);
  if (dims.empty() || count * element_bytes <= kPieceBytes) {
    H5_CHECK(H5Dwrite(dset.id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
    return;
  }
  WriteInPieces(dset.id(), space.id(), mem_type, dims, data, element_bytes);
}

// HDF5 reads what the FILE holds: every element of the dataspace, each converted through a
// buffer sized by the file's element type. The readers below size their buffers for what
// they expect, so a corrupt or hostile file is checked first (tests/fuzz/checkpoint_fuzz):
// a checkpoint whose "scalar" attribute held 4 values had H5Aread write past an int64, and
// one whose float claimed 1.5 GB per element had one H5Dread allocate and clear 1.5 GB.

// `space` must hold exactly one element.
void RequireOneValue(hid_t space, const std::string& what) {
  const hssize_t n = H5_CHECK(H5Sget_simple_extent_npoints(space));
  if (n != 1) throw H5Error(what + " holds " + std::to_string(n) + " values, not one");
}

// `type` must be an integer or floating-point number of at most 8 bytes.
void RequireNumber(hid_t type, const std::string& what) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) throw H5Error(what + " is not a number");
  if (size == 0 || size > 8)
    throw H5Error(what + " has " + std::to_string(size) + "-byte elements, not a number");
}

// A fixed-length string of `size` bytes must fit in the file holding it: HDF5 hands back
// fill bytes for one never written, after allocating the size its header claims.
void RequireFitsFile(hid_t loc, size_t size, const std::string& what) {
  Handle file(H5_CHECK(H5Iget_file_id(loc)));
  hsize_t file_size = 0;
  H5_CHECK(H5Fget_filesize(file.id(), &file_size));
  if (size > file_size)
    throw H5Error(what + " is a " + std::to_string(size) + "-byte string, longer than the file (" +
                  std::to_string(file_size) + " bytes)");
}

template <typename T>
std::vector<T> ReadTyped(hid_t loc, const std::string& path, hid_t mem_type) {
  Handle dset = OpenDataset(loc, path);
  Handle ftype(H5_CHECK(H5Dget_type(dset.id())));
  RequireNumber(ftype.id(), "'" + path + "'");
  Handle space(H5_CHECK(H5Dget_space(dset.id())));
  hssize_t n = H5_CHECK(H5Sget_simple_extent_npoints(space.id()));
  std::vector<T> out(static_cast<size_t>(n));
  if (n > 0) H5_CHECK(H5Dread(dset.id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()));
  return out;
}

Handle OpenAttr(hid_t loc, const std::string& obj, const std::string& name) {
  Silence();
  hid_t id = H5Aopen_by_name(loc, obj.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) throw H5Error("no attribute '" + name + "' on '" + obj + "'");
  return Handle(id);
}

void WriteAttr(hid_t loc, const std::string& obj, const std::string& name, hid_t type,
               const void* value) {
  Silence();
  if (H5_CHECK(H5Aexists_by_name(loc, obj.c_str(), name.c_str(), H5P_DEFAULT)) > 0)
    H5_CHECK(H5Adelete_by_name(loc, obj.c_str(), name.c_str(), H5P_DEFAULT));
  Handle space(H5_CHECK(H5Screate(H5S_SCALAR)));
  Handle attr(H5_CHECK(H5Acreate_by_name(loc, obj.c_str(), name.c_str(), type, space.id(),
                                         H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr.id(), type, value));
}

// HDF5 does not convert between character sets, so readers ask for the file's own.
Handle StringType(size_t length, H5T_cset_t cset = H5T_CSET_UTF8) {
  Handle type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_size(type.id(), std::max<size_t>(length, 1)));
  H5_CHECK(H5Tset_cset(type.id(), cset));
  return type;
}

// The one string of file type `ftype` in `object` (a dataset or an attribute, `what` naming
// it), read by `read(memory_type, buffer)`. Variable-length (h5py's own str): the library
// allocates it. Fixed-length: into one byte more than the file's, since HDF5 converts a
// null-padded string (h5py's and NumPy's fixed-length bytes) into a null-terminated one of
// the same size by dropping its last character to make room for the terminator.
template <typename Read>
std::string ReadOneString(hid_t object, hid_t ftype, const std::string& what, Read read) {
  if (H5_CHECK(H5Tis_variable_str(ftype)) > 0) {
    char* text = nullptr;
    Handle mtype(H5_CHECK(H5Tcopy(H5T_C_S1)));
    H5_CHECK(H5Tset_size(mtype.id(), H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(mtype.id(), H5Tget_cset(ftype)));
    H5_CHECK(read(mtype.id(), static_cast<void*>(&text)));
    std::string out = text ? text : "";
    H5free_memory(text);
    return out;
  }
  const size_t size = H5Tget_size(ftype);
  RequireFitsFile(object, size, what);
  Handle mtype = StringType(size + 1, H5Tget_cset(ftype));
  std::string out(size + 1, '\0');
  H5_CHECK(read(mtype.id(), static_cast<void*>(out.data())));
  out.resize(std::strlen(out.c_str()));
  return out;
}

}  // namespace

std::unique_lock<std::mutex> LockLibrary() {
  static std::mutex library;
  return std::unique_lock<std::mutex>(library);
}

int64_t Check(int64_t result, const char* call, const char* file, int line) {
  if (result >= 0) return result;
  std::string stack = StackMessage();
  throw H5Error(std::string("HDF5 call failed: ") + call + " (" + file + ":" +
                std::to_string(line) + ")" + (stack.empty() ? "" : ": " + stack));
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::reset() noexcept {
  if (id_ < 0) return;
  // H5Oclose/H5Fclose etc. differ by type; H5Idec_ref closes any kind of id. Errors at
  // this point cannot be reported usefully and must not throw.
  H5Idec_ref(id_);
  id_ = H5I_INVALID_HID;
}

File::File(const std::string& path, Mode mode) : path_(path) {
  Silence();
  hid_t id = mode == Mode::Create ? H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                                  : H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    std::string why = StackMessage();
    throw H5Error(path + ": cannot " + (mode == Mode::Create ? "create" : "open") + " HDF5 file" +
                      (why.empty() ? "" : " (" + why + ")"),
                  why);
  }
  handle_ = Handle(id);
}

void File::flush_and_sync() {
  H5_CHECK(H5Fflush(handle_.id(), H5F_SCOPE_GLOBAL));
  // With the sec2 driver H5Fflush only pwrite()s; durability needs an fsync.
  int* fd = nullptr;
  H5_CHECK(H5Fget_vfd_handle(handle_.id(), H5P_DEFAULT, reinterpret_cast<void**>(&fd)));
  if (fd && fsync(*fd) != 0) throw H5Error(path_ + ": fsync failed: " + std::strerror(errno));
}

int File::reserve(double bytes) {
  int* fd = nullptr;
  H5_CHECK(H5Fget_vfd_handle(handle_.id(), H5P_DEFAULT, reinterpret_cast<void**>(&fd)));
  if (!fd || !(bytes > 0)) return 0;
  return fallocate(*fd, 0, 0, off_t(bytes)) == 0 ? 0 : errno;
}

uint64_t File::end_of_allocation() {
  haddr_t eoa = 0;
  H5_CHECK(H5Fget_eoa(handle_.id(), &eoa));
  return uint64_t(eoa);
}

void File::close() {
  if (!handle_) return;
  // Ownership is dropped first so that a failing close is not retried by the destructor.
  H5_CHECK(H5Fclose(handle_.release()));
}

bool Exists(hid_t loc, const std::string& path) {
  Silence();
  // H5Lexists fails (rather than returning 0) when an intermediate link is missing, so
  // walk the path one component at a time.
  std::string prefix;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string part =
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!part.empty()) {
      prefix += (prefix.empty() ? "" : "/") + part;
      htri_t ok = H5Lexists(loc, prefix.c_str(), H5P_DEFAULT);
      if (ok <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
      }
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

namespace {
herr_t CollectName(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> ListChildren(hid_t loc, const std::string& group) {
  Silence();
  hid_t gid = H5Gopen2(loc, group.c_str(), H5P_DEFAULT);
  if (gid < 0) throw H5Error("no group '" + group + "'");
  Handle g(gid);
  std::vector<std::string> names;
  H5_CHECK(H5Literate(g.id(), H5_INDEX_NAME, H5_ITER_INC, nullptr, CollectName, &names));
  std::sort(names.begin(), names.end());
  return names;
}

void WriteFloats(hid_t loc, const std::string& path, const std::vector<hsize_t>& dims,
                 const float* data) {
  WriteTyped(loc, path, dims, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data);
}
void WriteBytes(hid_t loc, const std::string& path, const std::vector<hsize_t>& dims,
                const uint8_t* data) {
  WriteTyped(loc, path, dims, H5T_STD_U8LE, H5T_NATIVE_UINT8, data);
}
void WriteInts(hid_t loc, const std::string& path, const std::vector<hsize_t>& dims,
               const int32_t* data) {
  WriteTyped(loc, path, dims, H5T_STD_I32LE, H5T_NATIVE_INT32, data);
}

void WriteString(hid_t loc, const std::string& path, const std::string& text) {
  Silence();
  Handle type = StringType(text.size());
  Handle space(H5_CHECK(H5Screate(H5S_SCALAR)));
  Handle lcpl = LinkCreationWithIntermediates();
  Handle dset(H5_CHECK(
      H5Dcreate2(loc, path.c_str(), type.id(), space.id(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT)));
  std::string padded = text.empty() ? std::string(1, '\0') : text;
  H5_CHECK(H5Dwrite(dset.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, padded.data()));
}

std::vector<hsize_t> Dims(hid_t loc, const std::string& path) {
  Handle dset = OpenDataset(loc, path);
  Handle space(H5_CHECK(H5Dget_space(dset.id())));
  int rank = int(H5_CHECK(H5Sget_simple_extent_ndims(space.id())));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5_CHECK(H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr));
  return dims;
}

std::vector<float> ReadFloats(hid_t loc, const std::string& path) {
  return ReadTyped<float>(loc, path, H5T_NATIVE_FLOAT);
}
std::vector<int32_t> ReadInts(hid_t loc, const std::string& path) {
  return ReadTyped<int32_t>(loc, path, H5T_NATIVE_INT32);
}

std::string ReadString(hid_t loc, const std::string& path) {
  Handle dset = OpenDataset(loc, path);
  Handle ftype(H5_CHECK(H5Dget_type(dset.id())));
  if (H5Tget_class(ftype.id()) != H5T_STRING) throw H5Error("'" + path + "' is not a string");
  Handle space(H5_CHECK(H5Dget_space(dset.id())));
  RequireOneValue(space.id(), "'" + path + "'");
  return ReadOneString(dset.id(), ftype.id(), "'" + path + "'", [&](hid_t mtype, void* buffer) {
    return H5Dread(dset.id(), mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer);
  });
}

std::vector<float> ReadFloatRows(hid_t loc, const std::string& path, hsize_t first, hsize_t count) {
  Handle dset = OpenDataset(loc, path);
  Handle ftype(H5_CHECK(H5Dget_type(dset.id())));
  RequireNumber(ftype.id(), "'" + path + "'");
  Handle space(H5_CHECK(H5Dget_space(dset.id())));
  int rank = int(H5_CHECK(H5Sget_simple_extent_ndims(space.id())));
  if (rank < 1) throw H5Error("'" + path + "' is a scalar");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5_CHECK(H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr));
  if (first + count > dims[0])
    throw H5Error("'" + path + "': rows " + std::to_string(first) + "+" + std::to_string(count) +
                  " beyond " + std::to_string(dims[0]));
  std::vector<hsize_t> start(dims.size(), 0), block = dims;
  start[0] = first;
  block[0] = count;
  H5_CHECK(H5Sselect_hyperslab(space.id(), H5S_SELECT_SET, start.data(), nullptr, block.data(),
                               nullptr));
  Handle mem(H5_CHECK(H5Screate_simple(rank, block.data(), nullptr)));
  size_t n = 1;
  for (hsize_t d : block) n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  if (n > 0)
    H5_CHECK(H5Dread(dset.id(), H5T_NATIVE_FLOAT, mem.id(), space.id(), H5P_DEFAULT, out.data()));
  return out;
}

void SetAttr(hid_t loc, const std::string& obj, const std::string& name, int64_t value) {
  WriteAttr(loc, obj, name, H5T_NATIVE_INT64, &value);
}
void SetAttr(hid_t loc, const std::string& obj, const std::string& name, double value) {
  WriteAttr(loc, obj, name, H5T_NATIVE_DOUBLE, &value);
}
void SetAttr(hid_t loc, const std::string& obj, const std::string& name, const std::string& value) {
  Handle type = StringType(value.size());
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  WriteAttr(loc, obj, name, type.id(), padded.data());
}

bool HasAttr(hid_t loc, const std::string& obj, const std::string& name) {
  Silence();
  htri_t ok = H5Aexists_by_name(loc, obj.c_str(), name.c_str(), H5P_DEFAULT);
  if (ok < 0) H5Eclear2(H5E_DEFAULT);
  return ok > 0;
}

int64_t GetIntAttr(hid_t loc, const std::string& obj, const std::string& name) {
  Handle attr = OpenAttr(loc, obj, name);
  Handle type(H5_CHECK(H5Aget_type(attr.id())));
  if (H5Tget_class(type.id()) != H5T_INTEGER)
    throw H5Error("attribute '" + name + "' is not an integer");
  RequireNumber(type.id(), "attribute '" + name + "'");
  Handle space(H5_CHECK(H5Aget_space(attr.id())));
  RequireOneValue(space.id(), "attribute '" + name + "'");
  int64_t v = 0;
  H5_CHECK(H5Aread(attr.id(), H5T_NATIVE_INT64, &v));
  return v;
}

double GetDoubleAttr(hid_t loc, const std::string& obj, const std::string& name) {
  Handle attr = OpenAttr(loc, obj, name);
  Handle type(H5_CHECK(H5Aget_type(attr.id())));
  H5T_class_t cls = H5Tget_class(type.id());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER)
    throw H5Error("attribute '" + name + "' is not a number");
  RequireNumber(type.id(), "attribute '" + name + "'");
  Handle space(H5_CHECK(H5Aget_space(attr.id())));
  RequireOneValue(space.id(), "attribute '" + name + "'");
  double v = 0;
  H5_CHECK(H5Aread(attr.id(), H5T_NATIVE_DOUBLE, &v));
  return v;
}

void SetDoublesAttr(hid_t loc, const std::string& obj, const std::string& name,
                    const std::vector<double>& values) {
  if (values.size() == 1) return SetAttr(loc, obj, name, values[0]);
  if (values.empty()) throw H5Error("attribute '" + name + "': no values to write");
  Silence();
  if (H5_CHECK(H5Aexists_by_name(loc, obj.c_str(), name.c_str(), H5P_DEFAULT)) > 0)
    H5_CHECK(H5Adelete_by_name(loc, obj.c_str(), name.c_str(), H5P_DEFAULT));
  const hsize_t n = values.size();
  Handle space(H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  Handle attr(H5_CHECK(H5Acreate_by_name(loc, obj.c_str(), name.c_str(), H5T_NATIVE_DOUBLE,
                                         space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr.id(), H5T_NATIVE_DOUBLE, values.data()));
}

std::vector<double> GetDoublesAttr(hid_t loc, const std::string& obj, const std::string& name,
                                   size_t max_values) {
  Handle attr = OpenAttr(loc, obj, name);
  Handle type(H5_CHECK(H5Aget_type(attr.id())));
  RequireNumber(type.id(), "attribute '" + name + "'");
  Handle space(H5_CHECK(H5Aget_space(attr.id())));
  if (H5_CHECK(H5Sget_simple_extent_ndims(space.id())) > 1)
    throw H5Error("attribute '" + name + "' has more than one dimension");
  const hssize_t n = H5_CHECK(H5Sget_simple_extent_npoints(space.id()));
  if (n < 1 || size_t(n) > max_values)
    throw H5Error("attribute '" + name + "' holds " + std::to_string(n) + " values, not 1 to " +
                  std::to_string(max_values));
  std::vector<double> out(static_cast<size_t>(n));
  H5_CHECK(H5Aread(attr.id(), H5T_NATIVE_DOUBLE, out.data()));
  return out;
}

std::string GetStringAttr(hid_t loc, const std::string& obj, const std::string& name) {
  Handle attr = OpenAttr(loc, obj, name);
  Handle type(H5_CHECK(H5Aget_type(attr.id())));
  if (H5Tget_class(type.id()) != H5T_STRING)
    throw H5Error("attribute '" + name + "' is not a string");
  Handle space(H5_CHECK(H5Aget_space(attr.id())));
  RequireOneValue(space.id(), "attribute '" + name + "'");
  return ReadOneString(
      attr.id(), type.id(), "attribute '" + name + "'",
      [&](hid_t mtype, void* buffer) { return H5Aread(attr.id(), mtype, buffer); });
}

}  // namespace h5
}  // namespace dlh
