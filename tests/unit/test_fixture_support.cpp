#include "tests/support/fixtures.hpp"
TEST_CASE("fixture load") { auto a = xg::test::fixture("op_gather","x"); auto i = xg::test::fixture_index("op_gather","index"); CHECK(a.size()>0); CHECK(i.size()>0);}
