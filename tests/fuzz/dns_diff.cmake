# The differential fuzz target of the DNS query parser (fuzz_dns_diff): the
# kernel's parser, run through BPF_PROG_TEST_RUN of the production egress
# program, against the reference judge in dns_ref.cpp. libFuzzer needs
# clang: configure a build of its own with
#   CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DAIRLOCK_FUZZ=ON
# and build the target fuzz_dns_diff (build-fuzz/tests/fuzz/fuzz_dns_diff).
# It runs as root, like the BPF unit tests it shares bpf_harness with.
include_guard(GLOBAL)
option(AIRLOCK_FUZZ "Build the libFuzzer targets (needs clang)" OFF)
if(AIRLOCK_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "AIRLOCK_FUZZ needs clang for libFuzzer: configure with CC=clang-14 CXX=clang++-14")
  endif()
  add_executable(fuzz_dns_diff ${CMAKE_CURRENT_LIST_DIR}/fuzz_dns_diff.cpp ${CMAKE_CURRENT_LIST_DIR}/dns_ref.cpp)
  target_compile_options(fuzz_dns_diff PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
  target_link_options(fuzz_dns_diff PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_dns_diff PRIVATE bpf_harness)
  set_target_properties(fuzz_dns_diff PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fuzz)
endif()
