// The float32 twin of a test (issue 28): an op or module run on float32 copies of its float64
// inputs must give float32 results and gradients that agree with the float64 ones within a bound
// derived from float32's unit roundoff. float64 stays the checker (gradcheck proves the float64
// backward); the twin shows that the float32 path computes the same thing, only rounded.
//
// check_float32_twin(name, f, inputs64, condition):
//  1. runs f on `inputs64` (float64) and on float32 copies of them (new leaves, requires_grad as
//     the originals);
//  2. takes the gradients of sum_k <v_k, out_k> with respect to the inputs that require grad, by
//     first-order backward (xg::grad), with the same seeded random v_k: float64 N(0, 1) values for
//     the float64 run and those values rounded to float32 for the float32 run;
//  3. checks, for the float32 run: every output and every gradient has dtype float32 and holds
//     float32 values exactly (static_cast<float> round-trips); every node of the graph behind the
//     outputs that has axes is float32 (a float64 node with axes is a leak: it would promote what
//     it touches; a 0-D float64 node promotes nothing, as in PyTorch); and, elementwise,
//
//         |out32_i - out64_i| <= tol_i,  |grad32_i - grad64_i| <= tol_i,
//         tol_i = condition * u * (|ref_i| + rms(ref)),   u = 2^-24 (float32's unit roundoff),
//
//     where ref is the float64 tensor compared with (output or gradient) and rms(ref) its root
//     mean square over all its elements.
//
// Why this bound. Rounding the inputs to float32 perturbs each by a relative u; every float32
// store (the op's result, each gradient part and sum) adds a relative u of what it stores. An op
// with relative condition number kappa turns the input perturbation into kappa * u of its
// result, so an entry that is not the result of cancellation is off by at most about
// (kappa + stores) * u * |ref_i|. Entries that are small because terms of mixed sign cancel (a sum,
// a matrix product, sin near its root, a softmax gradient) carry an error on the scale of the
// terms, not of their own size: rms(ref), the tensor's typical magnitude, stands for that scale.
// It is the root mean square and not the maximum so that one large entry does not loosen the
// check of all the others. `condition` is therefore: the op's condition number on the test's
// inputs (measured against the tensor's typical magnitude) plus the number of float32 roundings
// on the way from an input to the compared value, forward or backward, whichever is larger.
// Each twin states its value and why next to its call. It is an upper bound, not a fit: the
// worst err/tol ratio printed for every twin is typically well below 1.
//
// Normwise form. A bound derived for the whole tensor rather than entry by entry (the twins of
// nn/, tests/support/float32_nn_twins.hpp) is checked as such: pass TwinNorm::normwise and the
// check is max_i |a32_i - a64_i| <= condition * u * max_i |a64_i|. Both forms are stated by the
// twin's derivation, never chosen to make a twin pass.
//
// For a module: pass its parameters among the inputs (f uses them), or convert the module with
// Module::to inside f for the float32 run; a float64 parameter with axes left in the float32 graph
// is reported as a leak, as it should be (it promotes everything after it to float64).
//
// The inputs must be float64 and finite; f must return at least one tensor. Every twin also
// records the op names of both runs' graphs in float32_twin_ops_reached() (the coverage test:
// every op core/ records is reached by some twin).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>
#include <xtensor/xmath.hpp>

#include "core/engine/random.hpp"
#include "core/engine/tensor.hpp"
#include "core/ops/ops.hpp"

namespace xg::test {

/// The worst err/tol of one twin, over its outputs and gradients (<= 1 passes).
struct TwinResult {
    std::string name;
    double worst_output = 0.0;    ///< max_i |out32_i - out64_i| / tol_i over every output
    double worst_gradient = 0.0;  ///< the same over every gradient (0 when nothing requires grad)
    bool dtypes_ok = true;        ///< every output, gradient and graph node with axes is of the twin's dtype, on its grid
    Dtype dtype = Dtype::Float32;  ///< the narrow dtype the twin ran in
    bool ok() const { return dtypes_ok && worst_output <= 1.0 && worst_gradient <= 1.0; }
    /// One line: name, condition, worst err/tol of the outputs and of the gradients.
    std::string summary(double condition) const {
        char line[512];
        std::snprintf(line, sizeof line, "%s twin %-4s %-58s condition %6.1f  worst err/tol: output %.3f, gradient %.3f",
                      dtype_name(dtype), ok() ? "ok" : "FAIL", name.c_str(), condition, worst_output, worst_gradient);
        return line;
    }
};

/// f for a twin: the outputs whose values and gradients are compared, from the inputs.
using TwinFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// One twin: f at inputs64 (float64 leaves; those that require grad get their gradients compared),
/// checked within `condition` u, the bound derived beside each twin.
struct Float32Twin {
    std::string name;
    TwinFunction f;
    std::vector<Tensor> inputs64;
    double condition;
};

/// New float32 leaves holding the values of `inputs64`, each requiring a gradient as its original.
inline std::vector<Tensor> narrow_copies(const std::vector<Tensor>& inputs64, Dtype dtype) {
    std::vector<Tensor> copies;
    for (const Tensor& x : inputs64) copies.emplace_back(x.value(), dtype, x.requires_grad());
    return copies;
}
inline std::vector<Tensor> float32_copies(const std::vector<Tensor>& inputs64) { return narrow_copies(inputs64, Dtype::Float32); }

/// max |a - b| / (u max |b|): the normwise error of a float32 result `a` against its float64 twin
/// `b`, in units of float32's unit roundoff, for checks stated as a whole-tensor bound.
inline double normwise_error_in_u(const Array& a, const Array& b) {
    return xt::amax(xt::abs(a - b))() / (unit_roundoff(Dtype::Float32) * xt::amax(xt::abs(b))());
}

/// The op names seen in the graphs of every twin run so far in this process (both runs).
inline std::set<std::string>& float32_twin_ops_reached() {
    static std::set<std::string> ops;
    return ops;
}

namespace detail {

// Every value of `a` is a number of `dtype`'s storage type (NaN counts as one).
inline bool on_grid(const Array& a, Dtype dtype) {
    return with_storage_type(dtype, [&](auto storage) {
        using T = typename decltype(storage)::type;
        const double* p = a.data();
        for (std::size_t i = 0; i < a.size(); ++i) {
            if (!std::isnan(p[i]) && static_cast<double>(T(p[i])) != p[i]) return false;
        }
        return true;
    });
}
inline bool on_float32_grid(const Array& a) { return on_grid(a, Dtype::Float32); }

/// Calls visit(node) once for every node of the graphs behind `outputs`, leaves included.
template <class Visit>
void for_each_node(const std::vector<Tensor>& outputs, Visit visit) {
    std::vector<const Node*> stack;
    for (const Tensor& t : outputs) stack.push_back(t.node().get());
    std::set<const Node*> seen;
    while (!stack.empty()) {
        const Node* n = stack.back();
        stack.pop_back();
        if (n == nullptr || !seen.insert(n).second) continue;
        visit(*n);
        for (const NodePtr& p : n->parents) stack.push_back(p.get());
    }
}

// Walks the graph behind `t`: collects op names; in a narrow run (`narrow` float32 or bfloat16, not
// float64) also returns the description of the first node with axes that is not of that dtype or
// not on its grid.
inline std::string walk_graph(const Tensor& t, Dtype narrow) {
    std::string problem;
    for_each_node({t}, [&](const Node& node) {
        const Node* n = &node;
        if (!n->is_leaf()) float32_twin_ops_reached().insert(n->op);
        if (narrow != Dtype::Float64 && problem.empty() && n->dims().size() > 0) {
            const Shape shape(n->dims().begin(), n->dims().end());
            const std::string run = std::string(" in the ") + dtype_name(narrow) + " run";
            const Shape stored = std::visit([](const auto& a) { return Shape(a.shape().begin(), a.shape().end()); }, n->narrow_value);
            if (n->dtype != narrow) {
                problem = "node '" + n->op + "' of shape " + shape_str(shape) + " is " + dtype_name(n->dtype) + run +
                          " (a float64 tensor with axes leaks into it)";
            } else if (n->value_mirror != Node::Mirror::Written && stored != shape) {
                problem = "node '" + n->op + "' does not hold its values in its narrow storage" + run;
            } else if (n->value_mirror == Node::Mirror::Clean && !on_grid(n->value, narrow)) {
                problem = "node '" + n->op + "' has a float64 mirror off the grid" + run;
            }
        }
    });
    return problem;
}

inline double rms(const Array& a) {
    double s = 0.0;
    for (double v : a) s += v * v;
    return a.size() == 0 ? 0.0 : std::sqrt(s / static_cast<double>(a.size()));
}

inline double max_abs(const Array& a) {
    double m = 0.0;
    for (double v : a) m = std::max(m, std::fabs(v));
    return m;
}

}  // namespace detail

/// How a twin's bound is stated: entry by entry (condition * u * (|ref_i| + rms(ref))) or for the
/// whole tensor (condition * u * max|ref|).
enum class TwinNorm { elementwise, normwise };

namespace detail {

// max_i |got_i - want_i| / tol_i, with tol_i = condition * u * (|want_i| + rms(want)) (elementwise)
// or condition * u * max|want| (normwise); +inf where tol_i is 0 and they differ, or where got is
// not finite while want is.
inline double worst_ratio(const Array& got, const Array& want, double condition, std::string& where,
                          TwinNorm norm = TwinNorm::elementwise, Dtype dtype = Dtype::Float32) {
    const double u = unit_roundoff(dtype), scale = rms(want), largest = max_abs(want);
    double worst = 0.0;
    const double *pg = got.data(), *pw = want.data();
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double err = std::fabs(pg[i] - pw[i]);
        const double tol = norm == TwinNorm::normwise ? condition * u * largest : condition * u * (std::fabs(pw[i]) + scale);
        const double ratio = err == 0.0 ? 0.0 : (tol > 0.0 && std::isfinite(err)) ? err / tol : INFINITY;
        if (ratio > worst) {
            worst = ratio;
            std::ostringstream s;
            s.precision(17);
            s << "element " << i << ": " << dtype_name(dtype) << " " << pg[i] << ", float64 " << pw[i] << ", tolerance " << tol;
            where = s.str();
        }
    }
    return worst;
}

}  // namespace detail

/// Runs the twin of `f` at `inputs64` in the narrow dtype `dtype` (float32 or bfloat16) and asserts
/// it (see the top of this file for what is checked and the tolerance condition * u * (|ref_i| +
/// rms(ref)), u = unit_roundoff(dtype)); prints its summary line.
inline TwinResult check_narrow_twin(Dtype dtype, const std::string& name, TwinFunction f,
                                    const std::vector<Tensor>& inputs64, double condition,
                                    TwinNorm norm = TwinNorm::elementwise) {
    INFO(dtype_name(dtype) << " twin: " << name);
    TwinResult result;
    result.name = name;
    result.dtype = dtype;
    std::vector<bool> compared;  // which inputs' gradients are compared: decided before f runs (a module twin's
                                 // replace_parameter may set requires_grad on an input it was given)
    for (const Tensor& x : inputs64) {
        compared.push_back(x.requires_grad());
        REQUIRE(x.dtype() == Dtype::Float64);
        REQUIRE(std::all_of(x.value().begin(), x.value().end(), [](double v) { return std::isfinite(v); }));
    }
    const std::vector<Tensor> inputs32 = narrow_copies(inputs64, dtype);
    const std::vector<Tensor> out64 = f(inputs64), out32 = f(inputs32);
    REQUIRE(!out64.empty());
    REQUIRE(out64.size() == out32.size());

    // the seeds: the same N(0, 1) values, float64 and rounded to the narrow dtype; only outputs that require grad
    Generator gen(20260528);
    std::vector<Tensor> roots64, roots32, seeds64, seeds32;
    for (std::size_t k = 0; k < out64.size(); ++k) {
        INFO("output " << k);
        REQUIRE(out64[k].shape() == out32[k].shape());
        REQUIRE(out64[k].dtype() == Dtype::Float64);
        const Tensor v(randn(out64[k].shape(), gen).value(), Dtype::Float64);
        if (!out64[k].requires_grad()) continue;
        REQUIRE(out32[k].requires_grad());
        roots64.push_back(out64[k]), roots32.push_back(out32[k]);
        seeds64.push_back(v), seeds32.push_back(v.to(dtype));
    }
    std::vector<Tensor> wrt64, wrt32;
    std::vector<std::size_t> input_of;  // the input each gradient belongs to
    for (std::size_t i = 0; i < inputs64.size(); ++i) {
        if (compared[i]) wrt64.push_back(inputs64[i]), wrt32.push_back(inputs32[i]), input_of.push_back(i);
    }

    std::vector<std::string> problems;  // every failed check, for the report
    std::string where;
    const auto dtype_problem = [&](const std::string& what) {
        problems.push_back(what);
        result.dtypes_ok = false;
    };
    for (std::size_t k = 0; k < out64.size(); ++k) {
        const std::string label = "output " + std::to_string(k);
        detail::walk_graph(out64[k], Dtype::Float64);
        const std::string graph_problem = detail::walk_graph(out32[k], dtype);
        if (!graph_problem.empty()) dtype_problem(label + ": " + graph_problem);
        if (out32[k].dtype() != dtype) dtype_problem(label + " is " + dtype_name(out32[k].dtype()));
        if (!detail::on_grid(out32[k].value(), dtype)) dtype_problem(label + " holds values that are not " + dtype_name(dtype) + " numbers");
        const double r = detail::worst_ratio(out32[k].value(), out64[k].value(), condition, where, norm, dtype);
        if (r > 1.0) problems.push_back(label + ": err/tol " + std::to_string(r) + " at " + where);
        result.worst_output = std::max(result.worst_output, r);
    }
    if (!roots64.empty() && !wrt64.empty()) {
        const GradOptions unused_allowed{false, false, true};
        const std::vector<Tensor> g64 = grad(roots64, wrt64, seeds64, unused_allowed);
        const std::vector<Tensor> g32 = grad(roots32, wrt32, seeds32, unused_allowed);
        for (std::size_t i = 0; i < g64.size(); ++i) {
            const std::string label = "gradient of input " + std::to_string(input_of[i]);
            REQUIRE(g64[i].defined() == g32[i].defined());
            if (!g64[i].defined()) continue;
            if (g32[i].dtype() != dtype) dtype_problem(label + " is " + dtype_name(g32[i].dtype()));
            if (!detail::on_grid(g32[i].value(), dtype)) dtype_problem(label + " holds values that are not " + dtype_name(dtype) + " numbers");
            const double r = detail::worst_ratio(g32[i].value(), g64[i].value(), condition, where, norm, dtype);
            if (r > 1.0) problems.push_back(label + ": err/tol " + std::to_string(r) + " at " + where);
            result.worst_gradient = std::max(result.worst_gradient, r);
        }
    }
    std::puts(result.summary(condition).c_str());
    // The test suite sets XGRAD_FLOAT32_LOG so ctest can print one table of every twin at the end.
    if (const char* log = std::getenv("XGRAD_FLOAT32_LOG")) std::ofstream(log, std::ios::app) << result.summary(condition) << '\n';
    INFO(Catch::Detail::stringify(problems));
    CHECK(problems.empty());
    return result;
}

/// The float32 twin: check_narrow_twin in float32.
inline TwinResult check_float32_twin(const std::string& name, TwinFunction f, const std::vector<Tensor>& inputs64,
                                     double condition, TwinNorm norm = TwinNorm::elementwise) {
    return check_narrow_twin(Dtype::Float32, name, std::move(f), inputs64, condition, norm);
}

/// check_float32_twin for each twin of `twins`, in order.
inline void check_float32_twins(const std::vector<Float32Twin>& twins, TwinNorm norm = TwinNorm::elementwise) {
    for (const Float32Twin& t : twins) check_float32_twin(t.name, t.f, t.inputs64, t.condition, norm);
}

}  // namespace xg::test
