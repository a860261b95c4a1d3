# The `install` test: installs the current build into a fresh prefix, then configures, builds and
# runs docs/template (find_package(xgrad) + xgrad::xgrad) against that prefix only, for a few
# steps, tests/consumer/hvp (a Hessian-vector product through layer_norm) and, given MPIEXEC,
# tests/consumer/ddp (xgrad::distributed on 2 ranks). Proves the exported package is complete:
# headers, libraries, config and dependencies.
#   cmake -DBUILD_DIR=<xgrad build> -DSOURCE_DIR=<xgrad source> -DWORK_DIR=<scratch> [-DMPIEXEC=<mpiexec>]
#         -P install_and_build.cmake
foreach(var IN ITEMS BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_and_build.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/template-build)
set(run_dir ${WORK_DIR}/run)
file(REMOVE_RECURSE ${prefix} ${run_dir})  # keep template-build: an unchanged train.cpp is not rebuilt

function(run_step what)
  string(TIMESTAMP start "%s")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP stop "%s")
  math(EXPR seconds "${stop} - ${start}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok (${seconds} s)")
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

run_step("install to ${prefix}" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/xgrad/xgrad.hpp include/xgrad/core/engine/tensor.hpp include/xgrad/nn/nn.hpp
          include/xgrad/optim/optim.hpp lib/cmake/xgrad/xgradConfig.cmake
          lib/cmake/xgrad/xgradConfigVersion.cmake lib/cmake/xgrad/xgradTargets.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install: ${prefix}/${f} is missing")
  endif()
endforeach()

# Public headers must not drag in the libraries' private heavy headers.
file(GLOB_RECURSE installed_headers ${prefix}/include/*.hpp)
foreach(h IN LISTS installed_headers)
  file(STRINGS ${h} heavy REGEX "#include[ \t]*[<\"](xtensor-blas/|zip\\.h|zlib\\.h)")
  if(heavy)
    message(FATAL_ERROR "install: ${h} includes a private dependency: ${heavy}")
  endif()
endforeach()

set(launcher "")
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE_PROGRAM})
endif()
# CMAKE_FIND_USE_PACKAGE_REGISTRY off and only our prefix: the build tree cannot leak in.
run_step("configure docs/template" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/docs/template -B ${consumer_build}
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${launcher})
run_step("build docs/template" ${CMAKE_COMMAND} --build ${consumer_build} -j2)
run_step("run train --steps 3" ${consumer_build}/train --steps 3 --out ${run_dir})
message(STATUS "train output:\n${step_output}")
foreach(expected "Sequential(" "starting at epoch 0, step 0" "done: epoch 0, step 3")
  string(FIND "${step_output}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "train output lacks '${expected}'")
  endif()
endforeach()
if(NOT EXISTS ${run_dir}/checkpoint.npz)
  message(FATAL_ERROR "train wrote no ${run_dir}/checkpoint.npz")
endif()

# Rerunning resumes from the checkpoint (same order of batches, step counter continues).
run_step("resume train --steps 5" ${consumer_build}/train --steps 5 --out ${run_dir})
string(FIND "${step_output}" "starting at epoch 0, step 3" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the rerun did not resume from step 3:\n${step_output}")
endif()

# Second derivatives through the installed API: a layer_norm Hessian-vector product by
# xg::grad(..., create_graph) through the fused op and through its composed twin agree to 1e-10.
run_step("configure tests/consumer/hvp" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer/hvp -B ${WORK_DIR}/hvp-build
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${launcher})
run_step("build tests/consumer/hvp" ${CMAKE_COMMAND} --build ${WORK_DIR}/hvp-build -j2)
run_step("run hvp" ${WORK_DIR}/hvp-build/hvp)
message(STATUS "hvp output:\n${step_output}")
string(FIND "${step_output}" "hvp ok" at)
if(at EQUAL -1)
  message(FATAL_ERROR "hvp did not report agreement:\n${step_output}")
endif()

# Data-parallel training through the installed xgrad::distributed (only when xgrad was built with
# MPI: the test passes -DMPIEXEC=...): two ranks' averaged gradients equal one process's.
if(MPIEXEC)
  run_step("configure tests/consumer/ddp" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer/ddp -B ${WORK_DIR}/ddp-build
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${launcher})
  run_step("build tests/consumer/ddp" ${CMAKE_COMMAND} --build ${WORK_DIR}/ddp-build -j2)
  # CI runs as root; more ranks than cores are allowed (as the distributed tests' launcher does).
  set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
  set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
  set(ENV{OMPI_MCA_rmaps_base_oversubscribe} 1)
  run_step("run ddp on 2 ranks" ${MPIEXEC} --oversubscribe --bind-to none -np 2 ${WORK_DIR}/ddp-build/ddp)
  message(STATUS "ddp output:\n${step_output}")
  string(FIND "${step_output}" "ddp ok" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "ddp did not report agreement:\n${step_output}")
  endif()
endif()
