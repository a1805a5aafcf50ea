// The carrier of the host test drivers' precompiled headers (tests/CMakeLists.txt, h2expr_test_pch):
// the headers are compiled once with this target's flags, and every host driver reuses them.
