// The five textbook ways to compute a variance (biased, divided by n), written once as plain loops
// over a storage type S (what the row is kept in) and an accumulator type A (what the sums are kept
// in): every value read is converted to A, every operation rounds in A. S and A are double, float,
// Float16 or BFloat16 (number_formats.hpp). Tutorial 19 measures them; the derivation of their
// errors is in docs/tutorials/19-precision-lab.md ("What each part shows", P10.1).
#pragma once

#include <cmath>
#include <cstddef>
#include <string>

#include "tutorials/19_precision_lab/number_formats.hpp"

namespace tutorial_values::precision_lab {

enum class VarianceAlgorithm { one_pass, two_pass, welford, shifted, pairwise };
constexpr VarianceAlgorithm kVarianceAlgorithms[] = {VarianceAlgorithm::one_pass, VarianceAlgorithm::two_pass,
                                                     VarianceAlgorithm::welford, VarianceAlgorithm::shifted,
                                                     VarianceAlgorithm::pairwise};

inline std::string algorithm_name(VarianceAlgorithm a) {
    switch (a) {
        case VarianceAlgorithm::one_pass: return "one-pass";
        case VarianceAlgorithm::two_pass: return "two-pass";
        case VarianceAlgorithm::welford: return "Welford";
        case VarianceAlgorithm::shifted: return "shifted";
        case VarianceAlgorithm::pairwise: return "pairwise";
    }
    return "?";
}

// var = E[x^2] - E[x]^2: two numbers of size mean^2 subtracted; loses about kappa^2 u.
template <class A, class S>
A variance_one_pass(const S* x, std::size_t n) {
    const A count = store<A>(static_cast<double>(n));
    A sum = store<A>(0), sum_sq = store<A>(0);
    for (std::size_t i = 0; i < n; ++i) {
        const A v = convert<A>(x[i]);
        sum += v;
        sum_sq += v * v;
    }
    const A mean = sum / count;
    return sum_sq / count - mean * mean;
}

// mean first, then E[(x - mean)^2]: the squares are of deviations; loses about kappa u.
template <class A, class S>
A variance_two_pass(const S* x, std::size_t n) {
    const A count = store<A>(static_cast<double>(n));
    A sum = store<A>(0);
    for (std::size_t i = 0; i < n; ++i) sum += convert<A>(x[i]);
    const A mean = sum / count;
    A sum_sq = store<A>(0);
    for (std::size_t i = 0; i < n; ++i) {
        const A d = convert<A>(x[i]) - mean;
        sum_sq += d * d;
    }
    return sum_sq / count;
}

// One pass with a running mean and M2 (Welford 1962): mean += delta / k, M2 += delta (x - mean).
template <class A, class S>
A variance_welford(const S* x, std::size_t n) {
    A mean = store<A>(0), m2 = store<A>(0);
    for (std::size_t i = 0; i < n; ++i) {
        const A v = convert<A>(x[i]);
        const A delta = v - mean;
        mean += delta / store<A>(static_cast<double>(i + 1));
        m2 += delta * (v - mean);
    }
    return m2 / store<A>(static_cast<double>(n));
}

// One-pass on x - K with K = x[0]: the sums are of deviations from a value near the mean, so the
// cancellation is that of (x[0] - mean) / sigma, not of mean / sigma.
template <class A, class S>
A variance_shifted(const S* x, std::size_t n) {
    const A count = store<A>(static_cast<double>(n)), shift = convert<A>(x[0]);
    A sum = store<A>(0), sum_sq = store<A>(0);
    for (std::size_t i = 0; i < n; ++i) {
        const A d = convert<A>(x[i]) - shift;
        sum += d;
        sum_sq += d * d;
    }
    return (sum_sq - sum * sum / count) / count;
}

// (count, mean, M2) of a block; two blocks merge as Chan, Golub & LeVeque (1983) give.
template <class A>
struct Moments {
    double count = 0;  // an integer, kept exact (a kernel keeps counts as integers)
    A mean{}, m2{};
};

template <class A, class S>
Moments<A> moments_pairwise(const S* x, std::size_t n) {
    if (n == 1) return {1.0, convert<A>(x[0]), store<A>(0)};
    const Moments<A> a = moments_pairwise<A>(x, n / 2), b = moments_pairwise<A>(x + n / 2, n - n / 2);
    // delta = mean_b - mean_a; mean = mean_a + delta n_b / n; M2 = M2_a + M2_b + delta^2 n_a n_b / n
    const double count = a.count + b.count;
    const A delta = b.mean - a.mean;
    return {count, a.mean + delta * store<A>(b.count / count),
            a.m2 + b.m2 + delta * delta * store<A>(a.count * b.count / count)};
}

// Halves merged pairwise up a tree (the merge of parallel and vectorised kernels): each value
// passes through about log2(n) merges instead of n additions.
template <class A, class S>
A variance_pairwise(const S* x, std::size_t n) {
    const Moments<A> m = moments_pairwise<A>(x, n);
    return m.m2 / store<A>(m.count);
}

/// The variance of x[0..n) by `algorithm` with accumulator A, as a double.
template <class A, class S>
double variance(VarianceAlgorithm algorithm, const S* x, std::size_t n) {
    switch (algorithm) {
        case VarianceAlgorithm::one_pass: return as_double(variance_one_pass<A>(x, n));
        case VarianceAlgorithm::two_pass: return as_double(variance_two_pass<A>(x, n));
        case VarianceAlgorithm::welford: return as_double(variance_welford<A>(x, n));
        case VarianceAlgorithm::shifted: return as_double(variance_shifted<A>(x, n));
        case VarianceAlgorithm::pairwise: return as_double(variance_pairwise<A>(x, n));
    }
    return std::nan("");
}

}  // namespace tutorial_values::precision_lab
