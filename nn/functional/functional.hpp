// Every function of xg::nn::functional (torch::nn::functional's names), one header per area.
// Each fused op is ONE graph node with a hand-derived backward (docs/derivations/<name>.md) and a
// *_composed twin built from core ops.
#pragma once

#include "nn/functional/activation.hpp"     // gelu, relu, softmax, log_softmax
#include "nn/functional/attention.hpp"      // self_attention
#include "nn/functional/conv.hpp"           // conv2d, conv1d, unfold, pad
#include "nn/functional/dropout.hpp"        // dropout
#include "nn/functional/dyt.hpp"            // dyt
#include "nn/functional/embedding.hpp"      // embedding
#include "nn/functional/linear.hpp"         // linear
#include "nn/functional/losses.hpp"         // cross_entropy, mse_loss
#include "nn/functional/normalization.hpp"  // layer_norm, batch_norm, group_norm, instance_norm, rms_norm
#include "nn/functional/pool.hpp"           // max_pool2d, avg_pool2d, adaptive_avg_pool2d
#include "nn/functional/recurrent.hpp"      // lstm_cell, gru_cell and their parts
