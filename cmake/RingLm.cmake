# The repo root, from which headers are included: the top-level project's
# folder unless a sub-build (cmake/kernels) says otherwise.
if(NOT DEFINED RINGLM_SOURCE_ROOT)
  set(RINGLM_SOURCE_ROOT ${PROJECT_SOURCE_DIR})
endif()

# ringlm_library(NAME SOURCES ... DEPS ...): a static library rooted at the repo,
# so headers are included as "folder/file.h".
function(ringlm_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${RINGLM_SOURCE_ROOT} ${PROJECT_BINARY_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# ringlm_test(NAME SOURCES ... DEPS ...): a GoogleTest binary registered with ctest.
# Tests see RINGLM_SHARED_DIR (models/ and refs/) as a compile definition.
# SERIAL: ctest runs the test's cases with no other test beside them.
function(ringlm_test name)
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT TARGET ringlm_test_support)  # what every test may use: base/testing
    ringlm_library(ringlm_test_support SOURCES ${RINGLM_SOURCE_ROOT}/base/testing/temp_dir.cc
      DEPS GTest::gtest absl::synchronization)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} ringlm_test_support
                                        GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE RINGLM_SHARED_DIR="${RINGLM_SHARED_DIR}"
                                             RINGLM_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(props TIMEOUT 300)
  if(ARG_LABELS)
    list(APPEND props LABELS "${ARG_LABELS}")
  endif()
  if(ARG_SERIAL)  # e.g. fixed port ranges: run alone
    list(APPEND props RUN_SERIAL TRUE)
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${props})
  # The unit tests (neither multi-process nor script): what the sanitizer
  # pass builds and runs (`ninja ringlm_unit_tests`).
  if(NOT "cluster" IN_LIST ARG_LABELS AND NOT "script" IN_LIST ARG_LABELS)
    if(NOT TARGET ringlm_unit_tests)
      add_custom_target(ringlm_unit_tests)
    endif()
    add_dependencies(ringlm_unit_tests ${name})
  endif()
endfunction()
