#include "tests/support/fixtures.hpp"

namespace xg_test_support_fixtures {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)
TEST_CASE("fixture load") { auto a = xg::test::fixture("op_gather","x"); auto i = xg::test::fixture_index("op_gather","index"); CHECK(a.size()>0); CHECK(i.size()>0);}

}  // namespace xg_test_support_fixtures
