// DLH — sum and max in one allreduce (see control_reduce.hpp).
#include "launcher/comm/control_reduce.hpp"

#include <algorithm>
#include <map>

#include "launcher/comm/mpi.hpp"

namespace dlh {
namespace {

// The layout of each live datatype, for the operation: it must not call MPI itself (the
// standard leaves MPI calls inside a user-defined operation undefined). It is written only by
// the constructor and destructor, on the main thread, while no operation runs (stale-synchronous
// training's thread, delayed_allreduce.hpp, ends before its SumMaxAllreduce): no lock.
struct Layout {
  size_t sums, maxes;
};
std::map<MPI_Datatype, Layout>& Layouts() {
  static std::map<MPI_Datatype, Layout> layouts;
  return layouts;
}

// The user-defined operation: `len` elements of `type`, each `sums` doubles to add and then
// `maxes` to max.
void SumThenMax(void* in, void* inout, int* len, MPI_Datatype* type) {
  const auto it = Layouts().find(*type);
  if (it == Layouts().end()) return;  // not ours: cannot happen, the op is only used with it
  const Layout l = it->second;
  const double* a = static_cast<const double*>(in);
  double* b = static_cast<double*>(inout);
  for (int e = 0; e < *len; ++e, a += l.sums + l.maxes, b += l.sums + l.maxes) {
    for (size_t i = 0; i < l.sums; ++i) b[i] += a[i];
    for (size_t i = l.sums; i < l.sums + l.maxes; ++i) b[i] = std::max(a[i], b[i]);
  }
}

}  // namespace

SumMaxAllreduce::SumMaxAllreduce(size_t sums, size_t maxes) : sums_(sums), maxes_(maxes) {
  MPI_CHECK(MPI_Type_contiguous(int(sums + maxes), MPI_DOUBLE, &type_));
  MPI_CHECK(MPI_Type_commit(&type_));
  Layouts()[type_] = Layout{sums, maxes};
  // Commutative, as MPI_SUM and MPI_MAX: MPI then picks the same algorithms as for them.
  MPI_CHECK(MPI_Op_create(&SumThenMax, 1, &op_));
}

SumMaxAllreduce::~SumMaxAllreduce() {
  if (op_ != MPI_OP_NULL) MPI_Op_free(&op_);
  if (type_ != MPI_DATATYPE_NULL) {
    Layouts().erase(type_);
    MPI_Type_free(&type_);
  }
}

void SumMaxAllreduce::run(const double* in, double* out, MPI_Comm comm) const {
  MPI_CHECK(MPI_Allreduce(in, out, 1, type_, op_, comm));
}

void SumMaxAllreduce::start(const double* in, double* out, MPI_Comm comm,
                            MPI_Request* request) const {
  MPI_CHECK(MPI_Iallreduce(in, out, 1, type_, op_, comm, request));
}

}  // namespace dlh
