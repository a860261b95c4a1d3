# Prints the gradient checks that the last ctest run performed, one line each (see
# XGRAD_GRADCHECK_LOG in core/tools/gradcheck.cpp). Silent when no gradcheck ran.
if(NOT EXISTS "${LOG}")
  return()
endif()
file(STRINGS "${LOG}" lines)
list(SORT lines)
list(LENGTH lines count)
# Checks named "(must FAIL)" prove the checker catches a wrong backward; they are not failures.
set(failed 0)
set(expected 0)
foreach(line IN LISTS lines)
  if(line MATCHES "must FAIL")
    math(EXPR expected "${expected} + 1")
  elseif(line MATCHES " FAIL ")
    math(EXPR failed "${failed} + 1")
  endif()
endforeach()
message("\nGradient checks (analytic backward vs central differences): ${count} run, ${failed} failed"
        " (plus ${expected} deliberately broken backward(s) correctly rejected)")
foreach(line IN LISTS lines)
  message("  ${line}")
endforeach()
