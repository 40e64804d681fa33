# SPDX-License-Identifier: Apache-2.0
# afmesh_add_module(<device|transport> <name> SOURCES ... [LIBRARIES ...])
# Builds lib/afmesh/libafmesh_{dev,net}_<name>.so: a dlopen()-able module that
# exports only afmesh_module_query and never links the core.
function(afmesh_add_module kind name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;INCLUDES" ${ARGN})
  if(kind STREQUAL "device")
    set(file_name afmesh_dev_${name})
  elseif(kind STREQUAL "transport")
    set(file_name afmesh_net_${name})
  else()
    message(FATAL_ERROR "afmesh_add_module: kind must be device or transport, not '${kind}'")
  endif()
  set(target afmesh_${kind}_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  # common/: the support layer a module shares with the core (see common/thread_annotations.h why).
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/hal ${PROJECT_SOURCE_DIR}/common ${ARG_INCLUDES})
  if(kind STREQUAL "transport")
    # net_module.h: the C ABI edge every transport shares.
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/transports/common)
  endif()
  target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  if(NOT AFMESH_SANITIZE)
    # Catch a missing library at build time; sanitizer runtimes come from the host program.
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  # Export afmesh_module_query alone (see the map for why visibility is not enough).
  set(export_map ${PROJECT_SOURCE_DIR}/cmake/module_exports.map)
  target_link_options(${target} PRIVATE "LINKER:--version-script=${export_map}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${export_map})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${file_name}
    PREFIX lib
    LIBRARY_OUTPUT_DIRECTORY ${AFMESH_MODULE_OUTPUT_DIR})
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/afmesh)
  set_property(GLOBAL APPEND PROPERTY AFMESH_MODULE_TARGETS ${target})
endfunction()
