# The `layout.layers_one_way` test: inside core/ and nn/ each subfolder is a layer, and a file
# includes only from its own folder and the layers below it (docs/architecture.md, "Layers
# inside core/ and nn/"), headers and sources alike. Lowest first:
#   core/: engine <- reference <- fast <- ops <- tools, io
#   nn/:   reference <- fast <- functional <- modules
# Folders side by side in one layer (tools and io) do not include each other.
# A file directly in core/ or nn/ (the umbrella nn/nn.hpp) may include every layer of its area.
# Between the areas, dependencies.cmake checks core <- nn <- optim.
#   cmake -DSOURCE_DIR=<xgrad source> -P layers.cmake
cmake_minimum_required(VERSION 3.18)
if(NOT DEFINED SOURCE_DIR)
  message(FATAL_ERROR "layers.cmake: -DSOURCE_DIR=... is required")
endif()

# One entry per layer, lowest first; folders side by side in a layer are joined by '|'.
set(layers_core engine reference fast ops tools|io)
set(layers_nn reference fast functional modules)

# The one include allowed to point up, "<file> -> <included file>", and why: the create_graph walk
# adds a node's gradient parts with the op add so that the sum is differentiable again, and add
# (its float32 kernel, its backward) is an op. It fails here too once it is no longer there.
set(allowed_upward "core/engine/tensor.cpp -> core/ops/ops.hpp")

foreach(area IN ITEMS core nn)
  set(rank 0)
  foreach(layer IN LISTS layers_${area})
    string(REPLACE "|" ";" layer_folders "${layer}")
    foreach(folder IN LISTS layer_folders)
      set(rank_${area}_${folder} ${rank})
    endforeach()
    math(EXPR rank "${rank} + 1")
  endforeach()
endforeach()

set(problems "")
set(upward_seen "")
foreach(area IN ITEMS core nn)
  file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${area}/*.hpp ${SOURCE_DIR}/${area}/*.cpp)
  foreach(file IN LISTS files)
    if(NOT file MATCHES "^${area}/([^/]+)/")
      continue()  # an umbrella header of the area: it may include every layer
    endif()
    set(folder ${CMAKE_MATCH_1})
    if(NOT DEFINED rank_${area}_${folder})
      string(APPEND problems "  ${file}: ${area}/${folder}/ is in no layer (add it to layers_${area} in tests/layout/layers.cmake and to docs/architecture.md)\n")
      continue()
    endif()
    file(STRINGS ${SOURCE_DIR}/${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]${area}/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*)[>\"].*" "\\1" target "${line}")
      if(target MATCHES "^${area}/([^/]+)/")
        set(target_folder ${CMAKE_MATCH_1})
      else()
        set(target_folder "")  # the area's umbrella header sits above every layer
      endif()
      if(target_folder STREQUAL folder)
        continue()
      endif()
      if(NOT target_folder STREQUAL "" AND DEFINED rank_${area}_${target_folder})
        if(rank_${area}_${target_folder} LESS rank_${area}_${folder})
          continue()
        endif()
      endif()
      if("${file} -> ${target}" IN_LIST allowed_upward)
        list(APPEND upward_seen "${file} -> ${target}")
        continue()
      endif()
      string(APPEND problems "  ${file}: #include \"${target}\" (${area}/${folder}/ may include only the layers below it)\n")
    endforeach()
  endforeach()
endforeach()

foreach(exception IN LISTS allowed_upward)
  if(NOT exception IN_LIST upward_seen)
    string(APPEND problems "  ${exception}: listed as the allowed upward include but not found; remove it from allowed_upward\n")
  endif()
endforeach()

if(problems)
  message(FATAL_ERROR "includes inside core/ and nn/ must point down the layers (docs/architecture.md):\n${problems}")
endif()
message(STATUS "core/ engine <- reference <- fast <- ops <- tools, io and nn/ reference <- fast <- functional "
               "<- modules: every include points down (one allowed: ${allowed_upward})")
