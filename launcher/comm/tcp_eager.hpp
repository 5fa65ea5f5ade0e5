// DLH — Open MPI's TCP eager limit raised to a gradient bucket before MPI_Init.
//
// A message above the TCP transport's eager limit (Open MPI 4.1: 64 KiB) goes by rendezvous:
// its first fragment, then the receiver's answer, then the rest. Between two hosts the answer
// rides the one TCP stream from the receiver to the sender, behind whatever the receiver is
// sending the other way. An allreduce sends both ways at once, so each direction's answer
// waits behind the other's data and the two directions take turns: on make bench's
// 100 Mbit/s link (tc tbf, 2026-12-01) the example spec's 1.7 MB gradient took 190 ms a step
// in synchronous training where the link's rate needs 135, and 144 ms with the limit raised
// to the bucket (samples/s 540 -> 677; MPI_Allreduce alone: medians 165-207 ms -> 145).
// So `dlh-launch train` and `bench-allreduce` raise the limit to hold a whole bucket, unless
// the environment already sets it (a site's or user's choice, either way). Ranks on one host
// talk through shared memory and never read it; a peak RSS did not move (+0.6 MiB).
#pragma once

#include <cstddef>

namespace dlh {

// Bytes of Open MPI's header room over a bucket (its eager limit counts the header).
constexpr size_t kTcpEagerHeaderRoom = size_t(64) << 10;

// The gradient bucket `dlh-launch COMMAND ARGS` will use: --bucket-mb N or --bucket-mb=N in
// argv (before any "--"), else train's default of 4 MiB; the default for what does not parse
// (the option parser says so later).
size_t BucketBytesFromArguments(int argc, char** argv);

// Sets OMPI_MCA_btl_tcp_eager_limit to `bucket_bytes` + kTcpEagerHeaderRoom (so never under
// Open MPI's default of 64 KiB) where the environment leaves it unset, and returns the limit
// set; 0 when left alone. Call it before MPI_Init.
size_t RaiseTcpEagerLimit(size_t bucket_bytes);

// What RaiseTcpEagerLimit set in this process (0: nothing).
size_t TcpEagerLimitRaised();

// After MPI_Init: the eager limit Open MPI's TCP transport took, read back through the MPI
// tool interface (MPI_T); 0 where it cannot say (another MPI, no TCP transport).
size_t TcpEagerLimitInEffect();

}  // namespace dlh
