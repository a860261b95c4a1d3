// Everything in xg::nn: modules, layers, attention, losses, initialisers and the functional ops.
#pragma once

#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/functional.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/losses.hpp"
#include "nn/module.hpp"

