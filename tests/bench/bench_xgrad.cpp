// The xgrad side of every workload: each Run does what a user's code would do.
#include <algorithm>
#include <memory>

#include "nn/modules/conv.hpp"
#include "nn/nn.hpp"
#include "nn/modules/recurrent.hpp"
#include "optim/optim.hpp"
#include "tests/bench/bench.hpp"

namespace xg::bench {

namespace {

// The dtype of the workload being built (Workload::float32).
Dtype g_dtype = kFloat64;

Tensor tensor_from(const std::vector<double>& values, const Shape& shape, bool requires_grad) {
    Array a = Array::from_shape(shape);
    std::copy(values.begin(), values.end(), a.begin());
    if (g_dtype == kFloat32) return Tensor::from_float32(to_float32_array(a), requires_grad);
    return Tensor(std::move(a), requires_grad);
}

Tensor random_tensor(const Shape& shape, unsigned seed, bool requires_grad = false) {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return tensor_from(bench_data(n, seed), shape, requires_grad);
}

void clear_grads(std::vector<Tensor>& leaves) {
    for (Tensor& t : leaves) t.zero_grad();
}

// y = op(leaves...) then y.backward(dy); gradients are cleared (set to none) before each call.
template <class Forward>
Run forward_backward(std::vector<Tensor> leaves, Tensor dy, Forward forward) {
    return [leaves, dy, forward]() mutable {
        clear_grads(leaves);
        forward(leaves).backward(dy);
    };
}

class PreLNTransformerBlock : public nn::Module {
public:
    PreLNTransformerBlock(std::size_t d, std::size_t heads)
        : ln1(register_module("ln1", std::make_shared<nn::LayerNorm>(d))),
          attn(register_module("attn", std::make_shared<nn::MultiheadAttention>(d, heads))),
          ln2(register_module("ln2", std::make_shared<nn::LayerNorm>(d))),
          fc1(register_module("fc1", std::make_shared<nn::Linear>(d, 4 * d))),
          fc2(register_module("fc2", std::make_shared<nn::Linear>(4 * d, d))) {}
    Tensor forward(const Tensor& x) override {
        const Tensor h = x + attn->forward(ln1->forward(x));
        return h + fc2->forward(nn::functional::gelu(fc1->forward(ln2->forward(h))));
    }

    std::shared_ptr<nn::LayerNorm> ln1;
    std::shared_ptr<nn::MultiheadAttention> attn;
    std::shared_ptr<nn::LayerNorm> ln2;
    std::shared_ptr<nn::Linear> fc1, fc2;
};

Run mlp_training_step(bool batch_norm, std::size_t batch) {
    auto norm = [batch_norm]() -> std::shared_ptr<nn::Module> {
        if (batch_norm) return std::make_shared<nn::BatchNorm1d>(256);
        return std::make_shared<nn::LayerNorm>(256);
    };
    auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(784, 256), norm(), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(256, 256), norm(), std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(256, 10)});
    model->to(g_dtype);
    auto optimizer = std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions(1e-3));
    const Tensor x = random_tensor({batch, 784}, 11);
    IndexArray targets = IndexArray::from_shape({batch});
    for (std::size_t i = 0; i < batch; ++i) targets(i) = static_cast<std::int64_t>((i * 7) % 10);
    return [model, optimizer, x, targets]() {
        optimizer->zero_grad();
        const Tensor loss = nn::cross_entropy(model->forward(x), targets);
        loss.backward();
        optimizer->step();
    };
}

}  // namespace

Run make_xgrad_run(const Workload& w) {
    namespace F = nn::functional;
    g_dtype = w.float32 ? kFloat32 : kFloat64;
    const auto& d = w.dims;
    switch (w.kind) {
    case Kind::layer_norm: {
        const std::size_t rows = d[0], width = d[1];
        return forward_backward({random_tensor({rows, width}, 1, true), random_tensor({width}, 2, true),
                                 random_tensor({width}, 3, true)},
                                random_tensor({rows, width}, 4), [width](const std::vector<Tensor>& t) {
                                    return F::layer_norm(t[0], {width}, t[1], t[2]);
                                });
    }
    case Kind::rms_norm: {
        const std::size_t rows = d[0], width = d[1];
        return forward_backward({random_tensor({rows, width}, 1, true), random_tensor({width}, 2, true)},
                                random_tensor({rows, width}, 4), [width](const std::vector<Tensor>& t) {
                                    return F::rms_norm(t[0], {width}, t[1], 1e-6);
                                });
    }
    case Kind::layer_norm_by_hand: {
        const std::size_t rows = d[0], width = d[1];
        return forward_backward({random_tensor({rows, width}, 1, true), random_tensor({width}, 2, true),
                                 random_tensor({width}, 3, true)},
                                random_tensor({rows, width}, 4), [](const std::vector<Tensor>& t) {
                                    const Tensor mu = mean(t[0], {-1}, true), v = var(t[0], {-1}, false, true);
                                    return (t[0] - mu) / sqrt(v + 1e-5) * t[1] + t[2];
                                });
    }
    case Kind::batch_norm: {
        const std::size_t rows = d[0], channels = d[1];
        const Tensor running_mean = zeros({channels}, g_dtype), running_var = ones({channels}, g_dtype);
        return forward_backward({random_tensor({rows, channels}, 1, true), random_tensor({channels}, 2, true),
                                 random_tensor({channels}, 3, true)},
                                random_tensor({rows, channels}, 4), [running_mean, running_var](const std::vector<Tensor>& t) {
                                    return F::batch_norm(t[0], running_mean, running_var, t[1], t[2], true);
                                });
    }
    case Kind::gelu:
        return forward_backward({random_tensor({d[0], d[1]}, 1, true)}, random_tensor({d[0], d[1]}, 4),
                                [](const std::vector<Tensor>& t) { return F::gelu(t[0]); });
    case Kind::linear: {
        const std::size_t batch = d[0], in = d[1], out = d[2];
        return forward_backward({random_tensor({batch, in}, 1, true), random_tensor({out, in}, 2, true),
                                 random_tensor({out}, 3, true)},
                                random_tensor({batch, out}, 4),
                                [](const std::vector<Tensor>& t) { return F::linear(t[0], t[1], t[2]); });
    }
    case Kind::mlp_layer_norm: return mlp_training_step(false, d[0]);
    case Kind::mlp_batch_norm: return mlp_training_step(true, d[0]);
    case Kind::transformer_block: {
        const std::size_t batch = d[0], seq = d[1], model_dim = d[2], heads = d[3];
        manual_seed(5);
        auto block = std::make_shared<PreLNTransformerBlock>(model_dim, heads);
        block->to(g_dtype);
        std::vector<Tensor> leaves = block->parameters();
        const Tensor x = random_tensor({batch, seq, model_dim}, 1, true);
        leaves.push_back(x);
        const Tensor dy = random_tensor({batch, seq, model_dim}, 4);
        return [block, leaves, x, dy]() mutable {
            clear_grads(leaves);
            block->forward(x).backward(dy);
        };
    }
    case Kind::conv2d: {
        const std::size_t n = d[0], c = d[1], o = d[2], h = d[3], wd = d[4], k = d[5];
        const auto padding = static_cast<std::int64_t>(d[6]);
        return forward_backward({random_tensor({n, c, h, wd}, 1, true), random_tensor({o, c, k, k}, 2, true),
                                 random_tensor({o}, 3, true)},
                                random_tensor({n, o, h + 2 * d[6] - k + 1, wd + 2 * d[6] - k + 1}, 4),
                                [padding](const std::vector<Tensor>& t) { return F::conv2d(t[0], t[1], t[2], 1, padding); });
    }
    case Kind::lstm: {
        const std::size_t seq = d[0], batch = d[1], in = d[2], hidden = d[3];
        manual_seed(5);
        auto lstm = std::make_shared<nn::LSTM>(in, hidden);
        lstm->to(g_dtype);
        std::vector<Tensor> leaves = lstm->parameters();
        const Tensor x = random_tensor({seq, batch, in}, 1, true);
        leaves.push_back(x);
        const Tensor dy = random_tensor({seq, batch, hidden}, 4);
        return [lstm, leaves, x, dy]() mutable {
            clear_grads(leaves);
            lstm->forward(x).output.backward(dy);
        };
    }
    case Kind::group_norm: {
        const std::size_t n = d[0], c = d[1], h = d[2], wd = d[3];
        const auto groups = static_cast<std::int64_t>(d[4]);
        return forward_backward({random_tensor({n, c, h, wd}, 1, true), random_tensor({c}, 2, true), random_tensor({c}, 3, true)},
                                random_tensor({n, c, h, wd}, 4), [groups](const std::vector<Tensor>& t) {
                                    return F::group_norm(t[0], groups, t[1], t[2]);
                                });
    }
    }
    return {};
}

}  // namespace xg::bench
