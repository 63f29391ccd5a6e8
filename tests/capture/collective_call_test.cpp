// What an NCCL call writes on this rank (core/collective_call.h), by
// operation, rank and root, and where that is not known.
#include "collective_call.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace kcap {
namespace {

using Op = schema::CollectiveOp;

CollectiveCall call(Op op, uint64_t count, int dataType, int rank, int ranks, int root = -1) {
  CollectiveCall c;
  c.op = op;
  c.count = count;
  c.dataType = dataType;
  c.rank = rank;
  c.ranks = ranks;
  c.root = root;
  return c;
}

constexpr int kFloat32 = 7, kBfloat16 = 9, kInt64 = 4, kFloat8e5m2 = 11;

TEST(CollectiveCall, ElementSizesFollowNcclsDataTypes) {
  EXPECT_EQ(ncclElementSize(0), 1u);
  EXPECT_EQ(ncclElementSize(kInt64), 8u);
  EXPECT_EQ(ncclElementSize(6), 2u);  // ncclFloat16
  EXPECT_EQ(ncclElementSize(kFloat32), 4u);
  EXPECT_EQ(ncclElementSize(kBfloat16), 2u);
  EXPECT_EQ(ncclElementSize(kFloat8e5m2), 1u);
  EXPECT_EQ(ncclElementSize(12), 0u);
  EXPECT_EQ(ncclElementSize(-1), 0u);
}

TEST(CollectiveCall, EachOperationWritesItsShareOnThisRank) {
  EXPECT_EQ(collectiveWrittenBytes(call(Op::ALL_REDUCE, 100, kFloat32, 1, 4)), 400u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::BROADCAST, 100, kBfloat16, 1, 4, 0)), 200u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::REDUCE_SCATTER, 100, kFloat32, 1, 4)), 400u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::SCATTER, 100, kFloat32, 1, 4, 0)), 400u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::RECV, 100, kInt64, 1, 4, 0)), 800u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::ALL_GATHER, 100, kFloat32, 1, 4)), 1600u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::ALL_TO_ALL, 100, kFloat32, 1, 4)), 1600u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::SEND, 100, kFloat32, 1, 4, 0)), 0u);
}

TEST(CollectiveCall, RootedReductionsAndGathersWriteAtTheirRootOnly) {
  EXPECT_EQ(collectiveWrittenBytes(call(Op::REDUCE, 100, kFloat32, 2, 4, 2)), 400u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::REDUCE, 100, kFloat32, 1, 4, 2)), 0u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::GATHER, 100, kFloat32, 2, 4, 2)), 1600u);
  EXPECT_EQ(collectiveWrittenBytes(call(Op::GATHER, 100, kFloat32, 1, 4, 2)), 0u);
}

TEST(CollectiveCall, WhatCannotBeKnownIsNotGuessed) {
  EXPECT_FALSE(collectiveWrittenBytes(call(Op::ALL_REDUCE, 100, 12, 0, 2)));                   // a newer data type
  EXPECT_FALSE(collectiveWrittenBytes(call(Op::REDUCE, 100, kFloat32, -1, 2, 0)));             // rank unknown
  EXPECT_FALSE(collectiveWrittenBytes(call(Op::ALL_GATHER, 100, kFloat32, 0, -1)));            // ranks unknown
  EXPECT_FALSE(collectiveWrittenBytes(call(Op::ALL_TO_ALL, UINT64_MAX / 2, kFloat32, 0, 4)));  // overflows
  EXPECT_FALSE(collectiveWrittenBytes(call(Op::ALL_REDUCE, UINT64_MAX / 2, kFloat32, 0, 4)));
  EXPECT_EQ(collectiveWrittenBytes(call(Op::ALL_REDUCE, 0, 12, 0, 2)), 0u);  // nothing, of any type
}

}  // namespace
}  // namespace kcap
