# The test programs compile their files in batches (tests/CMakeLists.txt, xgrad_compile_in_batches):
# several .cpp files become one translation unit. A helper of the same name in two files would then
# clash, or worse, overload resolution could quietly call the other file's helper (another
# tolerance). So every file of a batched test program keeps its code in its own namespace,
# xg_test_<file name without "test_">, opened after the includes and closed at the end.
# The tests are grouped by area (tests/<area>/test_<area>[_topic]_<kind>.cpp, tests/CMakeLists.txt):
# every test file is checked, and no two share a stem (their namespaces would be one).
# Run: cmake -DSOURCE_DIR=<repo> -P tests/layout/test_file_namespaces.cmake
cmake_minimum_required(VERSION 3.18)
set(bad "")
file(GLOB_RECURSE all_sources RELATIVE ${SOURCE_DIR}/tests ${SOURCE_DIR}/tests/test_*.cpp)
list(FILTER all_sources EXCLUDE REGEX "^(fuzz|bench|consumer|interop|browser|clones|fixtures|fixtures_check)/")
set(stems "")
foreach(relative IN LISTS all_sources)
  get_filename_component(stem ${relative} NAME_WE)
  if(stem IN_LIST stems)
    list(APPEND bad "tests/${relative} (another test file is also named ${stem}.cpp: stems must be unique across tests/)")
  endif()
  list(APPEND stems ${stem})
  set(source ${SOURCE_DIR}/tests/${relative})
  string(REGEX REPLACE "^test_" "" short ${stem})
  file(READ ${source} text)
  string(FIND "${text}" "\nnamespace xg_test_${short} {" open_at)
  string(FIND "${text}" "}  // namespace xg_test_${short}\n" close_at REVERSE)
  if(open_at EQUAL -1 OR close_at EQUAL -1)
    list(APPEND bad "tests/${relative} (needs namespace xg_test_${short} { ... }  // namespace xg_test_${short})")
    continue()
  endif()
  # nothing but the closing line (and #undef of the file's macros) after the namespace closes
  string(SUBSTRING "${text}" ${close_at} -1 tail)
  string(REGEX REPLACE "^}  // namespace xg_test_${short}\n[ \n]*" "" rest "${tail}")
  if(NOT rest STREQUAL "")
    list(APPEND bad "tests/${relative} (code after the closing of namespace xg_test_${short})")
  endif()
  # a #define would leak into the next file of the batch: each needs its #undef
  string(REGEX MATCHALL "\n#define [A-Za-z_0-9]+" defines "${text}")
  foreach(define IN LISTS defines)
    string(REGEX REPLACE "\n#define " "" name "${define}")
    string(FIND "${text}" "\n#undef ${name}\n" undef_at)
    if(undef_at EQUAL -1)
      list(APPEND bad "tests/${relative} (#define ${name} without #undef ${name} at the end)")
    endif()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n  " lines)
  message(FATAL_ERROR "test files that would meet another file's code in a batch:\n  ${lines}")
endif()
message(STATUS "every batched test file keeps its code in its own namespace")
