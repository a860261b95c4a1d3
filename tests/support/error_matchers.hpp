// REQUIRE_ERROR(expr, "part", ...): expr throws an xg::Error whose message contains every part,
// for the tests of bad input (tests/<area>/test_<area>_errors.cpp).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/tensor.hpp"

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

}  // namespace xg::test

#define REQUIRE_ERROR(expr, ...) REQUIRE_THROWS_MATCHES(expr, ::xg::Error, ::xg::test::Says({__VA_ARGS__}))
