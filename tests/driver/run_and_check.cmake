# Runs one command and checks BOTH its exit code and its output (CTest's
# PASS_REGULAR_EXPRESSION alone ignores the exit code).
#   cmake -DCMD=<;-list> -DEXPECT=zero|nonzero -DREGEX=<regex> [-DTIMEOUT=s] -P run_and_check.cmake
if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 50)
endif()
# With -DFILE (below): a stale line is written there first, so a run that appends to the file
# instead of replacing it fails the line count.
if(DEFINED FILE)
  file(WRITE "${FILE}" "stale line from an earlier run\n")
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
# -DFILE=<path> -DFILE_REGEX=<regex> -DFILE_LINES=<n>: the run also wrote FILE, whose text
# matches FILE_REGEX and which holds n lines besides its "# " header.
if(DEFINED FILE)
  if(NOT EXISTS "${FILE}")
    message(FATAL_ERROR "${FILE} was not written")
  endif()
  file(READ "${FILE}" text)
  if(NOT text MATCHES "${FILE_REGEX}")
    message(FATAL_ERROR "${FILE} does not match '${FILE_REGEX}':\n${text}")
  endif()
  file(STRINGS "${FILE}" lines REGEX "^[^#]")
  list(LENGTH lines n)
  if(NOT n EQUAL FILE_LINES)
    message(FATAL_ERROR "${FILE}: ${n} lines, expected ${FILE_LINES}:\n${text}")
  endif()
endif()
