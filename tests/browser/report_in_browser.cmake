# ctest browser.tutorial_report: the tutorial report from four quick programs (01: text and
# article notes, 05: Graphviz pictures, 12: a gnuplot figure, train_fashion_mlp: a progress bar and
# a guide, docs/training.md, that links its own sections), written from scratch, then every page
# loaded in headless Chromium by check_report.py (no console errors, no failed or outside requests,
# every image loaded with a size). Screenshot of the index: WORK_DIR/screenshots/index.png.
#   cmake -DRUNNER=... -DCHECK=... -DWORK_DIR=... -P report_in_browser.cmake
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(
  COMMAND ${RUNNER} --only 01_layernorm_by_hand --only 05_graph --only 12_implicit_learning_rate --only train_fashion_mlp
          --out ${WORK_DIR}/out --report ${WORK_DIR}/report
  OUTPUT_VARIABLE runner_output ERROR_VARIABLE runner_output RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "xgrad_run_tutorials failed (${rc}):\n${runner_output}")
endif()
execute_process(
  COMMAND /usr/bin/python3 ${CHECK} ${WORK_DIR}/report --screenshot-dir ${WORK_DIR}/screenshots --outputs ${WORK_DIR}/out
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the report failed in the browser (check_report.py exit ${rc}, problems listed above)")
endif()
