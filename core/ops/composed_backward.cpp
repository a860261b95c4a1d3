#include "core/ops/composed_backward.hpp"

#include "core/ops/ops.hpp"

namespace xg {

Backward through_composed(ComposedTwin twin) {
    return [twin = std::move(twin)](const BackwardContext& c) -> std::vector<Tensor> {
        // The twin runs on an alias of each input (an identity reshape) and the gradient is taken
        // with respect to the aliases: each is then the partial derivative for its input alone.
        // Taken with respect to the inputs themselves, it would also follow the paths from one
        // input through another (gru_next_h's gh is computed from its h, a second LSTM step's
        // state from its weights) and count those twice, and an input given twice would get the
        // sum of both partials at each place.
        std::vector<Tensor> aliases, wanted;
        std::vector<std::size_t> position;
        for (std::size_t i = 0; i < c.num_inputs(); ++i) {
            const Tensor input = c.input(i);
            const Shape shape = input.shape();
            aliases.push_back(reshape(input, std::vector<long>(shape.begin(), shape.end())));
            if (c.needs_grad(i)) wanted.push_back(aliases.back()), position.push_back(i);
        }
        // the recomputed output has the same value and a graph of differentiable ops
        const std::vector<Tensor> parts = grad({twin(aliases)}, wanted, {c.grad}, GradOptions{true, true, true});
        std::vector<Tensor> grads(c.num_inputs());
        for (std::size_t k = 0; k < parts.size(); ++k) grads[position[k]] = parts[k];
        return grads;
    };
}

}  // namespace xg
