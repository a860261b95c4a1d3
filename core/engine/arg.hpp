// A fluent option of an options class, like torch's TORCH_ARG (optimizers, DataLoader).
#pragma once

/// Declares option `name` of type `T` in class `Self`, defaulting to `default_value`:
/// `opts.lr(0.1)` sets it and returns the options (so setters chain), `opts.lr()` reads it.
/// Leaves the class in `private:` after the member.
#define XG_ARG(Self, T, name, default_value)             \
public:                                                  \
    Self& name(T value) {                                \
        name##_ = value;                                 \
        return *this;                                    \
    }                                                    \
    T name() const { return name##_; }                   \
                                                         \
private:                                                 \
    T name##_ = default_value
