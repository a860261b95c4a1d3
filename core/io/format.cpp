#include "core/io/format.hpp"

#include <cmath>
#include <ostream>

namespace xg {

namespace {

struct Printer {
    const Array& a;
    const PrintOptions& opt;
    bool summarise;
    bool scientific;
    std::size_t width = 0;

    std::string number(double v) const {
        if (std::isnan(v)) return "nan";
        if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
        return scientific ? fmt::format("{:.{}e}", v, opt.precision) : fmt::format("{:.{}f}", v, opt.precision);
    }

    // Indices along an axis of extent n that are printed (npos marks the "..." gap).
    std::vector<std::size_t> shown(std::size_t n) const {
        std::vector<std::size_t> idx;
        if (!summarise || n <= 2 * opt.edgeitems) {
            for (std::size_t i = 0; i < n; ++i) idx.push_back(i);
            return idx;
        }
        for (std::size_t i = 0; i < opt.edgeitems; ++i) idx.push_back(i);
        idx.push_back(std::string::npos);
        for (std::size_t i = n - opt.edgeitems; i < n; ++i) idx.push_back(i);
        return idx;
    }

    // Visits every printed element (for the column width).
    void measure(std::size_t axis, std::size_t offset) {
        if (axis == a.dimension()) {
            width = std::max(width, number(a.data()[offset]).size());
            return;
        }
        const std::size_t stride = a.strides()[axis] ? a.strides()[axis] : 0;
        for (std::size_t i : shown(a.shape()[axis])) {
            if (i != std::string::npos) measure(axis + 1, offset + i * stride);
        }
    }

    void print(std::string& out, std::size_t axis, std::size_t offset, std::size_t indent) const {
        if (axis == a.dimension()) {
            out += fmt::format("{:>{}}", number(a.data()[offset]), width);
            return;
        }
        const std::size_t stride = a.strides()[axis];
        const bool last = axis + 1 == a.dimension();
        const std::string newlines(std::max<std::size_t>(1, a.dimension() - axis - 1), '\n');
        out += "[";
        bool first = true;
        for (std::size_t i : shown(a.shape()[axis])) {
            if (!first) out += last ? ", " : "," + newlines + std::string(indent + 1, ' ');
            first = false;
            if (i == std::string::npos) {
                out += "...";
                continue;
            }
            print(out, axis + 1, offset + i * stride, indent + 1);
        }
        out += "]";
    }
};

}  // namespace

std::string to_string(const Tensor& t, const PrintOptions& options) {
    const Array& a = t.value();
    double lo = INFINITY, hi = 0.0;
    for (double v : a) {
        if (std::isfinite(v) && v != 0.0) {
            lo = std::min(lo, std::fabs(v));
            hi = std::max(hi, std::fabs(v));
        }
    }
    Printer p{a, options, a.size() > options.threshold, hi >= 1e8 || (hi > 0 && lo < 1e-4) || (hi > 0 && hi / lo > 1e3 && hi >= 1e4)};
    std::string out = "tensor(";
    if (a.dimension() == 0) {
        out += p.number(a.data()[0]);
    } else {
        p.measure(0, 0);
        p.print(out, 0, 0, 7);
    }
    out += ", shape=" + shape_str(t.shape());
    if (t.dtype() != default_dtype()) out += fmt::format(", dtype={}", dtype_name(t.dtype()));  // torch shows it when not the default
    if (t.requires_grad()) out += ", requires_grad=true";
    if (!t.is_leaf()) out += ", grad_fn=" + t.op();
    return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    return os << (t.defined() ? to_string(t) : std::string("tensor(undefined)"));
}

}  // namespace xg
