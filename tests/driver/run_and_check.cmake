# Runs one command and checks BOTH its exit code and its output (CTest's
# PASS_REGULAR_EXPRESSION alone ignores the exit code).
#   cmake -DCMD=<;-list> -DEXPECT=zero|nonzero -DREGEX=<regex> [-DTIMEOUT=s] -P run_and_check.cmake
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 50)
endif()
string(REPLACE "|" ";" cmd "${CMD}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT ${TIMEOUT})
message("${out}${err}")
if(EXPECT STREQUAL "zero" AND NOT rc STREQUAL "0")
  message(FATAL_ERROR "expected exit code 0, got '${rc}'")
endif()
if(EXPECT STREQUAL "nonzero" AND (rc STREQUAL "0" OR NOT rc MATCHES "^[0-9]+$"))
  message(FATAL_ERROR "expected a non-zero exit code, got '${rc}'")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}'")
endif()
