#include "nn/fast/rnn.hpp"

#include "nn/fast/gate_math.hpp"

namespace xg::nn::fast {

namespace {

using detail::sigmoid;
using detail::tanh;

}  // namespace

void lstm_next_c_forward(const double* gates, const double* c, std::size_t B, std::size_t H, double* c_next, double* i, double* f,
                         double* g) {
    for (std::size_t b = 0; b < B; ++b) {
        const double *a = gates + b * 4 * H, *c_prev = c + b * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            i[k] = sigmoid(a[j]), f[k] = sigmoid(a[H + j]), g[k] = tanh(a[2 * H + j]);
            c_next[k] = f[k] * c_prev[j] + i[k] * g[k];
        }
    }
}

void lstm_next_c_backward(const double* dc_all, const double* c, const double* i, const double* f, const double* g, std::size_t B,
                          std::size_t H, double* da, double* dc) {
    for (std::size_t b = 0; b < B; ++b) {
        const double *c_prev = c + b * H, *dc_next = dc_all + b * H;
        double* da_b = da + b * 4 * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            da_b[j] = dc_next[j] * g[k] * i[k] * (1.0 - i[k]);
            da_b[H + j] = dc_next[j] * c_prev[j] * f[k] * (1.0 - f[k]);
            da_b[2 * H + j] = dc_next[j] * i[k] * (1.0 - g[k] * g[k]);
            dc[k] = dc_next[j] * f[k];
        }
    }
}

void lstm_next_h_forward(const double* gates, const double* c_next, std::size_t B, std::size_t H, double* h, double* o, double* tanh_c) {
    for (std::size_t b = 0; b < B; ++b) {
        const double *a = gates + b * 4 * H, *c = c_next + b * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            o[k] = sigmoid(a[3 * H + j]), tanh_c[k] = tanh(c[j]);
            h[k] = o[k] * tanh_c[k];
        }
    }
}

void lstm_next_h_backward(const double* dh_all, const double* o, const double* tanh_c, std::size_t B, std::size_t H, double* da,
                          double* dc) {
    for (std::size_t b = 0; b < B; ++b) {
        const double* dh = dh_all + b * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            da[b * 4 * H + 3 * H + j] = dh[j] * tanh_c[k] * o[k] * (1.0 - o[k]);
            dc[k] = dh[j] * o[k] * (1.0 - tanh_c[k] * tanh_c[k]);
        }
    }
}

void gru_next_h_forward(const double* gi, const double* gh, const double* h, std::size_t B, std::size_t H, double* h_next, double* r,
                        double* z, double* n) {
    for (std::size_t b = 0; b < B; ++b) {
        const double *x = gi + b * 3 * H, *s = gh + b * 3 * H, *h_prev = h + b * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            r[k] = sigmoid(x[j] + s[j]), z[k] = sigmoid(x[H + j] + s[H + j]);
            n[k] = tanh(x[2 * H + j] + r[k] * s[2 * H + j]);
            h_next[k] = (1.0 - z[k]) * n[k] + z[k] * h_prev[j];
        }
    }
}

void gru_next_h_backward(const double* dh_all, const double* gh, const double* h, const double* r, const double* z, const double* n,
                         std::size_t B, std::size_t H, double* dgi, double* dgh, double* dh) {
    for (std::size_t b = 0; b < B; ++b) {
        const double *s = gh + b * 3 * H, *h_prev = h + b * H;
        const double* dh_next = dh_all + b * H;
        double *dx = dgi + b * 3 * H, *ds = dgh + b * 3 * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            const double da_n = dh_next[j] * (1.0 - z[k]) * (1.0 - n[k] * n[k]);
            const double da_r = da_n * s[2 * H + j] * r[k] * (1.0 - r[k]);
            const double da_z = dh_next[j] * (h_prev[j] - n[k]) * z[k] * (1.0 - z[k]);
            dx[j] = ds[j] = da_r;
            dx[H + j] = ds[H + j] = da_z;
            dx[2 * H + j] = da_n;
            ds[2 * H + j] = da_n * r[k];
            dh[k] = dh_next[j] * z[k];
        }
    }
}

void lstm_cell_forward(double* act, const double* bias, const double* c_all, std::size_t B, std::size_t H, double* tanh_c, double* hc) {
    for (std::size_t b = 0; b < B; ++b) {
        double *a = act + b * 4 * H, *h_next = hc + b * 2 * H, *c_next = h_next + H, *t = tanh_c + b * H;
        const double* c = c_all + b * H;
        for (std::size_t j = 0; j < H; ++j) {
            const double i = sigmoid(a[j] + bias[j]), f = sigmoid(a[H + j] + bias[H + j]);
            const double g = tanh(a[2 * H + j] + bias[2 * H + j]), o = sigmoid(a[3 * H + j] + bias[3 * H + j]);
            c_next[j] = f * c[j] + i * g;
            t[j] = tanh(c_next[j]);
            h_next[j] = o * t[j];
            a[j] = i, a[H + j] = f, a[2 * H + j] = g, a[3 * H + j] = o;
        }
    }
}

void lstm_cell_backward(const double* dhc, const double* c_all, const double* act, const double* tanh_c, std::size_t B, std::size_t H,
                        double* da, double* dc) {
    for (std::size_t b = 0; b < B; ++b) {
        const double *dh_next = dhc + b * 2 * H, *dc_in = dh_next + H, *c = c_all + b * H;
        const double *gates = act + b * 4 * H, *t = tanh_c + b * H;
        double *da_b = da + b * 4 * H, *dc_b = dc + b * H;
        for (std::size_t j = 0; j < H; ++j) {
            const double i = gates[j], f = gates[H + j], g = gates[2 * H + j], o = gates[3 * H + j];
            const double dc_next = dc_in[j] + dh_next[j] * o * (1.0 - t[j] * t[j]);
            da_b[j] = dc_next * g * i * (1.0 - i);
            da_b[H + j] = dc_next * c[j] * f * (1.0 - f);
            da_b[2 * H + j] = dc_next * i * (1.0 - g * g);
            da_b[3 * H + j] = dh_next[j] * t[j] * o * (1.0 - o);
            dc_b[j] = dc_next * f;
        }
    }
}

}  // namespace xg::nn::fast
