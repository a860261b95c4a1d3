// Everything in xg::optim: the optimizers (SGD, Adam, AdamW), learning-rate schedules and
// gradient clipping here in optim/, and the training loop's tools in optim/training/ (data
// loading and each rank's share of it, the progress bar and CSV log, checkpoints). See docs/training.md for a complete
// training script.
#pragma once

#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "optim/sgd.hpp"
#include "optim/training/checkpoint.hpp"
#include "optim/training/data.hpp"
#include "optim/training/distributed_sampler.hpp"
#include "optim/training/progress.hpp"
