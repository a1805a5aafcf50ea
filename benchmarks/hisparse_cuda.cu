// HiSparse against CSR on the CUDA space (issue 24): against cuSPARSE's SpMM (sparse_matrix) and
// cuSPARSE's transposed SpMM on one CSR copy. Usage: bench_hisparse_cuda [size factor, default 1]
// [node sizes, default 256,64]
#include "hisparse.hpp"

#include <h2expr/detail/primitives/cuda/sparse.cuh>

#include <cstdlib>
#include <sstream>

namespace hx = h2expr;

// cuSPARSE: Y = A^T X with A's CSR (one copy), the generic SpMM's transposed operation.
double cusparse_transposed(const hx::csr_arrays<double>& a, const hx::matrix<double, hx::cuda>& X,
                           hx::matrix<double, hx::cuda>& Y) {
  auto ctx = X.context_ptr();
  auto& c = *ctx;
  hx::detail::buffer<int, hx::cuda> ptr(ctx, a.row_ptr), idx(ctx, a.col_idx);
  hx::detail::buffer<double, hx::cuda> val(ctx, a.values);
  hx::detail::cusparse_const_sp_mat A;
  hx::detail::cusparse_const_dn_mat B;
  hx::detail::cusparse_dn_mat C;
  H2EXPR_CUSPARSE(cusparseCreateConstCsr(A.out(), a.rows, a.cols, std::int64_t(a.values.size()), ptr.data(), idx.data(),
                                         val.data(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                         CUDA_R_64F));
  H2EXPR_CUSPARSE(cusparseCreateConstDnMat(B.out(), X.rows(), X.cols(), X.rows(), X.data(), CUDA_R_64F, CUSPARSE_ORDER_COL));
  H2EXPR_CUSPARSE(cusparseCreateDnMat(C.out(), Y.rows(), Y.cols(), Y.rows(), Y.data(), CUDA_R_64F, CUSPARSE_ORDER_COL));
  const double one = 1, zero = 0;
  const auto t = CUSPARSE_OPERATION_TRANSPOSE, none = CUSPARSE_OPERATION_NON_TRANSPOSE;
  std::size_t bytes = 0;
  H2EXPR_CUSPARSE(cusparseSpMM_bufferSize(c.sparse(), t, none, &one, A.get(), B.get(), &zero, C.get(), CUDA_R_64F,
                                          CUSPARSE_SPMM_ALG_DEFAULT, &bytes));
  hx::detail::workspace_plan plan;
  const auto part = plan.add<std::byte>(bytes);
  const hx::detail::workspace<hx::cuda> ws(c, plan);
  void* work = bytes ? ws[part] : nullptr;
  return hx::bench::best_seconds(c, [&] {
    H2EXPR_CUSPARSE(cusparseSpMM(c.sparse(), t, none, &one, A.get(), B.get(), &zero, C.get(), CUDA_R_64F,
                                 CUSPARSE_SPMM_ALG_DEFAULT, work));
  }, 3);
}

int main(int argc, char** argv) {
  if (!hx::cuda_available()) {
    std::printf("# bench_hisparse_cuda: no CUDA device\n");
    return 0;
  }
  const double f = argc > 1 ? std::atof(argv[1]) : 1.0;
  std::vector<int> d;
  std::stringstream list(argc > 2 ? argv[2] : "256,64");
  for (std::string x; std::getline(list, x, ',');) d.push_back(std::stoi(x));
  std::printf("# bench_hisparse_cuda: h2expr CUDA space, double, size factor %g\n", f);
  hx::bench::run_hisparse_benchmark<double, hx::cuda>(hx::bench::hisparse_problems(f), d, cusparse_transposed);
}
