// The optimizer base: parameter groups, zero_grad, step and a state_dict of named Arrays.
//
// Update rules follow torch.optim (1.13) operation for operation, so a trajectory here matches
// PyTorch's step by step; see docs/training.md. Per-parameter state (step count, moment buffers)
// is created lazily on the first step a parameter has a gradient, as in PyTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/io/io.hpp"
#include "core/engine/tensor.hpp"

namespace xg::optim {

/// A set of parameters sharing a learning rate and weight decay (e.g. "no decay on biases").
/// Schedules rescale `lr` from `initial_lr`, the lr the group was created with.
struct ParamGroup {
    /// The leaf tensors this group updates.
    std::vector<Tensor> params;
    /// Current learning rate (schedules change it).
    double lr = 0.0;
    /// This group's weight decay.
    double weight_decay = 0.0;
    /// The lr the group was created with; schedules scale it.
    double initial_lr = 0.0;
};

/// A group as given to an optimizer's constructor; unset options take the optimizer's defaults.
struct ParamGroupSpec {
    /// The leaf tensors of the group.
    std::vector<Tensor> params;
    /// Learning rate, or nullopt for the optimizer's default.
    std::optional<double> lr;
    /// Weight decay, or nullopt for the optimizer's default.
    std::optional<double> weight_decay;
};

/// Per-parameter state: how many updates it has had and the optimizer's buffers (named by
/// Optimizer::buffer_names(), same shape as the parameter). The buffers have the parameter's
/// dtype, as in PyTorch: a float64 parameter's are in `buffers`, a float32 parameter's in
/// `buffers32` (native float32 storage, half the memory); the other vector is empty.
struct ParamState {
    /// Updates applied to this parameter so far.
    std::int64_t step = 0;
    /// A float64 parameter's buffers: one per Optimizer::buffer_names() entry, shaped like it.
    std::vector<Array> buffers;
    /// A float32 parameter's buffers.
    std::vector<FloatArray> buffers32;
    /// True once the parameter has been updated (its buffers exist).
    bool initialized() const { return step > 0; }
};

/// What Optimizer::update works on for one parameter of element type T (double or float): the
/// parameter's storage, its gradient and the state buffers (in buffer_names() order), all of
/// `size` elements. A float32 parameter is updated through its float32 storage directly: no
/// float64 mirror of the parameter or its gradient is made.
template <class T>
struct UpdateSpan {
    T* param;                  ///< the parameter, written in place
    const T* grad;             ///< its gradient
    std::vector<T*> buffers;   ///< the state buffers, written in place
    std::size_t size;          ///< elements of each
    std::int64_t step;         ///< this parameter's step count, already incremented (1 on the first)
};

/// The base of SGD, Adam and AdamW: parameter groups, zero_grad(), step() and a state_dict that
/// resumes training bit for bit. Subclasses implement update() for one parameter.
class Optimizer {
public:
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    /// One update of every parameter that has a gradient; parameters without one are skipped.
    /// Throws xg::Error when a gradient's shape differs from its parameter's, or a parameter
    /// was resized after its state was created.
    void step();
    /// Clears every parameter's gradient (PyTorch's set_to_none=True behaviour).
    void zero_grad();

    /// The groups; their lr and weight_decay may be changed between steps.
    std::vector<ParamGroup>& param_groups() { return groups_; }
    /// The groups (read-only).
    const std::vector<ParamGroup>& param_groups() const { return groups_; }
    /// Adds a group after construction (its unset options take the optimizer's defaults).
    void add_param_group(const ParamGroupSpec& spec);
    /// Number of parameters over all groups.
    std::size_t num_params() const;

    /// Everything needed to continue training bit-for-bit:
    ///   "param_groups.<g>.lr" / ".initial_lr" / ".weight_decay" / ".num_params" (0-d arrays),
    ///   "state.<i>.step" (0-d) and "state.<i>.<buffer>" for every parameter i (numbered across
    ///   groups in order) that has been updated at least once.
    NamedArrays state_dict() const;
    /// The keys of state_dict() holding the buffers of float32 parameters: they are float32
    /// (each buffer has its parameter's dtype, as in PyTorch) and saved as '<f4'.
    std::set<std::string> float32_keys() const;
    /// Checks `state` against this optimizer (groups, parameter counts, buffer names and shapes)
    /// and throws xg::Error naming the first problem; changes nothing.
    void validate_state_dict(const NamedArrays& state) const;
    /// Validates, then replaces all state; on error nothing is changed. Each buffer takes its
    /// parameter's dtype (rounded to float32 for a float32 parameter), as torch.optim does.
    void load_state_dict(const NamedArrays& state);

    /// The name used in error messages and docs ("SGD", "Adam", "AdamW").
    virtual std::string name() const = 0;
    /// Names of the per-parameter buffers this optimizer keeps (e.g. {"exp_avg", "exp_avg_sq"}).
    virtual std::vector<std::string> buffer_names() const = 0;

protected:
    /// Validates and stores the groups; unset options take the defaults. Throws xg::Error for an
    /// invalid lr or weight_decay, or a parameter that is undefined, not a leaf, or listed twice.
    Optimizer(std::vector<ParamGroupSpec> groups, double default_lr, double default_weight_decay);
    /// Updates one float64 parameter in place (the buffers are allocated, zero-filled on the
    /// first step). Both overloads run one templated rule: per element the arithmetic is in
    /// double, and a float32 parameter's values and buffers are rounded only when stored.
    virtual void update(const ParamGroup& group, const UpdateSpan<double>& span) = 0;
    /// Updates one float32 parameter in place, reading and writing float32 storage.
    virtual void update(const ParamGroup& group, const UpdateSpan<float>& span) = 0;

private:
    template <class T>
    void step_parameter(const ParamGroup& group, Tensor& p, ParamState& state, std::size_t index);
    std::vector<ParamGroup> groups_;
    std::vector<ParamState> states_; ///< one per parameter, numbered across groups
    double default_lr_, default_weight_decay_;
    std::vector<ParamState> parse_states(const NamedArrays& state) const;
};

/// A single group holding `params` (the common case: `SGD(model.parameters(), ...)`).
std::vector<ParamGroupSpec> single_group(std::vector<Tensor> params);

}  // namespace xg::optim
