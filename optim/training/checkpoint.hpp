// Training checkpoints: model, optimizer, schedule, data order, RNG and step counter in ONE .npz
// file, written atomically, so a resumed run continues bit for bit as if never stopped.
//
// Keys (float64 arrays, except the model's int64 buffers such as num_batches_tracked, and the
// float32 tensors of a float32 model with their optimizer state, saved as float32; numpy.load
// reads the file; loading converts each value to the dtype of the tensor it goes into):
//   meta.format (1), meta.step, meta.epoch   model.<state_dict key>   optim.<optimizer key>
//   sched.<key> (if a scheduler is bound; sched.<i>.<key> for each of a chain of schedulers)
//   loader.<key> (if a loader is bound)
//   rng.default: xg::default_generator()'s state as bytes (Dropout, init)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/modules/module.hpp"
#include "optim/training/data.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"

namespace xg::optim {

/// Where training stands: optimizer steps taken and epochs completed.
struct TrainingProgress {
    /// Optimizer steps taken so far.
    std::int64_t step = 0;
    /// Epochs completed so far.
    std::int64_t epoch = 0;
};

/// Binds the objects of a training run once; save()/load() then move all their state together.
/// The scheduler and loader are optional (nullptr): what is bound is what is saved and required.
class Checkpoint {
public:
    /// Binds the run's objects by reference; they must outlive the Checkpoint.
    Checkpoint(nn::Module& model, Optimizer& optimizer, LRScheduler* scheduler = nullptr, DataLoader* loader = nullptr);
    /// Binds a chain of schedulers on the optimizer (in the order they are stepped), saved as
    /// sched.<i>.<key>; a chain of one is saved as a single scheduler is. Throws xg::Error for a
    /// null scheduler.
    Checkpoint(nn::Module& model, Optimizer& optimizer, std::vector<LRScheduler*> schedulers, DataLoader* loader = nullptr);

    /// Everything as named arrays (the file's contents).
    NamedArrays collect(const TrainingProgress& progress) const;
    /// Checks `state` against the bound objects (every key, shape and value) and throws
    /// xg::Error naming the problem; changes nothing.
    void validate(const NamedArrays& state) const;
    /// Validates, then restores every bound object and the default generator. Returns the progress.
    TrainingProgress restore(const NamedArrays& state);

    /// Writes collect(progress) to `path` atomically: a crash or error at any point leaves the
    /// previous file intact. `before_commit` (for tests) runs on the fully written temporary
    /// file just before it replaces `path`; if it throws, nothing is replaced.
    void save(const std::string& path, const TrainingProgress& progress,
              const std::function<void(const std::string& tmp_path)>& before_commit = {}) const;
    /// Reads and validates `path` completely before touching any bound object.
    TrainingProgress load(const std::string& path);

private:
    nn::Module& model_;
    Optimizer& optimizer_;
    std::vector<LRScheduler*> schedulers_;
    DataLoader* loader_;
};

/// Loads only the model weights of a checkpoint (for evaluation); validated like load_state_dict.
void load_model_from_checkpoint(const std::string& path, nn::Module& model);

}  // namespace xg::optim
