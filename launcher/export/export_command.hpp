// DLH — `dlh-launch export`: a spec or a trained model for use outside DLH.
//   export SOURCE --pytorch OUT.py    the spec as a standalone PyTorch program (SOURCE: a spec,
//                                     a DLH checkpoint or a run folder; pytorch_program.hpp)
//   export CHECKPOINT --torch OUT.pt  the trained model as a PyTorch state dict of that
//   export CHECKPOINT --onnx OUT.onnx program's Net, or as ONNX: the program is written to a
//                                     private folder and run once by Python with torch
//                                     (--python, else $DLH_PYTHON, else python3)
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Returns an exit code; throws UsageError, SpecError, CheckpointError, IoError.
int RunExportCommand(const std::vector<std::string>& args);

}  // namespace dlh
