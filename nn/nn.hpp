// Everything in xg::nn: the functions (nn/functional/, one header per area) and the modules
// (nn/modules/): layers, normalisations, convolution and pooling, DyT, recurrent layers,
// attention, losses and initialisers.
#pragma once

#include "nn/functional/functional.hpp"
#include "nn/modules/activation.hpp"
#include "nn/modules/attention.hpp"
#include "nn/modules/conv.hpp"
#include "nn/modules/dyt.hpp"
#include "nn/modules/image_norm.hpp"
#include "nn/modules/init.hpp"
#include "nn/modules/layers.hpp"
#include "nn/modules/losses.hpp"
#include "nn/modules/module.hpp"
#include "nn/modules/norm_layers.hpp"
#include "nn/modules/recurrent.hpp"
