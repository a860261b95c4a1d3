// Tutorial 12: the implicit learning rate of LayerNorm (A1.7). A layer followed by LayerNorm gives
// the same output for W and for a*W, so its gradient scales as 1/a: (gradient norm x ||W||) does
// not change when W is rescaled, and the gradient is orthogonal to W. Under SGD ||W|| therefore
// only grows, and the step on the direction W/||W|| shrinks as it does: a learning rate that
// decays by itself. The same layer without LayerNorm shows none of this.
// Guide: docs/tutorials/12-implicit-learning-rate.md. Run with --step to pause after each step.
#include "tutorials/12_implicit_learning_rate/implicit_learning_rate.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "optim/sgd.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

namespace {

constexpr double kLr = tv::kImplicitLrLr, kNoise = tv::kImplicitLrNoise;
constexpr std::size_t kBatch = tv::kImplicitLrBatch;

// The mean of v over the steps [from, to).
double mean(const std::vector<double>& v, std::size_t from, std::size_t to) { return tv::a1_7_window_mean(v, from, to); }

// ---- A1.7 part 1: rescale W, look at the loss and the gradient ---------------------------------

void rescaling(Tutorial& tut, const tv::ImplicitLrData& d) {
    tut.step("loss and gradient of W on the first 512 samples, for W = a * W0 (W0: the initial W)");
    const std::vector<double> scales{0.25, 1, 4, 16};
    for (const char* which : {"LayerNorm (eps 0)", "no normalisation"}) {
        const bool ln = which[0] == 'L';
        // eps 0: the invariance is exact (see the last note)
        const std::vector<tv::ImplicitLrRescaled> rescaled = tv::a1_7_rescaled(d, ln, 0.0, scales);
        std::vector<std::vector<std::string>> rows{{"a", "loss", "|W|", "|grad W|", "|grad W| * |W|", "cos(grad W, W)"}};
        for (const tv::ImplicitLrRescaled& r : rescaled) {
            rows.push_back({num(r.scale, 2), num(r.loss, 6), num(r.w_norm, 4), num(r.g_norm, 6), num(r.g_norm * r.w_norm, 6),
                            ln ? under(std::fabs(r.cosine), 1e-12) : num(r.cosine, 4)});
        }
        tut.say(std::string(which) + ":");
        tut.show(table(rows, "    "));
    }
    tut.say("with LayerNorm the loss is the same for every a, |grad W| falls as 1/a, so");
    tut.say("|grad W| * |W| stays put; and the gradient has no component along W (cos = 0).");
    tut.say("Without normalisation the loss itself changes with a and so does |grad W| * |W|.");

    tut.step("why cos(grad W, W) = 0 with LayerNorm");
    tut.say("L(a W) = L(W) for every a > 0, so d/da L(a W) at a = 1 is 0, and that derivative is");
    tut.say("<grad W, W>. A step W - lr * grad W is then orthogonal to W (Pythagoras):");
    tut.say("  |W_next|^2 = |W|^2 + lr^2 |grad W|^2    -> |W| can only grow under plain SGD");

    const std::vector<tv::ImplicitLrRescaled> default_eps = tv::a1_7_rescaled(d, true, 1e-5, {1, 4});  // PyTorch's default eps
    const tv::ImplicitLrRescaled &at1 = default_eps[0], &at4 = default_eps[1];
    tut.step("with PyTorch's default eps = 1e-5 the invariance is approximate");
    tut.say(fmt::format("|grad W| * |W| at a = 1: {}, at a = 4: {} (eps/var(W x) of the first is {})",
                        num(at1.g_norm * at1.w_norm, 6), num(at4.g_norm * at4.w_norm, 6),
                        sci(1e-5 / (at1.w_norm * at1.w_norm / static_cast<double>(tv::kImplicitLrHidden)), 1)));
    tut.say("the eps inside the root is not scaled with W; when var(W x) >> eps it hardly matters.");
}

// ---- A1.7 part 2: SGD, with and without LayerNorm ---------------------------------------------

void training(Tutorial& tut, std::size_t steps) {
    tut.step(fmt::format("SGD lr {}, {} steps on minibatches of {} drawn from the 50000 samples", kLr, steps, kBatch));
    tut.say("both networks from the same initial W; measured after every step: |W| and the angle between W");
    tut.say("and W_next (the step on the direction W/|W|); angles and losses are means over each row's steps");
    const tv::ImplicitLrTrajectory ln = tv::a1_7_sgd(true, steps), plain = tv::a1_7_sgd(false, steps);
    std::vector<std::vector<std::string>> rows{
        {"steps", "LN |W|", "LN angle", "lr/|W|^2", "LN loss", "none |W|", "none angle", "none loss"}};
    std::size_t from = 0;
    for (std::size_t to : {std::size_t{10}, std::size_t{100}, std::size_t{300}, std::size_t{1000}, std::size_t{3000}}) {
        if (to > steps) break;
        rows.push_back({fmt::format("{}-{}", from + 1, to), num(ln.w_norm[to], 3), num(mean(ln.angle, from, to), 3) + "°",
                        num(kLr / (ln.w_norm[to] * ln.w_norm[to]), 4), num(mean(ln.loss, from, to), 3),
                        num(plain.w_norm[to], 3), num(mean(plain.angle, from, to), 3) + "°", num(mean(plain.loss, from, to), 3)});
        from = to;
    }
    tut.show(table(rows));
    tut.say(fmt::format("|W| at the start: {} (both). lr/|W|^2 is LayerNorm's effective learning rate on the", num(ln.w_norm[0], 3)));
    tut.say("direction: the angle per step is about lr |grad W| / |W| = lr/|W|^2 * (|grad W| * |W|).");
    tut.say(fmt::format("The label noise alone costs a loss of {}.", num(kNoise * kNoise, 3)));

    tut.step("checks on the LayerNorm run");
    tut.say(fmt::format("largest |cos(grad W, W)| over all steps: {} (eps = 1e-5 keeps it off 0)",
                        under(ln.max_cosine, 1e-4)));
    tut.say(fmt::format("largest relative error of |W_next|^2 = |W|^2 + lr^2 |grad W|^2: {}",
                        under(ln.max_pythagoras_error, 1e-4)));
    tut.say(fmt::format("without LayerNorm: largest |cos(grad W, W)| = {}", num(plain.max_cosine, 3)));

    // Steps 1-100 are the fast first descent, where the angle falls in both networks as the
    // gradient does; the claim is about what follows, so compare rows 101-300 and 1001-3000.
    const auto change = [&](const tv::ImplicitLrTrajectory& t) {
        return fmt::format("|W| {} -> {}, angle per step {}° -> {}°", num(t.w_norm[300], 2), num(t.w_norm[steps], 2),
                           num(mean(t.angle, 100, 300), 2), num(mean(t.angle, 1000, steps), 2));
    };
    tut.step("from steps 101-300 to steps 1001-3000 (after the first descent, which both share)");
    tut.say("LayerNorm: " + change(ln));
    tut.say("none:      " + change(plain));
    // The verdict, from the same two windows (tutorial_values::a1_7_verdict).
    const tv::ImplicitLrVerdict verdict = tv::a1_7_verdict(ln, plain, steps);
    const bool ln_shows = verdict.ln_shows, plain_neither = verdict.plain_neither;
    tut.conclude(ln_shows ? std::string(plain_neither ? "holds" : "partly") +
                                ": with LayerNorm |W| keeps growing and the angular step falls with lr/|W|^2;"
                          : "not shown: with LayerNorm |W| does not grow, or the angular step does not follow lr/|W|^2;");
    tut.say(plain_neither ? "   without it |W| does not grow and the angular step stays where it is"
                          : "   without it |W| grows or the angular step falls as well");

    std::vector<std::vector<double>> csv;
    for (std::size_t s = 0; s < steps; ++s) {
        csv.push_back({static_cast<double>(s + 1), ln.w_norm[s + 1], ln.angle[s], plain.w_norm[s + 1], plain.angle[s]});
    }
    const std::string csv_path = tut.out_path("12_implicit_lr.csv"), png = tut.out_path("12_implicit_lr.png");
    write_csv(csv_path, {"step", "ln_w_norm", "ln_angle_deg", "none_w_norm", "none_angle_deg"}, csv);
    // Left: |W|; right: the angle per step on log-log axes (thin: every step; thick: smoothed).
    const std::string plot = fmt::format(
        "set multiplot layout 1,2 title 'SGD lr {1}: the first layer W, with and without LayerNorm'\n"
        "set datafile separator ','\nset grid\nset key top left\nset xlabel 'step'\n"
        "set ylabel '|W|'\nset yrange [0:*]\n"
        "plot '{0}' using 1:2 with lines lw 3 lc rgb '#2471a3' title 'LayerNorm', "
        "'{0}' using 1:4 with lines lw 2 lc rgb '#c0392b' title 'no normalisation'\n"
        "set logscale xy\nset xrange [1:{2}]\nset yrange [*:*]\nset key bottom left\nset ylabel 'angle between W and W_next (degrees)'\n"
        "plot '{0}' using 1:3 with lines lw 1 lc rgb '#a9cce3' notitle, '{0}' using 1:5 with lines lw 1 lc rgb '#f5b7b1' notitle, "
        "'{0}' using 1:3 smooth bezier with lines lw 3 lc rgb '#2471a3' title 'LayerNorm', "
        "'{0}' using 1:5 smooth bezier with lines lw 3 dt 2 lc rgb '#c0392b' title 'no normalisation'\n"
        "unset multiplot\n",
        csv_path, kLr, steps);
    if (gnuplot(plot, png, 1200, 500, "7")) tut.say("plot: " + png);  // make_net's manual_seed(7)
    tut.say("csv: " + csv_path);
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"12 The implicit learning rate of LayerNorm", "A1.7", "docs/tutorials/12-implicit-learning-rate.md",
                  "about 1 s", "", "12_implicit_lr.csv/.png (|W| and the angle per step, every step)"});
    const tv::ImplicitLrData d = tv::a1_7_data();
    tut.section("A1.7", "a layer followed by LayerNorm: rescaling W, then SGD");
    tut.step("task: x (50000, 16) ~ N(0, 1), y = tanh(x A^T) + 0.3 noise, A (4, 16); loss MSE");
    tut.say("networks: Linear(16, 32, no bias) -> [LayerNorm(32)] -> Tanh -> Linear(32, 4);");
    tut.say("W is the first Linear's weight (32, 16); |.| is the Frobenius norm");
    rescaling(tut, d);
    training(tut, 3000);
    return 0;
}

namespace tutorial_values {

using namespace xg;

namespace {

// ---- the set-up: a regression task and two small networks -------------------------------------

// 50000 samples, of which SGD draws 16 at random per step: 3000 steps see most samples about once,
// so neither network can memorise the label noise (with 512 samples the plain one did, and its
// |W| grew as it fitted the noise). Part 1 uses the first 512.
// (kImplicitLrSamples, kImplicitLrBatch, kImplicitLrFixedBatch in the header.)
constexpr std::size_t kIn = 16, kHidden = kImplicitLrHidden, kOut = 4, kSamples = kImplicitLrSamples;
constexpr std::size_t kBatch = kImplicitLrBatch, kFixedBatch = kImplicitLrFixedBatch;
constexpr double kLr = kImplicitLrLr;        // plain SGD, the same for both networks
constexpr double kNoise = kImplicitLrNoise;  // label noise: the minibatch gradient never vanishes

// x ~ N(0, 1); y = tanh(x A^T) + 0.3 N(0, 1) for a fixed teacher A (4, 16).
using Data = ImplicitLrData;

Data make_data() {
    Generator gen(12);
    Data d{randn({kSamples, kIn}, gen).value(), Array()};
    const Array teacher = randn({kOut, kIn}, gen).value() / 4.0;
    d.y = Array(Shape{kSamples, kOut});
    for (std::size_t n = 0; n < kSamples; ++n) {
        for (std::size_t o = 0; o < kOut; ++o) {
            double a = 0;
            for (std::size_t i = 0; i < kIn; ++i) a += teacher(o, i) * d.x(n, i);
            d.y(n, o) = std::tanh(a) + kNoise * gen.normal();
        }
    }
    return d;
}

// Linear(16, 32, no bias) -> [LayerNorm(32)] -> Tanh -> Linear(32, 4). The first Linear's weight
// W is the one studied; it has no bias, so W is all of that layer (LN(Wx + b) is invariant to
// scaling W and b together). Built from the same seed, both networks start from the same W.
struct Net {
    std::shared_ptr<nn::Linear> first;
    std::shared_ptr<nn::Sequential> model;
};

Net make_net(bool layer_norm, double eps = 1e-5) {
    manual_seed(7);
    Net net{std::make_shared<nn::Linear>(kIn, kHidden, false), std::make_shared<nn::Sequential>()};
    auto second = std::make_shared<nn::Linear>(kHidden, kOut);
    net.model->push_back(net.first);
    if (layer_norm) net.model->push_back(std::make_shared<nn::LayerNorm>(kHidden, eps));
    net.model->push_back(std::make_shared<nn::Tanh>());
    net.model->push_back(second);
    return net;
}

double norm(const Array& a) {
    double s = 0;
    for (double v : a) s += v * v;
    return std::sqrt(s);
}

double dot(const Array& a, const Array& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a.data()[i] * b.data()[i];
    return s;
}

// The angle between W and W' in degrees, from the chord between the unit vectors (accurate for
// tiny angles, where acos of a cosine near 1 is not).
double angle_degrees(const Array& w, const Array& w_next) {
    const double nw = norm(w), nn_ = norm(w_next);
    double chord = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double d = w.data()[i] / nw - w_next.data()[i] / nn_;
        chord += d * d;
    }
    return 2.0 * std::asin(std::sqrt(chord) / 2.0) * 180.0 / M_PI;
}

// ---- A1.7 part 1: rescale W, look at the loss and the gradient ---------------------------------

using Rescaled = ImplicitLrRescaled;

Rescaled loss_and_gradient_at(Net& net, const Array& w0, double scale, const Data& d) {
    net.first->weight = Tensor(Array(scale * w0));
    net.model->zero_grad();
    Tensor loss = nn::mse_loss(net.model->forward(narrow(Tensor(d.x), 0, 0, kFixedBatch)), narrow(Tensor(d.y), 0, 0, kFixedBatch));
    loss.backward();
    const Array& w = net.first->weight.value();
    const Array& g = net.first->weight.grad_value();
    return {scale, loss.item(), norm(w), norm(g), dot(g, w) / (norm(g) * norm(w))};
}

}  // namespace

ImplicitLrData a1_7_data() { return make_data(); }

std::vector<ImplicitLrRescaled> a1_7_rescaled(const ImplicitLrData& d, bool layer_norm, double eps,
                                              const std::vector<double>& scales) {
    Net net = make_net(layer_norm, eps);
    const Array w0 = net.first->weight.value();
    std::vector<ImplicitLrRescaled> rows;
    for (double a : scales) rows.push_back(loss_and_gradient_at(net, w0, a, d));
    return rows;
}

// ---- A1.7 part 2: SGD, with and without LayerNorm ---------------------------------------------

using Trajectory = ImplicitLrTrajectory;

ImplicitLrTrajectory a1_7_sgd(bool layer_norm, std::size_t steps) {
    const Data d = make_data();
    Net net = make_net(layer_norm);
    optim::SGD opt(net.model->parameters(), optim::SGDOptions(kLr));
    Generator order(3);  // minibatches of 16 drawn at random; the same draws for both networks
    Trajectory t;
    t.w_norm.push_back(norm(net.first->weight.value()));
    for (std::size_t s = 0; s < steps; ++s) {
        Array xb(Shape{kBatch, kIn}), yb(Shape{kBatch, kOut});
        for (std::size_t r = 0; r < kBatch; ++r) {
            const std::size_t n = order.randint(kSamples);
            for (std::size_t i = 0; i < kIn; ++i) xb(r, i) = d.x(n, i);
            for (std::size_t o = 0; o < kOut; ++o) yb(r, o) = d.y(n, o);
        }
        opt.zero_grad();
        Tensor loss = nn::mse_loss(net.model->forward(Tensor(xb)), Tensor(yb));
        loss.backward();
        const Array w = net.first->weight.value();
        const Array& g = net.first->weight.grad_value();
        const double gn = norm(g), wn = norm(w);
        t.max_cosine = std::max(t.max_cosine, std::fabs(dot(g, w)) / (gn * wn));
        opt.step();
        const Array& w_next = net.first->weight.value();
        const double predicted = wn * wn + kLr * kLr * gn * gn, measured = norm(w_next) * norm(w_next);
        t.max_pythagoras_error = std::max(t.max_pythagoras_error, std::fabs(measured - predicted) / measured);
        t.w_norm.push_back(norm(w_next));
        t.grad_norm.push_back(gn);
        t.angle.push_back(angle_degrees(w, w_next));
        t.loss.push_back(loss.item());
    }
    return t;
}

double a1_7_window_mean(const std::vector<double>& v, std::size_t from, std::size_t to) {
    double s = 0;
    for (std::size_t i = from; i < to; ++i) s += v[i];
    return s / static_cast<double>(to - from);
}

ImplicitLrVerdict a1_7_verdict(const ImplicitLrTrajectory& ln, const ImplicitLrTrajectory& plain, std::size_t steps) {
    if (steps <= 1000 || ln.w_norm.size() <= steps || plain.w_norm.size() <= steps) {
        throw std::invalid_argument("a1_7_verdict: needs trajectories of more than 1000 steps");
    }
    ImplicitLrVerdict v;
    v.ln_w_ratio = ln.w_norm[steps] / ln.w_norm[300];
    v.ln_angle_ratio = a1_7_window_mean(ln.angle, 1000, steps) / a1_7_window_mean(ln.angle, 100, 300);
    v.plain_w_ratio = plain.w_norm[steps] / plain.w_norm[300];
    v.plain_angle_ratio = a1_7_window_mean(plain.angle, 1000, steps) / a1_7_window_mean(plain.angle, 100, 300);
    v.ln_lr_ratio = 1 / (v.ln_w_ratio * v.ln_w_ratio);  // lr/|W|^2 at the end over its value at step 300
    v.ln_shows = v.ln_w_ratio >= 1.1 && v.ln_angle_ratio <= 0.8 && std::fabs(v.ln_angle_ratio / v.ln_lr_ratio - 1) < 0.25 &&
                 ln.max_cosine < 1e-4;
    v.plain_neither = v.plain_w_ratio < 1.1 && v.plain_angle_ratio > 0.8;
    return v;
}

}  // namespace tutorial_values
