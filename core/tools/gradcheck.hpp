// Finite-difference gradient checking in the spirit of torch.autograd.gradcheck.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/engine/tensor.hpp"

namespace xg {

/// Settings of xg::gradcheck.
struct GradcheckOptions {
    std::string name = "f";       ///< shown in reports (e.g. "layer_norm")
    double eps = 1e-6;            ///< central-difference step
    double atol = 1e-5;           ///< element passes when |analytic - numerical| <= atol + rtol * |numerical|
    /// Relative tolerance (see atol).
    double rtol = 1e-3;
    bool random_projection = false; ///< compare v^T J u for random u, v instead of the full Jacobian
    int projections = 3;          ///< number of (u, v) pairs in random-projection mode
    std::uint64_t seed = 1234;    ///< for the projection vectors
};

/// Outcome of a gradient check: the worst element over every (output, input) pair.
struct GradcheckResult {
    /// True when every compared element is within tolerance.
    bool ok = true;
    /// GradcheckOptions::name, for the report.
    std::string name;
    std::size_t checked_elements = 0; ///< Jacobian entries (or projections) compared
    /// max |analytic - numerical| over all elements.
    double max_abs_error = 0.0;
    double max_rel_error = 0.0;       ///< |a - n| / max(|n|, tiny)
    // Where the worst violation (largest error relative to its tolerance) was found.
    ///@{
    /// Which input and output the worst element belongs to (positions in the argument lists).
    std::size_t worst_input = 0, worst_output = 0;
    ///@}
    ///@{
    /// Multi-indices of the worst element in that input and output.
    std::vector<std::size_t> worst_input_index, worst_output_index;
    ///@}
    ///@{
    /// The two derivative values at the worst element.
    double worst_analytic = 0.0, worst_numerical = 0.0;
    ///@}
    double worst_ratio = 0.0;         ///< error / tolerance at the worst element (> 1 fails)
    /// True when the check compared random projections (GradcheckOptions::random_projection).
    bool projection_mode = false;

    /// One line: name, verdict, worst absolute and relative error.
    std::string summary() const;
    /// A readable table naming the input, the worst element's index, analytic and numerical
    /// values and the errors.
    std::string report() const;
};

/// A function under test: tensors in, tensors out (each output's Jacobian is checked).
using MultiFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
/// A function under test with one output.
using SingleFunction = std::function<Tensor(const std::vector<Tensor>&)>;

/// Compares the analytic Jacobian (from backward with one-hot seeds) with central differences,
/// for every input with requires_grad set. `f` must be deterministic. When the environment
/// variable XGRAD_GRADCHECK_LOG names a file, the result's summary line is appended to it.
/// Throws xg::Error when no input has requires_grad set (nothing to check).
GradcheckResult gradcheck(const MultiFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});
/// gradcheck of a one-output function; the same checks and errors as the MultiFunction form.
GradcheckResult gradcheck(const SingleFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

/// Checks second derivatives as torch.autograd.gradgradcheck does: the first-order gradients
/// G(x) = J_f(x)^T v (v random and fixed, one per output; computed by xg::grad with
/// create_graph) are themselves gradchecked, so finite differences of the first-order gradient
/// are compared with the analytic second-order terms that backward through G's graph gives.
/// options.random_projection compares them along random directions. The result reads like
/// gradcheck's (its name gets the suffix " (second order)").
GradcheckResult gradgradcheck(const MultiFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});
/// gradgradcheck of a one-output function.
GradcheckResult gradgradcheck(const SingleFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace xg
