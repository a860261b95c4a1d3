// The libtorch side of every workload, written the way a libtorch user would (torch::nn modules,
// torch::optim::Adam), in double precision (float32 for the float32 rows), on the same input values
// as the xgrad side.
#include <torch/torch.h>

#include <cstring>

#include "tests/bench/bench.hpp"

namespace xg::bench {

namespace {

// The dtype of the workload being built (Workload::float32).
torch::Dtype g_dtype = torch::kFloat64;

torch::Tensor random_tensor(at::IntArrayRef shape, unsigned seed, bool requires_grad = false) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    const std::vector<double> values = bench_data(static_cast<std::size_t>(n), seed);
    torch::Tensor t = torch::empty(shape, torch::kFloat64);
    std::memcpy(t.data_ptr<double>(), values.data(), values.size() * sizeof(double));
    return t.to(g_dtype).requires_grad_(requires_grad);
}

void clear_grads(std::vector<torch::Tensor>& leaves) {
    for (torch::Tensor& t : leaves) t.mutable_grad().reset();
}

template <class Forward>
Run forward_backward(std::vector<torch::Tensor> leaves, torch::Tensor dy, Forward forward) {
    return [leaves, dy, forward]() mutable {
        clear_grads(leaves);
        forward(leaves).backward(dy);
    };
}

// Works in (T, B, E) layout, libtorch's MultiheadAttention convention; LayerNorm and Linear do
// not care, so the work equals xgrad's (B, T, E) block.
struct PreLNTransformerBlockImpl : torch::nn::Module {
    PreLNTransformerBlockImpl(std::int64_t d, std::int64_t heads)
        : ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
          attn(register_module("attn", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(d, heads)))),
          ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
          fc1(register_module("fc1", torch::nn::Linear(d, 4 * d))),
          fc2(register_module("fc2", torch::nn::Linear(4 * d, d))) {}
    torch::Tensor forward(const torch::Tensor& x) {
        const torch::Tensor a = ln1(x);
        const torch::Tensor h = x + std::get<0>(attn->forward(a, a, a, torch::Tensor(), /*need_weights=*/false));
        return h + fc2(torch::gelu(fc1(ln2(h))));
    }
    torch::nn::LayerNorm ln1;
    torch::nn::MultiheadAttention attn;
    torch::nn::LayerNorm ln2;
    torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(PreLNTransformerBlock);

Run mlp_training_step(bool batch_norm, std::int64_t batch) {
    auto norm = [batch_norm]() -> torch::nn::AnyModule {
        if (batch_norm) return torch::nn::AnyModule(torch::nn::BatchNorm1d(256));
        return torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({256})));
    };
    torch::nn::Sequential model;
    model->push_back(torch::nn::Linear(784, 256));
    model->push_back(norm());
    model->push_back(torch::nn::GELU());
    model->push_back(torch::nn::Linear(256, 256));
    model->push_back(norm());
    model->push_back(torch::nn::GELU());
    model->push_back(torch::nn::Linear(256, 10));
    model->to(g_dtype);
    auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-3));
    const torch::Tensor x = random_tensor({batch, 784}, 11);
    torch::Tensor targets = torch::empty({batch}, torch::kInt64);
    for (std::int64_t i = 0; i < batch; ++i) targets[i] = (i * 7) % 10;
    return [model, optimizer, x, targets]() mutable {
        optimizer->zero_grad();
        const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), targets);
        loss.backward();
        optimizer->step();
    };
}

}  // namespace

std::string torch_description() {
    return "libtorch " TORCH_VERSION;
}

Run make_torch_run(const Workload& w) {
    torch::set_num_threads(bench_threads());
    torch::manual_seed(5);
    g_dtype = w.float32 ? torch::kFloat32 : torch::kFloat64;
    std::vector<std::int64_t> d(w.dims.begin(), w.dims.end());
    switch (w.kind) {
    case Kind::layer_norm: {
        const std::int64_t width = d[1];
        return forward_backward({random_tensor({d[0], width}, 1, true), random_tensor({width}, 2, true),
                                 random_tensor({width}, 3, true)},
                                random_tensor({d[0], width}, 4), [width](const std::vector<torch::Tensor>& t) {
                                    return torch::layer_norm(t[0], {width}, t[1], t[2], 1e-5);
                                });
    }
    case Kind::rms_norm: {
        const std::int64_t width = d[1];
        return forward_backward({random_tensor({d[0], width}, 1, true), random_tensor({width}, 2, true)},
                                random_tensor({d[0], width}, 4), [](const std::vector<torch::Tensor>& t) {
                                    return t[0] * torch::rsqrt(t[0].pow(2).mean(-1, true) + 1e-6) * t[1];
                                });
    }
    case Kind::layer_norm_by_hand: {
        const std::int64_t width = d[1];
        return forward_backward({random_tensor({d[0], width}, 1, true), random_tensor({width}, 2, true),
                                 random_tensor({width}, 3, true)},
                                random_tensor({d[0], width}, 4), [](const std::vector<torch::Tensor>& t) {
                                    const torch::Tensor mu = t[0].mean(-1, true), v = t[0].var(-1, false, true);
                                    return (t[0] - mu) / torch::sqrt(v + 1e-5) * t[1] + t[2];
                                });
    }
    case Kind::batch_norm: {
        const std::int64_t channels = d[1];
        const torch::Tensor running_mean = torch::zeros({channels}, g_dtype);
        const torch::Tensor running_var = torch::ones({channels}, g_dtype);
        return forward_backward({random_tensor({d[0], channels}, 1, true), random_tensor({channels}, 2, true),
                                 random_tensor({channels}, 3, true)},
                                random_tensor({d[0], channels}, 4), [running_mean, running_var](const std::vector<torch::Tensor>& t) {
                                    return torch::batch_norm(t[0], t[1], t[2], running_mean, running_var, true, 0.1, 1e-5, false);
                                });
    }
    case Kind::gelu:
        return forward_backward({random_tensor({d[0], d[1]}, 1, true)}, random_tensor({d[0], d[1]}, 4),
                                [](const std::vector<torch::Tensor>& t) { return torch::gelu(t[0]); });
    case Kind::linear:
        return forward_backward({random_tensor({d[0], d[1]}, 1, true), random_tensor({d[2], d[1]}, 2, true),
                                 random_tensor({d[2]}, 3, true)},
                                random_tensor({d[0], d[2]}, 4),
                                [](const std::vector<torch::Tensor>& t) { return torch::linear(t[0], t[1], t[2]); });
    case Kind::mlp_layer_norm: return mlp_training_step(false, d[0]);
    case Kind::mlp_batch_norm: return mlp_training_step(true, d[0]);
    case Kind::transformer_block: {
        const std::int64_t batch = d[0], seq = d[1], model_dim = d[2], heads = d[3];
        PreLNTransformerBlock block(model_dim, heads);
        block->to(g_dtype);
        std::vector<torch::Tensor> leaves = block->parameters();
        const torch::Tensor x = random_tensor({seq, batch, model_dim}, 1, true);
        leaves.push_back(x);
        const torch::Tensor dy = random_tensor({seq, batch, model_dim}, 4);
        return [block, leaves, x, dy]() mutable {
            clear_grads(leaves);
            block->forward(x).backward(dy);
        };
    }
    case Kind::conv2d: {
        const std::int64_t n = d[0], c = d[1], o = d[2], h = d[3], wd = d[4], k = d[5], padding = d[6];
        return forward_backward({random_tensor({n, c, h, wd}, 1, true), random_tensor({o, c, k, k}, 2, true),
                                 random_tensor({o}, 3, true)},
                                random_tensor({n, o, h + 2 * padding - k + 1, wd + 2 * padding - k + 1}, 4),
                                [padding](const std::vector<torch::Tensor>& t) {
                                    return torch::conv2d(t[0], t[1], t[2], 1, padding);
                                });
    }
    case Kind::lstm: {
        const std::int64_t seq = d[0], batch = d[1], in = d[2], hidden = d[3];
        torch::nn::LSTM lstm(torch::nn::LSTMOptions(in, hidden));
        lstm->to(g_dtype);
        std::vector<torch::Tensor> leaves = lstm->parameters();
        const torch::Tensor x = random_tensor({seq, batch, in}, 1, true);
        leaves.push_back(x);
        const torch::Tensor dy = random_tensor({seq, batch, hidden}, 4);
        return [lstm, leaves, x, dy]() mutable {
            clear_grads(leaves);
            std::get<0>(lstm->forward(x)).backward(dy);
        };
    }
    case Kind::group_norm: {
        const std::int64_t n = d[0], c = d[1], h = d[2], wd = d[3], groups = d[4];
        return forward_backward({random_tensor({n, c, h, wd}, 1, true), random_tensor({c}, 2, true), random_tensor({c}, 3, true)},
                                random_tensor({n, c, h, wd}, 4), [groups](const std::vector<torch::Tensor>& t) {
                                    return torch::group_norm(t[0], groups, t[1], t[2], 1e-5);
                                });
    }
    }
    return {};
}

}  // namespace xg::bench
