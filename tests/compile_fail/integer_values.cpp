// Must not compile: a sampler of int values (checked by tests/CMakeLists.txt). Every type that holds or
// applies values in a space says why, in values_in_space's static_assert, before anything else fails.
#include <h2expr/h2expr.hpp>

int main() { return int(sizeof(h2expr::sampler<int>)); }
