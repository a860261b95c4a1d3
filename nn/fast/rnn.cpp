#include "nn/fast/rnn.hpp"

#include "core/engine/dtype.hpp"
#include "nn/fast/gate_math.hpp"

namespace xg::nn::fast {

namespace {

using detail::sigmoid;
using detail::tanh;

}  // namespace

// T is the tensors' storage (double, or float read into doubles, each result rounded once); the
// activated gates are double whatever T.
template <class T>
void lstm_next_c_forward(const T* gates, const T* c, std::size_t B, std::size_t H, T* c_next, double* i, double* f, double* g) {
    for (std::size_t b = 0; b < B; ++b) {
        const T *a = gates + b * 4 * H, *c_prev = c + b * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            i[k] = sigmoid(double(a[j])), f[k] = sigmoid(double(a[H + j])), g[k] = tanh(double(a[2 * H + j]));
            c_next[k] = T(f[k] * double(c_prev[j]) + i[k] * g[k]);
        }
    }
}

template <class T>
void lstm_next_c_backward(const T* dc_all, const T* c, const double* i, const double* f, const double* g, std::size_t B,
                          std::size_t H, T* da, T* dc) {
    for (std::size_t b = 0; b < B; ++b) {
        const T *c_prev = c + b * H, *dc_next = dc_all + b * H;
        T* da_b = da + b * 4 * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            const double dcn = double(dc_next[j]);
            da_b[j] = T(dcn * g[k] * i[k] * (1.0 - i[k]));
            da_b[H + j] = T(dcn * double(c_prev[j]) * f[k] * (1.0 - f[k]));
            da_b[2 * H + j] = T(dcn * i[k] * (1.0 - g[k] * g[k]));
            dc[k] = T(dcn * f[k]);
        }
    }
}

template <class T>
void lstm_next_h_forward(const T* gates, const T* c_next, std::size_t B, std::size_t H, T* h, double* o, double* tanh_c) {
    for (std::size_t b = 0; b < B; ++b) {
        const T *a = gates + b * 4 * H, *c = c_next + b * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            o[k] = sigmoid(double(a[3 * H + j])), tanh_c[k] = tanh(double(c[j]));
            h[k] = T(o[k] * tanh_c[k]);
        }
    }
}

template <class T>
void lstm_next_h_backward(const T* dh_all, const double* o, const double* tanh_c, std::size_t B, std::size_t H, T* da, T* dc) {
    for (std::size_t b = 0; b < B; ++b) {
        const T* dh = dh_all + b * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            const double dhj = double(dh[j]);
            da[b * 4 * H + 3 * H + j] = T(dhj * tanh_c[k] * o[k] * (1.0 - o[k]));
            dc[k] = T(dhj * o[k] * (1.0 - tanh_c[k] * tanh_c[k]));
        }
    }
}

template <class T>
void gru_next_h_forward(const T* gi, const T* gh, const T* h, std::size_t B, std::size_t H, T* h_next, double* r, double* z,
                        double* n) {
    for (std::size_t b = 0; b < B; ++b) {
        const T *x = gi + b * 3 * H, *s = gh + b * 3 * H, *h_prev = h + b * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            r[k] = sigmoid(double(x[j]) + double(s[j])), z[k] = sigmoid(double(x[H + j]) + double(s[H + j]));
            n[k] = tanh(double(x[2 * H + j]) + r[k] * double(s[2 * H + j]));
            h_next[k] = T((1.0 - z[k]) * n[k] + z[k] * double(h_prev[j]));
        }
    }
}

template <class T>
void gru_next_h_backward(const T* dh_all, const T* gh, const T* h, const double* r, const double* z, const double* n,
                         std::size_t B, std::size_t H, T* dgi, T* dgh, T* dh) {
    for (std::size_t b = 0; b < B; ++b) {
        const T *s = gh + b * 3 * H, *h_prev = h + b * H;
        const T* dh_next = dh_all + b * H;
        T *dx = dgi + b * 3 * H, *ds = dgh + b * 3 * H;
        for (std::size_t j = 0, k = b * H; j < H; ++j, ++k) {
            const double dhn = double(dh_next[j]);
            const double da_n = dhn * (1.0 - z[k]) * (1.0 - n[k] * n[k]);
            const double da_r = da_n * double(s[2 * H + j]) * r[k] * (1.0 - r[k]);
            const double da_z = dhn * (double(h_prev[j]) - n[k]) * z[k] * (1.0 - z[k]);
            dx[j] = ds[j] = T(da_r);
            dx[H + j] = ds[H + j] = T(da_z);
            dx[2 * H + j] = T(da_n);
            ds[2 * H + j] = T(da_n * r[k]);
            dh[k] = T(dhn * z[k]);
        }
    }
}

template <class T>
void lstm_cell_forward(const T* products, const double* bias, const T* c_all, std::size_t B, std::size_t H, double* gates,
                       double* tanh_c, T* hc) {
    for (std::size_t b = 0; b < B; ++b) {
        const T* a = products + b * 4 * H;
        double *gates_b = gates + b * 4 * H, *t = tanh_c + b * H;
        T *h_next = hc + b * 2 * H, *c_next = h_next + H;
        const T* c = c_all + b * H;
        for (std::size_t j = 0; j < H; ++j) {
            const double i = sigmoid(double(a[j]) + bias[j]), f = sigmoid(double(a[H + j]) + bias[H + j]);
            const double g = tanh(double(a[2 * H + j]) + bias[2 * H + j]), o = sigmoid(double(a[3 * H + j]) + bias[3 * H + j]);
            const double c_new = f * double(c[j]) + i * g;
            t[j] = tanh(c_new);
            c_next[j] = T(c_new);
            h_next[j] = T(o * t[j]);
            gates_b[j] = i, gates_b[H + j] = f, gates_b[2 * H + j] = g, gates_b[3 * H + j] = o;
        }
    }
}

template <class T>
void lstm_cell_backward(const T* dhc, const T* c_all, const double* gates, const double* tanh_c, std::size_t B, std::size_t H, T* da,
                        T* dc) {
    for (std::size_t b = 0; b < B; ++b) {
        const T *dh_next = dhc + b * 2 * H, *dc_in = dh_next + H, *c = c_all + b * H;
        const double *gates_b = gates + b * 4 * H, *t = tanh_c + b * H;
        T *da_b = da + b * 4 * H, *dc_b = dc + b * H;
        for (std::size_t j = 0; j < H; ++j) {
            const double i = gates_b[j], f = gates_b[H + j], g = gates_b[2 * H + j], o = gates_b[3 * H + j];
            const double dh = double(dh_next[j]);
            const double dc_next = double(dc_in[j]) + dh * o * (1.0 - t[j] * t[j]);
            da_b[j] = T(dc_next * g * i * (1.0 - i));
            da_b[H + j] = T(dc_next * double(c[j]) * f * (1.0 - f));
            da_b[2 * H + j] = T(dc_next * i * (1.0 - g * g));
            da_b[3 * H + j] = T(dh * t[j] * o * (1.0 - o));
            dc_b[j] = T(dc_next * f);
        }
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_RNN_KERNELS)

}  // namespace xg::nn::fast
