// The umbrella header: everything a training script needs in one include.
//
//   #include <xgrad/xgrad.hpp>   // installed: <prefix>/include/xgrad/xgrad.hpp
//
// In the source tree this file is core/xgrad.hpp; CMake copies it to
// <build>/include/xgrad/xgrad.hpp so the same `#include <xgrad/xgrad.hpp>` works for tests and
// tutorials built in-tree and for projects using an installed xgrad (find_package(xgrad)).
// It deliberately pulls in no xtensor-blas, libzip or zlib header: those stay inside the
// libraries, which keeps a script including this file quick to compile.
#pragma once

#include "core/dot.hpp"
#include "core/format.hpp"
#include "core/gradcheck.hpp"
#include "core/io.hpp"
#include "core/ops.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
