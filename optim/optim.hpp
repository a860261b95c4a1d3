// Everything in xg::optim: optimizers, schedules, clipping, data loading, progress and
// checkpoints. See docs/training.md for a complete training script.
#pragma once

#include "optim/adam.hpp"
#include "optim/checkpoint.hpp"
#include "optim/clip.hpp"
#include "optim/data.hpp"
#include "optim/optimizer.hpp"
#include "optim/progress.hpp"
#include "optim/schedule.hpp"
#include "optim/sgd.hpp"
