#include "core/tools/gradcheck.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"

namespace xg {

namespace {

std::vector<std::size_t> unravel(std::size_t flat, const Array& a) {
    std::vector<std::size_t> idx(a.dimension());
    for (std::size_t d = a.dimension(); d-- > 0;) {
        idx[d] = flat % a.shape()[d];
        flat /= a.shape()[d];
    }
    return idx;
}

std::string index_str(const std::vector<std::size_t>& idx) {
    std::string s = "[";
    for (std::size_t i = 0; i < idx.size(); ++i) s += fmt::format(i ? ", {}" : "{}", idx[i]);
    return s + "]";
}

// Fresh leaves holding copies of the inputs, so the check never touches the caller's tensors.
std::vector<Tensor> fresh_inputs(const std::vector<Tensor>& inputs) {
    std::vector<Tensor> out;
    for (const Tensor& t : inputs) out.emplace_back(t.value(), t.dtype(), t.requires_grad());
    return out;
}

std::vector<Array> evaluate(const MultiFunction& f, const std::vector<Tensor>& inputs) {
    NoGradGuard no_grad;
    std::vector<Array> out;
    for (const Tensor& t : f(inputs)) out.push_back(t.value());
    return out;
}

struct Comparator {
    const GradcheckOptions& opt;
    GradcheckResult& r;
    void operator()(double analytic, double numerical, std::size_t in, std::size_t out, std::vector<std::size_t> in_idx,
                    std::vector<std::size_t> out_idx) {
        const double err = std::fabs(analytic - numerical);
        const double tol = opt.atol + opt.rtol * std::fabs(numerical);
        const double ratio = std::isfinite(err) ? err / tol : INFINITY;
        r.checked_elements++;
        r.max_abs_error = std::max(r.max_abs_error, err);
        r.max_rel_error = std::max(r.max_rel_error, err / std::max(std::fabs(numerical), 1e-12));
        if (!(ratio <= r.worst_ratio) || r.checked_elements == 1) {
            r.worst_ratio = ratio;
            r.worst_input = in;
            r.worst_output = out;
            r.worst_input_index = std::move(in_idx);
            r.worst_output_index = std::move(out_idx);
            r.worst_analytic = analytic;
            r.worst_numerical = numerical;
        }
        if (!(ratio <= 1.0)) r.ok = false;
    }
};

void full_jacobian(const MultiFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& opt, GradcheckResult& r) {
    // Analytic rows: one backward per output element, seeded with a one-hot gradient.
    std::vector<Tensor> leaves = fresh_inputs(inputs);
    std::vector<Tensor> outputs = f(leaves);
    // analytic[o][i] is a (numel(output o) x numel(input i)) row-major matrix
    std::vector<std::vector<std::vector<double>>> analytic(outputs.size(), std::vector<std::vector<double>>(inputs.size()));
    for (std::size_t o = 0; o < outputs.size(); ++o) {
        const std::size_t rows = outputs[o].numel();
        for (std::size_t i = 0; i < inputs.size(); ++i) analytic[o][i].assign(rows * inputs[i].numel(), 0.0);
        if (!outputs[o].requires_grad()) continue;  // output independent of every checked input
        for (std::size_t row = 0; row < rows; ++row) {
            for (Tensor& l : leaves) l.zero_grad();
            Array seed = xt::zeros<double>(outputs[o].value().shape());
            seed.data()[row] = 1.0;
            outputs[o].backward(Tensor(std::move(seed)), {true});
            for (std::size_t i = 0; i < inputs.size(); ++i) {
                if (!leaves[i].requires_grad() || !leaves[i].has_grad()) continue;
                const Array& g = leaves[i].grad_value();
                std::copy(g.begin(), g.end(), analytic[o][i].begin() + static_cast<long>(row * g.size()));
            }
        }
    }
    // Numerical columns: central differences per input element.
    Comparator compare{opt, r};
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i].requires_grad()) continue;
        std::vector<Tensor> probe = fresh_inputs(inputs);
        Array& x = probe[i].mutable_value();
        for (std::size_t e = 0; e < x.size(); ++e) {
            const double saved = x.data()[e];
            x.data()[e] = saved + opt.eps;
            const std::vector<Array> plus = evaluate(f, probe);
            x.data()[e] = saved - opt.eps;
            const std::vector<Array> minus = evaluate(f, probe);
            x.data()[e] = saved;
            for (std::size_t o = 0; o < plus.size(); ++o) {
                for (std::size_t row = 0; row < plus[o].size(); ++row) {
                    const double numerical = (plus[o].data()[row] - minus[o].data()[row]) / (2.0 * opt.eps);
                    const double a = analytic[o][i][row * x.size() + e];
                    compare(a, numerical, i, o, unravel(e, x), unravel(row, plus[o]));
                }
            }
        }
    }
}

void projected(const MultiFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& opt, GradcheckResult& r) {
    Generator gen(opt.seed);
    Comparator compare{opt, r};
    for (int p = 0; p < opt.projections; ++p) {
        // u: a random direction over all checked inputs; v: random weights over outputs.
        std::vector<Array> u;
        for (const Tensor& t : inputs) u.push_back(randn(t.shape(), gen).value());
        std::vector<Tensor> leaves = fresh_inputs(inputs);
        std::vector<Tensor> outputs = f(leaves);
        std::vector<Array> v;
        Tensor total = scalar(0.0);
        for (const Tensor& out : outputs) {
            v.push_back(randn(out.shape(), gen).value());
            if (out.requires_grad()) total = add(total, sum(mul(out, Tensor(v.back()))));
        }
        double analytic = 0.0;
        if (total.requires_grad()) {
            total.backward();
            for (std::size_t i = 0; i < inputs.size(); ++i) {
                if (!leaves[i].requires_grad() || !leaves[i].has_grad()) continue;
                const Array& g = leaves[i].grad_value();
                for (std::size_t e = 0; e < g.size(); ++e) analytic += g.data()[e] * u[i].data()[e];
            }
        }
        auto shifted = [&](double sign) {
            std::vector<Tensor> probe = fresh_inputs(inputs);
            for (std::size_t i = 0; i < inputs.size(); ++i) {
                if (!inputs[i].requires_grad()) continue;
                Array& x = probe[i].mutable_value();
                for (std::size_t e = 0; e < x.size(); ++e) x.data()[e] += sign * opt.eps * u[i].data()[e];
            }
            double s = 0.0;
            const std::vector<Array> outs = evaluate(f, probe);
            for (std::size_t o = 0; o < outs.size(); ++o) {
                for (std::size_t k = 0; k < outs[o].size(); ++k) s += outs[o].data()[k] * v[o].data()[k];
            }
            return s;
        };
        const double numerical = (shifted(1.0) - shifted(-1.0)) / (2.0 * opt.eps);
        compare(analytic, numerical, 0, 0, {static_cast<std::size_t>(p)}, {});
    }
}

}  // namespace

std::string GradcheckResult::summary() const {
    return fmt::format("gradcheck {:<34} {:<4} {:>7} entries  max abs err {:.2e}  max rel err {:.2e}", name,
                       ok ? "ok" : "FAIL", checked_elements, max_abs_error, max_rel_error);
}

std::string GradcheckResult::report() const {
    std::string s = fmt::format("gradcheck '{}' {}{}\n", name, ok ? "passed" : "FAILED",
                                projection_mode ? " (random projection v^T J u)" : "");
    s += fmt::format("  {:<10} {:<14} {:<14} {:>16} {:>16} {:>11} {:>11} {:>9}\n", "input", "element", "output elem",
                     "analytic", "numerical", "abs err", "rel err", "err/tol");
    const double abs_err = std::fabs(worst_analytic - worst_numerical);
    const std::string in_label = projection_mode ? "all" : fmt::format("#{}", worst_input);
    const std::string in_idx = projection_mode ? fmt::format("proj {}", worst_input_index.empty() ? 0 : worst_input_index[0])
                                               : index_str(worst_input_index);
    s += fmt::format("  {:<10} {:<14} {:<14} {:>16.9e} {:>16.9e} {:>11.3e} {:>11.3e} {:>9.3g}\n", in_label, in_idx,
                     projection_mode ? "-" : fmt::format("#{}{}", worst_output, index_str(worst_output_index)),
                     worst_analytic, worst_numerical, abs_err, abs_err / std::max(std::fabs(worst_numerical), 1e-12),
                     worst_ratio);
    s += fmt::format("  {} entries compared; max abs err {:.3e}, max rel err {:.3e}\n", checked_elements, max_abs_error,
                     max_rel_error);
    return s;
}

// Finite differences with eps ~1e-6 need float64: in float32 the rounding of f (relative 6e-8)
// divided by eps would be as large as the gradients it checks.
void require_float64(const std::vector<Tensor>& inputs, const char* op, const std::string& name) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].defined() && inputs[i].dtype() != Dtype::Float64) {
            fail(op, fmt::format("input {} of '{}' is {}: finite differences need float64 (a float32 rounding error of "
                                 "6e-8 divided by eps = 1e-6 is as large as the gradient); check in float64 "
                                 "(x.to(xg::kFloat64)) and compare float32 against float64 with a twin test", i, name,
                                 dtype_name(inputs[i].dtype())));
        }
    }
}

GradcheckResult gradcheck(const MultiFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
    GradcheckResult r;
    r.name = options.name;
    r.projection_mode = options.random_projection;
    require_float64(inputs, "gradcheck", options.name);
    bool any = false;
    for (const Tensor& t : inputs) any = any || t.requires_grad();
    if (!any) fail("gradcheck", "no input has requires_grad set: nothing to check for '" + options.name + "'");
    if (options.random_projection) {
        projected(f, inputs, options, r);
    } else {
        full_jacobian(f, inputs, options, r);
    }
    // The test suite sets XGRAD_GRADCHECK_LOG so ctest can print one summary table at the end.
    if (const char* log = std::getenv("XGRAD_GRADCHECK_LOG")) {
        std::ofstream(log, std::ios::app) << r.summary() << '\n';
    }
    return r;
}

GradcheckResult gradcheck(const SingleFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
    return gradcheck(MultiFunction([&f](const std::vector<Tensor>& xs) { return std::vector<Tensor>{f(xs)}; }), inputs, options);
}

GradcheckResult gradgradcheck(const MultiFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
    require_float64(inputs, "gradgradcheck", options.name);
    bool any = false;
    for (const Tensor& t : inputs) any = any || t.requires_grad();
    if (!any) fail("gradgradcheck", "no input has requires_grad set: nothing to check for '" + options.name + "'");
    // One fixed random upstream gradient v per output: G(x) = J_f(x)^T v is then a function of x
    // alone, and its Jacobian is the second-order term v^T d2f/dx2.
    std::vector<Tensor> v;
    Generator gen(options.seed + 1);
    for (const Array& out : evaluate(f, fresh_inputs(inputs))) v.push_back(randn(Shape(out.shape().begin(), out.shape().end()), gen).to(Dtype::Float64));
    const MultiFunction first_order = [&f, v](const std::vector<Tensor>& xs) {
        EnableGradGuard recording;  // gradcheck evaluates under NoGradGuard; G needs f's graph
        const std::vector<Tensor> outputs = f(xs);
        std::vector<Tensor> used, seeds, wanted;
        for (std::size_t o = 0; o < outputs.size(); ++o) {
            if (outputs[o].requires_grad()) used.push_back(outputs[o]), seeds.push_back(v[o]);
        }
        for (const Tensor& x : xs) {
            if (x.requires_grad()) wanted.push_back(x);
        }
        std::vector<Tensor> g(wanted.size());
        if (!used.empty()) g = grad(used, wanted, seeds, GradOptions{true, true, true});
        for (std::size_t i = 0; i < g.size(); ++i) {
            if (!g[i].defined()) g[i] = zeros(wanted[i].shape());  // x does not reach any output
        }
        return g;
    };
    GradcheckOptions second = options;
    second.name = options.name + " (second order)";
    return gradcheck(first_order, inputs, second);
}

GradcheckResult gradgradcheck(const SingleFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
    return gradgradcheck(MultiFunction([&f](const std::vector<Tensor>& xs) { return std::vector<Tensor>{f(xs)}; }), inputs,
                         options);
}

}  // namespace xg
