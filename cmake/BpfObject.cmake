# bpf_object(NAME SOURCE [DEPENDS files...])
# clang -target bpf -> bpftool gen object (link) -> bpftool gen skeleton.
# Every header the source includes is a dependency (clang's depfile);
# DEPENDS adds files it does not include.
# Produces an INTERFACE target NAME whose include path holds NAME.skel.h.
find_program(BPF_CLANG clang REQUIRED)
find_program(BPFTOOL bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)

execute_process(COMMAND ${CMAKE_C_COMPILER} -print-multiarch
  OUTPUT_VARIABLE BPF_MULTIARCH OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT BPF_MULTIARCH)
  set(BPF_MULTIARCH "${CMAKE_SYSTEM_PROCESSOR}-linux-gnu")
endif()

function(bpf_object name source)
  cmake_parse_arguments(BO "" "" "DEPENDS" ${ARGN})
  set(out ${CMAKE_BINARY_DIR}/bpf)
  file(MAKE_DIRECTORY ${out})
  set(obj ${out}/${name}.tmp.o)
  set(linked ${out}/${name}.o)
  set(skel ${out}/${name}.skel.h)
  set(deps)
  foreach(d ${BO_DEPENDS})
    list(APPEND deps ${CMAKE_SOURCE_DIR}/${d})
  endforeach()
  add_custom_command(OUTPUT ${obj}
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_x86
            -Wall -Werror
            -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/bpf
            -I/usr/include/${BPF_MULTIARCH}
            -MD -MF ${obj}.d
            -c ${CMAKE_SOURCE_DIR}/${source} -o ${obj}
    DEPENDS ${CMAKE_SOURCE_DIR}/${source} ${deps}
    DEPFILE ${obj}.d
    COMMENT "BPF ${source}")
  add_custom_command(OUTPUT ${linked}
    COMMAND ${BPFTOOL} gen object ${linked} ${obj}
    DEPENDS ${obj}
    COMMENT "BPF link ${name}.o")
  add_custom_command(OUTPUT ${skel}
    COMMAND ${BPFTOOL} gen skeleton ${linked} name ${name} > ${skel}
    DEPENDS ${linked}
    COMMENT "BPF skeleton ${name}.skel.h")
  add_custom_target(${name}_gen DEPENDS ${skel})
  add_library(${name} INTERFACE)
  add_dependencies(${name} ${name}_gen)
  target_include_directories(${name} INTERFACE ${out})
  set_property(TARGET ${name} PROPERTY BPF_OBJECT ${linked})
endfunction()
