// SPDX-License-Identifier: Apache-2.0
// Names, parsers and sizes of dtype.h.
#include "conflux/common/dtype.h"

#include <gtest/gtest.h>

namespace conflux {
namespace {

TEST(DType, CanonicalNamesAreNcclTestsSpelling) {
  const char* want[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                        "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    EXPECT_EQ(dtype_name(t), want[i]);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(dtype_name(static_cast<DType>(12)), "invalid");
}

TEST(DType, ParserAcceptsAliasesCaseInsensitively) {
  EXPECT_EQ(parse_dtype("float32"), DType::kFloat32);
  EXPECT_EQ(parse_dtype("FP32"), DType::kFloat32);
  EXPECT_EQ(parse_dtype("ncclFloat"), DType::kFloat32);
  EXPECT_EQ(parse_dtype("float16"), DType::kFloat16);
  EXPECT_EQ(parse_dtype("fp16"), DType::kFloat16);
  EXPECT_EQ(parse_dtype("bf16"), DType::kBfloat16);
  EXPECT_EQ(parse_dtype("float64"), DType::kFloat64);
  EXPECT_EQ(parse_dtype("int"), DType::kInt32);
  EXPECT_EQ(parse_dtype("char"), DType::kInt8);
  EXPECT_EQ(parse_dtype("fp8_e4m3"), DType::kFloat8e4m3);
  EXPECT_EQ(parse_dtype("fp8_e5m2"), DType::kFloat8e5m2);
  EXPECT_EQ(parse_dtype("e5m2"), DType::kFloat8e5m2);
  EXPECT_EQ(parse_dtype("u64"), DType::kUint64);
  EXPECT_FALSE(parse_dtype(""));
  EXPECT_FALSE(parse_dtype("float128"));
  EXPECT_FALSE(parse_dtype("floa"));
}

TEST(Op, NamesAndParser) {
  const char* want[] = {"sum", "prod", "max", "min"};
  for (int i = 0; i < kNumOps; ++i) {
    EXPECT_EQ(op_name(static_cast<Op>(i)), want[i]);
    EXPECT_EQ(parse_op(want[i]), static_cast<Op>(i));
  }
  EXPECT_EQ(parse_op("SUM"), Op::kSum);
  EXPECT_EQ(parse_op("ncclMax"), Op::kMax);
  EXPECT_EQ(parse_op("product"), Op::kProd);
  EXPECT_FALSE(parse_op("avg"));  // avg reaches a CollNet plugin as sum; not an Op here
  EXPECT_FALSE(parse_op("xor"));
  EXPECT_EQ(op_name(static_cast<Op>(7)), "invalid");
}

TEST(DType, Sizes) {
  EXPECT_EQ(dtype_size(DType::kBfloat16), 2u);
  EXPECT_EQ(accum_size(DType::kBfloat16), 4u);
  EXPECT_EQ(accum_size(DType::kFloat8e4m3), 4u);
  EXPECT_EQ(accum_size(DType::kInt8), 1u);
  EXPECT_EQ(accum_size(DType::kFloat64), 8u);
  EXPECT_TRUE(valid_dtype(11));
  EXPECT_FALSE(valid_dtype(12));
  EXPECT_FALSE(valid_op(4));
}

}  // namespace
}  // namespace conflux
