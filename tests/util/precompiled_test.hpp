// DLH — the unit and MPI tests' precompiled header: the project's (common/precompiled.hpp)
// and GoogleTest, which 91 test files include (about 1.4 s to parse in each).
#pragma once

#include <gtest/gtest.h>

#include "common/precompiled.hpp"
