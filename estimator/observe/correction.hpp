// DLH estimator — predictions that learn from the observation store (issue 40).
//
// For each GPU type, after its speed is made from a calibration (or scaled, or a profile):
//  (a) a model already run on the type (the same model key) is predicted from its own
//      history: the speed is scaled by the median of measured / predicted compute over its
//      runs there (at each run's per-rank batch and ranks, with today's calibration), so a
//      second run at the same shape is predicted at the first one's measured step;
//  (b) any other model gets the type's correction: the median of ln(measured / predicted)
//      over the type's jobs, shrunk toward 0 when few (robust.hpp, TypeCorrection);
//  (c) on a CPU type, ranks that share cores: residuals are kept by that count of ranks; a
//      model run alone and side by side gives that count's offset (the median over such
//      models, shrunk toward none when few as (b) is), which every model's prediction at the
//      count then carries (ThreadScaling::learned_log_by_ranks), and a count the model itself
//      ran at is predicted from those runs alone;
//  (d) the links: each record's measured allreduce (Observation::allreduce_s) against the
//      allreduce the cluster's links model at its shape (ModelledComm), by shape and by
//      regime (CommRegime: within a node or across nodes, cores to spare or crowded); a
//      plan's modelled allreduce takes the factor at its shape (the planned model's runs,
//      else the type's), else at its regime (likewise), unshrunk: a link's factor is a
//      measurement of the link; others' records capped as below (DeviceSpeed::
//      comm_log_factor, comm_log_at). The compute of (a)-(c) is the step less the allreduce
//      the record measured, so a link's error is not learned as compute.
// Measured steps are the records' steady steps (Observation::steady_step_s: the mean of the
// steps after the first epoch where the record has them, else the mean step): a job takes
// those, and the first epoch's excess is a fixed cost of the job (phases.hpp's start-up).
// Records are the caller's own (files the caller owns) or others'; others' move a
// prediction by at most 15% (robust.hpp): the compute at each count of ranks side by side,
// (a)-(c) together, from what the caller's records alone teach. The speed says where it came
// from (DeviceSpeed::provenance, observed_runs) and its log_sigma gains the observations'
// spread, others' by at most kOthersCapLog.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include "estimator/cluster/cluster.hpp"
#include "estimator/observe/store_reader.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {

// Applies the store the cluster names (Cluster::observations; none: only the provenance is
// set) for the calling user. A store that is missing or unsafe teaches nothing. Never throws
// for the store's sake.
void ApplyObservations(const Job& job, const Cluster& cluster,
                       std::map<std::string, DeviceSpeed>* speeds);

// The same from given records, for `caller` (tests: a poisoned store).
void ApplyObservationsFrom(const StoreContents& store, uid_t caller, const Job& job,
                           const Cluster& cluster, std::map<std::string, DeviceSpeed>* speeds);

// The predicted compute seconds of one step of record `r` with speed `s` of GPU type `gpu`:
// the per-rank batch, and the CPU share of ranks on a node as the recommender counts it.
double PredictedCompute(const Observation& r, const DeviceSpeed& s, const Cluster& cluster,
                        const std::string& gpu);

// The seconds a step of record `r` waits in its gradient allreduce by the cluster's link
// models (candidates.cpp: the hierarchical ring of `gradient_bytes` at the record's ranks per
// node and nodes, plus the wait of ranks crowding shared cores), as a plan of that shape
// would model it before any correction. 0 for one rank; < 0 where the record does not wait
// for one allreduce a step (local SGD, stale-synchronous, a pipeline) or its bytes or GPU
// type's node are unknown.
double ModelledComm(const Observation& r, double gradient_bytes, const DeviceSpeed& s,
                    const Cluster& cluster, const std::string& gpu);

// "calibration alpha (cpu.json)" from a speed's source, or the provenance already set.
std::string BaseProvenance(const std::string& gpu, const DeviceSpeed& s);

}  // namespace dlh
