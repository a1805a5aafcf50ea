// The host space's cache of large blocks (detail/core/host/pool.hpp): reuse, limits, release, and that
// buffers from it behave as any other; and the workspace a context lends its calls (core/workspace.hpp).
#include <h2expr/compress.hpp>
#include <h2expr/samplers/expression.hpp>
#include <h2expr/h2_matrix.hpp>
#include <h2expr/detail/core/workspace.hpp>

#include <gtest/gtest.h>

#include "instances/h2_matrix.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

namespace h2expr::test {
namespace {

using detail::buffer;
using detail::host_pool;

TEST(host_pool, blocks_are_reused_and_fresh_memory_comes_in_huge_pages) {
  if (!H2EXPR_HOST_POOL) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  auto ctx = std::make_shared<context<host>>();
  const std::size_t n = (std::size_t(5) << 20) / sizeof(double);  // 5 MB: three huge pages
  const std::size_t mb = std::size_t(1) << 20, spare = host_pool::splits ? mb : 0;
  const double* first = nullptr;
  {
    buffer<double, host> a(ctx, n);
    first = a.data();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % host_pool::page, 0u);
    std::iota(a.data(), a.data() + n, 0.0);  // writable to the last entry
    EXPECT_EQ(a.data()[n - 1], double(n - 1));
    EXPECT_EQ(ctx->cached_bytes(), spare) << "the third huge page's rest is cached";
  }
  EXPECT_EQ(ctx->cached_bytes(), 6 * mb);
  {
    buffer<double, host> b(ctx, n - 1000);  // about the same size: the cached block
    EXPECT_EQ(b.data(), first);
    EXPECT_EQ(ctx->cached_bytes(), spare);
    buffer<double, host> c(ctx, n);  // the cached one is taken: a new block
    EXPECT_NE(c.data(), first);
    EXPECT_EQ(ctx->cached_bytes(), 2 * spare);
    buffer<double, host> small(ctx, 100000);  // 0.8 MB: a rest's front where blocks split
    small.data()[99999] = 1;
    if (host_pool::splits) {
      EXPECT_TRUE(small.data() == first + n || small.data() == c.data() + n) << "a rest of a huge page";
      EXPECT_EQ(ctx->cached_bytes(), 2 * spare - 13 * host_pool::grain);
    }
    buffer<double, host> tiny(ctx, host_pool::min_bytes / sizeof(double) - 1);  // the heap's
    tiny.data()[0] = 1;
    EXPECT_EQ(ctx->cached_bytes(), host_pool::splits ? 2 * spare - 13 * host_pool::grain : 0);
  }
  EXPECT_EQ(ctx->cached_bytes(), 12 * mb);
  {
    buffer<double, host> big(ctx, 3 * n);  // larger than any cached block: fresh
    EXPECT_EQ(ctx->cached_bytes(), 12 * mb + spare);
  }
  ctx->release_cached();
  EXPECT_EQ(ctx->cached_bytes(), 0u);
}

TEST(host_pool, a_larger_cached_block_is_split_and_freed_neighbours_merge) {
  if (!H2EXPR_HOST_POOL || !host_pool::splits) GTEST_SKIP() << "no cache, or blocks are not split here";
  auto ctx = std::make_shared<context<host>>();
  const std::size_t mb = (std::size_t(1) << 20) / sizeof(double);
  const double* first = nullptr;
  { first = buffer<double, host>(ctx, 12 * mb).data(); }
  EXPECT_EQ(ctx->cached_bytes(), std::size_t(12) << 20);
  {
    // The front of the cached block, then the next part (blocks are whole grains, not huge pages).
    buffer<double, host> b(ctx, 4 * mb), c(ctx, 5 * mb);
    EXPECT_EQ(b.data(), first);
    EXPECT_EQ(c.data(), first + 4 * mb);
    EXPECT_EQ(ctx->cached_bytes(), std::size_t(3) << 20);
    std::fill(c.data(), c.data() + 5 * mb, 1.0);  // writable to the end of its part
    std::fill(b.data(), b.data() + 4 * mb, 2.0);
    EXPECT_EQ(c.data()[0], 1.0);
  }
  EXPECT_EQ(ctx->cached_bytes(), std::size_t(12) << 20);
  {
    buffer<double, host> d(ctx, 12 * mb);  // the parts merged back into one block
    EXPECT_EQ(d.data(), first);
    EXPECT_EQ(ctx->cached_bytes(), 0u);
  }
  ctx->release_cached();
  EXPECT_EQ(ctx->cached_bytes(), 0u);
}

TEST(host_pool, the_limit_bounds_what_stays_cached) {
  if (!H2EXPR_HOST_POOL) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  auto ctx = std::make_shared<context<host>>();
  EXPECT_GT(ctx->cache_limit(), 0u);
  ctx->set_cache_limit(std::size_t(6) << 20);
  const std::size_t n = (std::size_t(4) << 20) / sizeof(float);  // 4 MB each
  {
    std::vector<buffer<float, host>> blocks;
    for (int i = 0; i < 3; ++i) blocks.emplace_back(ctx, n);
  }
  EXPECT_LE(ctx->cached_bytes(), std::size_t(6) << 20);  // one 4 MB block stays
  EXPECT_EQ(ctx->cached_bytes(), std::size_t(4) << 20);
  ctx->set_cache_limit(0);  // caching off: everything goes back, and freed blocks too
  EXPECT_EQ(ctx->cached_bytes(), 0u);
  { buffer<float, host> a(ctx, n); }
  EXPECT_EQ(ctx->cached_bytes(), 0u);
  {
    buffer<float, host> small(ctx, (std::size_t(100) << 10) / sizeof(float));  // no fresh huge page's rest kept
    EXPECT_EQ(ctx->cached_bytes(), 0u);
    small.data()[0] = 1;
  }
  EXPECT_EQ(ctx->cached_bytes(), 0u);
}

// The cache counts as available memory (memory_available), so a fresh block the system is short of
// first takes the cache back, by its largest blocks: the cache keeps at most half of what the system
// has left past the fresh block.
std::size_t test_available = std::numeric_limits<std::size_t>::max();
std::size_t available_for_test() noexcept { return test_available; }

TEST(host_pool, fresh_memory_the_system_lacks_takes_the_cache_back_first) {
  if (!H2EXPR_HOST_POOL) GTEST_SKIP() << "the cache is off under AddressSanitizer";
  host_pool pool(available_for_test);
  const std::size_t mb = std::size_t(1) << 20;
  test_available = std::numeric_limits<std::size_t>::max();
  void* a = pool.allocate(8 * mb);
  void* b = pool.allocate(4 * mb);
  pool.deallocate(a), pool.deallocate(b);
  EXPECT_EQ(pool.cached_bytes(), 12 * mb);  // two blocks, or one where they were neighbours
  void* c = pool.allocate(16 * mb);  // larger than any cached block: fresh, and the system has room
  EXPECT_EQ(pool.cached_bytes(), 12 * mb);
  pool.deallocate(c);
  EXPECT_EQ(pool.cached_bytes(), 28 * mb);
  test_available = 100 * mb;  // 68 MB left past a fresh 32 MB block: the 28 MB cached may stay
  void* f = pool.allocate(32 * mb);
  EXPECT_EQ(pool.cached_bytes(), 28 * mb);
  pool.deallocate(f);
  EXPECT_EQ(pool.cached_bytes(), 60 * mb);
  test_available = 88 * mb;  // 24 MB left past a fresh 64 MB block (more than all 60 cached): 12 MB may stay
  void* g = pool.allocate(64 * mb);
  EXPECT_LE(pool.cached_bytes(), 12 * mb);
  pool.deallocate(g);
  pool.release(28 * mb);
  test_available = 30 * mb;  // short of a fresh 32 MB block: the whole cache goes
  void* d = pool.allocate(32 * mb);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  pool.deallocate(d);
  test_available = 0;  // nothing left: the whole cache goes before the fresh block is mapped
  void* e = pool.allocate(64 * mb);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  pool.deallocate(e);
  EXPECT_EQ(pool.cached_bytes(), 64 * mb);
  test_available = std::numeric_limits<std::size_t>::max();
}

// Matrices and algorithms on a context whose blocks are recycled compute the same as on fresh ones.
TEST(host_pool, recycled_blocks_give_the_same_results) {
  auto ctx = std::make_shared<context<host>>();
  auto pts = point_cloud<double, 2>::grid({48, 48});
  auto A = h2_matrix<double, host>::from_kernel(pts, kernels::exponential{0.1}, {.leaf_size = 64}, ctx);
  const auto X = matrix<double, host>::random(A.cols(), 4, 3, ctx);
  const Eigen::MatrixXd first = to_dense(matrix<double, host>(A * X));
  for (int round = 0; round < 2; ++round) {
    auto B = A;
    compress(B, 1e-6);
    auto C = A;
    const Eigen::MatrixXd again = to_dense(matrix<double, host>(C * X));
    EXPECT_EQ((again - first).norm(), 0.0) << "round " << round;
  }
}

// One call at a time holds the context's block; a call made while it is lent gets its own; the block
// grows to the widest request and is then reused; a large one goes back to the cache of large blocks.
TEST(workspace, one_call_at_a_time_holds_the_context_block) {
  using detail::workspace;
  using detail::workspace_plan;
  auto ctx = std::make_shared<context<host>>();
  EXPECT_EQ(ctx->workspace_bytes(), 0u);
  workspace_plan plan;
  const auto a = plan.add<double>(1000);
  const auto b = plan.add<int>(3);
  const auto c = plan.add<float>(0);
  const auto d = plan.add<double>(7);
  EXPECT_EQ(a.offset, 0u);
  for (std::size_t o : {b.offset, c.offset, d.offset}) EXPECT_EQ(o % workspace_plan::alignment, 0u);
  EXPECT_GE(d.offset, b.offset + 3 * sizeof(int));
  EXPECT_EQ(plan.bytes(), d.offset + 7 * sizeof(double));
  const std::byte* block = nullptr;
  {
    const workspace<host> outer(*ctx, plan);
    EXPECT_TRUE(outer.holds_context_block());
    block = ctx->workspace_slot().block;
    EXPECT_EQ(reinterpret_cast<const std::byte*>(outer[a]), block);
    EXPECT_EQ(reinterpret_cast<const std::byte*>(outer[d]), block + d.offset);
    EXPECT_EQ(ctx->workspace_bytes(), plan.bytes());
    std::fill(outer[a], outer[a] + 1000, 1.0), std::fill(outer[d], outer[d] + 7, 2.0);  // writable to the end
    const workspace<host> inner(*ctx, plan);  // made while the outer call holds it
    EXPECT_FALSE(inner.holds_context_block());
    EXPECT_NE(reinterpret_cast<const std::byte*>(inner[a]), block);
    std::fill(inner[a], inner[a] + 1000, 3.0);
    EXPECT_EQ(outer[a][999], 1.0);
  }
  workspace_plan smaller;
  const auto s = smaller.add<char>(10);
  {
    const workspace<host> w(*ctx, smaller);
    EXPECT_TRUE(w.holds_context_block());
    EXPECT_EQ(reinterpret_cast<const std::byte*>(w[s]), block) << "reused";
  }
  EXPECT_EQ(ctx->workspace_bytes(), plan.bytes());
  workspace_plan wider;
  (void)wider.add<double>(100000);
  { const workspace<host> w(*ctx, wider); }
  EXPECT_EQ(ctx->workspace_bytes(), wider.bytes()) << "grown to the widest request";
  { const workspace<host> none(*ctx, workspace_plan{}); }
  EXPECT_EQ(ctx->workspace_bytes(), wider.bytes());
  ctx->release_cached();
  EXPECT_EQ(ctx->workspace_bytes(), 0u);
  workspace_plan large;  // from the cache of large blocks: back to it after the call, kept touched there
  (void)large.add<double>((std::size_t(8) << 20) / sizeof(double));
  {
    const workspace<host> w(*ctx, large);
    EXPECT_TRUE(w.holds_context_block());
  }
  EXPECT_EQ(ctx->workspace_bytes(), H2EXPR_HOST_POOL ? 0u : large.bytes());
  if (H2EXPR_HOST_POOL) EXPECT_GE(ctx->cached_bytes(), large.bytes());
  workspace_plan huge;
  (void)huge.add<double>(detail::max_elements<double>());
  EXPECT_THROW((void)huge.add<char>(1), error);
  EXPECT_THROW((void)huge.add<double>(detail::max_elements<double>() + 1), error);
}

}  // namespace
}  // namespace h2expr::test
