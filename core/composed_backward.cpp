#include "core/composed_backward.hpp"

namespace xg {

GraphBackwardFn through_composed(ComposedTwin twin) {
    return [twin = std::move(twin)](const GraphGradContext& c) -> std::vector<Tensor> {
        std::vector<Tensor> inputs, wanted;
        std::vector<std::size_t> position;
        for (std::size_t i = 0; i < c.num_inputs(); ++i) {
            inputs.push_back(c.input(i));
            if (c.needs_grad(i)) wanted.push_back(inputs.back()), position.push_back(i);
        }
        // the recomputed output has the same value and a graph of differentiable ops
        const std::vector<Tensor> parts = grad({twin(inputs)}, wanted, {c.grad}, GradOptions{true, true, true});
        std::vector<Tensor> grads(c.num_inputs());
        for (std::size_t k = 0; k < parts.size(); ++k) grads[position[k]] = parts[k];
        return grads;
    };
}

}  // namespace xg
