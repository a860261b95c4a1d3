# Counts the documented public names in Doxygen's XML index (run by the `docs` target after
# Doxygen): compounds (classes, structs, namespaces) plus members (functions, types, variables,
# enum values), each counted once although Doxygen lists namespace members under files too.
# With WARN_IF_UNDOCUMENTED + WARN_AS_ERROR every name counted here carries a comment.
#   cmake -DXML_DIR=<build>/docs/api/xml -P count_documented.cmake
file(READ ${XML_DIR}/index.xml index)
string(REGEX MATCHALL "<compound refid=\"[^\"]+\" kind=\"(class|struct|namespace|union)\">" compounds "${index}")
string(REGEX MATCHALL "<member refid=\"[^\"]+\" kind=\"[a-z]+\">" members "${index}")
list(REMOVE_DUPLICATES members)
list(LENGTH compounds compound_count)
list(LENGTH members member_count)
set(by_kind "")
foreach(kind IN ITEMS function typedef variable enum enumvalue define)
  set(n 0)
  foreach(m IN LISTS members)
    if(m MATCHES "kind=\"${kind}\"")
      math(EXPR n "${n} + 1")
    endif()
  endforeach()
  string(APPEND by_kind " ${kind} ${n},")
endforeach()
math(EXPR total "${compound_count} + ${member_count}")
string(REGEX REPLACE ",$" "" by_kind "${by_kind}")
message(STATUS "documented public names: ${total} (${compound_count} classes/structs/namespaces; members:${by_kind})")
