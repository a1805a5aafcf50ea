// HiSparse against CSR on the host space (issue 24). Usage: bench_hisparse_host [size factor, default 1]
// [node sizes, default 256,64]
#include "hisparse.hpp"

#include <cstdlib>
#include <sstream>

int main(int argc, char** argv) {
  const double f = argc > 1 ? std::atof(argv[1]) : 1.0;
  std::vector<int> d;
  std::stringstream list(argc > 2 ? argv[2] : "256,64");
  for (std::string x; std::getline(list, x, ',');) d.push_back(std::stoi(x));
  std::printf("# bench_hisparse_host: h2expr host space, double, size factor %g\n", f);
  h2expr::bench::run_hisparse_benchmark<double, h2expr::host>(h2expr::bench::hisparse_problems(f), d);
}
