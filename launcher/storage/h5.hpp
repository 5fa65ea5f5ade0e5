// DLH — small RAII wrappers over HDF5's C API (the openmpi build; only one thread may
// call HDF5 at a time). Every failing call throws H5Error carrying the HDF5 error
// stack's innermost message; HDF5's own stderr printing is turned off.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {

struct H5Error : Error {
  explicit H5Error(const std::string& message, std::string innermost_error = "")
      : Error(message), innermost(std::move(innermost_error)) {}
  std::string innermost;  // HDF5's most specific error text ("truncated file: eof = ..."), if any
};

// Checks an HDF5 return value (negative herr_t or hid_t is failure).
#define H5_CHECK(call) ::dlh::h5::Check((call), #call, __FILE__, __LINE__)

namespace h5 {

int64_t Check(int64_t result, const char* call, const char* file, int line);

// HDF5's serial build may be called by one thread at a time. Checkpoints are written on a
// background thread (checkpoint_writer.hpp) while the loop runs without HDF5; saving and
// loading a checkpoint hold this lock so that a caller who breaks that rule waits instead
// of corrupting the library's state.
std::unique_lock<std::mutex> LockLibrary();

// Owns one hid_t and closes it with the matching H5*close. Move-only; the destructor
// never throws.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  void reset() noexcept;
  hid_t release() noexcept {  // gives up ownership without closing
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  hid_t id() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

enum class Mode { ReadOnly, Create /* truncate */ };

class File {
 public:
  File(const std::string& path, Mode mode);
  hid_t id() const { return handle_.id(); }
  const std::string& path() const { return path_; }
  void flush_and_sync();  // H5Fflush + fsync of the file descriptor (sec2 driver)
  // Allocates `bytes` of disk from the file's start (fallocate: the file grows to them), so
  // that writes inside them cannot fail for want of space. Returns 0, or fallocate's errno:
  // ENOSPC, or a file system that cannot (EOPNOTSUPP), where writes go on as before. The
  // file keeps that size when HDF5 closes it: truncate it to end_of_allocation() then.
  int reserve(double bytes);
  uint64_t end_of_allocation();  // where HDF5's allocations end (H5Fget_eoa)
  void close();                  // explicit close that reports errors
 private:
  std::string path_;
  Handle handle_;
};

bool Exists(hid_t loc, const std::string& path);  // link exists (intermediate groups too)
std::vector<std::string> ListChildren(hid_t loc, const std::string& group);  // sorted names

// Datasets. `path` may contain '/', intermediate groups are created. dims may be empty
// for a scalar. Reading checks the element count against `dims` returned.
void WriteFloats(hid_t loc, const std::string& path, const std::vector<hsize_t>& dims,
                 const float* data);
void WriteBytes(hid_t loc, const std::string& path, const std::vector<hsize_t>& dims,
                const uint8_t* data);
void WriteInts(hid_t loc, const std::string& path, const std::vector<hsize_t>& dims,
               const int32_t* data);
void WriteString(hid_t loc, const std::string& path, const std::string& text);

std::vector<hsize_t> Dims(hid_t loc, const std::string& path);
// Reads converting to the requested memory type (HDF5 converts integer/float types).
// Readers refuse, as H5Error, what would not fit the buffer they fill: numbers wider than
// 8 bytes, string datasets and attributes holding other than one value, fixed-length
// strings longer than their file.
std::vector<float> ReadFloats(hid_t loc, const std::string& path);
std::vector<int32_t> ReadInts(hid_t loc, const std::string& path);
std::string ReadString(hid_t loc, const std::string& path);
// Reads rows [first, first+count) of a dataset whose first dimension is rows.
std::vector<float> ReadFloatRows(hid_t loc, const std::string& path, hsize_t first, hsize_t count);

// Scalar attributes on an object (`obj` is a path relative to loc, "." for loc itself).
void SetAttr(hid_t loc, const std::string& obj, const std::string& name, int64_t value);
void SetAttr(hid_t loc, const std::string& obj, const std::string& name, double value);
void SetAttr(hid_t loc, const std::string& obj, const std::string& name, const std::string& value);
bool HasAttr(hid_t loc, const std::string& obj, const std::string& name);
int64_t GetIntAttr(hid_t loc, const std::string& obj, const std::string& name);
double GetDoubleAttr(hid_t loc, const std::string& obj, const std::string& name);
std::string GetStringAttr(hid_t loc, const std::string& obj, const std::string& name);
// Numbers, one or more: one is written as a scalar attribute (as SetAttr's double), more as a
// 1-D array. The reader takes either, and refuses an empty attribute or one of more than
// `max_values` values.
void SetDoublesAttr(hid_t loc, const std::string& obj, const std::string& name,
                    const std::vector<double>& values);
std::vector<double> GetDoublesAttr(hid_t loc, const std::string& obj, const std::string& name,
                                   size_t max_values);

}  // namespace h5
}  // namespace dlh
