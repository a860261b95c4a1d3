// One LSTM / GRU step's element-wise arithmetic: docs/derivations/lstm.md, with its symbols. Unit
// j of row b is element k = b H + j of a (B, H) array; gate q's pre-activation sits at b k H + q H + j
// of a (B, k H) one.
#include "nn/reference/rnn.hpp"

#include <cmath>

#include "core/engine/dtype.hpp"

namespace xg::nn::reference {

namespace {

double sigma(double v) { return 1.0 / (1.0 + std::exp(-v)); }  // sigma(v) = 1 / (1 + e^-v)

}  // namespace

template <class T>
void lstm_next_c_forward(const T* a, const T* c, std::size_t B, std::size_t H, T* c_next, double* i, double* f, double* g) {
    for (std::size_t b = 0; b < B; ++b) {
        const T* a_b = a + b * 4 * H;  // [a_i, a_f, a_g, a_o]
        for (std::size_t j = 0; j < H; ++j) {
            const std::size_t k = b * H + j;
            i[k] = sigma(double(a_b[j])), f[k] = sigma(double(a_b[H + j])), g[k] = std::tanh(double(a_b[2 * H + j]));
            c_next[k] = T(f[k] * double(c[k]) + i[k] * g[k]);  // c' = f c + i g
        }
    }
}

template <class T>
void lstm_next_c_backward(const T* dc_next, const T* c, const double* i, const double* f, const double* g, std::size_t B,
                          std::size_t H, T* da, T* dc) {
    for (std::size_t b = 0; b < B; ++b) {
        T* da_b = da + b * 4 * H;
        for (std::size_t j = 0; j < H; ++j) {
            const std::size_t k = b * H + j;
            const double dc_k = double(dc_next[k]);
            da_b[j] = T(dc_k * g[k] * i[k] * (1.0 - i[k]));                 // da_i = dc' g i (1 - i)
            da_b[H + j] = T(dc_k * double(c[k]) * f[k] * (1.0 - f[k]));     // da_f = dc' c f (1 - f)
            da_b[2 * H + j] = T(dc_k * i[k] * (1.0 - g[k] * g[k]));         // da_g = dc' i (1 - g^2)
            dc[k] = T(dc_k * f[k]);                                         // dc = dc' f
        }
    }
}

template <class T>
void lstm_next_h_forward(const T* a, const T* c_next, std::size_t B, std::size_t H, T* h, double* o, double* tanh_c) {
    for (std::size_t b = 0; b < B; ++b) {
        for (std::size_t j = 0; j < H; ++j) {
            const std::size_t k = b * H + j;
            o[k] = sigma(double(a[b * 4 * H + 3 * H + j])), tanh_c[k] = std::tanh(double(c_next[k]));
            h[k] = T(o[k] * tanh_c[k]);  // h' = o tanh(c')
        }
    }
}

template <class T>
void lstm_next_h_backward(const T* dh, const double* o, const double* tanh_c, std::size_t B, std::size_t H, T* da, T* dc_next) {
    for (std::size_t b = 0; b < B; ++b) {
        for (std::size_t j = 0; j < H; ++j) {
            const std::size_t k = b * H + j;
            const double dh_k = double(dh[k]);
            da[b * 4 * H + 3 * H + j] = T(dh_k * tanh_c[k] * o[k] * (1.0 - o[k]));  // da_o = dh' tanh(c') o (1 - o)
            dc_next[k] = T(dh_k * o[k] * (1.0 - tanh_c[k] * tanh_c[k]));             // dc' = dh' o (1 - tanh(c')^2)
        }
    }
}

template <class T>
void gru_next_h_forward(const T* gi, const T* gh, const T* h, std::size_t B, std::size_t H, T* h_next, double* r, double* z,
                        double* n) {
    for (std::size_t b = 0; b < B; ++b) {
        const T *gi_b = gi + b * 3 * H, *gh_b = gh + b * 3 * H;  // [r, z, n] each
        for (std::size_t j = 0; j < H; ++j) {
            const std::size_t k = b * H + j;
            r[k] = sigma(double(gi_b[j]) + double(gh_b[j]));                         // r = sigma(gi_r + gh_r)
            z[k] = sigma(double(gi_b[H + j]) + double(gh_b[H + j]));                 // z = sigma(gi_z + gh_z)
            n[k] = std::tanh(double(gi_b[2 * H + j]) + r[k] * double(gh_b[2 * H + j]));  // n = tanh(gi_n + r gh_n)
            h_next[k] = T((1.0 - z[k]) * n[k] + z[k] * double(h[k]));               // h' = (1 - z) n + z h
        }
    }
}

template <class T>
void gru_next_h_backward(const T* dh_next, const T* gh, const T* h, const double* r, const double* z, const double* n,
                         std::size_t B, std::size_t H, T* dgi, T* dgh, T* dh) {
    for (std::size_t b = 0; b < B; ++b) {
        const T* gh_b = gh + b * 3 * H;
        T *dgi_b = dgi + b * 3 * H, *dgh_b = dgh + b * 3 * H;
        for (std::size_t j = 0; j < H; ++j) {
            const std::size_t k = b * H + j;
            const double dh_k = double(dh_next[k]);
            const double dn = dh_k * (1.0 - z[k]);                     // dn = dh' (1 - z)
            const double dz = dh_k * (double(h[k]) - n[k]);            // dz = dh' (h - n)
            const double da_n = dn * (1.0 - n[k] * n[k]);              // da_n = dn (1 - n^2)
            const double dr = da_n * double(gh_b[2 * H + j]);          // dr = da_n gh_n
            const double da_r = dr * r[k] * (1.0 - r[k]);              // da_r = dr r (1 - r)
            const double da_z = dz * z[k] * (1.0 - z[k]);              // da_z = dz z (1 - z)
            dgi_b[j] = dgh_b[j] = T(da_r);                             // dgi_r = dgh_r = da_r
            dgi_b[H + j] = dgh_b[H + j] = T(da_z);                     // dgi_z = dgh_z = da_z
            dgi_b[2 * H + j] = T(da_n);                                // dgi_n = da_n
            dgh_b[2 * H + j] = T(da_n * r[k]);                         // dgh_n = da_n r
            dh[k] = T(dh_k * z[k]);                                    // dh = dh' z
        }
    }
}

template <class T>
void lstm_cell_forward(const T* products, const double* bias, const T* c, std::size_t B, std::size_t H, double* gates,
                       double* tanh_c, T* hc) {
    for (std::size_t b = 0; b < B; ++b) {
        const T* a = products + b * 4 * H;  // a = x W_ih^T + h W_hh^T, then + b_ih + b_hh below
        double* gates_b = gates + b * 4 * H;
        T *h_next = hc + b * 2 * H, *c_next = h_next + H;
        for (std::size_t j = 0; j < H; ++j) {
            const std::size_t k = b * H + j;
            const double i = sigma(double(a[j]) + bias[j]), f = sigma(double(a[H + j]) + bias[H + j]);
            const double g = std::tanh(double(a[2 * H + j]) + bias[2 * H + j]), o = sigma(double(a[3 * H + j]) + bias[3 * H + j]);
            const double c_new = f * double(c[k]) + i * g;  // c' = f c + i g
            tanh_c[k] = std::tanh(c_new);
            c_next[j] = T(c_new);
            h_next[j] = T(o * tanh_c[k]);  // h' = o tanh(c')
            gates_b[j] = i, gates_b[H + j] = f, gates_b[2 * H + j] = g, gates_b[3 * H + j] = o;  // kept for the backward
        }
    }
}

template <class T>
void lstm_cell_backward(const T* dhc, const T* c, const double* gates, const double* tanh_c, std::size_t B, std::size_t H, T* da,
                        T* dc) {
    for (std::size_t b = 0; b < B; ++b) {
        const T *dh_next = dhc + b * 2 * H, *dc_in = dh_next + H;
        const double* gates_b = gates + b * 4 * H;
        T* da_b = da + b * 4 * H;
        for (std::size_t j = 0; j < H; ++j) {
            const std::size_t k = b * H + j;
            const double i = gates_b[j], f = gates_b[H + j], g = gates_b[2 * H + j], o = gates_b[3 * H + j], t = tanh_c[k];
            const double dh = double(dh_next[j]);
            const double dc_next = double(dc_in[j]) + dh * o * (1.0 - t * t);  // dc' <- dc' + dh' o (1 - tanh(c')^2)
            da_b[j] = T(dc_next * g * i * (1.0 - i));                          // da_i = dc' g i (1 - i)
            da_b[H + j] = T(dc_next * double(c[k]) * f * (1.0 - f));           // da_f = dc' c f (1 - f)
            da_b[2 * H + j] = T(dc_next * i * (1.0 - g * g));                  // da_g = dc' i (1 - g^2)
            da_b[3 * H + j] = T(dh * t * o * (1.0 - o));                       // da_o = dh' tanh(c') o (1 - o)
            dc[k] = T(dc_next * f);                                            // dc = dc' f
        }
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_RNN_KERNELS)

}  // namespace xg::nn::reference
