// DLH — `dlh-estimate calibrate`, `fit`, `check-calibration` and `validate`: making a
// calibration file, refitting it, checking it against this machine, and measuring how well it
// predicts models outside the sweep.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// calibrate --device cpu|cuda[:N] [--out F] [--quick]: the benchmark sweep (in this process,
// or through `dlh-launch time-steps`), the fit, the calibration file. With --slurm:
// CalibrateSlurmCommand (calibrate_slurm_cmd.hpp).
int CalibrateCommand(const std::vector<std::string>& args);

// fit CALIBRATION [--folds K] [--out F]: refits and reports R2 and MAPE.
int FitCommand(const std::vector<std::string>& args);

// check-calibration CALIBRATION [--transfer-out F] [--probe P]: 0 when it describes this
// build and, by the probes, this machine; 2 when it transfers to this machine (ratios and
// added uncertainty printed, F written); 1 with the reason when refused
// (check_calibration_cmd.cpp, estimator/calibrate/calibrate_transfer.hpp).
int CheckCalibrationCommand(const std::vector<std::string>& args);

// validate --calibration FILE [--device D]: predicted against measured on the validation
// models (optionally scaled, or against the roofline).
int ValidateCommand(const std::vector<std::string>& args);

}  // namespace dlh
