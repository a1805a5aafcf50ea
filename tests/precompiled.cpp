// The carrier of the test drivers' precompiled headers (tests/CMakeLists.txt, h2expr_test_pch): the
// headers are compiled once with this target's flags, and every driver (host and CUDA suites) reuses them.
