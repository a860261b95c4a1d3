#include "optim/training/checkpoint.hpp"

#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "core/io/io.hpp"
#include "core/engine/random.hpp"

namespace xg::optim {

namespace {

constexpr double kFormat = 1.0;
const char* const kOp = "load_checkpoint";

void append_prefixed(NamedArrays& out, const std::string& prefix, const NamedArrays& entries) {
    for (const auto& [key, value] : entries) out.emplace_back(prefix + key, value);
}

// The checkpoint split by prefix; unknown prefixes are an error (a file from something else).
struct Parts {
    std::map<std::string, const Array*> meta;
    NamedArrays model, optim, sched, loader;
    const Array* rng = nullptr;
};

Parts split(const NamedArrays& state) {
    Parts parts;
    auto strip = [](const std::string& key, const std::string& prefix, NamedArrays& into, const Array& v) {
        if (key.rfind(prefix, 0) != 0) return false;
        into.emplace_back(key.substr(prefix.size()), v);
        return true;
    };
    for (const auto& [key, value] : state) {
        if (key.rfind("meta.", 0) == 0) {
            parts.meta[key] = &value;
        } else if (key == "rng.default") {
            parts.rng = &value;
        } else if (!strip(key, "model.", parts.model, value) && !strip(key, "optim.", parts.optim, value) &&
                   !strip(key, "sched.", parts.sched, value) && !strip(key, "loader.", parts.loader, value)) {
            fail(kOp, fmt::format("unexpected entry '{}' (not a checkpoint written by Checkpoint::save?)", key));
        }
    }
    return parts;
}

double meta_value(const Parts& parts, const std::string& key) {
    const auto it = parts.meta.find(key);
    if (it == parts.meta.end()) fail(kOp, fmt::format("the checkpoint has no '{}' (not written by Checkpoint::save?)", key));
    const Array& a = *it->second;
    const double v = a.size() == 1 ? a.data()[0] : -1.0;
    if (!(v >= 0) || v != std::floor(v) || v > 9007199254740992.0) {
        fail(kOp, fmt::format("'{}' should be one non-negative whole number", key));
    }
    return v;
}

// Model keys and shapes must match exactly (strict), checked without touching the model.
void validate_model(const nn::Module& model, const NamedArrays& saved) {
    std::map<std::string, Shape> own;
    for (const auto& [key, value] : model.state_dict()) own.emplace(key, shape_of(value));
    std::vector<std::string> problems;
    std::map<std::string, bool> seen;
    for (const auto& [key, value] : saved) {
        const auto it = own.find(key);
        if (it == own.end()) problems.push_back(fmt::format("unexpected key 'model.{}'", key));
        else if (it->second != shape_of(value)) {
            problems.push_back(fmt::format("'model.{}' has shape {} but the model's is {}", key,
                                           shape_str(shape_of(value)), shape_str(it->second)));
        }
        if (seen[key]) problems.push_back(fmt::format("'model.{}' appears twice", key));
        seen[key] = true;
    }
    for (const auto& entry : own) {
        if (!seen.count(entry.first)) problems.push_back(fmt::format("missing key 'model.{}'", entry.first));
    }
    if (!problems.empty()) {
        std::string msg = fmt::format("the checkpoint does not fit this {} ({} problems; nothing was changed):",
                                      model.name(), problems.size());
        for (std::size_t i = 0; i < problems.size() && i < 10; ++i) msg += "\n  " + problems[i];
        if (problems.size() > 10) msg += fmt::format("\n  ... and {} more", problems.size() - 10);
        fail(kOp, msg);
    }
}

}  // namespace

Checkpoint::Checkpoint(nn::Module& model, Optimizer& optimizer, LRScheduler* scheduler, DataLoader* loader)
    : model_(model), optimizer_(optimizer), loader_(loader) {
    if (scheduler) schedulers_.push_back(scheduler);
}

Checkpoint::Checkpoint(nn::Module& model, Optimizer& optimizer, std::vector<LRScheduler*> schedulers, DataLoader* loader)
    : model_(model), optimizer_(optimizer), schedulers_(std::move(schedulers)), loader_(loader) {
    for (std::size_t i = 0; i < schedulers_.size(); ++i) {
        if (!schedulers_[i]) fail("Checkpoint", fmt::format("scheduler {} of {} is null", i, schedulers_.size()));
    }
}

namespace {

// A scheduler's keys: sched.<key> for one, sched.<i>.<key> for each of a chain.
std::string sched_prefix(std::size_t i, std::size_t count) {
    return count == 1 ? std::string("sched.") : fmt::format("sched.{}.", i);
}

// The 'sched.' entries (prefix stripped) split per bound scheduler; throws for an entry that
// belongs to none and for a scheduler with no entries.
std::vector<NamedArrays> split_schedulers(const NamedArrays& sched, std::size_t count) {
    if (count == 0) {
        if (!sched.empty()) fail(kOp, "the checkpoint holds scheduler state ('sched.') but no scheduler was given to restore it");
        return {};
    }
    if (count == 1) {
        if (sched.empty()) fail(kOp, "a scheduler was given but the checkpoint holds no 'sched.' state");
        return {sched};
    }
    std::vector<NamedArrays> per(count);
    for (const auto& [key, value] : sched) {
        const std::size_t dot = key.find('.');
        const std::string index = key.substr(0, dot);
        const bool numbered = dot != std::string::npos && !index.empty() && index.size() < 6 &&
                              index.find_first_not_of("0123456789") == std::string::npos;
        const std::size_t i = numbered ? std::stoul(index) : count;
        if (i >= count) {
            fail(kOp, fmt::format("unexpected entry 'sched.{}' for a chain of {} schedulers (sched.<0..{}>.<key>)", key, count,
                                  count - 1));
        }
        per[i].emplace_back(key.substr(dot + 1), value);
    }
    for (std::size_t i = 0; i < count; ++i) {
        if (per[i].empty()) fail(kOp, fmt::format("the checkpoint holds no state for scheduler {} of {} ('sched.{}.')", i, count, i));
    }
    return per;
}

}  // namespace

NamedArrays Checkpoint::collect(const TrainingProgress& progress) const {
    if (progress.step < 0 || progress.epoch < 0) {
        fail("save_checkpoint", fmt::format("step and epoch must be >= 0, got {} and {}", progress.step, progress.epoch));
    }
    NamedArrays out;
    out.emplace_back("meta.format", scalar_array(kFormat));
    out.emplace_back("meta.step", scalar_array(static_cast<double>(progress.step)));
    out.emplace_back("meta.epoch", scalar_array(static_cast<double>(progress.epoch)));
    append_prefixed(out, "model.", model_.state_dict());
    append_prefixed(out, "optim.", optimizer_.state_dict());
    for (std::size_t i = 0; i < schedulers_.size(); ++i) {
        append_prefixed(out, sched_prefix(i, schedulers_.size()), schedulers_[i]->state_dict());
    }
    if (loader_) append_prefixed(out, "loader.", loader_->state_dict());
    out.emplace_back("rng.default", bytes_to_array(default_generator().state()));
    return out;
}

void Checkpoint::validate(const NamedArrays& state) const {
    const Parts parts = split(state);
    if (meta_value(parts, "meta.format") != kFormat) {
        fail(kOp, fmt::format("unsupported checkpoint format {} (this build reads {})", meta_value(parts, "meta.format"), kFormat));
    }
    meta_value(parts, "meta.step");
    meta_value(parts, "meta.epoch");
    if (parts.meta.size() != 3) {
        std::string extra;
        for (const auto& entry : parts.meta) {
            if (entry.first != "meta.format" && entry.first != "meta.step" && entry.first != "meta.epoch") {
                extra += (extra.empty() ? "'" : ", '") + entry.first + "'";
            }
        }
        fail(kOp, fmt::format("unexpected 'meta.' entries in the checkpoint: {}", extra));
    }
    validate_model(model_, parts.model);
    optimizer_.validate_state_dict(parts.optim);
    const std::vector<NamedArrays> sched = split_schedulers(parts.sched, schedulers_.size());
    for (std::size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->validate_state_dict(sched[i]);
    if (loader_) {
        if (parts.loader.empty()) fail(kOp, "a DataLoader was given but the checkpoint holds no 'loader.' state");
        loader_->validate_state_dict(parts.loader);
    } else if (!parts.loader.empty()) {
        fail(kOp, "the checkpoint holds DataLoader state ('loader.') but no loader was given to restore it");
    }
    if (!parts.rng) fail(kOp, "the checkpoint has no 'rng.default'");
    Generator probe;
    probe.set_state(array_to_bytes(*parts.rng, "checkpoint entry 'rng.default'"));
}

TrainingProgress Checkpoint::restore(const NamedArrays& state) {
    validate(state);
    const Parts parts = split(state);
    model_.load_state_dict(parts.model);
    // The groups' lr come back with the optimizer's state; the scheduler only restores its step
    // count, so a chain of schedules continues from exactly the saved lr.
    optimizer_.load_state_dict(parts.optim);
    const std::vector<NamedArrays> sched = split_schedulers(parts.sched, schedulers_.size());
    for (std::size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(sched[i]);
    if (loader_) loader_->load_state_dict(parts.loader);
    default_generator().set_state(array_to_bytes(*parts.rng, "checkpoint entry 'rng.default'"));
    return TrainingProgress{static_cast<std::int64_t>(meta_value(parts, "meta.step")),
                            static_cast<std::int64_t>(meta_value(parts, "meta.epoch"))};
}

void Checkpoint::save(const std::string& path, const TrainingProgress& progress,
                      const std::function<void(const std::string& tmp_path)>& before_commit) const {
    Int64Keys int64_keys;  // the model's int64 buffers stay int64 in the file
    for (const std::string& key : model_.int64_keys()) int64_keys.insert("model." + key);
    Float32Keys float32_keys;  // and its float32 tensors, with their optimizer state, float32
    for (const std::string& key : model_.float32_keys()) float32_keys.insert("model." + key);
    for (const std::string& key : optimizer_.float32_keys()) float32_keys.insert("optim." + key);
    const std::string bytes = npz_bytes(collect(progress), false, int64_keys, float32_keys);
    write_file_atomic(
        path,
        [&](const std::string& tmp_path) {
            std::ofstream out(tmp_path, std::ios::binary | std::ios::trunc);
            out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
            out.close();
            if (!out) fail("save_checkpoint", fmt::format("writing {} failed", tmp_path));
            if (before_commit) before_commit(tmp_path);
        },
        "save_checkpoint");
}

TrainingProgress Checkpoint::load(const std::string& path) {
    const NamedArrays state = load_npz(path);
    try {
        return restore(state);
    } catch (const Error& e) {
        throw Error(fmt::format("{} (file {})", e.what(), path));
    }
}

void load_model_from_checkpoint(const std::string& path, nn::Module& model) {
    NamedArrays weights;
    for (auto& [key, value] : load_npz(path)) {
        if (key.rfind("model.", 0) == 0) weights.emplace_back(key.substr(6), std::move(value));
    }
    if (weights.empty()) fail(kOp, fmt::format("{} holds no 'model.' entries", path));
    validate_model(model, weights);
    model.load_state_dict(weights);
}

}  // namespace xg::optim
