# Run by llmctl_catch_tests (CatchTests.cmake) after TEST_EXECUTABLE is built: writes CTEST_FILE
# with one add_test and set_tests_properties per TEST_CASE. Inputs (-D): TEST_TARGET,
# TEST_EXECUTABLE, TEST_WORKING_DIR, CTEST_FILE.
#
# A ';' in a name would split it as a CMake list, so it travels as a placeholder and is put
# back inside bracket arguments ([==[...]==]), where CMake takes it literally.
cmake_minimum_required(VERSION 3.16)  # list() policies (CMP0007) in script mode
set(semicolon "<llmctl-semicolon>")

# The names EXECUTABLE lists for SPEC (empty: every test), one list element each.
function(list_test_names out spec)
  execute_process(
    COMMAND "${TEST_EXECUTABLE}" ${spec} --list-test-names-only
    OUTPUT_VARIABLE output
    RESULT_VARIABLE result
    WORKING_DIRECTORY "${TEST_WORKING_DIR}")
  # The exit code is the number of tests listed; a crash is a string or a negative number.
  if(NOT result MATCHES "^[0-9]+$")
    message(FATAL_ERROR "${TEST_EXECUTABLE} ${spec} --list-test-names-only failed: ${result}\n${output}")
  endif()
  string(REPLACE ";" "${semicolon}" output "${output}")
  string(REPLACE "\n" ";" output "${output}")
  list(FILTER output EXCLUDE REGEX "^$")
  set(${out} "${output}" PARENT_SCOPE)
endfunction()

list_test_names(names "")

# "  12  [cli]" lines of --list-tags (different spellings of one tag share a line: "[CLI][cli]").
execute_process(
  COMMAND "${TEST_EXECUTABLE}" --list-tags
  OUTPUT_VARIABLE tag_output
  RESULT_VARIABLE result
  WORKING_DIRECTORY "${TEST_WORKING_DIR}")
if(NOT result MATCHES "^[0-9]+$")
  message(FATAL_ERROR "${TEST_EXECUTABLE} --list-tags failed: ${result}\n${tag_output}")
endif()
string(REPLACE "\n" ";" tag_lines "${tag_output}")
set(tags)
foreach(line IN LISTS tag_lines)
  if(line MATCHES "^ *[0-9]+  \\[([^]]+)\\]")
    string(TOLOWER "${CMAKE_MATCH_1}" tag)
    list(APPEND tags "${tag}")
  endif()
endforeach()
list(REMOVE_DUPLICATES tags)

# labels_<index of the name>: the target, then each tag whose listing holds the name.
list(LENGTH names n_names)
foreach(tag IN LISTS tags)
  list_test_names(tagged "[${tag}]")
  foreach(name IN LISTS tagged)
    list(FIND names "${name}" i)
    if(i GREATER_EQUAL 0)
      list(APPEND labels_${i} "${tag}")
    endif()
  endforeach()
endforeach()

set(script "")
set(i 0)
foreach(name IN LISTS names)
  string(REPLACE "${semicolon}" ";" literal "${name}")
  # The test spec that selects exactly this name: Catch reads ',' '[' ']' '\' as syntax.
  set(spec "${literal}")
  foreach(char "\\" "," "[" "]")
    string(REPLACE "${char}" "\\${char}" spec "${spec}")
  endforeach()
  set(labels "${TEST_TARGET}")
  if(DEFINED labels_${i})
    list(APPEND labels ${labels_${i}})
  endif()
  set(test "${TEST_TARGET}:${literal}")
  string(APPEND script
    "add_test([==[${test}]==] [==[${TEST_EXECUTABLE}]==] [==[${spec}]==])\n"
    "set_tests_properties([==[${test}]==] PROPERTIES LABELS [==[${labels}]==]"
    " SKIP_RETURN_CODE 77 TIMEOUT 600 FAIL_REGULAR_EXPRESSION [==[No tests ran]==]"
    " WORKING_DIRECTORY [==[${TEST_WORKING_DIR}]==])\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
