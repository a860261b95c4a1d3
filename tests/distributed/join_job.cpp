// The distributed test program joins the MPI job before Catch2's main starts; then every rank runs
// the same test cases in the same order, so that their collectives meet. Catch2's precompiled main
// (Catch2WithMain) runs them: a main of our own compiled Catch2's whole runner, 19 s of every
// clean build. MPI is finalised at exit (xg::distributed::init).
#include "distributed/collectives.hpp"

namespace {
[[maybe_unused]] const bool g_joined_the_job = (xg::distributed::init(), true);
}  // namespace
