// DLH — running a helper program, reading what it prints: `dlh-data inspect --json` for
// dlh-estimate suggest and the plugin's spec=suggest, the exported program for export --onnx. No
// shell: the arguments are passed as they are (a path with spaces or quotes stays one argument).
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Runs argv[0] (looked up on PATH when it has no '/') with argv and this process's
// environment; its standard output goes to *out, its standard error to ours (so its own
// one-line error reaches the user). Returns its exit code (128 + N when killed by signal N).
// Throws Error when it cannot be started.
int RunCapturingOutput(const std::vector<std::string>& argv, std::string* out);

// The same without reading the output: the program writes to our standard output.
int RunProgram(const std::vector<std::string>& argv);

// `program` beside this process's executable (an installed or a build's bin folder) when it
// is there and executable, else `program` alone (PATH). `beside`: a file in that folder
// (empty: /proc/self/exe).
std::string ProgramBeside(const std::string& program, const std::string& beside = "");

}  // namespace dlh
