# The `build tree` test: configures, builds and runs docs/template (find_package(xgrad) +
# xgrad::xgrad) against the xgrad build directory itself, with no install step: the build tree
# exports its targets (xgradConfig.cmake and xgradTargets.cmake in the build directory).
#   cmake -DBUILD_DIR=<xgrad build> -DSOURCE_DIR=<xgrad source> -DWORK_DIR=<scratch> -P build_tree.cmake
foreach(var IN ITEMS BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "build_tree.cmake: -D${var}=... is required")
  endif()
endforeach()

set(consumer_build ${WORK_DIR}/template-build)
set(run_dir ${WORK_DIR}/run)
file(REMOVE_RECURSE ${run_dir})  # keep template-build: an unchanged train.cpp is not rebuilt

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

foreach(f xgradConfig.cmake xgradConfigVersion.cmake xgradTargets.cmake)
  if(NOT EXISTS ${BUILD_DIR}/${f})
    message(FATAL_ERROR "the build tree has no ${BUILD_DIR}/${f}")
  endif()
endforeach()

set(launcher "")
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE_PROGRAM})
endif()
# xgrad_DIR names the build directory; no prefix path, no package registry: nothing else can be found.
run_step("configure docs/template against ${BUILD_DIR}" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/docs/template
  -B ${consumer_build} -DCMAKE_BUILD_TYPE=Release -Dxgrad_DIR=${BUILD_DIR} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  ${launcher})
run_step("build docs/template" ${CMAKE_COMMAND} --build ${consumer_build} -j2)
# The program links the build tree's libraries (not an installed copy).
file(READ ${consumer_build}/CMakeFiles/train.dir/link.txt link_line)
string(FIND "${link_line}" "${BUILD_DIR}/libxgrad_core.a" at)
if(at EQUAL -1)
  message(FATAL_ERROR "train was not linked against ${BUILD_DIR}/libxgrad_core.a:\n${link_line}")
endif()
run_step("run train --steps 2" ${consumer_build}/train --steps 2 --out ${run_dir})
message(STATUS "train output:\n${step_output}")
foreach(expected "Sequential(" "done: epoch 0, step 2")
  string(FIND "${step_output}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "train output lacks '${expected}'")
  endif()
endforeach()
