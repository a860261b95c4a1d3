# The `layout.dependencies_one_way` test: the libraries' includes point one way,
# core <- nn <- optim <- distributed, and nothing in them includes the umbrella xgrad/xgrad.hpp or
# tutorials/. distributed/ (the files that talk MPI, built only with MPI) uses core/ and nn/;
# nothing else in the libraries includes it, so they build and run without MPI.
# optim/ reaches into nn/ in one place only: checkpoints save and load an nn::Module.
# The library's tests do not include tutorial code either: only the tests of the tutorials
# themselves (tests/tutorials/) may include tutorials/.
#   cmake -DSOURCE_DIR=<xgrad source> -P dependencies.cmake
cmake_minimum_required(VERSION 3.18)
if(NOT DEFINED SOURCE_DIR)
  message(FATAL_ERROR "dependencies.cmake: -DSOURCE_DIR=... is required")
endif()

# folder -> the project folders its files may not include
set(forbidden_core nn optim distributed tutorials xgrad)
set(forbidden_nn optim distributed tutorials xgrad)
set(forbidden_optim distributed tutorials xgrad)
set(forbidden_distributed tutorials xgrad)
set(nn_users_in_optim optim/training/checkpoint.hpp optim/training/checkpoint.cpp)

set(problems "")
foreach(dir IN ITEMS core nn optim distributed)
  file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${dir}/*.hpp ${SOURCE_DIR}/${dir}/*.cpp)
  foreach(file IN LISTS files)
    file(STRINGS ${SOURCE_DIR}/${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*)[>\"].*" "\\1" target "${line}")
      string(REGEX REPLACE "/.*" "" target_dir "${target}")
      if(target_dir IN_LIST forbidden_${dir})
        string(APPEND problems "  ${file}: #include \"${target}\" (${dir}/ may not depend on ${target_dir}/)\n")
      elseif(dir STREQUAL "optim" AND target_dir STREQUAL "nn" AND NOT file IN_LIST nn_users_in_optim)
        string(APPEND problems "  ${file}: #include \"${target}\" (in optim/ only checkpoints use nn/)\n")
      endif()
    endforeach()
  endforeach()
endforeach()

file(GLOB_RECURSE test_files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/tests/*.hpp ${SOURCE_DIR}/tests/*.cpp)
list(FILTER test_files EXCLUDE REGEX "^tests/tutorials/")
foreach(file IN LISTS test_files)
  file(STRINGS ${SOURCE_DIR}/${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]tutorials/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*)[>\"].*" "\\1" target "${line}")
    string(APPEND problems "  ${file}: #include \"${target}\" (only tests/tutorials/ may include tutorials/)\n")
  endforeach()
endforeach()

if(problems)
  message(FATAL_ERROR "dependencies must point one way (core <- nn <- optim; docs/architecture.md):\n${problems}")
endif()
message(STATUS "core <- nn <- optim: every include points one way; no library test includes tutorials/")
