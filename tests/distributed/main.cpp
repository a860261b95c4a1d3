// The distributed test program's main: joins the MPI job, then runs Catch2 on every rank (each
// rank runs the same test cases in the same order, so their collectives meet).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "core/distributed/collectives.hpp"

int main(int argc, char** argv) {
    xg::distributed::init();
    return Catch::Session().run(argc, argv);
}
