#include "tutorials/common/graph_dump.hpp"

#include <cmath>
#include <set>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "core/tools/graphviz.hpp"
#include "core/tools/gradcheck.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "tutorials/common/tutorial.hpp"

namespace tutorial_values {

using namespace xg;

namespace {

std::size_t numel(const Shape& s) {
    std::size_t n = 1;
    for (std::size_t d : s) n *= d;
    return n;
}

Shape shape_of(const Array& a) { return Shape(a.shape().begin(), a.shape().end()); }

// Nodes reachable from t, parents before children (iterative post-order: graphs may be deep).
std::vector<const Node*> topological(const Tensor& t) {
    std::vector<const Node*> order;
    std::set<const Node*> seen{t.node().get()};
    std::vector<std::pair<const Node*, std::size_t>> stack{{t.node().get(), 0}};
    while (!stack.empty()) {
        auto& [n, next] = stack.back();
        if (next < n->parents.size()) {
            const Node* p = n->parents[next++].get();
            if (seen.insert(p).second) stack.push_back({p, 0});
        } else {
            order.push_back(n);
            stack.pop_back();
        }
    }
    return order;
}

}  // namespace

std::size_t count_op_nodes(const Tensor& t) {
    std::size_t n = 0;
    for (const Node* node : topological(t)) n += !node->is_leaf();
    return n;
}

std::string graph_text(const Tensor& t, const std::map<const Node*, std::string>& names) {
    std::unordered_map<const Node*, std::string> id;
    std::string out;
    std::size_t next = 0;
    for (const Node* n : topological(t)) {
        auto named = names.find(n);
        const std::string me = named != names.end() ? named->second : fmt::format("%{}", next++);
        id[n] = me;
        if (n->is_leaf()) {
            out += fmt::format("  {:<6} leaf {}{}\n", me, tutorial::shape(shape_of(n->value)),
                               n->requires_grad ? " requires_grad" : " constant");
            continue;
        }
        std::string args;
        for (const NodePtr& p : n->parents) args += (args.empty() ? "" : ", ") + id[p.get()];
        std::string line = fmt::format("  {:<6} = {}({}) -> {}", me, n->op, args, tutorial::shape(shape_of(n->value)));
        for (const SavedInfo& s : n->saved) line += fmt::format("  saved {} {}", s.name, tutorial::shape(s.shape));
        out += line + "\n";
    }
    return out;
}

std::size_t graph_kept_numbers(const Tensor& t) {
    std::size_t total = 0;
    for (const Node* n : topological(t)) {
        if (n->is_leaf()) continue;
        if (n != t.node().get()) total += n->value.size();
        for (const SavedInfo& s : n->saved) total += numel(s.shape);
    }
    return total;
}

GraphComparison graph_comparison() {
    GraphComparison g;
    Generator gen(5);
    const Array x0 = randn({2, 3, 4}, gen).value();
    const Array up = randn({2, 3, 4}, gen).value();
    Tensor x(x0, true), gamma(ones({4}).value(), true), beta(zeros({4}).value(), true);
    std::map<const Node*, std::string> names{{x.node().get(), "x"}, {gamma.node().get(), "gamma"}, {beta.node().get(), "beta"}};

    Tensor composed = nn::functional::layer_norm_composed(x, {4}, gamma, beta);
    Tensor fused = nn::functional::layer_norm(x, {4}, gamma, beta);
    for (const Node* n : topological(composed)) {  // the one scalar constant of the composed graph is eps
        if (n->is_leaf() && !n->requires_grad && n->value.size() == 1) names[n] = "eps";
    }
    g.composed_text = graph_text(composed, names);
    g.fused_text = graph_text(fused, names);
    g.composed_nodes = count_op_nodes(composed);
    g.fused_nodes = count_op_nodes(fused);
    g.composed_kept = graph_kept_numbers(composed);
    g.fused_kept = graph_kept_numbers(fused);
    g.composed_dot = to_dot(composed, "composed LayerNorm", names);
    g.fused_dot = to_dot(fused, "fused LayerNorm", names);
    g.max_out_diff = tutorial::max_abs_diff(composed.value(), fused.value());

    sum(composed * Tensor(up)).backward();
    const Array grad_composed = x.grad_value();
    x.zero_grad();
    sum(fused * Tensor(up)).backward();
    g.max_grad_diff = tutorial::max_abs_diff(grad_composed, x.grad_value());
    return g;
}

namespace {

// LayerNorm over the last axis with a WRONG backward for x: it treats mean and 1/sigma as
// constants. gamma's and beta's gradients are right.
Tensor layer_norm_forgetting_statistics(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
    const std::size_t n = x.shape().back(), rows = x.numel() / n;
    Array y = Array::from_shape(x.value().shape()), x_hat = Array::from_shape(x.value().shape());
    Array rstd = Array::from_shape({rows});
    const double* px = x.data();
    for (std::size_t r = 0; r < rows; ++r) {
        double m = 0, v = 0;
        for (std::size_t j = 0; j < n; ++j) m += px[r * n + j];
        m /= static_cast<double>(n);
        for (std::size_t j = 0; j < n; ++j) v += (px[r * n + j] - m) * (px[r * n + j] - m);
        rstd(r) = 1.0 / std::sqrt(v / static_cast<double>(n) + 1e-5);
        for (std::size_t j = 0; j < n; ++j) {
            x_hat.data()[r * n + j] = (px[r * n + j] - m) * rstd(r);
            y.data()[r * n + j] = gamma.value()(j) * x_hat.data()[r * n + j] + beta.value()(j);
        }
    }
    // BROKEN on purpose: dx = rstd * gamma * dy (the true one subtracts the mean terms)
    return record("layer_norm_broken", std::move(y), {x, gamma, beta},
                  [n, rows, rstd, x_hat](const GradContext& c) -> Grads {
                      Array dx = Array::from_shape(c.grad.shape());
                      Array dgamma = xt::zeros<double>({n}), dbeta = xt::zeros<double>({n});
                      const double *g = c.grad.data(), *w = c.input(1).data();
                      for (std::size_t r = 0; r < rows; ++r) {
                          for (std::size_t j = 0; j < n; ++j) {
                              dx.data()[r * n + j] = rstd(r) * w[j] * g[r * n + j];
                              dgamma(j) += g[r * n + j] * x_hat.data()[r * n + j];
                              dbeta(j) += g[r * n + j];
                          }
                      }
                      return {dx, dgamma, dbeta};
                  },
                  {{"rstd", {rows}}, {"x_hat", shape_of(x_hat)}});
}

}  // namespace

BrokenBackward broken_backward_check() {
    BrokenBackward b;
    Generator gen(7);
    const std::vector<Tensor> inputs{randn({2, 4}, gen, true), Tensor(randn({4}, gen).value(), true),
                                     Tensor(randn({4}, gen).value(), true)};
    GradcheckOptions opt;
    opt.name = "layer_norm_broken";
    b.broken = gradcheck(
        [](const std::vector<Tensor>& in) { return layer_norm_forgetting_statistics(in[0], in[1], in[2]); }, inputs, opt);
    opt.name = "layer_norm (fused)";
    b.fused = gradcheck(
        [](const std::vector<Tensor>& in) { return nn::functional::layer_norm(in[0], {4}, in[1], in[2]); }, inputs, opt);
    return b;
}

}  // namespace tutorial_values
