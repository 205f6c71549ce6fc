# llmctl_catch_tests(TARGET): every TEST_CASE of a Catch2 v2 executable becomes a CTest test
# named TARGET:NAME, labelled with TARGET and its tags ([cli] -> cli, lowercased), with
# SKIP_RETURN_CODE 77 (missing test data, support/test_data.h) and TIMEOUT 600.
#
# The tests are discovered from the built executable, as Catch2's catch_discover_tests does (a
# POST_BUILD step writes a CTest file that the directory's TEST_INCLUDE_FILES reads), not by
# parsing the sources as ParseAndAddCatchTests did, which cut a name at ';'. Debian's Catch2 v2
# catch_discover_tests cannot be used as it is: it sets no labels from tags (ctest -L cli,
# -L slow, -L golden are what scripts/test.sh, .ci/run and README use) and splits the listed
# names at ';' too. CatchListTests.cmake lists the names (--list-test-names-only), the tags
# (--list-tags) and each tag's tests ("[tag]" --list-test-names-only).
set(LLMCTL_CATCH_LIST_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/CatchListTests.cmake")

function(llmctl_catch_tests TARGET)
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${TARGET}_include.cmake")
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${TARGET}_tests.cmake")
  add_custom_command(
    TARGET ${TARGET} POST_BUILD
    BYPRODUCTS "${tests_file}"
    COMMAND "${CMAKE_COMMAND}"
            -D "TEST_TARGET=${TARGET}"
            -D "TEST_EXECUTABLE=$<TARGET_FILE:${TARGET}>"
            -D "TEST_WORKING_DIR=${CMAKE_CURRENT_BINARY_DIR}"
            -D "CTEST_FILE=${tests_file}"
            -P "${LLMCTL_CATCH_LIST_SCRIPT}"
    VERBATIM)
  file(WRITE "${include_file}"
    "if(EXISTS \"${tests_file}\")\n"
    "  include(\"${tests_file}\")\n"
    "else()\n"
    "  add_test(${TARGET}_NOT_BUILT ${TARGET}_NOT_BUILT)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
