// Everything in xg::nn: modules, layers, convolution and pooling, image normalisations, DyT,
// recurrent layers, attention, losses, initialisers and the functional ops.
#pragma once

#include "nn/modules/activation.hpp"
#include "nn/modules/attention.hpp"
#include "nn/modules/conv.hpp"
#include "nn/modules/dyt.hpp"
#include "nn/functional/functional.hpp"
#include "nn/modules/image_norm.hpp"
#include "nn/modules/init.hpp"
#include "nn/modules/layers.hpp"
#include "nn/functional/losses.hpp"
#include "nn/modules/module.hpp"
#include "nn/modules/norm_layers.hpp"
#include "nn/modules/recurrent.hpp"

