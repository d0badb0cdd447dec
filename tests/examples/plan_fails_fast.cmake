# plan_fails_fast.cmake: passes when `rltrain plan --json` says that CONFIG does not fit (exit 3) and that
# REGION is its largest region. Run as a ctest test:
#   cmake -DRLTRAIN=/path/to/rltrain -DCONFIG=big.yaml -DREGION=replay -P plan_fails_fast.cmake
execute_process(COMMAND ${RLTRAIN} plan --config ${CONFIG} --json
                OUTPUT_VARIABLE plan ERROR_VARIABLE errors RESULT_VARIABLE code)
if(NOT code EQUAL 3)
  message(FATAL_ERROR "expected exit 3 (the plan does not fit), got ${code}: ${errors}")
endif()
string(JSON largest GET "${plan}" largest_region name)
if(NOT largest STREQUAL "${REGION}")
  message(FATAL_ERROR "the largest region is ${largest}, expected ${REGION}")
endif()
