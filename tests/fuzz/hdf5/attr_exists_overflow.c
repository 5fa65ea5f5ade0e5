/* HDF5 1.10.8 (Debian 12) reads out of bounds in H5O__attr_exists on a corrupt file that
 * checkpoint_bytes_fuzz produced (attr_exists_overflow.h5, a dlh-launch checkpoint with a few
 * bytes changed). Only HDF5 calls, the ones LoadCheckpoint makes before it fails:
 *
 *   clang-14 -g -fsanitize=address tests/fuzz/hdf5/attr_exists_overflow.c \
 *     $(pkg-config --cflags --libs hdf5-openmpi ompi-c) -o /tmp/attr_exists_overflow
 *   ASAN_OPTIONS=detect_leaks=0 /tmp/attr_exists_overflow tests/fuzz/hdf5/attr_exists_overflow.h5
 *
 * ASan: heap-buffer-overflow (or heap-use-after-free) READ of size 8 in memcpy from
 * H5O__msg_iterate_real < H5O__attr_exists < H5A__exists_by_name < H5Aexists_by_name, on the
 * third H5Aexists_by_name. */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>

static void ReadInt(hid_t file, const char* name) {
  printf("%s exists: %d\n", name, (int)H5Aexists_by_name(file, ".", name, H5P_DEFAULT));
  hid_t attr = H5Aopen_by_name(file, ".", name, H5P_DEFAULT, H5P_DEFAULT);
  int64_t value = 0;
  H5Aread(attr, H5T_NATIVE_INT64, &value);
  H5Aclose(attr);
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return 1;
  ReadInt(file, "format_version");
  ReadInt(file, "step");
  ReadInt(file, "epoch");
  printf("step_in_epoch exists: %d\n",
         (int)H5Aexists_by_name(file, ".", "step_in_epoch", H5P_DEFAULT));
  H5Fclose(file);
  return 0;
}
