// REQUIRE_ERROR(expr, "part", ...): expr throws an xg::Error whose message contains every part,
// for the tests of bad input (tests/<area>/test_<area>_errors.cpp); and the inputs and models
// several of those tests feed it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/tensor.hpp"
#include "nn/nn.hpp"

namespace xg::test {

/// Matches an xg::Error whose message contains every one of `parts`; shows the message on failure.
class Says : public Catch::MatcherBase<Error> {
public:
    Says(std::initializer_list<std::string> parts) : parts_(parts) {}
    bool match(const Error& e) const override {
        message_ = e.what();
        for (const auto& p : parts_) {
            if (message_.find(p) == std::string::npos) return false;
        }
        return true;
    }
    std::string describe() const override {
        std::string s = "has a message containing";
        for (const auto& p : parts_) s += " \"" + p + "\"";
        return s + " (message: \"" + message_ + "\")";
    }

private:
    std::vector<std::string> parts_;
    mutable std::string message_;
};

/// A 2-D index array from rows of literals (a braced IndexArray{...} of ints is ambiguous).
inline IndexArray index_rows(std::initializer_list<std::initializer_list<std::int64_t>> rows) {
    IndexArray out = IndexArray::from_shape({rows.size(), rows.begin()->size()});
    std::size_t i = 0;
    for (const auto& row : rows)
        for (std::int64_t v : row) out.data()[i++] = v;
    return out;
}

/// The same names, shapes and values bit for bit: rejected input must leave a model's state as it was.
inline bool same_state(const NamedArrays& a, const NamedArrays& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i].first != b[i].first || a[i].second.shape() != b[i].second.shape()) return false;
        if (!std::equal(a[i].second.begin(), a[i].second.end(), b[i].second.begin())) return false;
    }
    return true;
}

/// A model with parameters and buffers of several kinds, for the misuse of state dicts,
/// checkpoints and optimizers.
inline std::shared_ptr<nn::Sequential> small_model() {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::LayerNorm>(4), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(4, 2)});
}

}  // namespace xg::test

#define REQUIRE_ERROR(expr, ...) REQUIRE_THROWS_MATCHES(expr, ::xg::Error, ::xg::test::Says({__VA_ARGS__}))
