#include <gtest/gtest.h>

#include <cstdio>

#include "test_support.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::printf("filter tests: base seed CG_SEED=%llu%s%s\n",
              static_cast<unsigned long long>(cg::test::base_seed()), cg::test::kUnderTsan ? " (TSan)" : "",
              cg::test::soak() ? " (soak)" : "");
  return RUN_ALL_TESTS();
}
