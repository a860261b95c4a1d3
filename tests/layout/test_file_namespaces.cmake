# The test programs compile their files in batches (tests/CMakeLists.txt, xgrad_compile_in_batches):
# several .cpp files become one translation unit. A helper of the same name in two files would then
# clash, or worse, overload resolution could quietly call the other file's helper (another
# tolerance). So every file of a batched test program keeps its code in its own namespace,
# xg_test_<file name without "test_">, opened after the includes and closed at the end.
# Run: cmake -DSOURCE_DIR=<repo> -P tests/layout/test_file_namespaces.cmake
set(bad "")
foreach(dir unit gradcheck gradgradcheck)
  file(GLOB sources ${SOURCE_DIR}/tests/${dir}/*.cpp)
  foreach(source IN LISTS sources)
    get_filename_component(stem ${source} NAME_WE)
    string(REGEX REPLACE "^test_" "" short ${stem})
    file(READ ${source} text)
    string(FIND "${text}" "\nnamespace xg_test_${short} {" open_at)
    string(FIND "${text}" "}  // namespace xg_test_${short}\n" close_at REVERSE)
    if(open_at EQUAL -1 OR close_at EQUAL -1)
      list(APPEND bad "tests/${dir}/${stem}.cpp (needs namespace xg_test_${short} { ... }  // namespace xg_test_${short})")
      continue()
    endif()
    # nothing but the closing line (and #undef of the file's macros) after the namespace closes
    string(SUBSTRING "${text}" ${close_at} -1 tail)
    string(REGEX REPLACE "^}  // namespace xg_test_${short}\n[ \n]*" "" rest "${tail}")
    if(NOT rest STREQUAL "")
      list(APPEND bad "tests/${dir}/${stem}.cpp (code after the closing of namespace xg_test_${short})")
    endif()
    # a #define would leak into the next file of the batch: each needs its #undef
    string(REGEX MATCHALL "\n#define [A-Za-z_0-9]+" defines "${text}")
    foreach(define IN LISTS defines)
      string(REGEX REPLACE "\n#define " "" name "${define}")
      string(FIND "${text}" "\n#undef ${name}\n" undef_at)
      if(undef_at EQUAL -1)
        list(APPEND bad "tests/${dir}/${stem}.cpp (#define ${name} without #undef ${name} at the end)")
      endif()
    endforeach()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n  " lines)
  message(FATAL_ERROR "test files that would meet another file's code in a batch:\n  ${lines}")
endif()
message(STATUS "every batched test file keeps its code in its own namespace")
