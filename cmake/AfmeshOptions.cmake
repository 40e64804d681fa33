# SPDX-License-Identifier: Apache-2.0
# Build options, warnings and sanitizers.

option(AFMESH_BUILD_TESTS "Build the GoogleTest suites" ON)
option(AFMESH_WERROR "Treat warnings as errors" ON)
set(AFMESH_SANITIZE "" CACHE STRING "Sanitizers to build with: '', 'address,undefined' or 'thread'")

# -O2 for Release: GCC 12 at -O3 reports false -Wstringop-overflow/-Wrestrict
# in libstdc++'s vector code (GCC bugs 105651, 106199), which -Werror turns
# into failed builds, and -O3 buys nothing measurable for this code.
string(REPLACE "-O3" "-O2" CMAKE_CXX_FLAGS_RELEASE "${CMAKE_CXX_FLAGS_RELEASE}")
string(REPLACE "-O3" "-O2" CMAKE_C_FLAGS_RELEASE "${CMAKE_C_FLAGS_RELEASE}")

add_compile_options(-Wall -Wextra)
# Clang checks the locking rules written as annotations (common/thread_annotations.h);
# not part of -Wall, and GCC has no such warning (the annotations expand to nothing there).
add_compile_options($<$<COMPILE_LANG_AND_ID:CXX,Clang>:-Wthread-safety>)
if(AFMESH_WERROR)
  add_compile_options(-Werror)
endif()

option(AFMESH_FAULT_MATRIX "Build and run the fault matrix test (tests/cluster/fault_matrix_test.cpp): minutes long" OFF)
option(AFMESH_FUZZ "Build only the libFuzzer targets (fuzz/) and what they link; needs clang" OFF)
if(AFMESH_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "AFMESH_FUZZ=ON needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: use the fuzz preset.")
  endif()
  # Coverage instrumentation for everything the fuzz targets link, without
  # libFuzzer's main(): the targets add -fsanitize=fuzzer themselves. Without
  # it the fuzzer sees only its own file and mutates blind.
  add_compile_options(-fsanitize=fuzzer-no-link)
  add_link_options(-fsanitize=fuzzer-no-link)
endif()

if(AFMESH_SANITIZE)
  add_compile_options(-fsanitize=${AFMESH_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${AFMESH_SANITIZE})
endif()

# afmesh_module_option(<NAME> <doc>): declares AFMESH_WITH_<NAME> = AUTO|ON|OFF.
# The caller then calls afmesh_module_enabled(<NAME> <sdk-found> <what-is-missing> <out-var>).
function(afmesh_module_option name doc)
  set(AFMESH_WITH_${name} AUTO CACHE STRING "${doc}: AUTO (when its SDK is found), ON or OFF")
  set_property(CACHE AFMESH_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
endfunction()

# Decides whether a module is built: ON without its SDK is a configure error.
function(afmesh_module_enabled name sdk_found missing out_var)
  set(mode "${AFMESH_WITH_${name}}")
  if(mode STREQUAL "OFF")
    set(enabled OFF)
  elseif(sdk_found)
    set(enabled ON)
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "AFMESH_WITH_${name}=ON but ${missing}. Install it or set AFMESH_WITH_${name}=AUTO/OFF.")
  else()
    set(enabled OFF)
  endif()
  message(STATUS "afmesh module ${name}: ${enabled} (AFMESH_WITH_${name}=${mode})")
  set(${out_var} ${enabled} PARENT_SCOPE)
endfunction()
