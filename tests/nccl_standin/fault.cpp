// DLH NCCL stand-in — parsing DLH_NCCL_STANDIN_FAULT (see fault.hpp).
#include "tests/nccl_standin/fault.hpp"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace dlh::nccl_standin {
namespace {

long ParseNumber(const std::string& text, const std::string& field, const std::string& whole) {
  size_t used = 0;
  long v = -1;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 0)
    throw std::runtime_error("DLH_NCCL_STANDIN_FAULT=" + whole + ": " + field +
                             " must be a number >= 0, got \"" + text + "\"");
  return v;
}

}  // namespace

Fault ParseFault(const std::string& text) {
  Fault f;
  if (text.empty()) return f;
  std::istringstream in(text);
  std::string kind, rank, call, extra;
  if (!std::getline(in, kind, ':') || !std::getline(in, rank, ':') ||
      !std::getline(in, call, ':') || std::getline(in, extra))
    throw std::runtime_error("DLH_NCCL_STANDIN_FAULT=" + text +
                             ": expected KIND:RANK:CALL, such as stop:1:5");
  if (kind == "stop")
    f.kind = Fault::Stop;
  else if (kind == "hang")
    f.kind = Fault::Hang;
  else if (kind == "error")
    f.kind = Fault::Error;
  else
    throw std::runtime_error("DLH_NCCL_STANDIN_FAULT=" + text +
                             ": KIND must be stop, hang or error, got \"" + kind + "\"");
  f.rank = int(ParseNumber(rank, "RANK", text));
  f.call = ParseNumber(call, "CALL", text);
  if (f.call < 1)
    throw std::runtime_error("DLH_NCCL_STANDIN_FAULT=" + text + ": CALL counts from 1");
  return f;
}

int ProcessRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  return -1;
}

}  // namespace dlh::nccl_standin
