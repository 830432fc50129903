# ember_library(NAME name HDRS ... SRCS ... DEPS ... [PRIVATE_DEPS ...] [INTERNAL])
#
# Declares one Ember library target `ember_<name>` with the alias `ember::<name>`.
# HDRS are the public headers (installed); SRCS the sources; DEPS are public
# link dependencies, PRIVATE_DEPS private ones. INTERNAL targets are neither
# installed nor exported.
function(ember_library)
  cmake_parse_arguments(EL "INTERNAL" "NAME" "HDRS;SRCS;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target ember_${EL_NAME})
  add_library(${target} ${EL_SRCS} ${EL_HDRS})
  add_library(ember::${EL_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${EL_NAME} OUTPUT_NAME ember_${EL_NAME})
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC ${EL_DEPS} PRIVATE ${EL_PRIVATE_DEPS})
  target_compile_options(${target} PRIVATE ${EMBER_WARNINGS})
  if(NOT EL_INTERNAL)
    set_property(GLOBAL APPEND PROPERTY EMBER_EXPORTED_TARGETS ${target})
    foreach(hdr IN LISTS EL_HDRS)
      get_filename_component(dir ${hdr} DIRECTORY)
      file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${dir})
      install(FILES ${hdr} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${rel})
    endforeach()
  endif()
endfunction()

# ember_test(NAME name SRCS ... DEPS ... [LABELS ...])
#
# One GoogleTest executable in <build>/bin, registered with ctest through
# gtest_discover_tests so each case is its own ctest test. Its main()
# (tests/test_main.cc) gives every test a deadline.
function(ember_test)
  cmake_parse_arguments(ET "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${ET_NAME} ${ET_SRCS})
  target_link_libraries(${ET_NAME} PRIVATE ${ET_DEPS} ember_test_main GTest::gtest)
  target_compile_options(${ET_NAME} PRIVATE ${EMBER_WARNINGS})
  if(NOT ET_TIMEOUT)
    set(ET_TIMEOUT 300)
  endif()
  gtest_discover_tests(${ET_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${ET_TIMEOUT})
  # Labels are set by a script of our own: gtest_discover_tests flattens a
  # list-valued LABELS ("engine;stress") into separate property arguments,
  # which drops every label but the first.
  if(ET_LABELS)
    set(labels_script ${CMAKE_CURRENT_BINARY_DIR}/${ET_NAME}_labels.cmake)
    file(WRITE ${labels_script}
      "if(${ET_NAME}_TESTS)\n"
      "  set_tests_properties(\${${ET_NAME}_TESTS} PROPERTIES LABELS \"${ET_LABELS}\")\n"
      "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_script})
  endif()
endfunction()
