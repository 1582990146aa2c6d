# AIRLOCK_SANITIZE: every C and C++ target of this build (the agent, its
# libraries, the unit and kernel tests, the test clients) with
# AddressSanitizer and UndefinedBehaviorSanitizer; the first report ends
# the process. The BPF object is compiled by its own command
# (cmake/BpfObject.cmake), which none of these flags reach.
#
# AIRLOCK_FUZZ: the libFuzzer targets of tests/fuzz. It implies
# AIRLOCK_SANITIZE and adds libFuzzer's coverage instrumentation
# (-fsanitize=fuzzer-no-link) to every target, so that the code under test is
# instrumented in whatever library it lives; binaries other than the fuzz
# targets find the coverage hooks as no-ops in the sanitizer runtime.
option(AIRLOCK_SANITIZE "Build everything with ASan and UBSan" OFF)
option(AIRLOCK_FUZZ "Build the libFuzzer targets of tests/fuzz (clang; implies AIRLOCK_SANITIZE)" OFF)

if(AIRLOCK_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "AIRLOCK_FUZZ needs clang's libFuzzer: configure with "
    "-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14")
endif()

# A report's stack needs file and line only: line tables (clang) instead of
# full debug information compile about a seventh faster.
if(AIRLOCK_SANITIZE OR AIRLOCK_FUZZ)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-gline-tables-only)
  endif()
  add_link_options(-fsanitize=address,undefined)
endif()
if(AIRLOCK_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
