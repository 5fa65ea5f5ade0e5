// DLH — the headers most translation units parse, precompiled once per build (the Makefile's
// PCH; `make PCH=0` builds without). Only what a third of the files or more include goes
// here: nlohmann-json (about 2.4 s to parse in each of 159 files), Boost.Program_options
// (2.2 s in each CLI file) and the standard headers the project uses throughout. Every file
// still includes what it uses itself: this header is a build speed-up, never a dependency.
// Nothing here may define an object with a constructor (<iostream> does: std::ios_base::Init
// would run in every file), so that the objects compile to the same code with it or without.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>
