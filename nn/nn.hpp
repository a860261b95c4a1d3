// Everything in xg::nn: modules, layers, convolution and pooling, image normalisations, DyT,
// recurrent layers, attention, losses, initialisers and the functional ops.
#pragma once

#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/conv.hpp"
#include "nn/dyt.hpp"
#include "nn/functional.hpp"
#include "nn/image_norm.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/losses.hpp"
#include "nn/module.hpp"
#include "nn/recurrent.hpp"

